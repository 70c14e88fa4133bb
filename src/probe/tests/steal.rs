//! Real-kernel tests of the sampler's steal clock: the time the host took each vCPU, as KVM's
//! per-vCPU steal time or the run queue's copy of the paravirt steal clock says at every tick,
//! against the kernel's own account of it (the steal column of /proc/stat). A gap between ticks is an irqs-off stall only for what is left of it
//! once that steal is taken out.

use std::time::{Duration, Instant};

use super::*;
use super::{config, cpu_states, pin_to, CPU, ONE_AT_A_TIME};

/// /proc/stat counts steal in clock ticks (USER_HZ) at the scheduler tick; the sampler's value
/// is as of its last tick. Both lag the host's clock by a few ms.
const TOLERANCE_NS: u64 = 40_000_000;

/// Each CPU's steal time as the sampler last read it.
fn sampler_steal_ns(loaded: &loader::Loaded<'_>) -> Vec<u64> {
    cpu_states(loaded.maps())
        .iter()
        .map(|state| state.last_tick_steal)
        .collect()
}

/// Each CPU's steal time as /proc/stat has it, in ns.
fn proc_stat_steal_ns() -> Vec<(usize, u64)> {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    crate::probe::selfcheck::proc_stat_steal_ns(&stat, ticks_per_s)
        .into_iter()
        .map(|(cpu, ns)| (cpu as usize, ns))
        .collect()
}

/// Keeps each online CPU busy for a moment, so the sampler ticks on all of them.
fn tick_every_cpu() {
    let online = crate::cpulist::CpuList::online().unwrap();
    std::thread::scope(|scope| {
        for cpu in online.iter() {
            scope.spawn(move || {
                pin_to(cpu as usize);
                let end = Instant::now() + Duration::from_millis(50);
                while Instant::now() < end {
                    std::hint::spin_loop();
                }
            });
        }
    });
}

fn the_sampler_reads_the_hosts_steal_clock(attach: AttachMode, steal: StealSource) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut storage = ObjectStorage::default();
    let config = ProbeConfig {
        steal,
        ..config(attach)
    };
    let loaded = loader::load(&config, &mut storage).expect("probes load");
    tick_every_cpu();
    let ours = sampler_steal_ns(&loaded);
    let kernel = proc_stat_steal_ns();
    assert!(!kernel.is_empty(), "no per-CPU lines in /proc/stat");
    for &(cpu, steal) in &kernel {
        assert!(
            ours[cpu].abs_diff(steal) <= TOLERANCE_NS,
            "CPU {cpu}: the sampler read {} ns of steal, /proc/stat says {steal} ns \
             (±{TOLERANCE_NS}); all CPUs: ours {ours:?}, /proc/stat {kernel:?}",
            ours[cpu]
        );
    }
}

#[test]
fn tp_btf_the_sampler_reads_the_hosts_steal_clock() {
    the_sampler_reads_the_hosts_steal_clock(AttachMode::TpBtf, StealSource::Kvm);
}

#[test]
fn raw_tp_the_sampler_reads_the_hosts_steal_clock() {
    the_sampler_reads_the_hosts_steal_clock(AttachMode::RawTp, StealSource::Kvm);
}

/// The run queue's copies of the paravirt steal clock (the source on any hypervisor but x86
/// KVM), read on this KVM guest, where the kernel fills them from KVM's.
#[test]
fn tp_btf_the_sampler_reads_the_run_queues_steal_clock() {
    the_sampler_reads_the_hosts_steal_clock(AttachMode::TpBtf, StealSource::RunQueue);
}

#[test]
fn raw_tp_the_sampler_reads_the_run_queues_steal_clock() {
    the_sampler_reads_the_hosts_steal_clock(AttachMode::RawTp, StealSource::RunQueue);
}

