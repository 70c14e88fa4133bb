//! The one keymap: which key does what, in which mode. Key handling looks
//! keys up here, and the help overlay and the footer's hints are written
//! from it, so a key cannot work unlisted or be listed and not work.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::view::{Line, Segment, Tone};

/// What a key asks for. Overlays and panes give some of them their own
/// meaning (↑ scrolls a popup, moves the selection in a pane).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    NextPane,
    PreviousPane,
    Up,
    Down,
    PageUp,
    PageDown,
    First,
    Last,
    Details,
    Back,
    SortNext,
    SortPrevious,
    Filter,
    PickCpus,
    Threshold,
    ZoomIn,
    ZoomOut,
    Reset,
    Pause,
    NextStall,
    PreviousStall,
    SeekForward,
    SeekBack,
    StepForward,
    StepBack,
    Start,
    End,
    WorstStall,
    GoTo,
    Copy,
}

/// Where a binding works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyMode {
    Both,
    Live,
    Replay,
}

impl KeyMode {
    fn includes(self, replay: bool) -> bool {
        match self {
            KeyMode::Both => true,
            KeyMode::Live => !replay,
            KeyMode::Replay => replay,
        }
    }
}

/// A key, with Ctrl or without (Shift is part of the character).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    code: KeyCode,
    ctrl: bool,
}

const fn key(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const fn ch(c: char) -> Key {
    key(KeyCode::Char(c))
}

const fn ctrl(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: true,
    }
}

/// Keys that do one thing (or a pair of opposite things), one line of help.
pub struct Binding {
    pub keys: &'static [(Key, Action)],
    pub mode: KeyMode,
    /// The help overlay's text: the first line beside the keys, the rest
    /// under it.
    pub help: &'static [&'static str],
    /// The footer's hint: the keys as it shows them, and one word.
    pub hint: Option<(&'static str, &'static str)>,
}

const fn bind(
    keys: &'static [(Key, Action)],
    mode: KeyMode,
    help: &'static [&'static str],
    hint: Option<(&'static str, &'static str)>,
) -> Binding {
    Binding {
        keys,
        mode,
        help,
        hint,
    }
}

use Action as A;
use KeyMode::{Both, Live, Replay};

