//! The per-CPU stall timeline pane: a row of cells per CPU, the time axis
//! under them, and the legend in the bottom border.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use super::theme;
use crate::app::{TimelineView, Tone};

pub fn render(frame: &mut Frame<'_>, area: Rect, view: &TimelineView) {
    let block = Block::bordered()
        .border_style(theme::border(view.focused))
        .title(theme::line(&view.title))
        .title_bottom(theme::line(&view.legend));
    let mut lines: Vec<Line<'_>> = view
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let label_style = if view.selected == Some(i) {
                theme::selected(view.focused)
            } else {
                theme::style(Tone::Normal)
            };
            let mut spans = vec![Span::styled(row.label.as_str(), label_style)];
            spans.extend(
                row.cells
                    .iter()
                    .map(|c| Span::styled(c.text.as_str(), theme::style(c.tone))),
            );
            spans.push(Span::styled(
                row.summary.text.as_str(),
                theme::style(row.summary.tone),
            ));
            Line::from(spans)
        })
        .collect();
    lines.push(Line::styled(view.axis.as_str(), theme::style(Tone::Dim)));
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
