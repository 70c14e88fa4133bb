//! The header bar: host, rates, costs, state, thresholds, filters and one
//! line per warning, as the view packed them.

use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::theme;
use crate::app::Segment;

pub fn render(frame: &mut Frame<'_>, area: Rect, lines: &[Vec<Segment>]) {
    let text: Vec<_> = lines.iter().map(|l| theme::line(l)).collect();
    frame.render_widget(Paragraph::new(text), area);
}