/// The switch from idle restarts the sampler's clock (idle has no ticks, so its time is no
/// gap) and its steal clock with it: steal the vCPU built up while idle (waiting for the host
/// on a wakeup) is no part of the next gap, and must not hide an irqs-off stall in it. Driven
/// with BPF_PROG_TEST_RUN: a switch from and to idle (no tasks) on CPU, whose state held a
/// steal reading from long before.
#[test]
fn raw_tp_a_switch_from_idle_restarts_the_steal_clock_of_the_next_gap() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::RawTp);
    assert_ne!(
        config.steal,
        StealSource::None,
        "this host's kernel accounts steal: {config:?}"
    );
    let mut storage = std::mem::MaybeUninit::uninit();
    let skel = loader::load_detached(&config, &mut storage).expect("raw_tp loads");
    let state = switch_from_idle_to_idle(
        &skel,
        skel::types::cpu_state {
            last_tick: 1,
            last_tick_steal: 1,
            ..Default::default()
        },
    );
    let kernel = proc_stat_steal_ns()
        .into_iter()
        .find(|&(cpu, _)| cpu == CPU)
        .map(|(_, steal)| steal)
        .unwrap();
    assert!(state.last_tick > 1, "the sampler's clock was not restarted");
    assert!(
        state.last_tick_steal.abs_diff(kernel) <= TOLERANCE_NS,
        "after idle the steal clock reads {} ns, /proc/stat says {kernel} ns for cpu {CPU}",
        state.last_tick_steal
    );
}

/// Runs raw_sched_switch once on CPU with BPF_PROG_TEST_RUN, from idle to idle (no task on
/// either side, so no run queue is read: the steal clock reads 0), on CPU's state set to `state`
/// (every CPU's, in fact); returns CPU's state after the switch.
fn switch_from_idle_to_idle(
    skel: &skel::StalltopSkel<'_>,
    state: skel::types::cpu_state,
) -> skel::types::cpu_state {
    use libbpf_rs::skel::Skel;
    use libbpf_rs::{MapCore, MapFlags, ProgramInput};
    let cpus = libbpf_rs::num_possible_cpus().unwrap();
    // SAFETY: cpu_state is Plain (generated from bpf/stalltop.h).
    let bytes = unsafe { plain::as_bytes(&state) }.to_vec();
    skel.maps
        .cpus
        .update_percpu(&0u32.to_ne_bytes(), &vec![bytes; cpus], MapFlags::ANY)
        .unwrap();
    let prog = skel
        .object()
        .progs_mut()
        .find(|p| p.name() == "raw_sched_switch")
        .unwrap();
    let mut args = [0u8; 24]; // preempt, prev, next
    prog.test_run(ProgramInput {
        context_in: Some(&mut args),
        cpu: CPU as u32,
        flags: libbpf_rs::libbpf_sys::BPF_F_TEST_RUN_ON_CPU,
        ..Default::default()
    })
    .unwrap();
    cpu_states(skel)[CPU]
}

/// A switch keeps the time the steal clock last moved (steal_moved_at: a wait that began after
/// it had no steal, and skips the interpolation over its CPU's slices) while the clock reads as
/// at the switch before, and moves it to the switch where it reads anew. Driven as above: the
/// switch reads a steal clock of 0, against a state whose last switch read 0, then 5 us.
#[test]
fn raw_tp_a_switch_marks_when_the_steal_clock_moved() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::RawTp);
    let mut storage = std::mem::MaybeUninit::uninit();
    let skel = loader::load_detached(&config, &mut storage).expect("raw_tp loads");
    let earlier = |current_steal| skel::types::cpu_state {
        current_steal,
        current_since: 1,
        steal_moved_at: 1,
        ..Default::default()
    };

    let still = switch_from_idle_to_idle(&skel, earlier(0));
    assert!(still.current_since > 1, "the switch did not run: {still:?}");
    assert_eq!(still.steal_moved_at, 1, "the clock stood still");

    let moved = switch_from_idle_to_idle(&skel, earlier(5_000));
    assert_eq!(
        moved.steal_moved_at, moved.current_since,
        "the clock moved at this switch"
    );
}
