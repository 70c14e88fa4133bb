//! The footer line: key hints, the prompt being typed, or a status.

use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::theme;
use crate::app::Segment;

pub fn render(frame: &mut Frame<'_>, area: Rect, line: &[Segment]) {
    frame.render_widget(Paragraph::new(theme::line(line)), area);
}
