//! The flight recorder's memory: the last `keep` of the entry stream as
//! compressed chunks of about a second each, every names table seen (a dump
//! must name what its chunks mention, however long ago it was named), and
//! the dumps planned around triggers. Pure: time comes from the caller.

use std::collections::VecDeque;

use super::stall_watch::Trigger;

/// Seconds of entries after a trigger that a dump also holds.
pub const AFTER_NS: u64 = 5_000_000_000;
/// The longest one dump grows by coalescing triggers into it.
pub const MAX_SPAN_NS: u64 = 10 * 60 * 1_000_000_000;

/// Entries received between `start_ns` and `end_ns`, as one chunk of a
/// recording file.
pub struct Chunk {
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: Vec<u8>,
}

/// A recording to write once the stream has passed `to_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub from_ns: u64,
    pub to_ns: u64,
    /// The first trigger's start: what the file is named after.
    pub trigger_ns: u64,
    /// ... and its end (equal to the start: asked for by hand).
    pub trigger_end_ns: u64,
}

pub struct FlightWindow {
    keep_ns: u64,
    max_bytes: usize,
    chunks: VecDeque<Chunk>,
    bytes: usize,
    /// Every names table seen, each an encoded chunk of one entry.
    names: Vec<Vec<u8>>,
    plans: VecDeque<Plan>,
    /// Chunks dropped to stay within `max_bytes` while still in the window.
    pub dropped_chunks: u64,
    /// Triggers that fell inside a planned dump.
    pub coalesced: u64,
}

impl FlightWindow {
    pub fn new(keep_ns: u64, max_bytes: usize) -> FlightWindow {
        FlightWindow {
            keep_ns,
            max_bytes,
            chunks: VecDeque::new(),
            bytes: 0,
            names: Vec::new(),
            plans: VecDeque::new(),
            dropped_chunks: 0,
            coalesced: 0,
        }
    }

    pub fn push_names(&mut self, chunk: Vec<u8>) {
        self.names.push(chunk);
    }

    /// Keep `chunk`; forget what is older than the window and than every
    /// planned dump, and the oldest beyond the memory bound.
    pub fn push(&mut self, chunk: Chunk) {
        let now = chunk.end_ns;
        self.bytes += chunk.bytes.len();
        self.chunks.push_back(chunk);
        let keep_from = self
            .plans
            .iter()
            .map(|p| p.from_ns)
            .fold(now.saturating_sub(self.keep_ns), u64::min);
        while let Some(oldest) = self.chunks.front() {
            let expired = oldest.end_ns < keep_from;
            let over = self.bytes > self.max_bytes && self.chunks.len() > 1;
            if !expired && !over {
                break;
            }
            if over && !expired {
                self.dropped_chunks += 1;
            }
            self.bytes -= oldest.bytes.len();
            self.chunks.pop_front();
        }
    }

    /// Plan a dump of the window before `trigger` and `AFTER_NS` after it,
    /// or stretch the last plan when they overlap.
    pub fn trigger(&mut self, trigger: Trigger) {
        let plan = Plan {
            from_ns: trigger.start_ns.saturating_sub(self.keep_ns),
            to_ns: trigger.end_ns + AFTER_NS,
            trigger_ns: trigger.start_ns,
            trigger_end_ns: trigger.end_ns,
        };
        if let Some(last) = self.plans.back_mut() {
            if plan.from_ns <= last.to_ns {
                last.to_ns = last
                    .to_ns
                    .max(plan.to_ns)
                    .min(last.trigger_ns + MAX_SPAN_NS);
                self.coalesced += 1;
                return;
            }
        }
        self.plans.push_back(plan);
    }

    /// The first planned dump whose end the stream has passed.
    pub fn due(&mut self, now_ns: u64) -> Option<Plan> {
        match self.plans.front() {
            Some(p) if p.to_ns <= now_ns => self.plans.pop_front(),
            _ => None,
        }
    }

    /// The names tables, then the chunks that overlap the plan.
    pub fn contents(&self, plan: Plan) -> impl Iterator<Item = &[u8]> {
        self.names.iter().map(Vec::as_slice).chain(
            self.chunks
                .iter()
                .filter(move |c| c.end_ns >= plan.from_ns && c.start_ns <= plan.to_ns)
                .map(|c| c.bytes.as_slice()),
        )
    }

    /// Where the kept stream starts (for the dump's header).
    pub fn start_ns(&self, plan: &Plan) -> u64 {
        self.chunks
            .iter()
            .find(|c| c.end_ns >= plan.from_ns)
            .map_or(plan.from_ns, |c| c.start_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn chunk(second: u64) -> Chunk {
        Chunk {
            start_ns: second * S,
            end_ns: (second + 1) * S,
            bytes: vec![second as u8; 100],
        }
    }

    fn window() -> FlightWindow {
        let mut w = FlightWindow::new(10 * S, 1 << 20);
        w.push_names(vec![0xee]);
        w
    }

    #[test]
    fn a_dump_holds_the_window_before_the_trigger_and_seconds_after() {
        let mut w = window();
        for s in 0..30 {
            w.push(chunk(s));
        }
        w.trigger(Trigger {
            start_ns: 29 * S,
            end_ns: 29 * S + S / 10,
        });
        for s in 30..34 {
            w.push(chunk(s));
            assert_eq!(w.due((s + 1) * S), None);
        }
        w.push(chunk(34));
        let plan = w.due(35 * S).expect("due once 5 s passed");
        let contents: Vec<&[u8]> = w.contents(plan).collect();
        assert_eq!(contents[0], &[0xee], "names first");
        let seconds: Vec<u8> = contents[1..].iter().map(|c| c[0]).collect();
        assert_eq!(seconds, (19..=34).collect::<Vec<u8>>());
        assert_eq!(w.start_ns(&plan), 19 * S);
        assert_eq!(w.due(40 * S), None, "written once");
    }

    #[test]
    fn overlapping_triggers_make_one_longer_dump() {
        let mut w = window();
        w.trigger(Trigger {
            start_ns: 20 * S,
            end_ns: 21 * S,
        });
        w.trigger(Trigger {
            start_ns: 24 * S,
            end_ns: 25 * S,
        });
        assert_eq!(w.coalesced, 1);
        assert_eq!(w.due(26 * S), None);
        let plan = w.due(30 * S).unwrap();
        assert_eq!((plan.from_ns, plan.to_ns), (10 * S, 30 * S));
        // A trigger after that dump's end starts a new one.
        w.trigger(Trigger {
            start_ns: 60 * S,
            end_ns: 61 * S,
        });
        assert_eq!(w.due(66 * S).unwrap().from_ns, 50 * S);
    }

    #[test]
    fn memory_stays_bounded_and_drops_are_counted() {
        let mut w = FlightWindow::new(100 * S, 1_000);
        for s in 0..20 {
            w.push(chunk(s));
        }
        assert_eq!(w.chunks.len(), 10);
        assert_eq!(w.dropped_chunks, 10);
    }

    #[test]
    fn a_planned_dump_keeps_its_chunks_past_the_window() {
        let mut w = window();
        w.trigger(Trigger {
            start_ns: 0,
            end_ns: S,
        });
        for s in 0..5 {
            w.push(chunk(s));
        }
        let plan = w.due(6 * S).unwrap();
        assert_eq!(w.contents(plan).count(), 1 + 5);
    }
}
