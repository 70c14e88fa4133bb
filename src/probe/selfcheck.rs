//! The start-up check of the per-CPU values the probes read: before a method trusts one, it is
//! read on this kernel (read_kernel_values, run on each online CPU with BPF_PROG_TEST_RUN) and
//! judged (verdict.rs). The pending softirq mask lies at a distance from the run queue that
//! the kernel's BTF gives; the steal clock there too (KVM's), or in the run queue. A method
//! whose value does not hold up is turned off with one warning line: sampler ticks that start
//! softirq delays give way to a program on every raise, and steal is no longer taken out of
//! interrupt runs and irqs-off gaps.

mod verdict;

use std::mem::MaybeUninit;
use std::time::Instant;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{libbpf_sys, AsRawLibbpf, MapCore, MapFlags, OpenObject, ProgramInput};

#[cfg(test)]
pub use self::verdict::proc_stat_steal_ns;
use super::config::ProbeConfig;
use super::features::{KernelFeatures, PerCpu};
use super::skel::types::{self, steal_source};
use super::skel::{StalltopSkel, StalltopSkelBuilder};
use crate::cpulist::CpuList;
use crate::modes::StealSource;
use crate::stream::{ProbeLoad, ProgramLoad};

const PROGRAM: &str = "read_kernel_values";
const VALUES_MAP: &str = "kernel_values";
/// The family name of the check's own load in the recording's `probes`.
pub const FAMILY: &str = "selfcheck";

/// What the check left of a configuration.
pub struct Checked {
    /// `config` with every method whose value failed turned off.
    pub config: ProbeConfig,
    /// One line per method turned off.
    pub warnings: Vec<String>,
    /// The check's program and time, if it ran.
    pub load: Option<ProbeLoad>,
}

/// Checks the values `config` would have the probes read.
pub fn check(config: &ProbeConfig) -> Checked {
    let started = Instant::now();
    let mut checked = Checked {
        config: config.clone(),
        warnings: Vec::new(),
        load: None,
    };
    if let Some(mismatch) = config.features.btf_mismatch {
        let wanted = match mismatch.value {
            PerCpu::SoftirqPending => ProbeConfig {
                features: KernelFeatures {
                    softirq_pending_from_rq: Some(0),
                    ..config.features
                },
                ..config.clone()
            }
            .softirq_delay_ticks(),
            PerCpu::StealTime => config.steal != StealSource::None,
        };
        if wanted {
            checked.warn(mismatch.value, &mismatch.to_string());
        }
    }
    let delay_ticks = config.softirq_delay_ticks();
    let steal = config.steal != StealSource::None;
    if !delay_ticks && !steal {
        return checked;
    }
    let mut storage = MaybeUninit::uninit();
    let program = match load_program(&mut storage) {
        Ok(program) => program,
        Err(error) => {
            let why = format!("the program that checks it did not load ({error})");
            if delay_ticks {
                checked.turn_off(PerCpu::SoftirqPending, &why);
            }
            if steal {
                checked.turn_off(PerCpu::StealTime, &why);
            }
            checked.load = Some(family_load(Err(error), started));
            return checked;
        }
    };
    if delay_ticks {
        let at = config.features.softirq_pending_from_rq.unwrap_or(0);
        if let Err(why) = check_pending_mask(&program, at) {
            checked.turn_off(
                PerCpu::SoftirqPending,
                &format!(
                    "the pending softirq mask at its BTF place (rq{at:+}) failed its check: {why}"
                ),
            );
        }
    }
    if steal {
        let at = config.features.steal_time_from_rq.unwrap_or(0);
        if let Err(why) = check_steal_clock(&program, config.steal, at) {
            let clock = match config.steal {
                StealSource::Kvm => format!("KVM's steal time at its BTF place (rq{at:+})"),
                _ => "the run queue's steal clock".to_string(),
            };
            checked.turn_off(
                PerCpu::StealTime,
                &format!("{clock} failed its check: {why}"),
            );
        }
    }
    checked.load = Some(family_load(Ok(verified_insns(&program)), started));
    checked
}

impl Checked {
    /// Turns the method that reads `value` off, with the warning line that says why.
    fn turn_off(&mut self, value: PerCpu, why: &str) {
        match value {
            PerCpu::SoftirqPending => self.config.features.softirq_pending_from_rq = None,
            PerCpu::StealTime => self.config.steal = StealSource::None,
        }
        self.warn(value, why);
    }

    /// The warning line of a method turned off (or never on) for `why`.
    fn warn(&mut self, value: PerCpu, why: &str) {
        self.warnings.push(match value {
            PerCpu::SoftirqPending => format!(
                "softirq delays are timed from each raise by a program, not from sampler ticks: \
                 {why}"
            ),
            PerCpu::StealTime => format!(
                "interrupt runs and irqs-off gaps are not corrected for the time the host took \
                 the vCPU: {why}"
            ),
        });
    }
}

