//! The live view's model and view state (Elm style): `App::update(Msg)` is
//! the only mutator. Its handlers change state and say what they changed;
//! `update` then recomputes, once, everything render needs (rows sorted and
//! filtered, timeline buckets, scroll bounds, layout) into `View`. No I/O,
//! no clock reads (time comes in `Msg::Tick` and from the entries), no
//! terminal: the loops in cmd/live.rs and cmd/replay.rs own those.

mod compose;
mod data;
mod detail;
mod filter;
pub mod format;
mod header;
mod input;
mod keymap;
mod layout;
mod pane;
mod playback;
mod prompt;
mod replay;
mod tables;
mod timeline;
mod view;

use std::time::Duration;

use crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;

use crate::cpulist::CpuList;
use crate::model::Report;
use crate::record::Recording;
use crate::stream::{Entry, Header};
use data::{Data, Rates};
use filter::{CpuSet, TextFilter};
pub use layout::Layout;
use pane::{Pane, Selection};
use prompt::Prompt;
use replay::Replay;
use tables::{Rows, Sorts};
pub use view::{OverlayView, Segment, TableView, TimelineView, Tone, View};

/// A stall is on screen at most this long after it ended, whatever the
/// refresh interval: the screen refreshes early when the next refresh
/// would come too late.
const STALL_SHOWN_WITHIN: Duration = Duration::from_secs(1);
/// How often the loop ticks (at most): the granularity of that deadline.
const TICK: Duration = Duration::from_millis(250);
/// Timeline windows for + and -; the default is 60 s.
const ZOOMS_S: [u64; 9] = [5, 10, 30, 60, 120, 300, 600, 1800, 3600];
const DEFAULT_ZOOM: usize = 3;

/// Everything that can change the app.
#[derive(Debug)]
pub enum Msg {
    /// An entry from the probes (live). Replay feeds itself. Boxed: entries
    /// are large and every other message is small.
    Entry(Box<Entry>),
    /// The loop's CLOCK_MONOTONIC; refreshes the screen when due, and moves
    /// a playing replay by the real time elapsed.
    Tick {
        now_ns: u64,
    },
    Key(KeyEvent),
    Mouse(MouseEvent),
    Resize {
        width: u16,
        height: u16,
    },
}

/// What a handler changed, and so what `update` recomputes at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Change {
    Nothing,
    /// Focus, selection, zoom, overlay, prompt, status, size: the view.
    View,
    /// The shown report, a filter or a sort: the rows, then the view.
    Rows,
}

enum Mode {
    Live,
    Replay(Box<Replay>),
}

/// A popup over the panes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Overlay {
    Help { scroll: u16 },
    Detail { target: detail::Target, scroll: u16 },
}

/// What the screen shows, frozen at the last refresh (`p` keeps it).
struct Shown {
    report: Report,
    rates: Rates,
    /// The right edge of the timeline: the loop clock (live) or the replay
    /// cursor.
    now_ns: u64,
}

pub struct App {
    header: Header,
    /// The host's online CPUs: the timeline's rows.
    online: CpuList,
    mode: Mode,
    data: Data,
    /// Optional probes that did not come up, damage in a recording.
    warnings: Vec<String>,
    refresh_ns: u64,
    shown: Shown,
    /// Live: the screen is frozen.
    paused: bool,
    /// The loop clock at the last tick and at the last refresh.
    clock_ns: u64,
    refreshed_ns: u64,
    /// The newest stall at the last refresh.
    refreshed_stall: Option<u64>,
    focus: Pane,
    /// The table a single-table screen shows: the last one focused.
    shown_table: Pane,
    /// The table a stacked screen shows under the stalls: the last other
    /// one focused; until then the top holders (culprits once a stall has
    /// one, else the containers with their neighbours).
    lower_table: Option<Pane>,
    selections: [Selection; 5],
    sorts: Sorts,
    filter: TextFilter,
    cpus: CpuSet,
    zoom: usize,
    /// Stalls shorter than this are hidden (0: show all the probes report).
    display_threshold_ns: u64,
    overlay: Option<Overlay>,
    prompt: Option<Prompt>,
    /// One line for the footer until the next key.
    status: Option<String>,
    /// Text y asked to copy, until the loop takes it.
    clipboard: Option<String>,
    size: Rect,
    quit: bool,
    /// Bumped whenever the view changes: the loops draw when it moved.
    version: u64,
    rows: Rows,
    layout: Layout,
    view: View,
}

impl App {
    /// The live view of a session that started as `header` says.
    pub fn live(header: Header, refresh: Duration) -> App {
        let warnings = header.warnings.clone();
        App::new(header, Mode::Live, warnings, refresh)
    }

