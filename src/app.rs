//! The live view's model and view state (Elm style): `App::update(Msg)` is
//! the only mutator, and it computes everything render needs (rows sorted
//! and filtered, timeline buckets, scroll bounds, layout) into `View`. No
//! I/O, no clock reads (time comes in `Msg::Tick` and from the entries), no
//! terminal: the loops in cmd/live.rs and cmd/replay.rs own those.

mod compose;
mod data;
mod detail;
mod filter;
mod format;
mod header;
mod layout;
mod replay;
mod tables;
mod timeline;
mod view;

use std::time::Duration;

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

use crate::model::Report;
use crate::record::Recording;
use crate::stream::{Entry, Header};
use data::{Data, Rates};
use filter::{CpuSet, TextFilter};
pub use layout::Layout;
use replay::Replay;
use tables::Rows;
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
/// `[` and `]` move the replay cursor this far.
const SEEK_STEP: Duration = Duration::from_secs(10);

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

/// The panes, in Tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pane {
    Timeline,
    Feed,
    Culprits,
    Containers,
    Syscalls,
}

const PANES: [Pane; 5] = [
    Pane::Timeline,
    Pane::Feed,
    Pane::Culprits,
    Pane::Containers,
    Pane::Syscalls,
];

impl Pane {
    fn index(self) -> usize {
        PANES.iter().position(|&p| p == self).unwrap_or(0)
    }

    fn is_table(self) -> bool {
        self != Pane::Timeline
    }
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

/// A line the user is typing into, in the footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PromptKind {
    Filter,
    Cpus,
    Threshold,
}

struct Prompt {
    kind: PromptKind,
    text: String,
}

/// The selected row of a pane; `key` follows a row when rows move (None:
/// stay on the first row, so a newest-first feed keeps showing the newest).
#[derive(Clone, Debug, Default)]
struct Selection {
    index: usize,
    offset: usize,
    key: Option<String>,
}

/// What the screen shows, frozen at the last refresh (`p` keeps it).
struct Shown {
    report: Report,
    rates: Rates,
    /// The right edge of the timeline: the loop clock (live) or the replay
    /// cursor.
    now_ns: u64,
}

/// Where a key works.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyMode {
    Both,
    Live,
    Replay,
}

/// What a key does, for the help overlay. An empty `keys` continues the
/// line above.
pub struct KeyHelp {
    pub keys: &'static str,
    pub action: &'static str,
    pub mode: KeyMode,
}

pub const KEYS: &[KeyHelp] = &[
    key("q  Ctrl-C", "quit (the probes detach)", KeyMode::Both),
    key("?  h  F1", "this help; any key closes it", KeyMode::Both),
    key("Tab  ←  →", "next / previous pane", KeyMode::Both),
    key(
        "↑ ↓ PgUp PgDn",
        "move in the pane (mouse wheel too)",
        KeyMode::Both,
    ),
    key(
        "Home  End",
        "first / last row (Home follows the newest)",
        KeyMode::Both,
    ),
    key("Enter", "details: the full chain of the row", KeyMode::Both),
    key(
        "Esc",
        "back: close details, help or a prompt",
        KeyMode::Both,
    ),
    key(
        "s  >  <",
        "sort by the next / previous column",
        KeyMode::Both,
    ),
    key(
        "/",
        "filter: comm:X container:X path:X cpu:N",
        KeyMode::Both,
    ),
    key("", "or words, which match any of those", KeyMode::Both),
    key(
        "c",
        "pick CPUs: a list like 0-3,8; empty = all",
        KeyMode::Both,
    ),
    key(
        "p  Space",
        "pause the screen (probes keep counting)",
        KeyMode::Live,
    ),
    key("p  Space", "play / pause the replay", KeyMode::Replay),
    key(
        "+  -",
        "zoom the timeline in / out (5s .. 1h)",
        KeyMode::Both,
    ),
    key("r", "reset counters, stalls and culprits", KeyMode::Both),
    key("t", "hide stalls shorter than X on screen;", KeyMode::Both),
    key(
        "",
        "display only: probe thresholds are fixed",
        KeyMode::Both,
    ),
    key("", "at load (--threshold, --runq-threshold)", KeyMode::Both),
    key("n  N", "jump to the next / previous stall", KeyMode::Replay),
    key(".  ,", "step one refresh forward / back", KeyMode::Replay),
    key("]  [", "seek 10s forward / back", KeyMode::Replay),
    key(
        "g  G",
        "go to the start / end of the recording",
        KeyMode::Replay,
    ),
];

