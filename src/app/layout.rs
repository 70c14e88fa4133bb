//! Where each pane goes for a terminal size: computed in `update` so that
//! scroll bounds and mouse hits use the same rectangles render draws in.
//! Pure arithmetic; any size, even 0x0, gives a valid (maybe empty) layout.

use ratatui::layout::{Position, Rect};

use super::pane::Pane;

/// From this width the four tables show at once, in a 2x2 grid; below it
/// one table shows at a time, with the others as tabs in its title.
pub const WIDE_FROM: u16 = 160;
/// The header never takes more than this share of the height.
const HEADER_SHARE: u16 = 3;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub header: Rect,
    pub timeline: Rect,
    /// The tables on screen, with their rectangles.
    pub tables: Vec<(Pane, Rect)>,
    pub footer: Rect,
    /// Where the detail popup and the help overlay go.
    pub popup: Rect,
    pub wide: bool,
}

impl Layout {
    /// `header_lines`: lines the header wants; `cpu_rows`: CPU rows the
    /// timeline wants; `shown_table`: the table a narrow screen shows.
    pub fn new(size: Rect, header_lines: u16, cpu_rows: u16, shown_table: Pane) -> Layout {
        let (x, width) = (size.x, size.width);
        let header_h = header_lines
            .min(size.height / HEADER_SHARE)
            .max(1)
            .min(size.height);
        let footer_h = u16::from(size.height > header_h);
        let rest = size.height - header_h - footer_h;
        // Borders and the axis take 3 lines; the timeline gets at most 2/5.
        let timeline_h = (cpu_rows + 3).min((rest * 2 / 5).max(4)).min(rest);
        let tables_h = rest - timeline_h;
        let header = Rect::new(x, size.y, width, header_h);
        let timeline = Rect::new(x, header.bottom(), width, timeline_h);
        let tables_area = Rect::new(x, timeline.bottom(), width, tables_h);
        let footer = Rect::new(x, tables_area.bottom(), width, footer_h);
        let wide = width >= WIDE_FROM && tables_h >= 10;
        let tables = if wide {
            let left_w = width / 2;
            let top_h = tables_h / 2;
            let (y, h2) = (tables_area.y, tables_h - top_h);
            vec![
                (Pane::Feed, Rect::new(x, y, left_w, top_h)),
                (
                    Pane::Culprits,
                    Rect::new(x + left_w, y, width - left_w, top_h),
                ),
                (Pane::Containers, Rect::new(x, y + top_h, left_w, h2)),
                (
                    Pane::Syscalls,
                    Rect::new(x + left_w, y + top_h, width - left_w, h2),
                ),
            ]
        } else {
            vec![(shown_table, tables_area)]
        };
        let popup_w = (width * 9 / 10).max(width.min(60));
        let popup_h = (size.height * 9 / 10).max(size.height.min(20));
        let popup = Rect::new(
            x + (width - popup_w) / 2,
            size.y + (size.height - popup_h) / 2,
            popup_w,
            popup_h,
        );
        Layout {
            header,
            timeline,
            tables,
            footer,
            popup,
            wide,
        }
    }

    pub fn rect_of(&self, pane: Pane) -> Option<Rect> {
        match pane {
            Pane::Timeline => Some(self.timeline),
            _ => self
                .tables
                .iter()
                .find(|(p, _)| *p == pane)
                .map(|(_, r)| *r),
        }
    }

    /// The pane under a terminal cell, and the row of it (0 = first data
    /// row) when the cell is on one.
    pub fn hit(&self, column: u16, row: u16) -> Option<(Pane, Option<usize>)> {
        let at = Position::new(column, row);
        let panes =
            std::iter::once((Pane::Timeline, self.timeline)).chain(self.tables.iter().copied());
        for (pane, rect) in panes {
            if rect.contains(at) {
                // Tables: border and column titles; timeline: border only.
                let first = rect.y + if pane == Pane::Timeline { 1 } else { 2 };
                let last = rect
                    .bottom()
                    .saturating_sub(if pane == Pane::Timeline { 2 } else { 1 });
                let data_row = (first..last)
                    .contains(&row)
                    .then(|| usize::from(row - first));
                return Some((pane, data_row));
            }
        }
        None
    }
}

/// Data rows a table pane can show (borders and column titles excluded).
pub fn table_rows(rect: Rect) -> usize {
    usize::from(rect.height.saturating_sub(3))
}

/// CPU rows the timeline can show (borders and axis excluded).
pub fn timeline_rows(rect: Rect) -> usize {
    usize::from(rect.height.saturating_sub(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_fits_inside_the_screen() {
        for (w, h) in [(0, 0), (1, 1), (20, 5), (80, 24), (160, 48), (300, 100)] {
            let size = Rect::new(0, 0, w, h);
            let l = Layout::new(size, 3, 64, Pane::Culprits);
            for r in [l.header, l.timeline, l.footer, l.popup]
                .into_iter()
                .chain(l.tables.iter().map(|(_, r)| *r))
            {
                assert!(
                    size.union(r) == size || r.area() == 0,
                    "{w}x{h}: {r:?} outside"
                );
            }
        }
    }

    #[test]
    fn narrow_shows_one_table_wide_shows_four() {
        let narrow = Layout::new(Rect::new(0, 0, 80, 24), 3, 2, Pane::Syscalls);
        assert_eq!(narrow.tables.len(), 1);
        assert_eq!(narrow.tables[0].0, Pane::Syscalls);
        assert_eq!(timeline_rows(narrow.timeline), 2);
        let wide = Layout::new(Rect::new(0, 0, 160, 48), 2, 2, Pane::Syscalls);
        assert_eq!(wide.tables.len(), 4);
        assert!(wide.wide);
        assert_eq!(
            wide.hit(1, wide.timeline.y + 1),
            Some((Pane::Timeline, Some(0)))
        );
        let culprits = wide.rect_of(Pane::Culprits).unwrap();
        assert_eq!(
            wide.hit(culprits.x + 3, culprits.y + 2),
            Some((Pane::Culprits, Some(0)))
        );
    }
}
