//! The detail popup and the help overlay: a bordered box over the panes
//! with scrolled lines.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph};
use ratatui::Frame;

use super::theme;
use crate::app::{OverlayView, Tone};

pub fn render(frame: &mut Frame<'_>, area: Rect, view: &OverlayView) {
    let block = Block::bordered()
        .border_style(theme::border(true))
        .title(Line::styled(
            format!(" {} ", view.title),
            theme::style(Tone::Strong),
        ))
        .title_bottom(Line::styled(view.hint.as_str(), theme::style(Tone::Dim)))
        .style(Style::default());
    let lines: Vec<Line<'_>> = view.lines.iter().map(|l| theme::line(l)).collect();
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(lines).block(block).scroll((view.scroll, 0)),
        area,
    );
}
