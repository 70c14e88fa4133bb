//! The scheduler family on real threads: a thread preempted by its sibling (both attach
//! modes, with and without syscall hooks, waits timed from sched_info or from wakeups), every
//! wakeup counted, tp_btf picked by auto, cgroups sharing a run-queue slot, preemptors sharing
//! an array slot, a CPU quota blamed instead of the bystander, and ksoftirqd threads told to
//! the probes while they run.

use std::time::{Duration, Instant};

use super::*;

#[test]
fn tp_btf_probes_see_a_thread_preempted_by_its_sibling() {
    fight_for_one_cpu(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_probes_see_a_thread_preempted_by_its_sibling() {
    fight_for_one_cpu(config(AttachMode::RawTp));
}

/// --no-syscalls: sched_switch skips the per-task syscall state, and the
/// run-queue side works as before.
#[test]
fn tp_btf_probes_without_syscall_hooks_see_the_preemption_and_no_calls() {
    fight_for_one_cpu(ProbeConfig {
        syscalls: SyscallMode::Off,
        ..config(AttachMode::TpBtf)
    });
}

/// The fallback for kernels without sched_info, forced here: waits of
/// preempted tasks are timed from their switch-out.
#[test]
fn tp_btf_probes_timing_waits_from_wakeups_see_a_thread_preempted_by_its_sibling() {
    fight_for_one_cpu(without_sched_info(config(AttachMode::TpBtf)));
}

#[test]
fn raw_tp_probes_timing_waits_from_wakeups_see_a_thread_preempted_by_its_sibling() {
    fight_for_one_cpu(without_sched_info(config(AttachMode::RawTp)));
}

const SLEEPS: u64 = 50;

/// Switches of a child's start and exit that may or may not count as its waits.
const SWITCH_SLACK: u64 = 3;

/// SLEEPS sleeps of 2 ms: each ends in a wakeup, then a switch-in.
fn sleep_repeatedly() {
    let nap = libc::timespec {
        tv_sec: 0,
        tv_nsec: 2_000_000,
    };
    for _ in 0..SLEEPS {
        // SAFETY: nanosleep reads `nap`; a null remainder is allowed.
        unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
    }
}

/// The fallback, forced: every wakeup of a task that sleeps is a wait,
/// counted for its cgroup (a scratch one, so no other thread adds to it).
#[test]
fn tp_btf_probes_timing_waits_from_wakeups_count_each_wakeup() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = without_sched_info(config(AttachMode::TpBtf));
    let sleeper = ScratchCgroup::create();
    let mut storage = ObjectStorage::default();
    let session = Session::start(&config, &mut storage).expect("probes load");
    assert!(
        session
            .info()
            .warnings
            .iter()
            .any(|w| w.contains("timed from wakeups")),
        "{:?}",
        session.info().warnings
    );
    let ((slept, preempted), snapshot) = sleeper
        .run_child_on_cpu_switching(CPU, sleep_repeatedly, || {
            session.snapshot(host::monotonic_ns())
        })
        .expect("the sleeper ran");
    let row = snapshot
        .runq
        .iter()
        .find(|r| r.cgroup == sleeper.id())
        .unwrap_or_else(|| panic!("no waits of the sleeper: {:?}", snapshot.runq));
    // A wakeup whose task state, or a wait whose per-CPU stats entry, could not be made (the
    // BPF allocator's cache can be empty in the scheduler's hooks) is counted as dropped.
    let dropped: u64 = snapshot
        .counters
        .map_full
        .iter()
        .filter(|(map, _)| map == "tasks" || map == "runq_by_cgroup")
        .map(|(_, n)| n)
        .sum();
    // Each time it was switched out while it slept on, it waited once to run again (a sleep
    // whose timer fired while it was still runnable, preempted before it slept, is no sleep),
    // give or take the waits at its edges: the one that brought it to its CPU, and its report.
    let switches = slept + preempted;
    assert!(
        slept >= SLEEPS / 2,
        "the child slept {slept} times of {SLEEPS}"
    );
    assert!(
        (switches.saturating_sub(SWITCH_SLACK)..=switches + SWITCH_SLACK)
            .contains(&(row.count + dropped)),
        "{} waits and {dropped} dropped for {slept} sleeps and {preempted} preemptions \
         (±{SWITCH_SLACK}): {row:?}; counters {:?}",
        row.count,
        snapshot.counters
    );
}

#[test]
fn auto_mode_picks_tp_btf_on_this_kernel() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::Auto);
    let mut storage = ObjectStorage::default();
    let session = Session::start(&config, &mut storage).expect("probes load");
    assert_eq!(session.info().attach, Attach::TpBtf);
}

