//! Turns the app's state into the `View` and `Layout` render draws: header
//! first (its height shapes the layout), then selections settled against
//! the rows and the space each pane has, then every pane's visible part.
//! Changes nothing else: data, rows and settings are update's.

use super::detail::{self, DetailRequest};
use super::header::{self, HeaderRequest, State};
use super::keymap;
use super::layout::{self, Layout};
use super::pane::{Pane, PANES};
use super::tables::{self, TableRequest};
use super::timeline::{self, TimelineRequest};
use super::view::{Line, OverlayView, Segment, Tone, View};
use super::{App, Mode, Overlay};

impl App {
    /// Recompute the view from the current rows and settings.
    pub(super) fn compose(&mut self) {
        let start_ns = self.header.start_ns;
        let state = match &self.mode {
            Mode::Live => State::Live {
                paused: self.paused,
            },
            Mode::Replay(r) => State::Replay {
                playing: r.playing,
                at_ns: r.cursor_ns - r.start_ns,
                at_unix_ns: crate::model::unix_ns(&self.header, r.cursor_ns),
                length_ns: r.end_ns - r.start_ns,
            },
        };
        let replay = matches!(self.mode, Mode::Replay(_));
        let header = header::header_lines(&HeaderRequest {
            header: &self.header,
            report: &self.shown.report,
            rates: &self.shown.rates,
            state,
            running_ns: self.shown.now_ns.saturating_sub(start_ns),
            refresh_ns: self.refresh_ns,
            display_threshold_ns: self.display_threshold_ns,
            filter: &self.filter.source,
            cpus: &self.cpus.source,
            warnings: &self.warnings,
            width: self.size.width,
        });
        let layout = Layout::new(
            self.size,
            header.len() as u16,
            self.rows.cpus.len() as u16,
            self.shown_table,
            self.lower_table(),
        );
        for pane in PANES {
            let visible = visible_rows(&layout, pane);
            self.selections[pane.index()].settle(self.rows.keys(pane), visible);
        }

        let settings = &self.header.settings;
        let floor_ns = self
            .display_threshold_ns
            .max(settings.runq_threshold_ns.min(settings.stall_threshold_ns));
        let timeline_selection = &self.selections[Pane::Timeline.index()];
        let (right_ns, origin_ns) = self.timeline_edge();
        let timeline = timeline::timeline_view(&TimelineRequest {
            report: &self.shown.report,
            rows: &self.rows,
            now_ns: right_ns,
            origin_ns,
            window_ns: self.zoom_ns(),
            inner_width: layout.timeline.width.saturating_sub(2),
            first: timeline_selection.offset,
            count: visible_rows(&layout, Pane::Timeline),
            selected: timeline_selection.index,
            focused: self.focus == Pane::Timeline,
            floor_ns,
            cpus_picked: (!self.cpus.is_all()).then(|| self.cpus.source.clone()),
        });

        let tables = layout
            .tables
            .iter()
            .map(|&(pane, rect)| {
                let selection = &self.selections[pane.index()];
                tables::table_view(&TableRequest {
                    pane,
                    report: &self.shown.report,
                    rows: &self.rows,
                    when: match &self.mode {
                        Mode::Live => tables::When::Ago {
                            now_ns: self.shown.now_ns,
                        },
                        Mode::Replay(r) => tables::When::Offset {
                            origin_ns: r.start_ns,
                        },
                    },
                    inner_width: rect.width.saturating_sub(2),
                    first: selection.offset,
                    count: layout::table_rows(rect),
                    selected: selection.index,
                    focused: self.focus == pane,
                    sorts: self.sorts,
                    tabs: layout.tabs(pane),
                    empty: self.empty_message(pane),
                    runq_threshold_ns: self.header.settings.runq_threshold_ns,
                })
            })
            .collect();

        let overlay = self.overlay_view(&layout);
        if let (Some(view), Some(Overlay::Help { scroll } | Overlay::Detail { scroll, .. })) =
            (&overlay, &mut self.overlay)
        {
            *scroll = view.scroll;
        }
        self.view = View {
            header,
            timeline,
            tables,
            footer: self.footer(replay),
            overlay,
        };
        self.layout = layout;
        self.version += 1;
    }