/// In the order of the help overlay and the footer's hints.
pub const KEYMAP: &[Binding] = &[
    bind(
        &[(ch('q'), A::Quit), (ctrl('c'), A::Quit)],
        Both,
        &["quit (the probes detach)"],
        Some(("q", "quit")),
    ),
    bind(
        &[
            (ch('?'), A::Help),
            (ch('h'), A::Help),
            (key(KeyCode::F(1)), A::Help),
        ],
        Both,
        &["this help; any key closes it"],
        Some(("?", "help")),
    ),
    bind(
        &[(ch('n'), A::NextStall), (ch('N'), A::PreviousStall)],
        Replay,
        &["jump to the next / previous stall"],
        Some(("n/N", "next/prev stall")),
    ),
    bind(
        &[(ch(']'), A::SeekForward), (ch('['), A::SeekBack)],
        Replay,
        &["seek 10s forward / back"],
        Some(("[ ]", "seek")),
    ),
    bind(
        &[(ch('.'), A::StepForward), (ch(','), A::StepBack)],
        Replay,
        &["step one refresh forward / back"],
        Some((". ,", "step")),
    ),
    bind(
        &[(ch('g'), A::Start), (ch('G'), A::End)],
        Replay,
        &["go to the start / end of the recording"],
        None,
    ),
    bind(
        &[(ch('w'), A::WorstStall)],
        Replay,
        &["jump to the worst stall (the longest single wait)"],
        Some(("w", "worst")),
    ),
    bind(
        &[(ch(':'), A::GoTo)],
        Replay,
        &["go to a time: +90s, 12:03:05 (UTC), 2026-11-26T12:03:05Z"],
        Some((":", "go to")),
    ),
    bind(
        &[
            (key(KeyCode::Tab), A::NextPane),
            (key(KeyCode::BackTab), A::PreviousPane),
            (key(KeyCode::Right), A::NextPane),
            (key(KeyCode::Left), A::PreviousPane),
        ],
        Both,
        &["next / previous pane"],
        Some(("Tab", "pane")),
    ),
    bind(
        &[
            (key(KeyCode::Up), A::Up),
            (key(KeyCode::Down), A::Down),
            (key(KeyCode::PageUp), A::PageUp),
            (key(KeyCode::PageDown), A::PageDown),
        ],
        Both,
        &["move in the pane (mouse wheel too)"],
        Some(("↑↓", "row")),
    ),
    bind(
        &[(key(KeyCode::Home), A::First), (key(KeyCode::End), A::Last)],
        Both,
        &["first / last row (Home follows the newest)"],
        None,
    ),
    bind(
        &[(key(KeyCode::Enter), A::Details)],
        Both,
        &["details: the full chain of the row"],
        Some(("Enter", "details")),
    ),
    bind(
        &[(ch('y'), A::Copy)],
        Both,
        &["copy the open popup as text (to the terminal's clipboard)"],
        None,
    ),
    bind(
        &[
            (key(KeyCode::Esc), A::Back),
            (key(KeyCode::Backspace), A::Back),
        ],
        Both,
        &["back: close details, help or a prompt"],
        None,
    ),
    bind(
        &[(ch('/'), A::Filter)],
        Both,
        &[
            "filter: comm:X container:X path:X cpu:N",
            "or words, which match any of those",
        ],
        Some(("/", "filter")),
    ),
    bind(
        &[(ch('c'), A::PickCpus)],
        Both,
        &["pick CPUs: a list like 0-3,8; empty = all"],
        Some(("c", "CPUs")),
    ),
    bind(
        &[(ch('p'), A::Pause), (ch(' '), A::Pause)],
        Live,
        &["pause the screen (probes keep counting)"],
        Some(("p", "pause")),
    ),
    bind(
        &[(ch('p'), A::Pause), (ch(' '), A::Pause)],
        Replay,
        &["play / pause the replay"],
        Some(("p", "play/pause")),
    ),
    bind(
        &[
            (ch('+'), A::ZoomIn),
            (ch('='), A::ZoomIn),
            (ch('-'), A::ZoomOut),
        ],
        Both,
        &["zoom the timeline in / out (5s .. 1h)"],
        Some(("+-", "zoom")),
    ),
    bind(
        &[
            (ch('s'), A::SortNext),
            (ch('>'), A::SortNext),
            (ch('<'), A::SortPrevious),
        ],
        Both,
        &["sort by the next / previous column"],
        Some(("s", "sort")),
    ),
    bind(
        &[(ch('r'), A::Reset)],
        Both,
        &["reset counters, stalls and culprits"],
        Some(("r", "reset")),
    ),
    bind(
        &[(ch('t'), A::Threshold)],
        Both,
        &[
            "hide stalls shorter than X on screen;",
            "display only: probe thresholds are fixed",
            "at load (--stall-threshold, --runq-threshold)",
        ],
        Some(("t", "threshold")),
    ),
];

fn bindings(replay: bool) -> impl Iterator<Item = &'static Binding> {
    KEYMAP.iter().filter(move |b| b.mode.includes(replay))
}

fn key_of(event: &KeyEvent) -> Key {
    Key {
        code: event.code,
        ctrl: event.modifiers.contains(KeyModifiers::CONTROL),
    }
}

/// What a key press asks for in this mode, if anything.
pub fn action(event: &KeyEvent, replay: bool) -> Option<Action> {
    let pressed = key_of(event);
    bindings(replay)
        .flat_map(|b| b.keys)
        .find(|(key, _)| *key == pressed)
        .map(|&(_, action)| action)
}

/// A Ctrl key that quits: it works even while a prompt takes text.
pub fn quits_anywhere(event: &KeyEvent) -> bool {
    let pressed = key_of(event);
    pressed.ctrl
        && KEYMAP
            .iter()
            .flat_map(|b| b.keys)
            .any(|&(key, action)| key == pressed && action == Action::Quit)
}

