//! The single waits inside a stall: which run-queue waits (by id) a stall
//! merged, and the longest single signal in it. A merged stall's span is no
//! one's wait; these say what each task itself waited. Pure.

/// Wait ids a stall keeps (the count goes on past it).
const IDS_PER_STALL: usize = 1_000;

/// One task's wait as a stall holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitRef {
    /// The id of the run-queue wait (or ksoftirqd wait) in the analysis.
    pub id: u64,
    pub tid: u32,
    pub wait_ns: u64,
}

/// The waits and the longest single signal of a stall (or of one signal).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StallWaits {
    /// Oldest first, at most IDS_PER_STALL.
    pub waits: Vec<WaitRef>,
    /// Task waits merged in, also those past IDS_PER_STALL.
    pub count: u32,
    /// The longest single signal merged in: a task's wait, a softirq's
    /// delay or a sampler gap.
    pub longest_ns: u64,
}

impl StallWaits {
    /// A signal that is not a task's wait (a softirq delay, a gap).
    pub fn signal(length_ns: u64) -> StallWaits {
        StallWaits {
            longest_ns: length_ns,
            ..StallWaits::default()
        }
    }

    /// A signal that is one task's wait.
    pub fn wait(wait: WaitRef) -> StallWaits {
        StallWaits {
            waits: vec![wait],
            count: 1,
            longest_ns: wait.wait_ns,
        }
    }

    pub fn absorb(&mut self, other: StallWaits) {
        self.count += other.count;
        self.longest_ns = self.longest_ns.max(other.longest_ns);
        let room = IDS_PER_STALL.saturating_sub(self.waits.len());
        self.waits.extend(other.waits.into_iter().take(room));
        self.waits.sort_by_key(|w| w.id);
    }

    /// Thread `tid`'s own waits in the stall: its longest and how many.
    pub fn of_task(&self, tid: u32) -> (u64, u32) {
        self.waits
            .iter()
            .filter(|w| w.tid == tid)
            .fold((0, 0), |(longest, n), w| (longest.max(w.wait_ns), n + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(id: u64, tid: u32, ms: u64) -> StallWaits {
        StallWaits::wait(WaitRef {
            id,
            tid,
            wait_ns: ms * 1_000_000,
        })
    }

    /// The case of the issue: a 1 ms waker's few short waits beside two
    /// burners' long ones; the span says nothing of the waker's own wait.
    #[test]
    fn a_task_keeps_its_own_longest_wait() {
        let mut stall = wait(3, 100, 3);
        for (id, tid, ms) in [(1, 200, 8), (2, 100, 1), (4, 300, 9), (5, 100, 2)] {
            stall.absorb(wait(id, tid, ms));
        }
        stall.absorb(StallWaits::signal(4_000_000));
        assert_eq!(stall.count, 5);
        assert_eq!(stall.longest_ns, 9_000_000);
        assert_eq!(stall.of_task(100), (3_000_000, 3));
        assert_eq!(
            stall.waits.iter().map(|w| w.id).collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5]
        );
    }

    #[test]
    fn ids_are_bounded_and_the_count_goes_on() {
        let mut stall = StallWaits::default();
        for id in 0..(IDS_PER_STALL as u64 + 10) {
            stall.absorb(wait(id, 1, 1));
        }
        assert_eq!(stall.waits.len(), IDS_PER_STALL);
        assert_eq!(stall.count as usize, IDS_PER_STALL + 10);
    }
}
