//! Real-kernel tests of the start-up check of the per-CPU values the probes read: on this
//! kernel the pending mask's BTF place and the chosen steal clock prove themselves, and a place
//! forced wrong (a field of the run queue that holds something else) turns its method off with
//! one warning line.

use std::time::Instant;

use super::*;
use super::{config, ONE_AT_A_TIME};
use crate::modes::SoftirqDelay;
use crate::probe::features::{self, BtfMismatch, PerCpu};
use crate::probe::loader;

const DELAY_FALLBACK: &str =
    "softirq delays are timed from each raise by a program, not from sampler ticks: ";
const STEAL_FALLBACK: &str =
    "interrupt runs and irqs-off gaps are not corrected for the time the host took the vCPU: ";

/// The cheap default mode, in raw_tp (the check does not depend on the attach mode).
fn cheap(features: KernelFeatures, steal: StealSource) -> ProbeConfig {
    ProbeConfig {
        syscalls: SyscallMode::Sampled,
        features,
        steal,
        ..config(AttachMode::RawTp)
    }
}

fn warnings_starting(loaded: &loader::Loaded<'_>, start: &str) -> Vec<String> {
    loaded
        .warnings
        .iter()
        .filter(|w| w.starts_with(start))
        .cloned()
        .collect()
}

fn check_load<'a>(loaded: &'a loader::Loaded<'_>) -> Option<&'a crate::stream::ProbeLoad> {
    loaded.probes.iter().find(|p| p.family == "selfcheck")
}

/// Where the BTF places it, the pending mask proves itself here, and so does the steal clock
/// stalltop would choose: the cheap mode starts delays at ticks, steal is read where chosen,
/// and the check's program verified (the matrix runs this on every kernel it boots).
#[test]
fn the_kernel_s_places_prove_themselves() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let features = KernelFeatures::detect();
    assert_eq!(features.btf_mismatch, None, "{features:?}");
    assert!(features.softirq_pending_from_rq.is_some(), "{features:?}");
    let config = cheap(features, config(AttachMode::RawTp).steal);
    let mut storage = ObjectStorage::default();
    let started = Instant::now();
    let loaded = loader::load(&config, &mut storage).expect("probes load");
    let took = started.elapsed();
    assert!(
        warnings_starting(&loaded, DELAY_FALLBACK).is_empty()
            && warnings_starting(&loaded, STEAL_FALLBACK).is_empty(),
        "{:?}",
        loaded.warnings
    );
    assert_eq!(loaded.steal, config.steal);
    let expected_delay = if features.preempt_rt {
        SoftirqDelay::Exact
    } else {
        SoftirqDelay::Sampled
    };
    assert_eq!(loaded.softirq_delay, expected_delay);
    match check_load(&loaded) {
        Some(check) => {
            assert!(check.loaded, "{check:?}");
            assert!(check.programs[0].verified_insns.is_some(), "{check:?}");
            eprintln!(
                "the start-up check took {} ms of a {} ms load (steal: {})",
                check.load_ms,
                took.as_millis(),
                config.steal
            );
        }
        // Nothing to check: no ticks start delays (PREEMPT_RT) and no steal is read.
        None => assert!(!config.softirq_delay_ticks() && config.steal == StealSource::None),
    }
}

/// The run queue's steal clock, the source of any hypervisor's steal, proves itself here too
/// (on a KVM host stalltop would choose KVM's own clock).
#[test]
fn the_run_queue_s_steal_clock_proves_itself() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = cheap(KernelFeatures::detect(), StealSource::RunQueue);
    let mut storage = ObjectStorage::default();
    let loaded = loader::load(&config, &mut storage).expect("probes load");
    assert!(
        warnings_starting(&loaded, STEAL_FALLBACK).is_empty(),
        "{:?}",
        loaded.warnings
    );
    assert_eq!(loaded.steal, StealSource::RunQueue);
    assert!(check_load(&loaded).is_some_and(|check| check.loaded));
}

/// The pending mask's place moved onto the run queue's clock: its low 16 bits have bits at or
/// above NR_SOFTIRQS on some CPU, except by a chance of (1/64)^CPUs, for which the load is
/// tried again. Delays are then timed from each raise.
#[test]
fn a_pending_mask_place_that_is_no_mask_times_delays_from_the_raise() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let detected = KernelFeatures::detect();
    if detected.preempt_rt {
        return; // delays are timed from the raise there anyway: nothing to check
    }
    let config = cheap(
        KernelFeatures {
            softirq_pending_from_rq: features::rq_field_offset("clock"),
            ..detected
        },
        StealSource::None,
    );
    assert!(config.softirq_delay_ticks());
    let mut seen = Vec::new();
    for _ in 0..3 {
        let mut storage = ObjectStorage::default();
        let loaded = loader::load(&config, &mut storage).expect("probes load");
        let fallback = warnings_starting(&loaded, DELAY_FALLBACK);
        if fallback.is_empty() {
            seen.push(loaded.warnings.clone());
            continue;
        }
        assert_eq!(fallback.len(), 1, "{:?}", loaded.warnings);
        assert!(
            fallback[0].contains("the pending softirq mask at its BTF place")
                && fallback[0].contains("bits at or above NR_SOFTIRQS"),
            "{fallback:?}"
        );
        assert_eq!(loaded.softirq_delay, SoftirqDelay::Exact);
        return;
    }
    panic!("the clock's low bits passed for a pending mask three times: {seen:?}");
}

/// KVM's steal time forced onto the run queue's clock, which reads the time since boot where
/// /proc/stat's steal is far less: steal is left alone, with one line that says why (this
/// runs on any kernel, a guest without KVM steal time included: only the place is read).
#[test]
fn a_steal_place_that_is_no_steal_clock_leaves_steal_alone() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = cheap(
        KernelFeatures {
            steal_time_from_rq: features::rq_field_offset("clock"),
            ..KernelFeatures::detect()
        },
        StealSource::Kvm,
    );
    let mut storage = ObjectStorage::default();
    let loaded = loader::load(&config, &mut storage).expect("probes load");
    let fallback = warnings_starting(&loaded, STEAL_FALLBACK);
    assert_eq!(fallback.len(), 1, "{:?}", loaded.warnings);
    assert!(
        fallback[0].contains("KVM's steal time at its BTF place")
            && fallback[0].contains("where /proc/stat's steal is"),
        "{fallback:?}"
    );
    assert_eq!(loaded.steal, StealSource::None);
    // The other methods stand.
    assert!(warnings_starting(&loaded, DELAY_FALLBACK).is_empty());
}

/// A pending mask whose BTF type is not what the probes read is never read, and the method it
/// serves says so.
#[test]
fn a_pending_mask_of_another_type_falls_back_with_the_type_named() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let detected = KernelFeatures::detect();
    if detected.preempt_rt {
        return;
    }
    let config = cheap(
        KernelFeatures {
            softirq_pending_from_rq: None,
            btf_mismatch: Some(BtfMismatch {
                value: PerCpu::SoftirqPending,
                variable: "pcpu_hot",
                field: Some("softirq_pending"),
                bytes: 8,
            }),
            ..detected
        },
        StealSource::None,
    );
    let mut storage = ObjectStorage::default();
    let loaded = loader::load(&config, &mut storage).expect("probes load");
    assert_eq!(
        warnings_starting(&loaded, DELAY_FALLBACK),
        [format!(
            "{DELAY_FALLBACK}pcpu_hot.softirq_pending is a 8-byte integer in the kernel's BTF"
        )]
    );
    assert_eq!(loaded.softirq_delay, SoftirqDelay::Exact);
}