/// A key as the help names it: "q", "Ctrl-C", "Tab", "←", "PgUp", "Space".
fn key_name(key: Key) -> String {
    let name = match key.code {
        KeyCode::Char(' ') => "Space".to_string(),
        KeyCode::Char(c) if key.ctrl => c.to_ascii_uppercase().to_string(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::F(n) => format!("F{n}"),
        KeyCode::Tab => "Tab".into(),
        KeyCode::BackTab => "S-Tab".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::Home => "Home".into(),
        KeyCode::End => "End".into(),
        KeyCode::Enter => "Enter".into(),
        KeyCode::Esc => "Esc".into(),
        KeyCode::Backspace => "Backspace".into(),
        other => format!("{other:?}"),
    };
    if key.ctrl {
        format!("Ctrl-{name}")
    } else {
        name
    }
}

/// The help overlay: every binding of the mode with its keys, then notes.
pub fn help_lines(replay: bool) -> Vec<Line> {
    let labels: Vec<(String, &Binding)> = bindings(replay)
        .map(|b| {
            let keys: Vec<String> = b.keys.iter().map(|&(key, _)| key_name(key)).collect();
            (keys.join("  "), b)
        })
        .collect();
    let width = labels
        .iter()
        .map(|(label, _)| label.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    let mut lines: Vec<Line> = Vec::new();
    for (label, binding) in labels {
        for (i, text) in binding.help.iter().enumerate() {
            let keys = if i == 0 { label.as_str() } else { "" };
            lines.push(vec![
                Segment::new(format!("  {keys:<width$}"), Tone::Key),
                Segment::plain(*text),
            ]);
        }
    }
    for note in [
        "",
        "Filters apply where a row has the field: cpu: to the timeline,",
        "stalls and culprits; comm: to stalls and culprits; path: to those",
        "and syscalls; container: to every table.",
        "Timeline: a cell's colour is the kind of the longest stall in it,",
        "its height that stall's length; K: ksoftirqd took over the CPU.",
        "Logs never go to the screen: --log FILE.",
    ] {
        lines.push(vec![Segment::new(format!("  {note}"), Tone::Dim)]);
    }
    lines
}

/// The footer's key hints for the mode.
pub fn hints(replay: bool) -> Line {
    bindings(replay)
        .filter_map(|b| b.hint)
        .flat_map(|(keys, word)| {
            [
                Segment::new(format!(" {keys}"), Tone::Key),
                Segment::plain(format!(" {word} ")),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_does_one_thing_in_each_mode() {
        for replay in [false, true] {
            let keys: Vec<Key> = bindings(replay)
                .flat_map(|b| b.keys.iter().map(|&(key, _)| key))
                .collect();
            for (i, key) in keys.iter().enumerate() {
                assert!(
                    !keys[i + 1..].contains(key),
                    "{} is bound twice (replay: {replay})",
                    key_name(*key)
                );
            }
        }
    }

    #[test]
    fn keys_are_looked_up_by_mode() {
        let press = |code| KeyEvent::new(code, KeyModifiers::NONE);
        assert_eq!(action(&press(KeyCode::Char('n')), true), Some(A::NextStall));
        assert_eq!(action(&press(KeyCode::Char('n')), false), None);
        assert_eq!(action(&press(KeyCode::Left), false), Some(A::PreviousPane));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action(&ctrl_c, false), Some(A::Quit));
        assert!(quits_anywhere(&ctrl_c));
        assert!(!quits_anywhere(&press(KeyCode::Char('q'))));
        assert_eq!(action(&press(KeyCode::Char('c')), false), Some(A::PickCpus));
    }

    #[test]
    fn help_names_every_bound_key() {
        let help: String = help_lines(true)
            .iter()
            .flatten()
            .map(|s| s.text.as_str())
            .collect();
        for name in ["Ctrl-C", "F1", "S-Tab", "PgDn", "Space", "n  N", "g  G"] {
            assert!(help.contains(name), "{name} missing:\n{help}");
        }
    }
}
