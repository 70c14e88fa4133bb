//! A table pane: the stalls & takeovers feed, culprits, containers and
//! syscalls all arrive as a `TableView` (columns that fit, visible rows,
//! selection) and are drawn the same way.

use ratatui::layout::{Alignment, Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::theme;
use crate::app::{TableView, Tone};

pub fn render(frame: &mut Frame<'_>, area: Rect, view: &TableView) {
    let block = Block::bordered()
        .border_style(theme::border(view.focused))
        .title(theme::line(&view.title));
    let align = |right: bool| {
        if right {
            Alignment::Right
        } else {
            Alignment::Left
        }
    };
    let header = Row::new(
        view.columns
            .iter()
            .map(|c| Cell::from(Line::from(c.title.as_str()).alignment(align(c.right)))),
    )
    .style(Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    if view.rows.is_empty() {
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let lines = vec![
            Line::from(""),
            Line::styled(format!(" {}", view.empty), theme::style(Tone::Dim)),
        ];
        frame.render_widget(Paragraph::new(lines), inner);
        return;
    }
    let rows = view.rows.iter().enumerate().map(|(i, row)| {
        let cells = row.cells.iter().zip(&view.columns).map(|(cell, column)| {
            Cell::from(
                Line::styled(cell.text.as_str(), theme::style(cell.tone))
                    .alignment(align(column.right)),
            )
        });
        let style = if view.selected == Some(i) {
            theme::selected(view.focused)
        } else {
            Style::default()
        };
        Row::new(cells).style(style)
    });
    let widths = view.columns.iter().map(|c| Constraint::Length(c.width));
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .block(block);
    frame.render_widget(table, area);
}
