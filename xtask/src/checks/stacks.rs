//! A stack for every culprit: each stall of at least `STACKED_NS` whose culprit is a task shows
//! a kernel or user stack kept by the sampler's ticks on the stall's CPU: the culprit's own, or,
//! where no tick of the stall found the culprit on the CPU, the task a tick found there, which
//! the report names (`stack_of`). This check does not tell the two apart.

use super::pretty;
use super::report::{Report, Stall};

/// The shortest stall judged. The sampler first sees a waiter at a tick (up to a period,
/// 1.38 ms, after the wait began) and keeps stacks from a tick at least 1 ms later
/// (bpf/sampler.bpf.h), so a stall under about 2.8 ms can end before any tick may keep one;
/// from 5 ms on, some task held the CPU through at least one such tick (not always the
/// culprit, which is the task that held it longest over all the stall's waits). Ticks stop
/// while the hypervisor holds the vCPU, so the 5 ms are the guest's own: the stall's span less
/// the steal its waiter saw (a lower bound of the stall's steal, so at least the guest's time).
pub const STACKED_NS: u64 = 5_000_000;

/// Every stall of `STACKED_NS` or more of guest time with a task culprit has a stack.
pub fn check(report: &Report) -> Result<(), String> {
    let judged: Vec<&Stall> = report
        .stalls
        .iter()
        .filter(|s| guest_ns(s) >= STACKED_NS && s.culprit.is_some())
        .collect();
    let bare: Vec<&Stall> = judged
        .iter()
        .copied()
        .filter(|s| {
            s.culprit
                .as_ref()
                .is_some_and(|c| c.stack.is_empty() && c.user_stack.is_empty())
        })
        .collect();
    match bare.first() {
        None => Ok(()),
        Some(first) => Err(report.annotate(format!(
            "{} of {} stalls of {} ms or more (steal taken out) with a task culprit have no \
             stack of it; the first:\n{}",
            bare.len(),
            judged.len(),
            STACKED_NS / 1_000_000,
            pretty(first)
        ))),
    }
}

/// The stall's span the guest ran for: its waiter's steal taken out.
fn guest_ns(stall: &Stall) -> u64 {
    let steal = stall.waited.steal_ns.unwrap_or(0);
    stall.duration_ns.saturating_sub(steal)
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::checks::fixtures::NOISY;

    fn with_stalls(stalls: Vec<Value>) -> Report {
        let mut doc: Value = serde_json::from_str(NOISY).unwrap();
        doc["stalls"] = json!(stalls);
        serde_json::from_value(doc).unwrap()
    }

    fn stall(ms: u64, culprit: Option<(&[&str], &[&str])>) -> Value {
        json!({"cpu": 1, "start_ns": 0, "duration_ns": ms * 1_000_000, "kind": "runq",
            "waits": 1, "waited": {}, "gap": null,
            "culprit": culprit.map(|(stack, user_stack)| json!({"pid": 7, "tid": 7,
                "comm": "hog", "cgroup": "/noisy", "container": "/noisy", "syscall": null,
                "path": null, "oncpu_ns": null, "wall_ns": null, "stack": stack,
                "user_stack": user_stack, "samples": stack.len() + user_stack.len()}))})
    }

    #[test]
    fn a_long_stall_needs_its_culprits_kernel_or_user_stack() {
        let kernel = stall(20, Some((&["clear_page_erms"], &[])));
        let user = stall(20, Some((&[], &["0x55d0"])));
        let short_bare = stall(3, Some((&[], &[])));
        let nobody = stall(40, None);
        check(&with_stalls(vec![kernel, user, short_bare, nobody])).unwrap();

        let long_bare = stall(6, Some((&[], &[])));
        let err = check(&with_stalls(vec![
            stall(20, Some((&["x"], &[]))),
            long_bare,
        ]))
        .unwrap_err();
        assert!(
            err.contains("1 of 2 stalls of 5 ms or more (steal taken out) with a task culprit"),
            "{err}"
        );
    }

    /// The slow-syscall run of CI on 19b49d0: a 41.2 ms wait of rcu_preempt, 39.2 ms of it
    /// with the vCPU taken by the hypervisor, so no tick ran to keep the holder's stack.
    #[test]
    fn a_stall_mostly_stolen_needs_no_stack_but_five_guest_ms_do() {
        let stolen = |ms: u64, steal_ms: u64| {
            let mut s = stall(ms, Some((&[], &[])));
            s["waited"] = json!({"wait_ns": ms * 1_000_000, "steal_ns": steal_ms * 1_000_000});
            s
        };
        check(&with_stalls(vec![stolen(41, 39)])).unwrap();
        let err = check(&with_stalls(vec![stolen(41, 35)])).unwrap_err();
        assert!(err.contains("1 of 1 stalls"), "{err}");
    }
}