/// The `runq_slots` index of a cgroup id (runq_stats_of in bpf/sched.bpf.h).
fn runq_slot_of(cgroup: u64) -> u64 {
    let bits = skel::types::runq_slot_layout::RUNQ_SLOT_BITS.0;
    cgroup.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)
}

/// Two cgroups whose ids share a run-queue array slot wait on one CPU:
/// one keeps its stats in the slot, the other in the hash, and the
/// snapshot has both.
#[test]
fn tp_btf_runq_stats_of_cgroups_sharing_a_slot_are_both_kept() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::TpBtf);
    let own_cgroup = own_cgroup_id(&config);
    // About 1 in 64 fresh cgroups lands on our slot.
    let other = (0..2000)
        .map(|_| ScratchCgroup::create())
        .find(|c| runq_slot_of(c.id()) == runq_slot_of(own_cgroup))
        .expect("a cgroup id that shares our slot");
    let mut storage = ObjectStorage::default();
    let session = Session::start(&config, &mut storage).expect("probes load");

    let ours = spinner(c"st-spin-a", SPIN);
    let made = other.run_child_on_cpu(CPU, || {
        let end = Instant::now() + SPIN;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    });
    ours.join().unwrap();
    assert!(made, "the child in {} failed", other.dir.display());

    let snapshot = session.snapshot(host::monotonic_ns());
    for cgroup in [own_cgroup, other.id()] {
        let row = snapshot
            .runq
            .iter()
            .find(|r| r.cgroup == cgroup)
            .unwrap_or_else(|| panic!("no runq stats for {cgroup}: {:?}", snapshot.runq));
        // Two spinners on one CPU for SPIN: each waited out the other's slices.
        assert!(row.max_ns >= 1_000_000, "{row:?}");
    }
}

/// The `preemptor_slots` index of a preemptor key (preemptor_stats_of in
/// bpf/sched.bpf.h): the key's five words, hashed.
fn preemptor_slot_of(victim: u64, preemptor: u64, comm: &str) -> u64 {
    const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut bytes = [0u8; 16];
    bytes[..comm.len()].copy_from_slice(comm.as_bytes());
    let word = |i: usize| u64::from_ne_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
    // The last word: kthread (0 here) and the padding.
    let hash = [preemptor, word(0), word(1), 0]
        .into_iter()
        .fold(victim.wrapping_mul(FIBONACCI), |h, w| {
            (h ^ w).wrapping_mul(FIBONACCI)
        });
    hash >> (64 - skel::types::preemptor_slot_layout::PREEMPTOR_SLOT_BITS.0)
}

/// Two threads of our cgroup whose preemptor keys share an array slot
/// keep each other waiting on one CPU: one counts in the slot (the first
/// to land there), the other in the hash, and the snapshot names both.
#[test]
fn tp_btf_preemptors_sharing_a_slot_are_both_kept() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::TpBtf);
    let own_cgroup = own_cgroup_id(&config);
    let first = "st-slot-0";
    let slot = preemptor_slot_of(own_cgroup, own_cgroup, first);
    // About 1 in 128 names lands on the same slot.
    let second = (1..5000)
        .map(|i| format!("st-slot-{i}"))
        .find(|name| preemptor_slot_of(own_cgroup, own_cgroup, name) == slot)
        .expect("a name whose key shares the first one's slot");
    let mut storage = ObjectStorage::default();
    let session = Session::start(&config, &mut storage).expect("probes load");

    let names = [first.to_string(), second];
    let spinners: Vec<_> = names
        .iter()
        .map(|name| {
            let name = std::ffi::CString::new(name.as_str()).unwrap();
            spinner(Box::leak(name.into_boxed_c_str()), SPIN)
        })
        .collect();
    spinners.into_iter().for_each(|s| s.join().unwrap());

    let snapshot = session.snapshot(host::monotonic_ns());
    for name in &names {
        assert_kept_own_cgroup_waiting(&snapshot, own_cgroup, name);
    }
}

/// The CPU quota of QUOTA_US per PERIOD_US lets the throttled task run this long.
const QUOTA_SPIN: Duration = Duration::from_millis(800);

const QUOTA_US: u64 = 10_000;

const PERIOD_US: u64 = 100_000;

/// A wait at least this long of the throttled task is one its quota explains.
const THROTTLED_WAIT_NS: u64 = 40_000_000;

/// A task whose parent cgroup has a CPU quota spins beside a bystander of another cgroup on
/// one CPU: its long waits are throttles of the parent (found up the cgroup hierarchy in the
/// kernel), not the bystander's doing.
fn quota_throttles_the_waiter(config: ProbeConfig) {
    until_clean(|| quota_throttles_once(&config));
}

