//! Draws the app: `render(frame, &App)` lays the pre-computed `View` into
//! the pre-computed `Layout`. No logic, no I/O, no state: everything shown
//! was decided in `App::update`.

mod footer;
mod header;
mod popup;
mod table;
mod theme;
mod timeline;

#[cfg(test)]
mod tests;

use ratatui::layout::Rect;
use ratatui::Frame;

use crate::app::App;

pub fn render(frame: &mut Frame<'_>, app: &App) {
    let view = app.view();
    let layout = app.layout();
    // The terminal may have shrunk since the last Resize: never draw
    // outside it.
    let screen = frame.area();
    let fit = |rect: Rect| rect.intersection(screen);
    header::render(frame, fit(layout.header), &view.header);
    timeline::render(frame, fit(layout.timeline), &view.timeline);
    for ((_, rect), table) in layout.tables.iter().zip(&view.tables) {
        table::render(frame, fit(*rect), table);
    }
    footer::render(frame, fit(layout.footer), &view.footer);
    if let Some(overlay) = &view.overlay {
        popup::render(frame, fit(layout.popup), overlay);
    }
}
