//! Real-kernel test of the hardirq probes: with every run reported (threshold 0), a write to
//! the root disk and its fsync make the disk's handler run, and each reported run names the irq
//! and the handler /proc/interrupts lists for it; the hrtimer callbacks that ran meanwhile
//! (the CPU sampler's own among them) are named by their kernel functions.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use super::*;
use super::{config, ONE_AT_A_TIME};
use crate::event::{self, Event, HardirqRun};

/// Each irq's handler names, as /proc/interrupts lists them (the last column; shared lines
/// list several, comma-separated).
fn handlers_by_irq() -> HashMap<u32, Vec<String>> {
    std::fs::read_to_string("/proc/interrupts")
        .unwrap()
        .lines()
        .filter_map(|line| {
            let (irq, rest) = line.trim_start().split_once(':')?;
            let irq = irq.parse::<u32>().ok()?;
            let names = rest.split_whitespace().last()?;
            Some((irq, names.split(',').map(str::to_owned).collect()))
        })
        .collect()
}

/// Writes and syncs a file under /var/tmp, on a block device (/tmp may be a tmpfs), wherever
/// cargo's target directory is.
fn disk_io() {
    let mut file = tempfile::tempfile_in("/var/tmp").unwrap();
    for _ in 0..8 {
        file.write_all(&[1u8; 64 << 10]).unwrap();
        file.sync_all().unwrap();
    }
}

fn handler_runs_are_named(attach: AttachMode) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        hardirq_threshold_ns: 0,
        ..config(attach)
    };
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    disk_io();
    let records = session.poll(Duration::from_millis(100));
    let runs: Vec<HardirqRun> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Hardirq(h)) => Some(h),
            _ => None,
        })
        .collect();
    let (callbacks, runs): (Vec<HardirqRun>, Vec<HardirqRun>) =
        runs.into_iter().partition(|r| r.hrtimer.is_some());
    assert!(!runs.is_empty(), "no hardirq handler ran during 8 fsyncs");
    hrtimer_callbacks_are_kernel_functions(&callbacks);
    let listed = handlers_by_irq();
    for run in &runs {
        let names = listed.get(&run.irq);
        // The probes keep 15 bytes of a name.
        let same = |name: &String| {
            *name == run.handler || (run.handler.len() == 15 && name.starts_with(&run.handler))
        };
        assert!(
            names.is_some_and(|n| n.iter().any(same)),
            "irq {} handler {:?} is not in /proc/interrupts ({names:?})",
            run.irq,
            run.handler
        );
        assert!(run.run_ns > 0 && run.run_ns < 1_000_000_000, "{run:?}");
    }
}

/// Hard hrtimer callbacks ran meanwhile (the tick's, and the CPU sampler's own cpu-clock
/// timer): each is reported by its callback, a kernel function kallsyms names.
fn hrtimer_callbacks_are_kernel_functions(callbacks: &[HardirqRun]) {
    let addresses: Vec<u64> = callbacks.iter().filter_map(|c| c.hrtimer).collect();
    let names = crate::symbols::StackNamer::new()
        .name(&[], &addresses)
        .kernel;
    let named = |addr: u64| {
        names
            .iter()
            .find(|(a, _)| *a == addr)
            .map(|(_, n)| n.as_str())
    };
    for callback in callbacks {
        let addr = callback.hrtimer.unwrap();
        assert!(
            named(addr).is_some(),
            "hrtimer callback {addr:#x} has no kernel name: {callback:?}"
        );
        assert!(
            callback.irq == 0 && callback.handler.is_empty(),
            "{callback:?}"
        );
    }
    assert!(
        addresses
            .iter()
            .any(|&a| named(a) == Some("perf_swevent_hrtimer")),
        "the sampler's own timer is not among the hrtimer callbacks: {:?}",
        addresses.iter().map(|&a| named(a)).collect::<Vec<_>>()
    );
}

#[test]
fn tp_btf_hardirq_handler_runs_are_named_as_proc_interrupts_names_them() {
    handler_runs_are_named(AttachMode::TpBtf);
}

#[test]
fn raw_tp_hardirq_handler_runs_are_named_as_proc_interrupts_names_them() {
    handler_runs_are_named(AttachMode::RawTp);
}
