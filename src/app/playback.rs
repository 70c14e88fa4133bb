//! Moving through time: a playing replay follows the loop clock, seeks and
//! steps move its cursor (re-applying the recording from its start when
//! going back), n / N jump between stalls, p pauses the live screen or the
//! replay.

use std::time::Duration;

use super::data::Data;
use super::pane::{Pane, Selection};
use super::replay::{Replay, StallMark};
use super::{App, Change, Mode};

/// `[` and `]` move the replay cursor this far.
const SEEK_STEP: Duration = Duration::from_secs(10);

impl App {
    /// A tick moves a playing replay by the real time elapsed; at the end it
    /// stops and says so.
    pub(super) fn play(&mut self, now_ns: u64) -> Change {
        let Mode::Replay(replay) = &mut self.mode else {
            return Change::Nothing;
        };
        let step = replay.elapsed(now_ns);
        if step == 0 {
            return Change::Nothing;
        }
        let to = replay.cursor_ns + step;
        self.seek(to);
        match &mut self.mode {
            Mode::Replay(replay) if replay.at_end() => {
                replay.playing = false;
                self.status = Some("end of the recording (g: from the start)".into());
                self.refresh()
            }
            _ => Change::Nothing,
        }
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

    /// A user's seek: pause, move, then show where it landed at once.
    fn seek_and_show(&mut self, to_ns: u64) -> Change {
        if let Mode::Replay(replay) = &mut self.mode {
            replay.playing = false;
        }
        self.seek(to_ns);
        self.refresh()
    }

    pub(super) fn toggle_pause(&mut self) -> Change {
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
        self.refresh()
    }

    fn replay_state(&self) -> Option<&Replay> {
        match &self.mode {
            Mode::Replay(replay) => Some(replay),
            Mode::Live => None,
        }
    }

    /// n / N: the next (or previous) stall the CPU pick and the threshold
    /// show, selected in the feed.
    pub(super) fn jump_to_stall(&mut self, forward: bool) -> Change {
        let Some(replay) = self.replay_state() else {
            return Change::Nothing;
        };
        let shown =
            |m: &StallMark| self.cpus.contains(m.cpu) && m.duration_ns >= self.display_threshold_ns;
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
            return Change::View;
        };
        let change = self.seek_and_show(at);
        // Select the stall that just appeared: the newest one shown.
        let newest = self
            .shown
            .report
            .stalls
            .iter()
            .filter(|s| self.cpus.contains(s.cpu) && s.duration_ns >= self.display_threshold_ns)
            .map(|s| s.id)
            .max();
        self.focus_on(Pane::Feed);
        self.selections[Pane::Feed.index()] = Selection {
            key: newest.map(|id| id.to_string()),
            ..Selection::default()
        };
        change
    }

    /// w: the stall with the longest single wait the CPU pick and the
    /// threshold show, selected, its details open.
    pub(super) fn jump_to_worst_stall(&mut self) -> Change {
        let Some(replay) = self.replay_state() else {
            return Change::Nothing;
        };
        let shown =
            |m: &StallMark| self.cpus.contains(m.cpu) && m.duration_ns >= self.display_threshold_ns;
        let Some(worst) = replay.worst_stall(shown) else {
            self.status = Some("no stall in the recording".into());
            return Change::View;
        };
        self.seek_and_show(worst.complete_ns);
        self.focus_on(Pane::Feed);
        self.selections[Pane::Feed.index()] = Selection {
            key: Some(worst.id.to_string()),
            ..Selection::default()
        };
        self.status = Some(format!(
            "the worst stall: #{} on CPU {}, a single wait of {}",
            worst.id,
            worst.cpu,
            super::format::duration(worst.longest_wait_ns)
        ));
        Change::Rows
    }

    /// `:`: the replay cursor to a time the user typed.
    pub(super) fn go_to(&mut self, to_ns: u64) -> Change {
        let Some(replay) = self.replay_state() else {
            return Change::Nothing;
        };
        if to_ns < replay.start_ns || to_ns > replay.end_ns {
            self.status = Some(format!(
                "that is outside the recording ({} to {})",
                self.clock_text(replay.start_ns),
                self.clock_text(replay.end_ns)
            ));
            return Change::View;
        }
        let change = self.seek_and_show(to_ns);
        self.status = Some(format!("at {}", self.clock_text(to_ns)));
        change
    }

    /// "+3.041s 12:03:05.123Z": a recording time as the screen gives it.
    pub(super) fn clock_text(&self, ns: u64) -> String {
        format!(
            "{} {}",
            super::format::offset(ns.saturating_sub(self.header.start_ns)),
            super::format::utc_clock(crate::model::unix_ns(&self.header, ns))
        )
    }

    /// . and , move one refresh interval.
    pub(super) fn step(&mut self, forward: bool) -> Change {
        let step = self.refresh_ns as i64;
        self.seek_by(if forward { step } else { -step })
    }

    /// ] and [ move ten seconds.
    pub(super) fn seek_step(&mut self, forward: bool) -> Change {
        let step = SEEK_STEP.as_nanos() as i64;
        self.seek_by(if forward { step } else { -step })
    }

    fn seek_by(&mut self, delta_ns: i64) -> Change {
        let Some(replay) = self.replay_state() else {
            return Change::Nothing;
        };
        let to = replay.cursor_ns.saturating_add_signed(delta_ns);
        self.seek_and_show(to)
    }

    /// g and G: the start or the end of the recording.
    pub(super) fn seek_to_edge(&mut self, end: bool) -> Change {
        let Some(replay) = self.replay_state() else {
            return Change::Nothing;
        };
        let to = if end { replay.end_ns } else { replay.start_ns };
        self.seek_and_show(to)
    }
}
