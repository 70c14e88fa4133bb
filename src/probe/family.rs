//! The probe families: programs that load and fail together, what a user
//! loses without each, and which programs of the skeleton each enables.

use super::config::ProbeConfig;
use super::skel::OpenStalltopSkel;
use crate::modes::{Attach, SyscallMode};

/// Programs that load and fail together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeFamily {
    /// sys_enter and sys_exit.
    Syscall,
    /// sched_switch, sched_wakeup[_new], sched_migrate_task,
    /// sched_process_exit.
    Sched,
    /// softirq_raise, softirq_entry, softirq_exit, irq_handler_entry,
    /// irq_handler_exit, hrtimer_expire_entry, hrtimer_expire_exit.
    Softirq,
    /// The CPU X-ray on a cpu-clock perf event.
    Sampler,
}

impl ProbeFamily {
    pub fn name(self) -> &'static str {
        match self {
            ProbeFamily::Syscall => "syscall",
            ProbeFamily::Sched => "sched",
            ProbeFamily::Softirq => "softirq",
            ProbeFamily::Sampler => "sampler",
        }
    }

    /// The signals a user loses without this family.
    pub(super) fn lost(self) -> &'static str {
        match self {
            ProbeFamily::Syscall => {
                "slow calls and their files, the syscall table, and culprits' syscalls are lost"
            }
            ProbeFamily::Sched => "there is nothing to show without it",
            ProbeFamily::Softirq => {
                "softirq delays, NET_RX stalls, stolen softirq time and long hardirq \
                 handlers and hrtimer callbacks are lost"
            }
            ProbeFamily::Sampler => {
                "kernel stacks of stalls, irqs-off gaps and sampled syscalls are lost \
                 (softirq delays are timed from a program on every raise instead)"
            }
        }
    }

    /// How to start without being told again.
    pub(super) fn avoid(self) -> &'static str {
        match self {
            ProbeFamily::Syscall => "--syscalls off starts without them",
            ProbeFamily::Sched => "stalltop needs Linux 5.8 or later with BTF",
            ProbeFamily::Softirq => "no option replaces them",
            ProbeFamily::Sampler => "--sample-hz 0 starts without it",
        }
    }
}

/// The families to load, in order: the syscall family first, so the
/// others know whether a syscall can be in progress.
pub(super) fn families(config: &ProbeConfig) -> Vec<ProbeFamily> {
    let mut families = Vec::new();
    if config.syscalls == SyscallMode::Exact {
        families.push(ProbeFamily::Syscall);
    }
    families.extend([ProbeFamily::Sched, ProbeFamily::Softirq]);
    if config.sample_hz > 0 {
        families.push(ProbeFamily::Sampler);
    }
    families
}

/// Enable the programs of `family` in `attach` mode; every other program
/// of the instance stays unloaded.
pub(super) fn enable_programs(
    open: &mut OpenStalltopSkel<'_>,
    family: ProbeFamily,
    attach: Attach,
) {
    let p = &mut open.progs;
    let btf = attach == Attach::TpBtf;
    let enable = |prog: &mut libbpf_rs::OpenProgramMut<'_>| prog.set_autoload(true);
    match family {
        ProbeFamily::Syscall => {
            if btf {
                enable(&mut p.btf_sys_enter);
                enable(&mut p.btf_sys_exit);
            } else {
                enable(&mut p.raw_sys_enter);
                enable(&mut p.raw_sys_exit);
            }
        }
        ProbeFamily::Sched => {
            enable(&mut p.set_ksoftirqd); // run by user space, never attached
            if btf {
                enable(&mut p.btf_sched_switch);
                enable(&mut p.btf_sched_migrate_task);
                enable(&mut p.btf_sched_process_exit);
                enable(&mut p.btf_sched_wakeup);
                enable(&mut p.btf_sched_wakeup_new);
            } else {
                enable(&mut p.raw_sched_switch);
                enable(&mut p.raw_sched_migrate_task);
                enable(&mut p.raw_sched_process_exit);
                enable(&mut p.raw_sched_wakeup);
                enable(&mut p.raw_sched_wakeup_new);
            }
        }
        ProbeFamily::Softirq => {
            // The raise program loads with the others; it is attached only
            // where the sampler's ticks do not start the delays (decided
            // once the sampler has attached: loader::attach_softirq_raise).
            if btf {
                enable(&mut p.btf_softirq_raise);
                enable(&mut p.btf_softirq_entry);
                enable(&mut p.btf_softirq_exit);
                enable(&mut p.btf_irq_handler_entry);
                enable(&mut p.btf_irq_handler_exit);
                enable(&mut p.btf_hrtimer_expire_entry);
                enable(&mut p.btf_hrtimer_expire_exit);
            } else {
                enable(&mut p.raw_softirq_raise);
                enable(&mut p.raw_softirq_entry);
                enable(&mut p.raw_softirq_exit);
                enable(&mut p.raw_irq_handler_entry);
                enable(&mut p.raw_irq_handler_exit);
                enable(&mut p.raw_hrtimer_expire_entry);
                enable(&mut p.raw_hrtimer_expire_exit);
            }
        }
        ProbeFamily::Sampler => {
            if btf {
                enable(&mut p.btf_cpu_sample);
            } else {
                enable(&mut p.raw_cpu_sample);
            }
        }
    }
}
