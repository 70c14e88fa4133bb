//! Encoders for tests elsewhere in the crate: synthetic records with the
//! real layouts, so analysis tests run on exactly what the kernel emits.

use super::*;

pub fn task(pid: u32, comm: &str, cgroup: u64) -> types::task_ref {
    let mut t = types::task_ref {
        pid,
        tid: pid,
        cgroup,
        ..Default::default()
    };
    t.comm[..comm.len()].copy_from_slice(comm.as_bytes());
    t
}

pub fn header(kind: u16, size: usize, cpu: u32, ts: u64) -> types::record_header {
    types::record_header {
        kind,
        size: size as u16,
        cpu,
        ts,
    }
}

/// A runq (or takeover) record: `waiter` waited `wait_ns` until `ts`, and the hypervisor
/// took `steal_ns` of that.
#[allow(clippy::too_many_arguments)] // one per field of the record
pub fn runq_record(
    kind: u16,
    cpu: u32,
    ts: u64,
    wait_ns: u64,
    waiter: types::task_ref,
    ran: types::task_ref,
    ran_syscall: Option<(i32, u64)>,
    steal_ns: u64,
) -> Vec<u8> {
    let e = types::runq_event {
        hdr: header(kind, std::mem::size_of::<types::runq_event>(), cpu, ts),
        wait_ns,
        waiter,
        ran,
        ran_syscall: ran_syscall.map_or(-1, |s| s.0),
        ran_syscall_ns: ran_syscall.map_or(0, |s| s.1),
        steal_us: (steal_ns / 1000) as u32,
        ..Default::default()
    };
    // SAFETY: runq_event is Plain (see above).
    unsafe { plain::as_bytes(&e) }.to_vec()
}

/// A run-queue record whose wait a CPU quota throttle of `throttled_cgroup` covered for
/// `throttled_ns`.
pub fn throttled_runq_record(
    cpu: u32,
    ts: u64,
    wait_ns: u64,
    waiter: types::task_ref,
    ran: types::task_ref,
    throttled_cgroup: u64,
    throttled_ns: u64,
) -> Vec<u8> {
    runq_bytes(&types::runq_event {
        throttled_cgroup,
        throttled_ns,
        ..plain_runq_event(cpu, ts, wait_ns, waiter, ran)
    })
}

/// A run-queue record of a wait that began on `from_cpu` and moved `migrations` times
/// before it ended on `cpu`.
pub fn migrated_runq_record(
    cpu: u32,
    ts: u64,
    wait_ns: u64,
    waiter: types::task_ref,
    ran: types::task_ref,
    from_cpu: u32,
    migrations: u32,
) -> Vec<u8> {
    runq_bytes(&types::runq_event {
        waited_from_cpu: from_cpu,
        migrations,
        ..plain_runq_event(cpu, ts, wait_ns, waiter, ran)
    })
}

/// A KIND_RUNQ event: `waiter` waited `wait_ns` until `ts` behind `ran`, outside syscalls.
fn plain_runq_event(
    cpu: u32,
    ts: u64,
    wait_ns: u64,
    waiter: types::task_ref,
    ran: types::task_ref,
) -> types::runq_event {
    types::runq_event {
        hdr: header(KIND_RUNQ, std::mem::size_of::<types::runq_event>(), cpu, ts),
        wait_ns,
        waiter,
        ran,
        ran_syscall: -1,
        ..Default::default()
    }
}

fn runq_bytes(e: &types::runq_event) -> Vec<u8> {
    // SAFETY: runq_event is Plain (see above).
    unsafe { plain::as_bytes(e) }.to_vec()
}

/// A softirq delay record: `vector` waited `delay_ns` until `ts` and
/// ran in `ctx` (ksoftirqd if `in_ksoftirqd`).
pub fn softirq_record(
    cpu: u32,
    ts: u64,
    delay_ns: u64,
    vector: u32,
    in_ksoftirqd: bool,
    ctx: types::task_ref,
) -> Vec<u8> {
    let e = types::softirq_event {
        hdr: header(
            KIND_SOFTIRQ,
            std::mem::size_of::<types::softirq_event>(),
            cpu,
            ts,
        ),
        delay_ns,
        vector,
        in_ksoftirqd: u32::from(in_ksoftirqd),
        ctx,
        ctx_syscall: -1,
        ..Default::default()
    };
    // SAFETY: softirq_event is Plain (see above).
    unsafe { plain::as_bytes(&e) }.to_vec()
}

