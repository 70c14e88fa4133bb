//! The replay cursor over a recording: when each entry happened in
//! recording time, which entries are due as the cursor moves, and where
//! stalls appeared (for n / N). Pure; the recording is already in memory.

use std::collections::HashMap;

use crate::event::{self, Event};
use crate::model::Analysis;
use crate::record::Recording;
use crate::stream::{Entry, Header};

/// Where a stall first appeared while replaying.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallMark {
    /// Recording time at which the stall is on screen.
    pub at_ns: u64,
    pub id: u64,
    pub cpu: u32,
    pub duration_ns: u64,
    /// Its longest single wait, at the end of the recording.
    pub longest_wait_ns: u64,
    /// Recording time from which the stall is as the end of the recording has it: signals
    /// merged in after it first appeared lengthen it, and change its kind and culprit.
    pub complete_ns: u64,
}

/// Stalls still taking signals: the newest of each CPU, so a few per CPU at most.
const RECENT_STALLS: usize = 64;

pub struct Replay {
    entries: Vec<Entry>,
    /// Entry i is applied once the cursor reaches times[i]; non-decreasing.
    times: Vec<u64>,
    /// Entries applied so far (a prefix).
    applied: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub cursor_ns: u64,
    pub playing: bool,
    /// The loop clock at the last tick, to advance by real elapsed time.
    last_tick_ns: Option<u64>,
    marks: Vec<StallMark>,
    /// Why reading stopped early, for a warning line.
    pub damage: Option<String>,
}

impl Replay {
    pub fn new(recording: Recording) -> (Replay, Header) {
        let Recording {
            header,
            entries,
            damage,
        } = recording;
        let mut times = Vec::with_capacity(entries.len());
        let mut time = header.start_ns;
        for entry in &entries {
            time = time.max(entry_time(entry).unwrap_or(time));
            times.push(time);
        }
        let marks = stall_marks(&header, &entries, &times);
        let replay = Replay {
            start_ns: header.start_ns,
            end_ns: times.last().copied().unwrap_or(header.start_ns),
            cursor_ns: header.start_ns,
            entries,
            times,
            applied: 0,
            playing: true,
            last_tick_ns: None,
            marks,
            damage: damage.map(|d| format!("the recording is {d}; replay ends there")),
        };
        (replay, header)
    }

    /// Real time passed: how far the cursor should move while playing.
    pub fn elapsed(&mut self, now_ns: u64) -> u64 {
        let elapsed = self
            .last_tick_ns
            .map_or(0, |last| now_ns.saturating_sub(last));
        self.last_tick_ns = Some(now_ns);
        if self.playing {
            elapsed
        } else {
            0
        }
    }

    /// Move the cursor forward to `to_ns`; the entries that became due.
    pub fn forward(&mut self, to_ns: u64) -> &[Entry] {
        self.cursor_ns = to_ns.clamp(self.start_ns, self.end_ns);
        let from = self.applied;
        while self.applied < self.entries.len() && self.times[self.applied] <= self.cursor_ns {
            self.applied += 1;
        }
        &self.entries[from..self.applied]
    }

    /// Move the cursor back to `to_ns`; every entry due by then, to apply
    /// to a fresh analysis.
    pub fn rewind(&mut self, to_ns: u64) -> &[Entry] {
        self.applied = 0;
        self.forward(to_ns)
    }

    pub fn at_end(&self) -> bool {
        self.cursor_ns >= self.end_ns
    }

    /// The first stall after the cursor that `shown` accepts.
    pub fn next_stall(&self, shown: impl Fn(&StallMark) -> bool) -> Option<u64> {
        self.marks
            .iter()
            .find(|m| m.at_ns > self.cursor_ns && shown(m))
            .map(|m| m.at_ns)
    }

    /// The stall with the longest single wait that `shown` accepts.
    pub fn worst_stall(&self, shown: impl Fn(&StallMark) -> bool) -> Option<StallMark> {
        self.marks
            .iter()
            .filter(|m| shown(m))
            .max_by_key(|m| (m.longest_wait_ns, std::cmp::Reverse(m.at_ns)))
            .copied()
    }

    /// The last stall before the cursor that `shown` accepts.
    pub fn previous_stall(&self, shown: impl Fn(&StallMark) -> bool) -> Option<u64> {
        self.marks
            .iter()
            .rev()
            .find(|m| m.at_ns < self.cursor_ns && shown(m))
            .map(|m| m.at_ns)
    }
}

/// The latest time an entry carries; names carry none.
fn entry_time(entry: &Entry) -> Option<u64> {
    match entry {
        Entry::Records(bytes) => event::decode(bytes)
            .into_iter()
            .flatten()
            .map(|e| match e {
                Event::Runq(w) | Event::Takeover(w) => w.ts_ns,
                Event::Softirq(s) => s.ts_ns,
                Event::Syscall(s) => s.ts_ns,
                Event::Sample(s) | Event::Irqoff(s) => s.ts_ns,
                Event::Hardirq(h) => h.ts_ns,
            })
            .max(),
        Entry::Kernel(k) => Some(k.ts_ns),
        Entry::Throttle(t) => Some(t.ts_ns),
        Entry::Pressure(p) => Some(p.ts_ns),
        Entry::Names(_) => None,
    }
}

/// One pass of the analysis over the whole recording, noting the time at
/// which each new stall appeared and the time it last took a signal.
fn stall_marks(header: &Header, entries: &[Entry], times: &[u64]) -> Vec<StallMark> {
    let mut analysis = Analysis::new(header.clone());
    let mut newest = None;
    let mut marks = Vec::new();
    // A recent stall's signals so far, and when they last grew.
    let mut grown: HashMap<u64, (u32, u64)> = HashMap::new();
    for (entry, &at_ns) in entries.iter().zip(times) {
        analysis.apply(entry);
        let new: Vec<StallMark> = analysis
            .stalls()
            .rev()
            .take_while(|s| newest.is_none_or(|n| s.id > n))
            .map(|s| StallMark {
                at_ns,
                id: s.id,
                cpu: s.cpu,
                duration_ns: s.duration_ns(),
                longest_wait_ns: s.waits.longest_ns,
                complete_ns: at_ns,
            })
            .collect();
        marks.extend(new.into_iter().rev());
        newest = analysis.stalls().next_back().map(|s| s.id).or(newest);
        for s in analysis.stalls().rev().take(RECENT_STALLS) {
            let seen = grown.entry(s.id).or_insert((s.signals, at_ns));
            if seen.0 != s.signals {
                *seen = (s.signals, at_ns);
            }
        }
    }
    // Waits merged in later make a stall's worst wait longer.
    let longest: HashMap<u64, u64> = analysis
        .stalls()
        .map(|s| (s.id, s.waits.longest_ns))
        .collect();
    for mark in &mut marks {
        if let Some(&ns) = longest.get(&mark.id) {
            mark.longest_wait_ns = ns;
        }
        if let Some(&(_, at_ns)) = grown.get(&mark.id) {
            mark.complete_ns = at_ns;
        }
    }
    marks
}
