//! Load the probes family by family: each family (syscall, sched, softirq,
//! sampler) is its own instance of the skeleton with only its programs
//! enabled, so the kernel judges each on its own. The first instance to
//! load creates every map; the others share them. A family the kernel
//! refuses is left out with a warning that says what is lost and why;
//! only the scheduler family is required. How softirq delays are timed is
//! decided last, on what attached.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Instant;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{
    libbpf_sys, AsRawLibbpf, Link, MapCore, MapFlags, MapType, OpenObject, ProgramInput,
};

pub use super::config::ProbeConfig;
use super::family::{enable_programs, families, ProbeFamily};
use super::prealloc::{self, HashShape};
use super::skel::types::steal_source;
use super::skel::{types, OpenStalltopSkel, StalltopSkel, StalltopSkelBuilder};
use super::{libbpf_log, refusal, sampler, selfcheck, ProbeError};
use crate::modes::{
    Attach, AttachMode, RunqWait, SoftirqDelay, SoftirqTime, StealSource, SyscallMode, Throttle,
};
use crate::stream::{ProbeLoad, ProgramLoad};
use crate::syscall_table;

/// The kernel stack size of x86_64 and arm64 (without KASAN): a task's
/// saved user registers sit at its top.
const KERNEL_STACK_SIZE: u64 = 16 << 10;

/// The ring buffer holds what every CPU records between two drains of the reader (at the
/// record rate limit, about 100 KiB per CPU per 100 ms poll): this much per possible CPU,
/// rounded up to a power of two (the kernel's rule), within the bounds below.
const RING_BYTES_PER_CPU: usize = 512 << 10;
const RING_MIN_BYTES: usize = 4 << 20;
const RING_MAX_BYTES: usize = 256 << 20;

const FAMILIES: usize = 4;

/// The ring buffer's size on a host with `cpus` possible CPUs.
fn ring_buffer_bytes(cpus: usize) -> u32 {
    let bytes = cpus
        .saturating_mul(RING_BYTES_PER_CPU)
        .checked_next_power_of_two()
        .unwrap_or(RING_MAX_BYTES)
        .clamp(RING_MIN_BYTES, RING_MAX_BYTES);
    u32::try_from(bytes).expect("RING_MAX_BYTES fits a u32")
}

/// Backing storage for the skeleton instances: one per family and
/// attach mode tried.
pub struct ObjectStorage([MaybeUninit<OpenObject>; 2 * FAMILIES]);

impl Default for ObjectStorage {
    fn default() -> Self {
        ObjectStorage(std::array::from_fn(|_| MaybeUninit::uninit()))
    }
}

/// One loaded and attached family.
pub struct Instance<'obj> {
    /// Declared first so the links drop (detach) before the programs.
    pub(super) links: Vec<Link>,
    /// The sampler's perf events (duplicates of the ones its links own),
    /// for changing their period while they run.
    pub(super) perf_events: Vec<OwnedFd>,
    pub skel: StalltopSkel<'obj>,
    pub family: ProbeFamily,
}

/// Loaded and attached probes; dropping this detaches everything.
pub struct Loaded<'obj> {
    /// The first holds (created) every map.
    pub instances: Vec<Instance<'obj>>,
    pub attach: Attach,
    /// What each family's load did, for the recording and the report.
    pub probes: Vec<ProbeLoad>,
    /// Families and optional parts that did not come up, for the user.
    pub warnings: Vec<String>,
    /// How syscalls are watched, given what loaded (and the cost guard's
    /// syscalls step).
    pub syscalls: SyscallMode,
    /// How softirq run time and delays are timed, given what attached.
    pub softirq_time: SoftirqTime,
    pub softirq_delay: SoftirqDelay,
    /// The sampler's rate as loaded (its step halves it).
    pub sample_hz: u32,
    /// An exact session with the sampled-call code loaded too: the cost
    /// guard may take its hooks off.
    pub exact_steps_to_sampled: bool,
    /// Where steal is read, once the start-up check proved it (else none).
    pub steal: StealSource,
    pub runq_wait: RunqWait,
    pub throttle: Throttle,
}

