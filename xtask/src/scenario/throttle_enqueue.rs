//! Throttles that begin as a task is enqueued: every 250 ms round makes a new cgroup with a
//! 12 ms / 100 ms CFS quota (a group's CPU-local runtime starts at nothing), where a `spender`
//! on CPU 0 spends the quota from the round's start; two `sleeper`s on CPU 1, moved into the
//! new group while they sleep, wake 40 ms into the round to work 5 ms, beside a bystander
//! `hog` of another cgroup. Before Linux 6.18 the quota holds a sleeper as it is enqueued
//! (`check_enqueue_throttle` throttles the group's cfs_rq and takes it off the run queue), with
//! no task of the group leaving CPU 1. Each sleeper says, per round, how long it was kept off its
//! CPU.
//!
//! From 6.18 throttling is task-based: a throttled cfs_rq stays queued, and each of its tasks
//! runs until its return to user space, where it is dequeued and switched out. No wakeup is held
//! at its enqueue there, so the scenario does not apply (`not_applicable`).

use std::fs;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread;

use anyhow::{ensure, Context, Result};
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::task::{self, Window};
use super::{hog, Cgroups, Injected, Measured};

pub const SLEEPER_COMM: &str = "sleeper";
const SPENDER_COMM: &str = "spender";
/// The parent of the rounds' cgroups (it has no quota).
const CGROUP: &str = "stalltop_enqueue";
const BYSTANDER_CGROUP: &str = "stalltop_bystander";
const SLEEPERS: usize = 2;
const PERIOD_US: u64 = 100_000;
const QUOTA_US: u64 = 12_000;
const MS: u64 = 1_000_000;
pub const ROUND_NS: u64 = 250 * MS;
/// Relative to a round's start (its cgroup made, the spender moved in): the spender spends
/// from SPEND_FROM to SPEND_UNTIL, the sleepers are moved in at JOIN and wake at WAKE.
const SPEND_FROM: u64 = 2 * MS;
const SPEND_UNTIL: u64 = 150 * MS;
const JOIN: u64 = 5 * MS;
const WAKE: u64 = 40 * MS;
const WORK_NS: u64 = 5 * MS;
/// The first round starts this long after the window opens (the threads settle first).
const FIRST_ROUND_AFTER: u64 = 100 * MS;

/// One round as the threads saw it.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// The round's cgroup (with the quota) and when it began (CLOCK_MONOTONIC).
    pub cgroup: String,
    pub start_ns: u64,
    /// Per sleeper: how long it was kept off its CPU this round (late to run after its wakeup
    /// was due, or stopped while it worked).
    pub kept_ns: Vec<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    pub sleeper_tids: Vec<u32>,
    pub rounds: Vec<Round>,
}

/// Where the running kernel describes its types.
const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";
/// A member of `struct cfs_rq` only task-based throttling has (the tasks it dequeued at their
/// return to user space): Linux 6.18+, or a kernel with that series backported.
const TASK_THROTTLE_MEMBER: &str = "throttled_limbo_list";

/// Why the scenario cannot show a throttle at enqueue on this kernel, if it cannot.
pub fn not_applicable() -> Result<Option<String>> {
    let btf = fs::read(KERNEL_BTF).with_context(|| format!("read {KERNEL_BTF}"))?;
    let task_based =
        btf_names(&btf, TASK_THROTTLE_MEMBER).with_context(|| format!("{KERNEL_BTF} is no BTF"))?;
    Ok(task_based.then(|| {
        format!(
            "not applicable on this kernel: its CFS throttling is task-based (cfs_rq has \
             {TASK_THROTTLE_MEMBER}; Linux 6.18+), which holds a woken task at its return to \
             user space, after a switch-out, never as it is enqueued"
        )
    }))
}

/// Whether the string section of the BTF blob `btf` holds `name`; None if `btf` is no BTF.
fn btf_names(btf: &[u8], name: &str) -> Option<bool> {
    const MAGIC: u16 = 0xeb9f;
    let u32_at = |at: usize| -> Option<usize> {
        let bytes = btf.get(at..at + 4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(bytes)).ok()
    };
    if btf.get(0..2)? != MAGIC.to_le_bytes() {
        return None;
    }
    // The header: magic, version, flags, hdr_len, type_off, type_len, str_off, str_len.
    let start = u32_at(4)?.checked_add(u32_at(16)?)?;
    let strings = btf.get(start..start.checked_add(u32_at(20)?)?)?;
    Some(strings.split(|&b| b == 0).any(|s| s == name.as_bytes()))
}

