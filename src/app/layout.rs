//! Where each pane goes for a terminal size: computed in `update` so that
//! scroll bounds and mouse hits use the same rectangles render draws in.
//! Pure arithmetic; any size, even 0x0, gives a valid (maybe empty) layout.

use ratatui::layout::{Position, Rect};

use super::pane::{Pane, TABLES};

/// From this width the four tables show at once, in a 2x2 grid.
pub const WIDE_FROM: u16 = 160;
/// Below it, with this many lines for tables, the stalls show above one
/// other table (the top holders at first), so the first screen has both;
/// with fewer, one table shows at a time, the others as tabs in its title.
pub const STACKED_FROM: u16 = 12;
/// The header never takes more than this share of the height.
const HEADER_SHARE: u16 = 3;
/// The tables below the stalls in a stacked layout, as tabs.
const LOWER_TABLES: [Pane; 3] = [Pane::Culprits, Pane::Containers, Pane::Syscalls];

/// How the tables share their space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Arrangement {
    /// All four, 2x2.
    Grid,
    /// The stalls, and one other table under them.
    Stacked,
    /// One table.
    #[default]
    Single,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub header: Rect,
    pub timeline: Rect,
    /// The tables on screen, with their rectangles.
    pub tables: Vec<(Pane, Rect)>,
    pub footer: Rect,
    /// Where the detail popup and the help overlay go.
    pub popup: Rect,
    pub arrangement: Arrangement,
}

impl Layout {
    /// `header_lines`: lines the header wants; `cpu_rows`: CPU rows the
    /// timeline wants; `single`: the table a single-table screen shows;
    /// `lower`: the table a stacked screen shows under the stalls.
    pub fn new(size: Rect, header_lines: u16, cpu_rows: u16, single: Pane, lower: Pane) -> Layout {
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
        let arrangement = if width >= WIDE_FROM && tables_h >= 10 {
            Arrangement::Grid
        } else if tables_h >= STACKED_FROM {
            Arrangement::Stacked
        } else {
            Arrangement::Single
        };
        let (y, top_h) = (tables_area.y, tables_h / 2);
        let bottom_h = tables_h - top_h;
        let tables = match arrangement {
            Arrangement::Grid => {
                let left_w = width / 2;
                let right_w = width - left_w;
                vec![
                    (Pane::Feed, Rect::new(x, y, left_w, top_h)),
                    (Pane::Culprits, Rect::new(x + left_w, y, right_w, top_h)),
                    (Pane::Containers, Rect::new(x, y + top_h, left_w, bottom_h)),
                    (
                        Pane::Syscalls,
                        Rect::new(x + left_w, y + top_h, right_w, bottom_h),
                    ),
                ]
            }
            Arrangement::Stacked => vec![
                (Pane::Feed, Rect::new(x, y, width, top_h)),
                (lower, Rect::new(x, y + top_h, width, bottom_h)),
            ],
            Arrangement::Single => vec![(single, tables_area)],
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
            arrangement,
        }
    }

    /// The tables a table pane's title lists as tabs: in a stacked layout
    /// the lower one names the others that can take its place; a single
    /// table names all four.
    pub fn tabs(&self, pane: Pane) -> &'static [Pane] {
        match self.arrangement {
            Arrangement::Grid => &[],
            Arrangement::Stacked if pane == Pane::Feed => &[],
            Arrangement::Stacked => &LOWER_TABLES,
            Arrangement::Single => &TABLES,
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
            let l = Layout::new(size, 3, 64, Pane::Culprits, Pane::Containers);
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
    fn short_shows_one_table_tall_two_wide_four() {
        let short = Layout::new(
            Rect::new(0, 0, 80, 20),
            3,
            4,
            Pane::Syscalls,
            Pane::Culprits,
        );
        assert_eq!(short.arrangement, Arrangement::Single);
        assert_eq!(short.tables.len(), 1);
        assert_eq!(short.tables[0].0, Pane::Syscalls);
        assert_eq!(short.tabs(Pane::Syscalls).len(), 4);
        // 80x24 and 120x40: the stalls, and the holders under them.
        for (w, h) in [(80, 24), (120, 40)] {
            let stacked = Layout::new(Rect::new(0, 0, w, h), 3, 2, Pane::Feed, Pane::Culprits);
            assert_eq!(stacked.arrangement, Arrangement::Stacked, "{w}x{h}");
            let panes: Vec<Pane> = stacked.tables.iter().map(|(p, _)| *p).collect();
            assert_eq!(panes, [Pane::Feed, Pane::Culprits]);
            assert!(
                stacked.tables.iter().all(|(_, r)| table_rows(*r) >= 4),
                "{w}x{h}"
            );
            assert_eq!(timeline_rows(stacked.timeline), 2);
            assert!(stacked.tabs(Pane::Feed).is_empty());
            assert_eq!(stacked.tabs(Pane::Culprits).len(), 3);
        }
        let wide = Layout::new(
            Rect::new(0, 0, 160, 48),
            2,
            2,
            Pane::Syscalls,
            Pane::Culprits,
        );
        assert_eq!(wide.tables.len(), 4);
        assert_eq!(wide.arrangement, Arrangement::Grid);
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