impl<'obj> Loaded<'obj> {
    /// The instance whose maps every family shares.
    pub fn maps(&self) -> &StalltopSkel<'obj> {
        &self.instances[0].skel
    }

    pub fn has(&self, family: ProbeFamily) -> bool {
        self.instances.iter().any(|i| i.family == family)
    }

    /// Tell each CPU of `ksoftirqd` (cpu, thread id) which thread is its
    /// ksoftirqd, while the probes run (a CPU that came online since they
    /// loaded has a thread they were not told of): set_ksoftirqd, run on
    /// that CPU, changes that field of its state alone.
    pub fn set_ksoftirqd(&mut self, ksoftirqd: &[(u32, u32)]) -> Result<(), libbpf_rs::Error> {
        let sched = self
            .instances
            .iter_mut()
            .find(|i| i.family == ProbeFamily::Sched)
            .expect("the scheduler family is required");
        let prog = sched
            .skel
            .object_mut()
            .progs_mut()
            .find(|p| p.name() == SET_KSOFTIRQD)
            .expect("set_ksoftirqd loads with the scheduler family");
        for &(cpu, tid) in ksoftirqd {
            let mut args = u64::from(tid).to_ne_bytes();
            let input = ProgramInput {
                context_in: Some(&mut args),
                cpu,
                flags: libbpf_sys::BPF_F_TEST_RUN_ON_CPU,
                ..Default::default()
            };
            prog.test_run(input)?;
        }
        Ok(())
    }
}

pub fn load<'obj>(
    config: &ProbeConfig,
    storage: &'obj mut ObjectStorage,
) -> Result<Loaded<'obj>, ProbeError> {
    load_refusing(config, storage, None)
}

/// `load`, with `refused` (if any) made one the kernel refuses: for
/// tests of what happens when a kernel does.
pub fn load_refusing<'obj>(
    config: &ProbeConfig,
    storage: &'obj mut ObjectStorage,
    refused_family: Option<ProbeFamily>,
) -> Result<Loaded<'obj>, ProbeError> {
    let attaches: &[Attach] = match config.attach {
        AttachMode::TpBtf => &[Attach::TpBtf],
        AttachMode::RawTp => &[Attach::RawTp],
        AttachMode::Auto => &[Attach::TpBtf, Attach::RawTp],
    };
    let (first, second) = storage.0.split_at_mut(FAMILIES);
    let mut slots = [first, second].into_iter();
    let checked = selfcheck::check(config);
    let config = &checked.config;
    let mut refused: Vec<ProbeLoad> = checked.load.into_iter().collect();
    let mut last_error = None;
    for &attach in attaches {
        let slots = slots.next().expect("storage for every attach mode");
        match load_attach(config, attach, slots, refused_family) {
            Ok(mut loaded) => {
                refused.append(&mut loaded.probes);
                loaded.probes = refused;
                loaded.warnings.extend(checked.warnings);
                return Ok(loaded);
            }
            Err((error, mut probes)) => {
                tracing::warn!("{error}");
                refused.append(&mut probes);
                last_error = Some(error);
            }
        }
    }
    Err(last_error.expect("at least one attach mode was tried"))
}

