//! Tones to colours: the only place that picks them.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::app::{Segment, Tone};

pub fn style(tone: Tone) -> Style {
    let s = Style::default();
    match tone {
        Tone::Normal => s,
        Tone::Dim => s.fg(Color::DarkGray),
        Tone::Strong => s.add_modifier(Modifier::BOLD),
        Tone::Key => s.fg(Color::Cyan).add_modifier(Modifier::BOLD),
        Tone::Good => s.fg(Color::Green),
        Tone::Warn => s.fg(Color::Yellow),
        Tone::Bad => s.fg(Color::Red).add_modifier(Modifier::BOLD),
        Tone::Runq => s.fg(Color::Cyan),
        Tone::Ksoftirqd => s.fg(Color::Magenta),
        Tone::Softirq => s.fg(Color::Yellow),
        Tone::Irqoff => s.fg(Color::Red),
    }
}

pub fn border(focused: bool) -> Style {
    if focused {
        Style::default().fg(Color::Cyan)
    } else {
        Style::default().fg(Color::DarkGray)
    }
}

pub fn selected(focused: bool) -> Style {
    if focused {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default()
    }
}

pub fn line(segments: &[Segment]) -> Line<'_> {
    Line::from(
        segments
            .iter()
            .map(|s| Span::styled(s.text.as_str(), style(s.tone)))
            .collect::<Vec<_>>(),
    )
}