/// A slow-syscall record whose fd resolved to `path` (absolute).
#[allow(clippy::too_many_arguments)]
pub fn syscall_record(
    cpu: u32,
    ts: u64,
    task: types::task_ref,
    nr: u32,
    wall_ns: u64,
    oncpu_ns: u64,
    fd: u32,
    path: &str,
) -> Vec<u8> {
    let mut e = types::syscall_event {
        hdr: header(
            KIND_SYSCALL,
            std::mem::size_of::<types::syscall_event>(),
            cpu,
            ts,
        ),
        task,
        wall_ns,
        oncpu_ns,
        nr: nr as i32,
        fd,
        path_kind: PATH_DENTRIES,
        ..Default::default()
    };
    // Components leaf first, each NUL-terminated, as the kernel side writes them.
    let mut off = 0;
    for name in path.split('/').filter(|c| !c.is_empty()).rev() {
        e.path[off..off + name.len()].copy_from_slice(name.as_bytes());
        off += name.len() + 1;
    }
    e.path_len = off as u32;
    // SAFETY: syscall_event is Plain (see above).
    unsafe { plain::as_bytes(&e) }.to_vec()
}

/// Hardirq handler `name` of irq `irq` ran `run_ns` until `ts` over `ctx`.
pub fn hardirq_record(
    cpu: u32,
    ts: u64,
    run_ns: u64,
    irq: u32,
    name: &str,
    ctx: types::task_ref,
) -> Vec<u8> {
    let mut e = types::hardirq_event {
        hdr: header(
            KIND_HARDIRQ,
            std::mem::size_of::<types::hardirq_event>(),
            cpu,
            ts,
        ),
        run_ns,
        irq,
        ctx,
        ..Default::default()
    };
    e.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: hardirq_event is Plain (see above).
    unsafe { plain::as_bytes(&e) }.to_vec()
}

/// The first tick after a gap of `gap_ns`, `steal_ns` of which the hypervisor took the vCPU.
pub fn stolen_gap_record(
    cpu: u32,
    ts: u64,
    task: types::task_ref,
    gap_ns: u64,
    steal_ns: u64,
) -> Vec<u8> {
    let e = types::sample_event {
        hdr: header(
            KIND_IRQOFF,
            std::mem::size_of::<types::sample_event>(),
            cpu,
            ts,
        ),
        task,
        gap_ns,
        gap_steal_ns: steal_ns,
        syscall: -1,
        ..Default::default()
    };
    // SAFETY: sample_event is Plain (see above).
    unsafe { plain::as_bytes(&e) }.to_vec()
}

/// A sampler tick (or, with `gap_ns` > 0, the first tick after a gap)
/// with a kernel stack of `frames` (leaf first).
pub fn sample_record(
    cpu: u32,
    ts: u64,
    task: types::task_ref,
    syscall: Option<u32>,
    gap_ns: u64,
    frames: &[u64],
) -> Vec<u8> {
    sample_bytes(cpu, ts, task, syscall, gap_ns, (frames, &[]))
}

/// A sampler tick with kernel and user stacks (leaf first): in user code
/// when `kernel` is empty.
pub fn stacks_sample_record(
    cpu: u32,
    ts: u64,
    task: types::task_ref,
    syscall: Option<u32>,
    kernel: &[u64],
    user: &[u64],
) -> Vec<u8> {
    sample_bytes(cpu, ts, task, syscall, 0, (kernel, user))
}

fn sample_bytes(
    cpu: u32,
    ts: u64,
    task: types::task_ref,
    syscall: Option<u32>,
    gap_ns: u64,
    (kernel, user): (&[u64], &[u64]),
) -> Vec<u8> {
    let kind = if gap_ns > 0 { KIND_IRQOFF } else { KIND_SAMPLE };
    let mut e = types::sample_event {
        hdr: header(kind, std::mem::size_of::<types::sample_event>(), cpu, ts),
        task,
        gap_ns,
        syscall: syscall.map_or(-1, |nr| nr as i32),
        kstack_len: (kernel.len() * 8) as u32,
        ustack_len: (user.len() * 8) as u32,
        ..Default::default()
    };
    e.kstack[..kernel.len()].copy_from_slice(kernel);
    e.ustack[..user.len()].copy_from_slice(user);
    // SAFETY: sample_event is Plain (see above).
    unsafe { plain::as_bytes(&e) }.to_vec()
}
