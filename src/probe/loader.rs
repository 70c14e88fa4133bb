//! Open the skeleton, write the rodata knobs, pick the program family
//! (tp_btf, else raw_tp), load, seed per-task and per-CPU state, attach;
//! the CPU X-ray sampler is optional and degrades to a warning.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use super::skel::{types, OpenStalltopSkel, StalltopSkel, StalltopSkelBuilder};
use super::{sampler, ProbeError};
use crate::syscall_table;

/// Which twin of every program to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    /// tp_btf where the kernel has BTF tracepoints, else raw_tp.
    Auto,
    /// BTF tracepoints only (fastest: direct field access).
    TpBtf,
    /// Raw tracepoints with CO-RE reads (for kernels without tp_btf).
    RawTp,
}

/// What the probes are told before they load.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    pub attach: AttachMode,
    pub runq_threshold_ns: u64,
    /// Softirq delay, ksoftirqd wait and irqs-off gap that make a stall.
    pub stall_threshold_ns: u64,
    pub syscall_wall_threshold_ns: u64,
    pub syscall_oncpu_threshold_ns: u64,
    /// CPU X-ray sampling rate; 0 turns the sampler off.
    pub sample_hz: u32,
    /// Records per second per CPU and kind before the kernel side samples.
    pub record_rate: u32,
    /// Hook every syscall's entry and exit (latency, on-CPU time, files).
    pub syscalls: bool,
    /// Attribute tasks by their v1 cpu cgroup (hybrid and v1 hosts).
    pub cgroup_v1_cpu: bool,
    /// (cpu, thread id) of every ksoftirqd/N thread.
    pub ksoftirqd: Vec<(u32, u32)>,
    /// Keep BPF run-time statistics on so stalltop can show its own cost
    /// (adds a clock pair to every probe invocation).
    pub self_cost: bool,
    /// Time run-queue waits from sched_wakeup hooks: for kernels without
    /// the scheduler's own sched_info accounting (see `sched_info_missing`).
    pub runq_from_wakeup: bool,
}

/// True on kernels built without CONFIG_SCHED_INFO, whose run-queue
/// accounting stalltop reads by default (it also backs /proc/<pid>/schedstat).
pub fn sched_info_missing() -> bool {
    !std::path::Path::new("/proc/self/schedstat").exists()
}

/// The family that loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    TpBtf,
    RawTp,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::TpBtf => "tp_btf",
            Family::RawTp => "raw_tp",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Family::TpBtf => "btf_",
            Family::RawTp => "raw_",
        }
    }
}

/// Backing storage for the load attempts (each needs its own): tp_btf and
/// raw_tp, each with and without the sampler.
pub struct ObjectStorage([MaybeUninit<OpenObject>; 4]);

impl Default for ObjectStorage {
    fn default() -> Self {
        ObjectStorage(std::array::from_fn(|_| MaybeUninit::uninit()))
    }
}

/// Loaded and attached probes; dropping this detaches everything.
pub struct Loaded<'obj> {
    /// Declared first so the links drop (detach) before the programs.
    _links: Vec<Link>,
    pub skel: StalltopSkel<'obj>,
    pub family: Family,
    /// Optional parts that did not come up, for the user to see.
    pub warnings: Vec<String>,
}

pub fn load<'obj>(
    config: &ProbeConfig,
    storage: &'obj mut ObjectStorage,
) -> Result<Loaded<'obj>, ProbeError> {
    let families: &[Family] = match config.attach {
        AttachMode::TpBtf => &[Family::TpBtf],
        AttachMode::RawTp => &[Family::RawTp],
        AttachMode::Auto => &[Family::TpBtf, Family::RawTp],
    };
    let mut slots = storage.0.iter_mut();
    let mut warnings = Vec::new();
    if config.runq_from_wakeup {
        warnings.push(
            "the kernel lacks CONFIG_SCHED_INFO: run-queue waits are timed from wakeups (costs more per switch)"
                .into(),
        );
    }
    let mut last_error = None;
    for &family in families {
        for with_sampler in [config.sample_hz > 0, false] {
            let slot = slots.next().expect("four slots for at most four attempts");
            match load_once(config, family, with_sampler, slot) {
                Ok(skel) => {
                    if config.sample_hz > 0 && !with_sampler {
                        warnings.push(
                            "CPU X-ray sampler did not load; stacks and irqs-off gaps are off"
                                .into(),
                        );
                    }
                    return attach(skel, family, config.sample_hz, warnings);
                }
                Err(e) => {
                    tracing::warn!("{e}");
                    last_error = Some(e);
                }
            }
            if config.sample_hz == 0 {
                break; // the second attempt would be the same
            }
        }
    }
    Err(last_error.expect("at least one attempt ran"))
}