/// Every family in one attach mode. Fails only if the sched family does,
/// with what each family's attempt did.
fn load_attach<'obj>(
    config: &ProbeConfig,
    attach: Attach,
    slots: &'obj mut [MaybeUninit<OpenObject>],
    refused_family: Option<ProbeFamily>,
) -> Result<Loaded<'obj>, (ProbeError, Vec<ProbeLoad>)> {
    let kernel = config.features.release.to_string();
    let mut loaded = Loaded {
        instances: Vec::new(),
        attach,
        probes: Vec::new(),
        warnings: Vec::new(),
        syscalls: SyscallMode::Off,
        softirq_time: SoftirqTime::Off,
        softirq_delay: SoftirqDelay::Off,
        sample_hz: config.sample_hz,
        exact_steps_to_sampled: config.syscalls == SyscallMode::Exact
            && config.sampled_calls_loaded(),
        steal: config.steal,
        runq_wait: config.features.runq_wait(),
        throttle: config.features.throttle(),
    };
    if let Some(why) = config.features.runq_from_wakeup_because() {
        loaded.warnings.push(format!(
            "{why}: run-queue waits are timed from wakeups (costs more per switch)"
        ));
    }
    let mut slots = slots.iter_mut();
    for family in families(config) {
        let slot = slots.next().expect("a slot for every family");
        let started = Instant::now();
        let syscalls_hooked = loaded.has(ProbeFamily::Syscall);
        let capture = libbpf_log::capture();
        let refuse = refused_family == Some(family);
        let result = load_family(
            config,
            family,
            attach,
            syscalls_hooked,
            refuse,
            &loaded,
            slot,
        );
        let log = capture.finish();
        let load_ms = started.elapsed().as_millis() as u64;
        // A load failure is the verifier's (in plain words); an attach
        // failure says itself what failed.
        let result = result
            .map_err(|error| refusal::explain(&kernel, &error, &log))
            .and_then(|skel| attach_family(skel, family, config.sample_hz));
        match result {
            Ok(instance) => {
                loaded.probes.push(ProbeLoad {
                    family: family.name().into(),
                    attach: attach.name().into(),
                    loaded: true,
                    load_ms,
                    error: None,
                    programs: program_loads(&instance.skel),
                });
                loaded.instances.push(instance);
            }
            Err(reason) => {
                loaded.probes.push(ProbeLoad {
                    family: family.name().into(),
                    attach: attach.name().into(),
                    loaded: false,
                    load_ms,
                    error: Some(reason.clone()),
                    programs: Vec::new(),
                });
                if family == ProbeFamily::Sched {
                    let error = ProbeError::SchedRefused {
                        attach: attach.name(),
                        reason,
                        hint: family.avoid(),
                    };
                    return Err((error, loaded.probes));
                }
                loaded.warnings.push(format!(
                    "{} probes are off ({}): {}; {}; {}",
                    family.name(),
                    attach.name(),
                    reason,
                    family.lost(),
                    family.avoid()
                ));
            }
        }
    }
    loaded.syscalls = match config.syscalls {
        SyscallMode::Exact if loaded.has(ProbeFamily::Syscall) => SyscallMode::Exact,
        SyscallMode::Sampled if loaded.has(ProbeFamily::Sampler) => SyscallMode::Sampled,
        SyscallMode::Sampled if config.sample_hz == 0 => {
            loaded.warnings.push(
                "syscalls are not watched: sampling them needs the CPU sampler (--sample-hz 0 turns it off; --syscalls exact hooks them instead)"
                    .into(),
            );
            SyscallMode::Off
        }
        _ => SyscallMode::Off,
    };
    time_softirqs(config, &mut loaded);
    Ok(loaded)
}

/// Decide how softirqs are timed, on what attached: entry to exit wherever
/// the softirq family loaded; delays from the sampler's ticks where the
/// sampler attached on every online CPU with them on (its instance was
/// told so: `delay_ticks` in `load_family`), else from the raise program,
/// attached now.
fn time_softirqs(config: &ProbeConfig, loaded: &mut Loaded<'_>) {
    if !loaded.has(ProbeFamily::Softirq) {
        return;
    }
    loaded.softirq_time = SoftirqTime::Exact;
    if loaded.has(ProbeFamily::Sampler) && config.softirq_delay_ticks() {
        loaded.softirq_delay = SoftirqDelay::Sampled;
        return;
    }
    let softirq = loaded
        .instances
        .iter_mut()
        .find(|i| i.family == ProbeFamily::Softirq)
        .expect("the softirq family loaded");
    let raise = softirq
        .skel
        .object()
        .progs_mut()
        .find(|p| p.autoload() && is_softirq_raise(p.name()))
        .expect("the raise program loads with the softirq family")
        .attach();
    match raise {
        Ok(link) => {
            softirq.links.push(link);
            loaded.softirq_delay = SoftirqDelay::Exact;
        }
        Err(e) => loaded.warnings.push(format!(
            "softirq delays are not timed: attaching softirq_raise failed: {e}"
        )),
    }
}