pub fn run(window: &Window) -> Result<(Measured, Injected)> {
    let parent = CpuCgroup::create(CGROUP)?;
    let bystander = CpuCgroup::create(BYSTANDER_CGROUP)?;
    let first = window.start_ns() + FIRST_ROUND_AFTER;
    let rounds = window.deadline_ns().saturating_sub(first) / ROUND_NS;
    ensure!(rounds > 0, "the window is too short for one round");
    let start = |round: u64| first + round * ROUND_NS;
    let spender_tid = AtomicI32::new(0);
    let sleeper_tids: [AtomicI32; SLEEPERS] = Default::default();
    let (cgroups, kept) = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let hog = window.spawn(scope, hog::COMM, &bystander, || hog::run(window))?;
        let spender = window.spawn_pinned(scope, SPENDER_COMM, Some(0), &parent, || {
            spender_tid.store(task::gettid(), Ordering::SeqCst);
            for round in 0..rounds {
                task::sleep_until(window, start(round) + SPEND_FROM)?;
                if window.cancelled() {
                    break;
                }
                task::spin_until(start(round) + SPEND_UNTIL);
            }
            Ok(())
        })?;
        let sleepers = sleeper_tids
            .iter()
            .map(|tid| {
                window.spawn(scope, SLEEPER_COMM, &parent, move || {
                    tid.store(task::gettid(), Ordering::SeqCst);
                    (0..rounds)
                        .map(|round| wake_and_work(window, start(round) + WAKE))
                        .collect::<Result<Vec<u64>>>()
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let made = make_rounds(window, rounds, start, &spender_tid, &sleeper_tids);
        let kept = sleepers
            .into_iter()
            .map(|sleeper| sleeper.join())
            .collect::<Result<Vec<_>>>()?;
        spender.join()?;
        hog.join()?;
        // The last round's cgroup goes only now that its threads are done.
        let (cgroups, _last) = made?;
        anyhow::Ok((cgroups, kept))
    })?;
    let rounds = cgroups
        .into_iter()
        .enumerate()
        .map(|(round, cgroup)| Round {
            cgroup,
            start_ns: start(round as u64),
            kept_ns: kept.iter().map(|k| k[round]).collect(),
        })
        .collect();
    let truth = Truth {
        sleeper_tids: sleeper_tids
            .iter()
            .map(|tid| tid.load(Ordering::SeqCst) as u32)
            .collect(),
        rounds,
    };
    Ok((
        Measured {
            cgroups: Cgroups {
                requests: Some(parent.path().to_owned()),
                noisy: Some(bystander.path().to_owned()),
                ..Cgroups::default()
            },
            ..Measured::default()
        },
        Injected {
            throttle_enqueue: Some(truth),
            ..Injected::default()
        },
    ))
}

/// The coordinator: each round's cgroup, made at the round's start with the spender moved in,
/// the sleepers at JOIN (asleep); the previous round's removed once empty. Their paths, and
/// the last round's cgroup, still in use.
fn make_rounds(
    window: &Window,
    rounds: u64,
    start: impl Fn(u64) -> u64,
    spender: &AtomicI32,
    sleepers: &[AtomicI32],
) -> Result<(Vec<String>, Option<CpuCgroup>)> {
    let mut paths = Vec::new();
    let mut previous: Option<CpuCgroup> = None;
    for round in 0..rounds {
        task::sleep_until(window, start(round))?;
        if window.cancelled() {
            break;
        }
        let cgroup = CpuCgroup::create(&format!("{CGROUP}/round{round}"))?;
        cgroup.set_bandwidth(PERIOD_US, QUOTA_US)?;
        cgroup.adopt_thread(spender.load(Ordering::SeqCst))?;
        task::sleep_until(window, start(round) + JOIN)?;
        for sleeper in sleepers {
            cgroup.adopt_thread(sleeper.load(Ordering::SeqCst))?;
        }
        paths.push(cgroup.path().to_owned());
        previous = Some(cgroup);
    }
    Ok((paths, previous))
}

/// Sleeps until `due`, then works WORK_NS of CPU time; how long it was kept off its CPU.
fn wake_and_work(window: &Window, due: u64) -> Result<u64> {
    task::sleep_until(window, due)?;
    let woke = task::monotonic_ns();
    let cpu_until = task::thread_cpu_ns() + WORK_NS;
    while task::thread_cpu_ns() < cpu_until && !window.cancelled() {
        std::hint::spin_loop();
    }
    let worked = task::monotonic_ns() - woke;
    Ok(woke.saturating_sub(due).max(worked.saturating_sub(WORK_NS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with no types and the strings `names`.
    fn btf_with(names: &[&str]) -> Vec<u8> {
        let mut strings = vec![0u8];
        for name in names {
            strings.extend_from_slice(name.as_bytes());
            strings.push(0);
        }
        let mut btf = vec![0x9f, 0xeb, 1, 0];
        for field in [24, 0, 0, 0, strings.len() as u32] {
            btf.extend_from_slice(&field.to_le_bytes());
        }
        btf.extend_from_slice(&strings);
        btf
    }

    #[test]
    fn a_kernel_with_task_based_throttling_is_told_by_its_btf() {
        let btf = btf_with(&["cfs_rq", "throttled_limbo_list", "throttle_count"]);
        assert_eq!(btf_names(&btf, TASK_THROTTLE_MEMBER), Some(true));
        let btf = btf_with(&["cfs_rq", "throttled_list", "throttle_count"]);
        assert_eq!(btf_names(&btf, TASK_THROTTLE_MEMBER), Some(false));
        // A prefix of a longer name is not the name.
        let btf = btf_with(&["throttled_limbo_list_x"]);
        assert_eq!(btf_names(&btf, TASK_THROTTLE_MEMBER), Some(false));
    }

    #[test]
    fn what_is_not_btf_is_told_apart() {
        assert_eq!(btf_names(b"ELF\0\0\0", TASK_THROTTLE_MEMBER), None);
        let mut btf = btf_with(&["throttled_limbo_list"]);
        btf.truncate(30);
        assert_eq!(btf_names(&btf, TASK_THROTTLE_MEMBER), None);
    }
}
