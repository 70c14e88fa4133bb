//! Real-kernel test of blame by time held over the whole wait: a waiter on CPU 1 waits behind
//! real-time tasks there, first `st-often` in many short slices (2 ms each, 40 ms in all, a
//! filler running in its gaps), then `st-once` in one 20 ms slice. `st-often` held the CPU
//! twice as long and is the culprit, though the last few slices (all a short memory would
//! weigh) hold more of `st-once`. The real-time tasks spin at most 62 ms per 200 ms round,
//! pinned, in a cgroup with a real-time budget. A second test renames `st-often` halfway
//! through its slices: the culprit bears the name it has when the wait ends (a task's holder
//! entry lasts as long as it keeps running, and a task renamed, or moved into its container,
//! after it started must not be named as it was).

use std::time::Duration;

use super::migration::{RtBudget, MS};
use super::*;
use super::{
    config, pin_to, runq_waits_of, set_name, sleep_until, spin_until, until_clean, Contaminated,
};
use crate::host;

const CPU: usize = 1;
const ROUNDS: u64 = 3;
const ROUND_NS: u64 = 200 * MS;
/// Relative to each round's start, when the waiter wakes: `st-often` runs OFTEN_SLICES slices
/// of OFTEN_SLICE_NS with OFTEN_GAP_NS sleeps between them (the filler runs there), then
/// `st-once` runs ONCE_NS.
const OFTEN_SLICES: u64 = 20;
const OFTEN_SLICE_NS: u64 = 2 * MS;
const OFTEN_GAP_NS: u64 = 100_000;
const OFTEN_NS: u64 = OFTEN_SLICES * (OFTEN_SLICE_NS + OFTEN_GAP_NS);
const ONCE_NS: u64 = 20 * MS;
/// The waiter wakes this long after `st-often` starts (its timer is due while the CPU is
/// taken).
const WAKE_AFTER: u64 = MS;

fn round_start(first: u64, round: u64) -> u64 {
    first + round * ROUND_NS
}

/// What `st-often` renames itself to halfway through its slices, in the renaming test.
const RENAMED: &std::ffi::CStr = c"st-renamed";

/// The rounds; returns the waiter's thread id and, per round, when it woke and when it ran.
/// With `rename`, `st-often` takes the name RENAMED halfway through its slices of each round.
fn wait_behind_many_slices_then_one(first: u64, rename: bool) -> (u32, Vec<(u64, u64)>) {
    let budget = RtBudget::create();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            set_name(c"st-often");
            pin_to(CPU);
            budget.join_as_real_time(20);
            for round in 0..ROUNDS {
                let start = round_start(first, round);
                sleep_until(start);
                set_name(c"st-often");
                for slice in 0..OFTEN_SLICES {
                    if rename && slice == OFTEN_SLICES / 2 {
                        set_name(RENAMED);
                    }
                    let at = start + slice * (OFTEN_SLICE_NS + OFTEN_GAP_NS);
                    spin_until(at + OFTEN_SLICE_NS);
                    sleep_until(at + OFTEN_SLICE_NS + OFTEN_GAP_NS);
                }
            }
        });
        scope.spawn(|| {
            set_name(c"st-filler");
            pin_to(CPU);
            budget.join_as_real_time(10);
            for round in 0..ROUNDS {
                let start = round_start(first, round);
                sleep_until(start);
                spin_until(start + OFTEN_NS);
            }
        });
        scope.spawn(|| {
            set_name(c"st-once");
            pin_to(CPU);
            budget.join_as_real_time(5);
            for round in 0..ROUNDS {
                let start = round_start(first, round);
                sleep_until(start + OFTEN_NS);
                spin_until(start + OFTEN_NS + ONCE_NS);
            }
        });
        let waiter = scope.spawn(|| {
            set_name(c"st-waiter");
            pin_to(CPU);
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            let waits = (0..ROUNDS)
                .map(|round| {
                    let wake = round_start(first, round) + WAKE_AFTER;
                    sleep_until(wake);
                    (wake, host::monotonic_ns())
                })
                .collect();
            (tid, waits)
        });
        waiter.join().unwrap()
    })
}

fn blamed_once(config: &ProbeConfig, rename: bool) -> Result<(), Contaminated> {
    let culprit = if rename {
        RENAMED.to_str().unwrap()
    } else {
        "st-often"
    };
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let (tid, rounds) = wait_behind_many_slices_then_one(host::monotonic_ns() + 50 * MS, rename);
    let records = session.poll(Duration::from_millis(100));
    let waits = runq_waits_of(&records, tid);
    let blamed: Vec<Option<&str>> = rounds
        .iter()
        .map(|&(wake, ran)| {
            waits
                .iter()
                .find(|w| w.ts_ns >= wake && w.ts_ns <= ran && w.wait_ns >= OFTEN_NS)
                .map(|w| w.ran.comm.as_str())
        })
        .collect();
    if blamed.iter().filter(|&&c| c == Some(culprit)).count() >= ROUNDS as usize - 1 {
        return Ok(());
    }
    let ours = [
        "st-often",
        "st-renamed",
        "st-once",
        "st-filler",
        "st-waiter",
    ];
    if waits.iter().any(|w| !ours.contains(&w.ran.comm.as_str())) {
        return Err(Contaminated(format!(
            "foreign tasks in the waits: {waits:#?}"
        )));
    }
    panic!("culprits per round {blamed:?} (expected {culprit}); waits: {waits:#?}");
}

fn the_longest_holder_over_the_whole_wait_is_blamed(attach: AttachMode) {
    let config = config(attach);
    until_clean(|| blamed_once(&config, false));
}

fn the_holder_bears_the_name_it_has_when_the_wait_ends(attach: AttachMode) {
    let config = config(attach);
    until_clean(|| blamed_once(&config, true));
}

#[test]
fn tp_btf_a_holder_renamed_while_it_holds_the_cpu_is_named_as_it_is_now() {
    the_holder_bears_the_name_it_has_when_the_wait_ends(AttachMode::TpBtf);
}

#[test]
fn raw_tp_a_holder_renamed_while_it_holds_the_cpu_is_named_as_it_is_now() {
    the_holder_bears_the_name_it_has_when_the_wait_ends(AttachMode::RawTp);
}

#[test]
fn tp_btf_the_task_that_held_the_cpu_longest_over_the_whole_wait_is_blamed() {
    the_longest_holder_over_the_whole_wait_is_blamed(AttachMode::TpBtf);
}

#[test]
fn raw_tp_the_task_that_held_the_cpu_longest_over_the_whole_wait_is_blamed() {
    the_longest_holder_over_the_whole_wait_is_blamed(AttachMode::RawTp);
}