/// The program on softirq_raise, which `time_softirqs` attaches or not.
fn is_softirq_raise(name: &std::ffi::OsStr) -> bool {
    name == "btf_softirq_raise" || name == "raw_softirq_raise"
}

/// Open, configure and load one family's instance, sharing the maps of
/// the first instance loaded (if any).
fn load_family<'obj>(
    config: &ProbeConfig,
    family: ProbeFamily,
    attach: Attach,
    syscalls_hooked: bool,
    refuse: bool,
    loaded: &Loaded<'_>,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<StalltopSkel<'obj>, String> {
    let mut open = StalltopSkelBuilder::default()
        .open(storage)
        .map_err(|e| e.to_string())?;
    let hooked = syscalls_hooked || family == ProbeFamily::Syscall;
    // Only the sampler's ticks read it; they start delays that the softirq
    // family's entry program ends, so only where that family loaded.
    let delay_ticks = family == ProbeFamily::Sampler
        && loaded.has(ProbeFamily::Softirq)
        && config.softirq_delay_ticks();
    configure(&mut open, config, attach, hooked, delay_ticks).map_err(|e| e.to_string())?;
    enable_programs(&mut open, family, attach);
    if refuse {
        // As a socket filter, its helpers are unknown to the verifier.
        for mut prog in open.open_object_mut().progs_mut() {
            if prog.autoload() {
                prog.set_prog_type(libbpf_rs::ProgramType::SocketFilter);
            }
        }
    }
    if let Some(owner) = loaded.instances.first() {
        share_maps(&mut open, &owner.skel).map_err(|e| e.to_string())?;
    }
    let skel = open.load().map_err(|e| e.to_string())?;
    if loaded.instances.is_empty() {
        seed(&skel, &config.ksoftirqd).map_err(|e| e.to_string())?;
    }
    Ok(skel)
}

/// Every skeleton instance of one session: the same knobs and map shapes.
fn configure(
    open: &mut OpenStalltopSkel<'_>,
    config: &ProbeConfig,
    attach: Attach,
    syscalls_hooked: bool,
    softirq_delay_ticks: bool,
) -> libbpf_rs::Result<()> {
    let use_task_storage = attach == Attach::TpBtf && config.features.task_storage_in_hooks;
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("the BPF object has const volatile knobs, so a .rodata map");
    rodata.cgroup_v1_cpu = u8::from(config.cgroup_v1_cpu);
    rodata.use_task_storage = u8::from(use_task_storage);
    rodata.runq_threshold_ns = config.runq_threshold_ns;
    rodata.runq_from_wakeup = u8::from(config.features.runq_from_wakeup());
    rodata.stall_threshold_ns = config.stall_threshold_ns;
    rodata.softirq_delay_ticks = u8::from(softirq_delay_ticks);
    rodata.steal_source = match config.steal {
        StealSource::None => steal_source::STEAL_NONE,
        StealSource::Kvm => steal_source::STEAL_KVM,
        StealSource::RunQueue => steal_source::STEAL_RQ,
    }
    .0 as u8;
    rodata.steal_time_from_rq = match config.steal {
        StealSource::Kvm => config.features.steal_time_from_rq.unwrap_or(0),
        _ => 0,
    };
    rodata.softirq_pending_from_rq = config.features.softirq_pending_from_rq.unwrap_or(0);
    rodata.hardirq_threshold_ns = config.hardirq_threshold_ns;
    rodata.syscalls_hooked = u8::from(syscalls_hooked);
    rodata.syscalls_sampled = u8::from(config.sampled_calls_loaded());
    rodata.thread_size = KERNEL_STACK_SIZE;
    rodata.syscall_wall_threshold_ns = config.syscall_wall_threshold_ns;
    rodata.syscall_oncpu_threshold_ns = config.syscall_oncpu_threshold_ns;
    rodata.syscall_arg = syscall_table::file_arg_table();
    rodata.record_rate = config.record_rate;
    let data = open
        .maps
        .data_data
        .as_deref_mut()
        .expect("the BPF object has knobs user space turns while it runs, so a .data map");
    data.sample_period_ns = sample_period_ns(config.sample_hz);
    // An exact session under a cost guard follows sampled calls only once
    // the guard takes the hooks off.
    data.sampling_calls_now = u8::from(config.syscalls == SyscallMode::Sampled);

    let maps = &mut open.maps;
    let cpus = libbpf_rs::num_possible_cpus().unwrap_or(1);
    maps.events.set_max_entries(ring_buffer_bytes(cpus))?;
    maps.throttle_spans.set_max_entries(cpus as u32)?;
    if !use_task_storage {
        // Not task storage where it is not used: a kernel may lack the map
        // type (before 5.11). The code that would use it is dead there.
        stand_in(&mut maps.task_store)?;
    }
    if config.syscalls == SyscallMode::Off {
        // Nothing fills them: keep them small on hosts with many CPUs.
        maps.syscalls_by_nr.set_max_entries(1)?;
        maps.syscalls.set_max_entries(1)?;
        maps.path_bufs.set_max_entries(1)?;
    }
    if !config.sampled_calls_loaded() {
        maps.sampled_files.set_max_entries(1)?;
    }
    if prealloc::hashes_preallocated(&config.features) {
        preallocate_hashes(open, cpus as u32)?;
    }
    Ok(())
}