/// The raw_tp family loaded but not attached: for driving its handlers
/// with BPF_PROG_TEST_RUN.
#[cfg(test)]
pub fn load_detached<'obj>(
    config: &ProbeConfig,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<StalltopSkel<'obj>, ProbeError> {
    load_once(config, Family::RawTp, false, storage)
}

fn load_once<'obj>(
    config: &ProbeConfig,
    family: Family,
    with_sampler: bool,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<StalltopSkel<'obj>, ProbeError> {
    let load_error = |e: libbpf_rs::Error| ProbeError::Load {
        mode: family.name(),
        detail: e.to_string(),
    };
    let mut open = StalltopSkelBuilder::default()
        .open(storage)
        .map_err(load_error)?;
    configure(&mut open, config, family);
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_str().unwrap_or_default();
        let syscall_hook = name.ends_with("_sys_enter") || name.ends_with("_sys_exit");
        let wakeup_hook = name.contains("_sched_wakeup");
        let wanted = (name.starts_with(family.prefix())
            && (config.syscalls || !syscall_hook)
            && (config.runq_from_wakeup || !wakeup_hook))
            || (with_sampler && name == "cpu_sample");
        prog.set_autoload(wanted);
    }
    let skel = open.load().map_err(load_error)?;
    seed(&skel, &config.ksoftirqd).map_err(load_error)?;
    Ok(skel)
}

fn configure(open: &mut OpenStalltopSkel<'_>, config: &ProbeConfig, family: Family) {
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("the BPF object has const volatile knobs, so a .rodata map");
    rodata.cgroup_v1_cpu = u8::from(config.cgroup_v1_cpu);
    // Task storage needs the trusted task pointers only tp_btf has.
    rodata.use_task_storage = u8::from(family == Family::TpBtf);
    rodata.runq_threshold_ns = config.runq_threshold_ns;
    rodata.runq_from_wakeup = u8::from(config.runq_from_wakeup);
    rodata.takeover_threshold_ns = config.stall_threshold_ns;
    rodata.softirq_threshold_ns = config.stall_threshold_ns;
    rodata.irqoff_threshold_ns = config.stall_threshold_ns;
    rodata.syscalls_hooked = u8::from(config.syscalls);
    rodata.syscall_wall_threshold_ns = config.syscall_wall_threshold_ns;
    rodata.syscall_oncpu_threshold_ns = config.syscall_oncpu_threshold_ns;
    rodata.syscall_arg = syscall_table::file_arg_table();
    rodata.record_rate = config.record_rate;
}

/// Tell each CPU which thread is its ksoftirqd: its waits are takeovers,
/// and the softirqs it runs are not stolen from anyone.
fn seed(skel: &StalltopSkel<'_>, ksoftirqd: &[(u32, u32)]) -> Result<(), libbpf_rs::Error> {
    let possible = libbpf_rs::num_possible_cpus()?;
    let per_cpu: Vec<Vec<u8>> = (0..possible)
        .map(|cpu| {
            let state = types::cpu_state {
                ksoftirqd_tid: ksoftirqd
                    .iter()
                    .find(|(c, _)| *c as usize == cpu)
                    .map_or(0, |(_, tid)| *tid),
                ..Default::default()
            };
            bytes_of(&state).to_vec()
        })
        .collect();
    skel.maps
        .cpus
        .update_percpu(&0u32.to_ne_bytes(), &per_cpu, MapFlags::ANY)
}

fn bytes_of<T: plain::Plain>(value: &T) -> &[u8] {
    // SAFETY: T is Plain: a #[repr(C)] struct of integers generated from
    // bpf/stalltop.h, so viewing it as bytes is sound.
    unsafe { plain::as_bytes(value) }
}

fn attach<'obj>(
    skel: StalltopSkel<'obj>,
    family: Family,
    sample_hz: u32,
    mut warnings: Vec<String>,
) -> Result<Loaded<'obj>, ProbeError> {
    let mut links = Vec::new();
    for prog in skel.object().progs_mut() {
        if !prog.autoload() {
            continue;
        }
        if prog.name() == "cpu_sample" {
            match sampler::attach(&prog, sample_hz) {
                Ok(mut sampler_links) => links.append(&mut sampler_links),
                Err(e) => warnings.push(format!("CPU X-ray sampler is off: {e}")),
            }
            continue;
        }
        let link = prog.attach().map_err(|e| ProbeError::Attach {
            detail: format!("{}: {e}", prog.name().to_string_lossy()),
        })?;
        links.push(link);
    }
    Ok(Loaded {
        _links: links,
        skel,
        family,
        warnings,
    })
}