    /// The timeline's right edge, and the recording's start in replay. A
    /// replay whose whole recording fits the window shows all of it (the
    /// part not yet played empty); a longer one follows the cursor.
    fn timeline_edge(&self) -> (u64, Option<u64>) {
        match &self.mode {
            Mode::Live => (self.shown.now_ns, None),
            Mode::Replay(r) if r.end_ns - r.start_ns <= self.zoom_ns() => {
                (r.start_ns + self.zoom_ns(), Some(r.start_ns))
            }
            Mode::Replay(r) => (
                self.shown.now_ns.max(r.start_ns + self.zoom_ns()),
                Some(r.start_ns),
            ),
        }
    }

    /// The table under the stalls on a stacked screen.
    fn lower_table(&self) -> Pane {
        self.lower_table
            .unwrap_or(if self.rows.culprits.is_empty() {
                Pane::Containers
            } else {
                Pane::Culprits
            })
    }

    fn overlay_view(&self, layout: &Layout) -> Option<OverlayView> {
        let replay = matches!(self.mode, Mode::Replay(_));
        let (title, lines, scroll, hint) = match self.overlay.as_ref()? {
            Overlay::Help { scroll } => (
                "stalltop keys".to_string(),
                keymap::help_lines(replay),
                *scroll,
                " any key closes · ↑↓ scroll ",
            ),
            Overlay::Detail { target, scroll } => {
                let (title, lines) = detail::detail(
                    target,
                    &DetailRequest {
                        report: &self.shown.report,
                        rows: &self.rows,
                        now_ns: self.shown.now_ns,
                        start_ns: self.header.start_ns,
                        window_ns: self.zoom_ns(),
                        runq_threshold_ns: self.header.settings.runq_threshold_ns,
                    },
                );
                (
                    title,
                    lines,
                    *scroll,
                    " Esc back · ↑↓ PgUp PgDn scroll · q quit ",
                )
            }
        };
        let inner = layout.popup.height.saturating_sub(2);
        let max_scroll = (lines.len() as u16).saturating_sub(inner);
        Some(OverlayView {
            title,
            lines,
            scroll: scroll.min(max_scroll),
            max_scroll,
            hint: hint.to_string(),
        })
    }

    fn footer(&self, replay: bool) -> Line {
        if let Some(prompt) = &self.prompt {
            return vec![
                Segment::new(format!(" {}: ", prompt.kind.label()), Tone::Key),
                Segment::plain(format!("{}█", prompt.text)),
                Segment::new("  Enter apply · Esc cancel · Ctrl-U clear", Tone::Dim),
            ];
        }
        if let Some(status) = &self.status {
            return vec![Segment::new(format!(" {status}"), Tone::Warn)];
        }
        keymap::hints(replay)
    }

    fn empty_message(&self, pane: Pane) -> String {
        let report = &self.shown.report;
        let settings = &self.header.settings;
        let filtered =
            !self.filter.is_empty() || !self.cpus.is_all() || self.display_threshold_ns > 0;
        let duration = super::format::duration;
        match pane {
            _ if filtered => "nothing matches the filter, CPUs or threshold".into(),
            Pane::Feed | Pane::Culprits if report.stalls.is_empty() => {
                let (runq, stall) = (settings.runq_threshold_ns, settings.stall_threshold_ns);
                if runq == stall {
                    format!("no stalls over {} yet", duration(runq))
                } else {
                    format!(
                        "no stalls yet (runq waits over {}, others over {})",
                        duration(runq),
                        duration(stall)
                    )
                }
            }
            Pane::Culprits => "no stall had a task holding the CPU".into(),
            Pane::Containers => "no run-queue data yet (the probes report every second)".into(),
            Pane::Syscalls => format!(
                "no syscall over {} yet",
                duration(
                    settings
                        .syscall_wall_threshold_ns
                        .min(settings.syscall_oncpu_threshold_ns)
                )
            ),
            _ => String::new(),
        }
    }
}

/// Rows a pane can show; a narrow screen's hidden tables would get the
/// one table's space.
fn visible_rows(layout: &Layout, pane: Pane) -> usize {
    match pane {
        Pane::Timeline => layout::timeline_rows(layout.timeline),
        _ => layout
            .rect_of(pane)
            .or_else(|| layout.tables.first().map(|(_, r)| *r))
            .map_or(0, layout::table_rows),
    }
}