/// The sampler's period at `hz` ticks a second.
pub fn sample_period_ns(hz: u32) -> u64 {
    1_000_000_000 / u64::from(hz.max(1))
}

/// Make every hash map that would allocate on insert a preallocated one,
/// within the memory budget (src/probe/prealloc.rs says why).
fn preallocate_hashes(open: &mut OpenStalltopSkel<'_>, cpus: u32) -> libbpf_rs::Result<()> {
    for mut map in open.open_object_mut().maps_mut() {
        let per_cpu = match map.map_type() {
            MapType::PercpuHash => true,
            MapType::Hash => false,
            _ => continue,
        };
        if map.map_flags() & libbpf_sys::BPF_F_NO_PREALLOC == 0 {
            continue;
        }
        let shape = HashShape {
            per_cpu,
            key_size: map.key_size(),
            value_size: map.value_size(),
            max_entries: map.max_entries(),
        };
        map.set_map_flags(map.map_flags() & !libbpf_sys::BPF_F_NO_PREALLOC)?;
        map.set_max_entries(shape.preallocated_entries(cpus))?;
    }
    Ok(())
}

/// Turn an unused task-storage map into the smallest map every kernel can
/// create (the programs only reference it on paths that are dead).
fn stand_in(map: &mut libbpf_rs::OpenMapMut<'_>) -> libbpf_rs::Result<()> {
    map.set_type(MapType::Array)?;
    map.set_map_flags(0)?;
    map.set_max_entries(1)
}

/// Point every map of `open` except its own globals (.rodata, .bss) at the
/// same map of `owner`, loaded already.
fn share_maps(open: &mut OpenStalltopSkel<'_>, owner: &StalltopSkel<'_>) -> libbpf_rs::Result<()> {
    for mut map in open.open_object_mut().maps_mut() {
        // SAFETY: the pointer is the live bpf_map of an open object we hold.
        if unsafe { libbpf_sys::bpf_map__is_internal(map.as_libbpf_object().as_ptr()) } {
            continue;
        }
        let name = map.name().to_owned();
        let Some(shared) = owner.object().maps().find(|m| m.name() == name) else {
            continue;
        };
        map.reuse_fd(shared.as_fd())?;
    }
    Ok(())
}

