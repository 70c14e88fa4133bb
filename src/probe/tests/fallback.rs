//! Real-kernel tests of what older kernels get (root, as in CI), forced on
//! this one: maps that never allocate inside scheduler hooks, run-queue
//! waits without the run queue, raw_tp programs that call no BTF-only
//! helper, and families the kernel refuses.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::skel::Skel;
use libbpf_rs::{libbpf_sys, MapCore, MapInfo, MapType};

use super::*;
use super::{config, fight_for_one_cpu, program_ids_of_this_process, ONE_AT_A_TIME};
use crate::probe::family::ProbeFamily;
use crate::probe::loader;

/// `config` on a kernel without the BPF memory allocator (before 6.1, or
/// PREEMPT_RT).
fn no_allocation_in_hooks(config: ProbeConfig) -> ProbeConfig {
    ProbeConfig {
        features: KernelFeatures {
            hash_alloc_in_hooks: false,
            task_storage_in_hooks: false,
            ..config.features
        },
        ..config
    }
}

/// Every hash map of a loaded session, with whether it allocates on insert.
fn hash_maps(loaded: &loader::Loaded<'_>) -> Vec<(String, bool)> {
    loaded
        .maps()
        .object()
        .maps()
        .filter(|m| matches!(m.map_type(), MapType::Hash | MapType::PercpuHash))
        .map(|m| {
            let info = MapInfo::new(m.as_fd()).expect("map info");
            let allocates = info.info.map_flags & libbpf_sys::BPF_F_NO_PREALLOC != 0;
            (m.name().to_string_lossy().into_owned(), allocates)
        })
        .collect()
}

/// Before 6.1 no hash map that a perf_event, raw_tp or tp_btf program reaches may allocate
/// (src/probe/prealloc.rs): in both attach modes and both syscall modes that fill them, every
/// hash map loads preallocated; where the kernel has the BPF memory allocator, those declared
/// so still allocate on demand.
#[test]
fn hash_maps_are_preallocated_where_the_kernel_needs_it() {
    for attach in [AttachMode::TpBtf, AttachMode::RawTp] {
        for syscalls in [SyscallMode::Sampled, SyscallMode::Exact] {
            let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
            let base = ProbeConfig {
                syscalls,
                ..config(attach)
            };
            let mut storage = ObjectStorage::default();
            let loaded = loader::load(&no_allocation_in_hooks(base.clone()), &mut storage)
                .expect("probes load");
            assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
            let maps = hash_maps(&loaded);
            assert!(maps.len() >= 4, "{maps:?}");
            assert!(
                maps.iter().all(|(_, allocates)| !allocates),
                "{attach:?} {syscalls:?}: {maps:?}"
            );
            // Per-task state lives in the preallocated hash, not task storage.
            let task_store = MapInfo::new(loaded.maps().maps.task_store.as_fd()).unwrap();
            assert_eq!(task_store.map_type(), MapType::Array);
            drop(loaded);
            let mut storage = ObjectStorage::default();
            let loaded = loader::load(&base, &mut storage).expect("probes load");
            let mut on_demand: Vec<String> = hash_maps(&loaded)
                .into_iter()
                .filter(|(_, allocates)| *allocates)
                .map(|(name, _)| name)
                .collect();
            on_demand.sort();
            // PREEMPT_RT preallocates every hash map, allocator or not.
            let expected: &[&str] = if base.features.preempt_rt {
                &[]
            } else {
                &["preemptors", "runq_by_cgroup", "syscalls"]
            };
            assert_eq!(on_demand, expected, "{attach:?} {syscalls:?}");
        }
    }
}

#[test]
fn tp_btf_probes_without_allocation_in_hooks_see_a_thread_preempted_by_its_sibling() {
    fight_for_one_cpu(no_allocation_in_hooks(config(AttachMode::TpBtf)));
}

/// Without CONFIG_FAIR_GROUP_SCHED there is no run queue to read the
/// scheduler's clock from: waits are timed from wakeups instead.
#[test]
fn raw_tp_probes_without_the_run_queue_see_a_thread_preempted_by_its_sibling() {
    let config = config(AttachMode::RawTp);
    fight_for_one_cpu(ProbeConfig {
        features: KernelFeatures {
            rq_from_task: false,
            ..config.features
        },
        ..config
    });
}

/// Helpers that need kernel BTF and 5.11 (bpf_get_current_task_btf) or
/// task storage: a raw_tp program that calls one is no fallback.
const BTF_ONLY_HELPERS: [&str; 3] = [
    "bpf_get_current_task_btf",
    "bpf_task_storage_get",
    "bpf_task_storage_delete",
];

