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
/// culprit, which is the task that held it longest over all the stall's waits).
pub const STACKED_NS: u64 = 5_000_000;

/// Every stall of `STACKED_NS` or more with a task culprit has a stack.
pub fn check(report: &Report) -> Result<(), String> {
    let judged: Vec<&Stall> = report
        .stalls
        .iter()
        .filter(|s| s.duration_ns >= STACKED_NS && s.culprit.is_some())
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
            "{} of {} stalls of {} ms or more with a task culprit have no stack of it; the \
             first:\n{}",
            bare.len(),
            judged.len(),
            STACKED_NS / 1_000_000,
            pretty(first)
        ))),
    }
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
            err.contains("1 of 2 stalls of 5 ms or more with a task culprit have no stack"),
            "{err}"
        );
    }
}