/// The program user space runs to set one CPU's ksoftirqd thread.
const SET_KSOFTIRQD: &str = "set_ksoftirqd";

/// Tell each CPU which thread is its ksoftirqd: its waits are takeovers,
/// and the softirqs it runs are not stolen from anyone. Before the
/// programs run: it writes each CPU's whole state.
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

/// Attach the loaded programs of one family. A sampler that cannot open
/// its perf events on every online CPU did not load: nothing it would
/// measure is there.
fn attach_family(
    skel: StalltopSkel<'_>,
    family: ProbeFamily,
    sample_hz: u32,
) -> Result<Instance<'_>, String> {
    let mut instance = Instance {
        links: Vec::new(),
        perf_events: Vec::new(),
        skel,
        family,
    };
    if family != ProbeFamily::Sampler {
        instance.links = attach_programs(&instance.skel)?;
        return Ok(instance);
    }
    for prog in instance.skel.object().progs_mut().filter(|p| p.autoload()) {
        let attached = sampler::attach(&prog, sample_hz)?;
        instance.links.extend(attached.links);
        instance.perf_events.extend(attached.events);
    }
    Ok(instance)
}

/// Attach every loaded program of a tracepoint family (the sampler's go
/// to perf events instead; softirq_raise waits for `time_softirqs`).
pub(super) fn attach_programs(skel: &StalltopSkel<'_>) -> Result<Vec<Link>, String> {
    skel.object()
        .progs_mut()
        .filter(|p| p.autoload() && p.name() != SET_KSOFTIRQD && !is_softirq_raise(p.name()))
        .map(|prog| {
            prog.attach()
                .map_err(|e| format!("attaching {}: {e}", prog.name().to_string_lossy()))
        })
        .collect()
}

/// Each loaded program's name and the instructions the verifier went
/// through (kernels from 5.16 report it).
fn program_loads(skel: &StalltopSkel<'_>) -> Vec<ProgramLoad> {
    skel.object()
        .progs()
        .filter(|p| p.autoload())
        .map(|p| ProgramLoad {
            name: p.name().to_string_lossy().into_owned(),
            verified_insns: prog_info(p.as_fd().as_raw_fd())
                .map(|info| info.verified_insns)
                .filter(|&n| n > 0),
        })
        .collect()
}

/// The kernel's information about a loaded program.
pub fn prog_info(fd: std::os::fd::RawFd) -> Option<libbpf_sys::bpf_prog_info> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a writable bpf_prog_info of `len` bytes; a bad fd
    // only makes the call fail.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    (rc == 0).then_some(info)
}

/// All raw_tp programs in one instance, loaded but not attached: for
/// driving their handlers with BPF_PROG_TEST_RUN.
#[cfg(test)]
pub fn load_detached<'obj>(
    config: &ProbeConfig,
    storage: &'obj mut MaybeUninit<OpenObject>,
) -> Result<StalltopSkel<'obj>, String> {
    let mut open = StalltopSkelBuilder::default()
        .open(storage)
        .map_err(|e| e.to_string())?;
    let hooked = config.syscalls == SyscallMode::Exact;
    configure(&mut open, config, Attach::RawTp, hooked, false).map_err(|e| e.to_string())?;
    for family in families(config) {
        enable_programs(&mut open, family, Attach::RawTp);
    }
    let skel = open.load().map_err(|e| e.to_string())?;
    seed(&skel, &config.ksoftirqd).map_err(|e| e.to_string())?;
    Ok(skel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_buffer_grows_with_the_cpus_in_powers_of_two_within_bounds() {
        assert_eq!(ring_buffer_bytes(1), 4 << 20);
        assert_eq!(ring_buffer_bytes(8), 4 << 20);
        assert_eq!(ring_buffer_bytes(12), 8 << 20);
        assert_eq!(ring_buffer_bytes(64), 32 << 20);
        assert_eq!(ring_buffer_bytes(4096), 256 << 20);
        assert_eq!(ring_buffer_bytes(usize::MAX), 256 << 20);
    }
}