fn quota_throttles_once(config: &ProbeConfig) -> Result<(), Contaminated> {
    let quota = ScratchCgroup::create();
    quota.set_quota(QUOTA_US, PERIOD_US);
    let task = quota.child();
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");

    let bystander = spinner(c"st-bystander", QUOTA_SPIN);
    let throttled = std::thread::spawn(move || {
        task.run_child_on_cpu(CPU, || {
            set_name(c"st-quota");
            let end = Instant::now() + QUOTA_SPIN;
            while Instant::now() < end {
                std::hint::spin_loop();
            }
        })
        .then_some(task)
    });
    let mut records = Vec::new();
    let deadline = Instant::now() + QUOTA_SPIN + Duration::from_millis(300);
    while Instant::now() < deadline {
        records.extend(session.poll(Duration::from_millis(50)));
    }
    bystander.join().unwrap();
    let task = throttled
        .join()
        .unwrap()
        .expect("the child in the quota's cgroup ran");
    records.extend(session.poll(Duration::from_millis(10)));
    let snapshot = session.snapshot(host::monotonic_ns());

    let long_waits: Vec<_> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Runq(w)) if w.waiter.comm == "st-quota" && w.wait_ns >= THROTTLED_WAIT_NS => {
                Some(w)
            }
            _ => None,
        })
        .collect();
    let unexplained: Vec<_> = long_waits.iter().filter(|w| w.throttle.is_none()).collect();
    if let Some(w) = unexplained.iter().find(|w| w.ran.comm != "st-bystander") {
        return Err(Contaminated(format!(
            "st-quota waited behind {}",
            w.ran.comm
        )));
    }
    assert!(
        unexplained.is_empty(),
        "long waits blamed on the bystander, not the quota: {unexplained:#?}"
    );
    let throttles: Vec<_> = long_waits.iter().filter_map(|w| w.throttle).collect();
    assert!(
        throttles.len() >= 3,
        "{} throttled waits of st-quota in {QUOTA_SPIN:?} under {QUOTA_US}us/{PERIOD_US}us: {long_waits:#?}",
        throttles.len()
    );
    for t in &throttles {
        assert_eq!(
            t.cgroup,
            quota.id(),
            "the throttled cgroup is the parent with the quota"
        );
    }
    let row = snapshot
        .runq
        .iter()
        .find(|r| r.cgroup == task.id())
        .unwrap_or_else(|| panic!("no runq stats for {}: {:?}", task.id(), snapshot.runq));
    assert!(row.preempted_throttled >= 3, "{row:?}");
    Ok(())
}

#[test]
fn tp_btf_probes_blame_a_cpu_quota_not_the_bystander() {
    quota_throttles_the_waiter(config(AttachMode::TpBtf));
}

#[test]
fn raw_tp_probes_blame_a_cpu_quota_not_the_bystander() {
    quota_throttles_the_waiter(config(AttachMode::RawTp));
}

/// Each CPU's ksoftirqd thread and whether its state is live, as the
/// probes hold them.
fn ksoftirqd_in_cpu_states(loaded: &loader::Loaded<'_>) -> Vec<(u32, bool)> {
    cpu_states(loaded.maps())
        .iter()
        .map(|state| (state.ksoftirqd_tid, state.current_since != 0))
        .collect()
}

/// Probes that start without knowing the CPUs' ksoftirqd threads (as for a
/// CPU that comes online for the first time after they loaded) are told
/// them while they run, and each CPU keeps the rest of its state.
fn ksoftirqd_threads_are_told_while_running(attach: AttachMode) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        ksoftirqd: Vec::new(),
        ..config(attach)
    };
    let mut storage = ObjectStorage::default();
    let mut loaded = loader::load(&config, &mut storage).expect("probes load");
    std::thread::sleep(Duration::from_millis(50)); // every CPU switches tasks meanwhile
    let online = crate::cpulist::CpuList::online().unwrap();
    let before = ksoftirqd_in_cpu_states(&loaded);
    assert!(
        online.iter().all(|cpu| before[cpu as usize] == (0, true)),
        "{before:?}"
    );
    let threads = host::ksoftirqd_threads();
    assert_eq!(
        threads.len(),
        online.len(),
        "{threads:?} for CPUs {online:?}"
    );
    loaded.set_ksoftirqd(&threads).expect("set_ksoftirqd runs");
    let after = ksoftirqd_in_cpu_states(&loaded);
    for &(cpu, tid) in &threads {
        assert_eq!(after[cpu as usize], (tid, true), "CPU {cpu}: {after:?}");
    }
}

#[test]
fn tp_btf_probes_are_told_ksoftirqd_threads_while_running() {
    ksoftirqd_threads_are_told_while_running(AttachMode::TpBtf);
}

#[test]
fn raw_tp_probes_are_told_ksoftirqd_threads_while_running() {
    ksoftirqd_threads_are_told_while_running(AttachMode::RawTp);
}
