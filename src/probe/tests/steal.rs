//! Real-kernel test of the sampler's steal clock: the time the host took each vCPU, as KVM's
//! per-vCPU steal time says at every tick, against the kernel's own account of it (the steal
//! column of /proc/stat). A gap between ticks is an irqs-off stall only for what is left of it
//! once that steal is taken out.

use std::time::{Duration, Instant};

use super::*;
use super::{config, cpu_states, pin_to, ONE_AT_A_TIME};

/// /proc/stat counts steal in clock ticks (USER_HZ) at the scheduler tick; the sampler's value
/// is as of its last tick. Both lag the host's clock by a few ms.
const TOLERANCE_NS: u64 = 40_000_000;

/// Each CPU's steal time as the sampler last read it.
fn sampler_steal_ns(loaded: &loader::Loaded<'_>) -> Vec<u64> {
    cpu_states(loaded)
        .iter()
        .map(|state| state.last_tick_steal)
        .collect()
}

/// Each CPU's steal time as /proc/stat has it, in ns.
fn proc_stat_steal_ns() -> Vec<(usize, u64)> {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let cpu = fields.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
            let steal: u64 = fields.nth(7)?.parse().ok()?;
            Some((cpu, steal * 1_000_000_000 / ticks_per_s))
        })
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

fn the_sampler_reads_the_hosts_steal_clock(attach: AttachMode) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut storage = ObjectStorage::default();
    let loaded = loader::load(&config(attach), &mut storage).expect("probes load");
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
    the_sampler_reads_the_hosts_steal_clock(AttachMode::TpBtf);
}

#[test]
fn raw_tp_the_sampler_reads_the_hosts_steal_clock() {
    the_sampler_reads_the_hosts_steal_clock(AttachMode::RawTp);
}