/// The check's entry in `probes`: its program (or why it did not load) and its time.
fn family_load(program: Result<Option<u32>, String>, started: Instant) -> ProbeLoad {
    let (programs, error) = match program {
        Ok(verified_insns) => (
            vec![ProgramLoad {
                name: PROGRAM.into(),
                verified_insns,
            }],
            None,
        ),
        Err(error) => (Vec::new(), Some(error)),
    };
    ProbeLoad {
        family: FAMILY.into(),
        attach: "raw_tp".into(),
        loaded: error.is_none(),
        load_ms: started.elapsed().as_millis() as u64,
        error,
        programs,
    }
}

/// The pending mask read on every online CPU is in range.
fn check_pending_mask(program: &StalltopSkel<'_>, at: i64) -> Result<(), String> {
    let bit = types::kernel_read::KERNEL_READ_SOFTIRQ_PENDING.0 as u16;
    let values = on_every_cpu(program, at, steal_source::STEAL_NONE, 0)?;
    let masks: Vec<(u32, u16)> = values
        .iter()
        .filter(|(_, v)| v.read & bit != 0)
        .map(|(cpu, v)| (*cpu, v.softirq_pending))
        .collect();
    if masks.len() < values.len() {
        return Err("it could not be read on every CPU".into());
    }
    verdict::softirq_pending(&masks)
}

/// The steal clock read on every online CPU is what /proc/stat accounted.
fn check_steal_clock(
    program: &StalltopSkel<'_>,
    source: StealSource,
    at: i64,
) -> Result<(), String> {
    let from = match source {
        StealSource::Kvm => steal_source::STEAL_KVM,
        StealSource::RunQueue => steal_source::STEAL_RQ,
        StealSource::None => steal_source::STEAL_NONE,
    };
    let bit = types::kernel_read::KERNEL_READ_STEAL.0 as u16;
    let values = on_every_cpu(program, 0, from, at)?;
    let clock_ns = values
        .iter()
        .filter(|(_, v)| v.read & bit != 0)
        .map(|(cpu, v)| (*cpu, v.steal_ns))
        .collect::<std::collections::BTreeMap<_, _>>();
    if clock_ns.len() < values.len() {
        return Err("it could not be read on every CPU".into());
    }
    let proc_stat =
        std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    verdict::steal_clock(
        &clock_ns,
        &verdict::proc_stat_steal_ns(&proc_stat, ticks_per_s),
    )
}

/// `read_kernel_values` on every online CPU (BPF_F_TEST_RUN_ON_CPU: an IPI to each but this
/// one), with what it read there.
fn on_every_cpu(
    program: &StalltopSkel<'_>,
    pending_at: i64,
    steal_from: steal_source,
    steal_at: i64,
) -> Result<Vec<(u32, types::kernel_values)>, String> {
    CpuList::online()?
        .iter()
        .map(|cpu| -> Result<(u32, types::kernel_values), String> {
            let mut args = [pending_at, i64::from(steal_from.0), steal_at]
                .iter()
                .flat_map(|arg| arg.to_ne_bytes())
                .collect::<Vec<u8>>();
            let input = ProgramInput {
                context_in: Some(&mut args),
                cpu,
                flags: libbpf_sys::BPF_F_TEST_RUN_ON_CPU,
                ..Default::default()
            };
            program
                .progs
                .read_kernel_values
                .test_run(input)
                .map_err(|e| format!("running {PROGRAM}: {e}"))?;
            let bytes = program
                .maps
                .kernel_values
                .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| format!("reading {VALUES_MAP}: {e}"))?
                .and_then(|per_cpu| per_cpu.into_iter().nth(cpu as usize))
                .ok_or_else(|| format!("{VALUES_MAP} has no value for CPU {cpu}"))?;
            let mut read = types::kernel_values::default();
            plain::copy_from_bytes(&mut read, &bytes)
                .map_err(|_| format!("{VALUES_MAP}: a value of {} bytes", bytes.len()))?;
            Ok((cpu, read))
        })
        .collect()
}

/// The check's program alone in an instance of the skeleton, with only its own map created.
fn load_program(storage: &mut MaybeUninit<OpenObject>) -> Result<StalltopSkel<'_>, String> {
    let mut open = StalltopSkelBuilder::default()
        .open(storage)
        .map_err(|e| e.to_string())?;
    open.progs.read_kernel_values.set_autoload(true);
    for mut map in open.open_object_mut().maps_mut() {
        // SAFETY: the pointer is the live bpf_map of an open object we hold.
        let internal = unsafe { libbpf_sys::bpf_map__is_internal(map.as_libbpf_object().as_ptr()) };
        if !internal && map.name() != VALUES_MAP {
            map.set_autocreate(false).map_err(|e| e.to_string())?;
        }
    }
    open.load().map_err(|e| e.to_string())
}

fn verified_insns(program: &StalltopSkel<'_>) -> Option<u32> {
    use std::os::fd::{AsFd, AsRawFd};
    let fd = program.progs.read_kernel_values.as_fd().as_raw_fd();
    super::loader::prog_info(fd)
        .map(|info| info.verified_insns)
        .filter(|&n| n > 0)
}