#[test]
fn raw_tp_programs_call_no_btf_only_helper() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let helpers = helper_addresses();
    let calls_of = |attach: AttachMode| -> BTreeMap<String, Vec<String>> {
        let mut storage = ObjectStorage::default();
        let loaded = loader::load(&config(attach), &mut storage).expect("probes load");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        loaded
            .instances
            .iter()
            .flat_map(|i| {
                i.skel
                    .object()
                    .progs()
                    .filter(|p| p.autoload())
                    .collect::<Vec<_>>()
            })
            .map(|p| {
                let called = helper_calls(p.as_fd().as_raw_fd())
                    .into_iter()
                    .filter_map(|addr| helpers.get(&addr).cloned())
                    .collect();
                (p.name().to_string_lossy().into_owned(), called)
            })
            .collect()
    };
    let raw = calls_of(AttachMode::RawTp);
    let families = [
        "raw_cpu_sample",
        "raw_hrtimer_expire_entry",
        "raw_hrtimer_expire_exit",
        "raw_irq_handler_entry",
        "raw_irq_handler_exit",
        "raw_sched_migrate_task",
        "raw_sched_process_exit",
        "raw_sched_switch",
        "raw_sched_wakeup",
        "raw_sched_wakeup_new",
        "raw_softirq_entry",
        "raw_softirq_exit",
        "raw_softirq_raise",
        "raw_sys_enter",
        "raw_sys_exit",
        "set_ksoftirqd",
    ];
    assert_eq!(
        raw.keys().collect::<Vec<_>>(),
        families,
        "every program is checked"
    );
    for (program, called) in &raw {
        assert!(called.is_empty(), "{program} calls {called:?}");
    }
    // The scan finds such calls where they are made, on every kernel: the
    // tp_btf twin of sys_enter reads the current task with the BTF-only
    // helper.
    let btf = calls_of(AttachMode::TpBtf);
    assert!(
        btf["btf_sys_enter"]
            .iter()
            .any(|h| h == "bpf_get_current_task_btf"),
        "{btf:?}"
    );
}

/// Kernel addresses of the BTF-only helpers' implementations (any
/// variant, e.g. bpf_task_storage_get_recur), by address.
fn helper_addresses() -> BTreeMap<u64, String> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").expect("/proc/kallsyms");
    kallsyms
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
            let name = parts.nth(1)?;
            BTF_ONLY_HELPERS
                .iter()
                .any(|h| name.starts_with(h))
                .then(|| (addr, name.to_string()))
        })
        .collect()
}

/// Addresses of the helpers a loaded program calls, from the kernel's
/// translated instructions (a helper call's imm is its offset from
/// __bpf_call_base).
fn helper_calls(prog_fd: i32) -> Vec<u64> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").expect("/proc/kallsyms");
    let base = kallsyms
        .lines()
        .find(|l| l.ends_with(" __bpf_call_base"))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .expect("__bpf_call_base in /proc/kallsyms");
    let len = loader::prog_info(prog_fd)
        .expect("prog info")
        .xlated_prog_len;
    let mut insns = vec![0u64; len as usize / 8];
    let mut info = libbpf_sys::bpf_prog_info {
        xlated_prog_len: len,
        xlated_prog_insns: insns.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut info_len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `insns` has room for xlated_prog_len bytes and outlives the
    // call; `info` is a writable bpf_prog_info of `info_len` bytes.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog_fd, &mut info, &mut info_len) };
    assert_eq!(rc, 0, "bpf_prog_get_info_by_fd");
    insns
        .iter()
        .filter_map(|&insn| {
            let bytes = insn.to_le_bytes();
            let (code, regs) = (bytes[0], bytes[1]);
            let imm = i32::from_le_bytes(bytes[4..8].try_into().unwrap());
            // BPF_JMP | BPF_CALL with src_reg 0: a helper (not a subprogram).
            (code == 0x85 && regs >> 4 == 0).then(|| base.wrapping_add(imm as i64 as u64))
        })
        .collect()
}

#[test]
fn a_family_the_kernel_refuses_is_left_out_with_a_warning_and_nothing_left_attached() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::TpBtf);
    {
        let mut storage = ObjectStorage::default();
        let loaded = loader::load_refusing(&config, &mut storage, Some(ProbeFamily::Softirq))
            .expect("the other families load");
        assert!(loaded.has(ProbeFamily::Sched) && loaded.has(ProbeFamily::Syscall));
        assert!(!loaded.has(ProbeFamily::Softirq));
        let warning = loaded
            .warnings
            .iter()
            .find(|w| w.starts_with("softirq probes are off (tp_btf): "))
            .unwrap_or_else(|| panic!("{:?}", loaded.warnings));
        // As a socket filter its context is not a tracepoint's.
        assert!(
            warning.contains("verifier rejects btf_softirq_") && warning.contains("context access"),
            "{warning}"
        );
        assert!(warning.contains("NET_RX stalls"), "{warning}");
        let softirq = loaded
            .probes
            .iter()
            .find(|p| p.family == "softirq")
            .expect("the softirq attempt is reported");
        assert!(!softirq.loaded && softirq.error.is_some(), "{softirq:?}");
        let sched = loaded.probes.iter().find(|p| p.family == "sched").unwrap();
        assert!(sched.loaded, "{sched:?}");
        assert!(
            sched
                .programs
                .iter()
                .any(|p| p.name == "btf_sched_switch" && p.verified_insns.is_some_and(|n| n > 0)),
            "{sched:?}"
        );
    }
    assert_eq!(program_ids_of_this_process(), Vec::<u32>::new());
}

#[test]
fn without_the_scheduler_family_nothing_loads_and_the_reason_is_plain() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut storage = ObjectStorage::default();
    let error = loader::load_refusing(
        &config(AttachMode::Auto),
        &mut storage,
        Some(ProbeFamily::Sched),
    )
    .err()
    .expect("no session without the sched family");
    let message = error.to_string();
    // Auto tried tp_btf, then raw_tp: the last word is raw_tp's.
    assert!(
        message.starts_with("the scheduler probes cannot load (raw_tp): the "),
        "{message}"
    );
    assert!(
        message.contains("verifier rejects raw_sched_") && message.contains("context access"),
        "{message}"
    );
    assert!(!message.contains("os error"), "{message}");
    assert_eq!(program_ids_of_this_process(), Vec::<u32>::new());
}