    /// The same view over a recording, starting to play from its start.
    pub fn replay(recording: Recording, refresh: Duration) -> App {
        let (replay, header) = Replay::new(recording);
        let warnings = header
            .warnings
            .iter()
            .chain(replay.damage.iter())
            .cloned()
            .collect();
        let length_ns = replay.end_ns - replay.start_ns;
        let mut app = App::new(header, Mode::Replay(Box::new(replay)), warnings, refresh);
        // The timeline spans the whole recording at open.
        app.zoom = ZOOMS_S
            .iter()
            .position(|&s| s * 1_000_000_000 >= length_ns)
            .unwrap_or(ZOOMS_S.len() - 1);
        app.recompose(Change::Rows);
        app
    }

    fn new(header: Header, mode: Mode, warnings: Vec<String>, refresh: Duration) -> App {
        let data = Data::new(header.clone());
        let mut app = App {
            shown: Shown {
                report: data.analysis.report(),
                rates: Rates::default(),
                now_ns: header.start_ns,
            },
            clock_ns: 0,
            refreshed_ns: 0,
            refreshed_stall: None,
            online: header.host.online_cpus(),
            header,
            mode,
            data,
            warnings,
            refresh_ns: refresh.as_nanos() as u64,
            paused: false,
            focus: Pane::Feed,
            shown_table: Pane::Feed,
            lower_table: None,
            selections: Default::default(),
            sorts: Sorts::default(),
            filter: TextFilter::default(),
            cpus: CpuSet::default(),
            zoom: DEFAULT_ZOOM,
            display_threshold_ns: 0,
            overlay: None,
            prompt: None,
            status: None,
            clipboard: None,
            size: Rect::new(0, 0, 80, 24),
            quit: false,
            version: 0,
            rows: Rows::default(),
            layout: Layout::default(),
            view: View::default(),
        };
        app.recompose(Change::Rows);
        app
    }

    /// How often the loop should send `Msg::Tick`.
    pub fn tick_interval(&self) -> Duration {
        Duration::from_nanos(self.refresh_ns).min(TICK)
    }

    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn quitting(&self) -> bool {
        self.quit
    }

    /// Text the user asked to copy (y), once.
    pub fn take_clipboard(&mut self) -> Option<String> {
        self.clipboard.take()
    }

    /// Changes whenever the screen should be drawn again.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn update(&mut self, msg: Msg) {
        let change = match msg {
            Msg::Entry(entry) => {
                if matches!(self.mode, Mode::Live) {
                    self.data.apply(&entry);
                }
                Change::Nothing
            }
            Msg::Tick { now_ns } => self.tick(now_ns),
            Msg::Key(key) => self.key(key),
            Msg::Mouse(mouse) => self.mouse(mouse),
            Msg::Resize { width, height } => {
                self.size = Rect::new(0, 0, width, height);
                Change::View
            }
        };
        self.recompose(change);
    }

    /// The one place rows and the view are recomputed.
    fn recompose(&mut self, change: Change) {
        if change == Change::Rows {
            self.rows = Rows::derive(
                &self.shown.report,
                &tables::Settings {
                    filter: &self.filter,
                    cpus: &self.cpus,
                    threshold_ns: self.display_threshold_ns,
                    sorts: self.sorts,
                    online: &self.online,
                },
            );
        }
        if change >= Change::View {
            self.compose();
        }
    }

    fn tick(&mut self, now_ns: u64) -> Change {
        self.clock_ns = now_ns;
        let mut change = self.play(now_ns);
        let since = now_ns.saturating_sub(self.refreshed_ns);
        // Would a stall not yet on screen miss its deadline at the next tick?
        let overdue = self
            .data
            .first_end_after(self.refreshed_stall)
            .is_some_and(|end| {
                self.now_ns() + TICK.as_nanos() as u64 >= end + STALL_SHOWN_WITHIN.as_nanos() as u64
            });
        let due = since >= self.refresh_ns || overdue;
        if due && !self.frozen() {
            change = change.max(self.refresh());
        }
        change
    }

    /// The screen holds still: live and paused, or a replay not playing.
    fn frozen(&self) -> bool {
        match &self.mode {
            Mode::Live => self.paused,
            Mode::Replay(replay) => !replay.playing,
        }
    }

    /// Where the view's "now" is: the loop clock, or the replay cursor.
    fn now_ns(&self) -> u64 {
        match &self.mode {
            Mode::Live => self.clock_ns.max(self.header.start_ns),
            Mode::Replay(replay) => replay.cursor_ns,
        }
    }

    /// Take the analysis's current state onto the screen.
    fn refresh(&mut self) -> Change {
        self.shown = Shown {
            report: self.data.analysis.report(),
            rates: self.data.rates.clone(),
            now_ns: self.now_ns(),
        };
        self.refreshed_ns = self.clock_ns;
        self.refreshed_stall = self.data.newest_stall();
        Change::Rows
    }

    fn zoom_ns(&self) -> u64 {
        ZOOMS_S[self.zoom] * 1_000_000_000
    }
}

#[cfg(test)]
pub mod fixtures;
#[cfg(test)]
mod tests;