const fn key(keys: &'static str, action: &'static str, mode: KeyMode) -> KeyHelp {
    KeyHelp { keys, action, mode }
}

pub struct App {
    header: Header,
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
    /// The table a narrow screen shows.
    shown_table: Pane,
    selections: [Selection; 5],
    /// Per table (Feed, Culprits, Containers, Syscalls): the column sorted by.
    sort: [usize; 4],
    filter: TextFilter,
    cpus: CpuSet,
    zoom: usize,
    /// Stalls shorter than this are hidden (0: show all the probes report).
    display_threshold_ns: u64,
    overlay: Option<Overlay>,
    prompt: Option<Prompt>,
    /// One line for the footer until the next key.
    status: Option<String>,
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
        App::new(header, Mode::Replay(Box::new(replay)), warnings, refresh)
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
            header,
            mode,
            data,
            warnings,
            refresh_ns: refresh.as_nanos() as u64,
            paused: false,
            focus: Pane::Feed,
            shown_table: Pane::Feed,
            selections: Default::default(),
            sort: tables::DEFAULT_SORT,
            filter: TextFilter::default(),
            cpus: CpuSet::default(),
            zoom: DEFAULT_ZOOM,
            display_threshold_ns: 0,
            overlay: None,
            prompt: None,
            status: None,
            size: Rect::new(0, 0, 80, 24),
            quit: false,
            version: 0,
            rows: Rows::default(),
            layout: Layout::default(),
            view: View::default(),
        };
        app.derive();
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

    /// Changes whenever the screen should be drawn again.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn update(&mut self, msg: Msg) {
        match msg {
            Msg::Entry(entry) => {
                if matches!(self.mode, Mode::Live) {
                    self.data.apply(&entry);
                }
            }
            Msg::Tick { now_ns } => self.tick(now_ns),
            Msg::Key(key) => self.key(key),
            Msg::Mouse(mouse) => self.mouse(mouse),
            Msg::Resize { width, height } => {
                self.size = Rect::new(0, 0, width, height);
                self.format();
            }
        }
    }

    fn tick(&mut self, now_ns: u64) {
        self.clock_ns = now_ns;
        if let Mode::Replay(replay) = &mut self.mode {
            let step = replay.elapsed(now_ns);
            if step > 0 {
                let to = replay.cursor_ns + step;
                self.seek(to);
                if let Mode::Replay(replay) = &mut self.mode {
                    if replay.at_end() {
                        replay.playing = false;
                        self.status = Some("end of the recording (g: from the start)".into());
                        self.refresh();
                    }
                }
            }
        }
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
            self.refresh();
        }
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
    fn refresh(&mut self) {
        self.shown = Shown {
            report: self.data.analysis.report(),
            rates: self.data.rates.clone(),
            now_ns: self.now_ns(),
        };
        self.refreshed_ns = self.clock_ns;
        self.refreshed_stall = self.data.newest_stall();
        self.derive();
    }

    /// Move the replay cursor, applying (or re-applying) what is due.
    fn seek(&mut self, to_ns: u64) {
        let Mode::Replay(replay) = &mut self.mode else {
            return;
        };
        if to_ns >= replay.cursor_ns {
            for entry in replay.forward(to_ns) {
                self.data.apply(entry);
            }
        } else {
            // Backwards: the analysis only moves forward, so start over.
            self.data = Data::new(self.header.clone());
            for entry in replay.rewind(to_ns) {
                self.data.apply(entry);
            }
        }
    }

    /// A user's seek: move, then show where it landed at once.
    fn seek_and_show(&mut self, to_ns: u64) {
        self.seek(to_ns);
        self.refresh();
    }

    fn key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            return;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.prompt.is_some() {
            self.prompt_key(key);
            return;
        }
        self.status = None;
        match self.overlay.clone() {
            Some(Overlay::Help { scroll }) => match key.code {
                KeyCode::Up => self.scroll_overlay(scroll.saturating_sub(1)),
                KeyCode::Down => self.scroll_overlay(scroll.saturating_add(1)),
                KeyCode::Char('q') => self.quit = true,
                _ => self.close_overlay(),
            },
            Some(Overlay::Detail { scroll, .. }) => match key.code {
                KeyCode::Up => self.scroll_overlay(scroll.saturating_sub(1)),
                KeyCode::Down => self.scroll_overlay(scroll.saturating_add(1)),
                KeyCode::PageUp => self.scroll_overlay(scroll.saturating_sub(10)),
                KeyCode::PageDown => self.scroll_overlay(scroll.saturating_add(10)),
                KeyCode::Char('q') => self.quit = true,
                KeyCode::Esc | KeyCode::Enter | KeyCode::Backspace => self.close_overlay(),
                KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => {
                    self.open_overlay(Overlay::Help { scroll: 0 })
                }
                _ => {}
            },
            None => self.pane_key(key),
        }
    }

    fn pane_key(&mut self, key: KeyEvent) {
        let replay = matches!(self.mode, Mode::Replay(_));
        match key.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => {
                self.open_overlay(Overlay::Help { scroll: 0 })
            }
            KeyCode::Tab | KeyCode::Right => self.focus_step(1),
            KeyCode::BackTab | KeyCode::Left => self.focus_step(-1),
            KeyCode::Up => self.move_selection(self.focus, -1),
            KeyCode::Down => self.move_selection(self.focus, 1),
            KeyCode::PageUp => self.move_selection(self.focus, -self.page()),
            KeyCode::PageDown => self.move_selection(self.focus, self.page()),
            KeyCode::Home => {
                self.selections[self.focus.index()] = Selection::default();
                self.format();
            }
            KeyCode::End => self.move_selection(self.focus, isize::MAX / 2),
            KeyCode::Enter => self.open_details(),
            KeyCode::Esc => self.format(),
            KeyCode::Char('s') | KeyCode::Char('>') => self.sort_step(1),
            KeyCode::Char('<') => self.sort_step(-1),
            KeyCode::Char('/') => self.open_prompt(PromptKind::Filter),
            KeyCode::Char('c') => self.open_prompt(PromptKind::Cpus),
            KeyCode::Char('t') => self.open_prompt(PromptKind::Threshold),
            KeyCode::Char('+') | KeyCode::Char('=') => self.zoom_step(-1),
            KeyCode::Char('-') => self.zoom_step(1),
            KeyCode::Char('r') => self.reset(),
            KeyCode::Char('p') | KeyCode::Char(' ') => self.toggle_pause(),
            KeyCode::Char('n') if replay => self.jump_to_stall(true),
            KeyCode::Char('N') if replay => self.jump_to_stall(false),
            KeyCode::Char('.') if replay => self.step(true),
            KeyCode::Char(',') if replay => self.step(false),
            KeyCode::Char(']') if replay => self.seek_by(SEEK_STEP.as_nanos() as i64),
            KeyCode::Char('[') if replay => self.seek_by(-(SEEK_STEP.as_nanos() as i64)),
            KeyCode::Char('g') if replay => self.seek_to_edge(false),
            KeyCode::Char('G') if replay => self.seek_to_edge(true),
            _ => {}
        }
    }

    fn prompt_key(&mut self, key: KeyEvent) {
        let Some(prompt) = &mut self.prompt else {
            return;
        };
        match key.code {
            KeyCode::Esc => self.prompt = None,
            KeyCode::Enter => {
                let Prompt { kind, text } = self.prompt.take().expect("checked above");
                self.apply_prompt(kind, &text);
            }
            KeyCode::Backspace => {
                prompt.text.pop();
            }
            // Readline's kill-line: start the text over.
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                prompt.text.clear()
            }
            KeyCode::Char(c) => prompt.text.push(c),
            _ => {}
        }
        self.format();
    }

    fn open_prompt(&mut self, kind: PromptKind) {
        let text = match kind {
            PromptKind::Filter => self.filter.source.clone(),
            PromptKind::Cpus => self.cpus.source.clone(),
            PromptKind::Threshold if self.display_threshold_ns > 0 => {
                format::duration(self.display_threshold_ns)
            }
            PromptKind::Threshold => String::new(),
        };
        self.prompt = Some(Prompt { kind, text });
        self.format();
    }

    fn apply_prompt(&mut self, kind: PromptKind, text: &str) {
        let applied = match kind {
            PromptKind::Filter => TextFilter::parse(text).map(|f| self.filter = f),
            PromptKind::Cpus => {
                CpuSet::parse(text, self.header.host.cpus.max(1)).map(|c| self.cpus = c)
            }
            PromptKind::Threshold => parse_threshold(text).map(|ns| {
                self.display_threshold_ns = ns;
                let probes = format!(
                    "the probes report runq waits over {} and softirq/ksoftirqd/irqs-off stalls over {} (fixed at load)",
                    format::duration(self.header.settings.runq_threshold_ns),
                    format::duration(self.header.settings.stall_threshold_ns),
                );
                self.status = Some(if ns == 0 {
                    format!("showing every stall; {probes}")
                } else {
                    format!(
                        "hiding stalls under {} on screen; {probes}",
                        format::duration(ns)
                    )
                });
            }),
        };
        if let Err(e) = applied {
            self.status = Some(e);
        }
        for s in &mut self.selections {
            *s = Selection::default();
        }
        self.derive();
    }

    fn open_overlay(&mut self, overlay: Overlay) {
        self.overlay = Some(overlay);
        self.format();
    }

    fn close_overlay(&mut self) {
        self.overlay = None;
        self.format();
    }

    fn scroll_overlay(&mut self, to: u16) {
        let max = self.view.overlay.as_ref().map_or(0, |o| o.max_scroll);
        match &mut self.overlay {
            Some(Overlay::Help { scroll }) | Some(Overlay::Detail { scroll, .. }) => {
                *scroll = to.min(max)
            }
            None => {}
        }
        self.format();
    }

    fn open_details(&mut self) {
        if let Some(target) = self.selected_target() {
            self.open_overlay(Overlay::Detail { target, scroll: 0 });
        }
    }

    fn focus_step(&mut self, delta: isize) {
        let n = PANES.len() as isize;
        let next = (self.focus.index() as isize + delta).rem_euclid(n) as usize;
        self.focus = PANES[next];
        if self.focus.is_table() {
            self.shown_table = self.focus;
        }
        self.format();
    }

    fn focus_on(&mut self, pane: Pane) {
        self.focus = pane;
        if pane.is_table() {
            self.shown_table = pane;
        }
    }

    /// Rows of a page in the focused pane.
    fn page(&self) -> isize {
        let rows = self
            .layout
            .rect_of(self.focus)
            .map_or(1, |r| match self.focus {
                Pane::Timeline => layout::timeline_rows(r),
                _ => layout::table_rows(r),
            });
        rows.max(1) as isize
    }

    fn move_selection(&mut self, pane: Pane, delta: isize) {
        let keys = self.rows.keys(pane);
        if keys.is_empty() {
            return;
        }
        let selection = &mut self.selections[pane.index()];
        let index = (selection.index as isize)
            .saturating_add(delta)
            .clamp(0, keys.len() as isize - 1) as usize;
        selection.index = index;
        selection.key = Some(keys[index].clone());
        self.format();
    }

    fn sort_step(&mut self, delta: isize) {
        let Some(table) = tables::table_index(self.focus) else {
            self.status = Some("the timeline is not sortable; Tab to a table".into());
            self.format();
            return;
        };
        self.sort[table] = tables::next_sort(table, self.sort[table], delta);
        self.selections[self.focus.index()] = Selection::default();
        self.derive();
    }

    fn zoom_step(&mut self, delta: isize) {
        self.zoom = (self.zoom as isize + delta).clamp(0, ZOOMS_S.len() as isize - 1) as usize;
        self.format();
    }

    fn zoom_ns(&self) -> u64 {
        ZOOMS_S[self.zoom] * 1_000_000_000
    }

    fn reset(&mut self) {
        let at = self.now_ns();
        self.data.reset(at);
        self.status = Some(format!(
            "counters reset at {}",
            format::clock(at.saturating_sub(self.header.start_ns))
        ));
        self.refresh();
    }

    fn toggle_pause(&mut self) {
        match &mut self.mode {
            Mode::Live => self.paused = !self.paused,
            Mode::Replay(replay) => {
                replay.playing = !replay.playing;
                if replay.playing && replay.at_end() {
                    let start = replay.start_ns;
                    self.seek(start);
                }
            }
        }
        self.refresh();
    }

    fn replay_state(&self) -> Option<&Replay> {
        match &self.mode {
            Mode::Replay(replay) => Some(replay),
            Mode::Live => None,
        }
    }

    fn pause_replay(&mut self) {
        if let Mode::Replay(replay) = &mut self.mode {
            replay.playing = false;
        }
    }

    fn jump_to_stall(&mut self, forward: bool) {
        let Some(replay) = self.replay_state() else {
            return;
        };
        let shown = |m: &replay::StallMark| {
            self.cpus.contains(m.cpu) && m.duration_ns >= self.display_threshold_ns
        };
        let target = if forward {
            replay.next_stall(shown)
        } else {
            replay.previous_stall(shown)
        };
        let Some(at) = target else {
            self.status = Some(format!(
                "no {} stall",
                if forward { "later" } else { "earlier" }
            ));
            self.format();
            return;
        };
        self.pause_replay();
        self.seek_and_show(at);
        // Select the stall that just appeared: the newest in the feed.
        self.focus_on(Pane::Feed);
        let newest = self.rows.newest_stall_key(&self.shown.report);
        self.selections[Pane::Feed.index()] = Selection {
            key: newest,
            ..Selection::default()
        };
        self.format();
    }

    fn step(&mut self, forward: bool) {
        let step = self.refresh_ns as i64;
        self.seek_by(if forward { step } else { -step });
    }

    fn seek_by(&mut self, delta_ns: i64) {
        let Some(replay) = self.replay_state() else {
            return;
        };
        let to = replay.cursor_ns.saturating_add_signed(delta_ns);
        self.pause_replay();
        self.seek_and_show(to);
    }

    fn seek_to_edge(&mut self, end: bool) {
        let Some(replay) = self.replay_state() else {
            return;
        };
        let to = if end { replay.end_ns } else { replay.start_ns };
        self.pause_replay();
        self.seek_and_show(to);
    }

    fn mouse(&mut self, mouse: MouseEvent) {
        let hit = self.layout.hit(mouse.column, mouse.row);
        match mouse.kind {
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let delta = if mouse.kind == MouseEventKind::ScrollUp {
                    -1
                } else {
                    1
                };
                if let Some(Overlay::Help { scroll } | Overlay::Detail { scroll, .. }) =
                    self.overlay.clone()
                {
                    self.scroll_overlay(scroll.saturating_add_signed(delta));
                } else if let Some((pane, _)) = hit {
                    self.move_selection(pane, delta as isize);
                }
            }
            MouseEventKind::Down(MouseButton::Left) if self.overlay.is_none() => {
                let Some((pane, row)) = hit else {
                    return;
                };
                self.focus_on(pane);
                match row {
                    Some(row) => {
                        let selection = &self.selections[pane.index()];
                        let target = selection.offset + row;
                        let delta = target as isize - selection.index as isize;
                        self.move_selection(pane, delta);
                    }
                    None => self.format(),
                }
            }
            _ => {}
        }
    }

    /// Recompute the rows (filters, sorts) from the shown report, then the
    /// view.
    fn derive(&mut self) {
        self.rows = Rows::derive(
            &self.shown.report,
            &tables::Settings {
                filter: &self.filter,
                cpus: &self.cpus,
                threshold_ns: self.display_threshold_ns,
                sort: self.sort,
                cpu_count: self.header.host.cpus,
            },
        );
        self.format();
    }

    fn selected_target(&self) -> Option<detail::Target> {
        let selection = &self.selections[self.focus.index()];
        match self.focus {
            Pane::Timeline => self
                .rows
                .cpus
                .get(selection.index)
                .map(|&cpu| detail::Target::Cpu(cpu)),
            pane => self
                .rows
                .keys(pane)
                .get(selection.index)
                .map(|key| detail::Target::Row(pane, key.clone())),
        }
    }
}

/// "20ms", "1s"; empty or 0 shows everything.
fn parse_threshold(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() || text == "0" {
        return Ok(0);
    }
    crate::cli::parse_duration(text).map(|d| d.as_nanos() as u64)
}

#[cfg(test)]
pub mod fixtures;
#[cfg(test)]
mod tests;
