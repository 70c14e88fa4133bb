//! Bytes -> typed events. Pure: decodes the ring-buffer records defined in
//! bpf/stalltop.h (Rust layouts generated from it by libbpf-cargo).

use crate::abi::types;
use crate::abi::{
    KIND_HARDIRQ, KIND_IRQOFF, KIND_RUNQ, KIND_SAMPLE, KIND_SOFTIRQ, KIND_SYSCALL, KIND_TAKEOVER,
};

const HEADER_SIZE: usize = std::mem::size_of::<types::record_header>();
const _: () = assert!(HEADER_SIZE == 16);
const _: () = assert!(std::mem::size_of::<types::runq_event>() == 128);
/// Run-queue records before they carried a throttle (`throttled_cgroup`,
/// `throttled_ns`): still read, as waits no throttle explains.
const RUNQ_EVENT_BEFORE_THROTTLE: usize = 104;
/// Sample records before they carried the steal over a gap (`gap_steal_ns`).
const SAMPLE_EVENT_BEFORE_STEAL: usize = std::mem::size_of::<types::sample_event>() - 8;
const RUNQ_OLDER: &[usize] = &[RUNQ_EVENT_BEFORE_THROTTLE, RUNQ_EVENT_BEFORE_MIGRATIONS];
const SAMPLE_OLDER: &[usize] = &[SAMPLE_EVENT_BEFORE_STEAL];
const HARDIRQ_OLDER: &[usize] = &[HARDIRQ_EVENT_BEFORE_CALLBACKS];
/// Hardirq records before they carried a callback (`function`) and the steal over the run
/// (`steal_ns`): still read, as handler runs with no steal known.
const HARDIRQ_EVENT_BEFORE_CALLBACKS: usize = std::mem::size_of::<types::hardirq_event>() - 16;
/// Run-queue records before they carried migrations (`waited_from_cpu`,
/// `migrations`): still read, as waits that did not move.
const RUNQ_EVENT_BEFORE_MIGRATIONS: usize = 120;

/// The name of a record kind, as used in reports ("lost_events").
pub fn kind_name(kind: u16) -> &'static str {
    match kind {
        KIND_RUNQ => "runq",
        KIND_TAKEOVER => "takeover",
        KIND_SOFTIRQ => "softirq",
        KIND_SYSCALL => "syscall",
        KIND_SAMPLE => "sample",
        KIND_IRQOFF => "irqoff",
        KIND_HARDIRQ => "hardirq",
        _ => "unknown",
    }
}

/// A task as a probe saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRef {
    pub pid: u32,
    pub tid: u32,
    pub cgroup: u64,
    pub comm: String,
}

/// A task waited `wait_ns` for a CPU (for `Takeover`: ksoftirqd/N did) and
/// got it at `ts_ns`; `ran` had the CPU until then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunqWait {
    pub cpu: u32,
    pub ts_ns: u64,
    pub wait_ns: u64,
    pub waiter: TaskRef,
    pub ran: TaskRef,
    /// The syscall `ran` was inside, and for how long it had been.
    pub ran_syscall: Option<(u32, u64)>,
    /// Of the wait, the time the hypervisor ran something else on this vCPU (steal time, at
    /// microsecond resolution; 0 on bare metal).
    pub steal_ns: u64,
    /// A CFS quota throttle covered most of the wait: `ran` only filled the CPU meanwhile.
    pub throttle: Option<WaitThrottle>,
    /// The wait began on another CPU and was moved here (load balancing, affinity).
    pub migrated: Option<WaitMigrated>,
}

/// A wait that began on CPU `from_cpu` and moved `migrations` times before it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitMigrated {
    pub from_cpu: u32,
    pub migrations: u32,
}

/// The CPU quota of `cgroup` (the waiter's cgroup or an ancestor) was exhausted for
/// `covered_ns` of a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitThrottle {
    pub cgroup: u64,
    pub covered_ns: u64,
}

/// Softirq `vector` waited `delay_ns` from its raise to its start at
/// `ts_ns`, and ran in `ctx` (ksoftirqd/N, or the task it interrupted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftirqDelay {
    pub cpu: u32,
    pub ts_ns: u64,
    pub delay_ns: u64,
    pub vector: u32,
    pub in_ksoftirqd: bool,
    pub ctx: TaskRef,
    pub ctx_syscall: Option<u32>,
}

/// Where a slow call's file came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilePath {
    None,
    /// Resolved from the fd in the kernel (absolute, from the root).
    Resolved {
        path: String,
        truncated: bool,
    },
    /// The string the caller passed (may be relative).
    Given(String),
    /// A file with no path: a socket, pipe or anonymous inode.
    Special {
        kind: &'static str,
        inode: u64,
    },
    /// Unknown: the call's fd named another file when it ended (another
    /// thread closed it and the number was reused).
    FdReused,
    /// Unknown, for no reason stalltop can prove (sampled: another task
    /// holds the position lock of the file the fd names, and is not seen
    /// using that file).
    Unknown,
}

impl FilePath {
    /// As reports and tables show it: the path, or `socket:[inode]`.
    pub fn text(&self) -> Option<String> {
        match self {
            FilePath::None => None,
            FilePath::Resolved { path, .. } => Some(path.clone()),
            FilePath::Given(path) => Some(path.clone()),
            FilePath::Special { kind, inode } => Some(format!("{kind}:[{inode}]")),
            FilePath::FdReused => Some(FD_REUSED.into()),
            FilePath::Unknown => Some(UNKNOWN_FILE.into()),
        }
    }

    /// A path the kernel side wrote: `kind` PATH_*, the bytes used, and
    /// for PATH_DENTRIES the file's mode and inode (nameless files).
    pub fn from_kernel(kind: u32, used: &[u8], truncated: bool, mode: u32, inode: u64) -> FilePath {
        match kind {
            PATH_DENTRIES => dentry_path(used, truncated, mode, inode),
            PATH_USER => FilePath::Given(comm_str(used)),
            PATH_FD_REUSED => FilePath::FdReused,
            PATH_UNKNOWN => FilePath::Unknown,
            _ => FilePath::None,
        }
    }
}

/// A syscall that ended at `ts_ns` after `wall_ns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowSyscall {
    pub cpu: u32,
    pub ts_ns: u64,
    pub task: TaskRef,
    pub nr: u32,
    pub wall_ns: u64,
    pub oncpu_ns: u64,
    pub softirq_ns: u64,
    pub fd: Option<u32>,
    pub path: FilePath,
}

/// What ran on `cpu` at a sampler tick (for `Irqoff`: the first tick
/// after `gap_ns` without one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    pub cpu: u32,
    pub ts_ns: u64,
    pub task: TaskRef,
    pub gap_ns: u64,
    /// Irqoff ticks: of `gap_ns`, the time the hypervisor took the vCPU (0: none, or unknown).
    pub gap_steal_ns: u64,
    pub syscall: Option<u32>,
    pub kernel_stack: Vec<u64>,
    pub user_stack: Vec<u64>,
}

/// Something ran in hard interrupt context (interrupts off) until `ts_ns`, over `ctx`: the
/// handler `handler` of irq `irq`, or the hrtimer callback at `hrtimer`. `run_ns` is its run
/// less `steal_ns`, the time the hypervisor took the vCPU meanwhile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HardirqRun {
    pub cpu: u32,
    pub ts_ns: u64,
    pub run_ns: u64,
    pub irq: u32,
    pub handler: String,
    /// An hrtimer callback's kernel address (None: an irq handler).
    pub hrtimer: Option<u64>,
    pub steal_ns: u64,
    pub ctx: TaskRef,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Runq(RunqWait),
    Takeover(RunqWait),
    Softirq(SoftirqDelay),
    Syscall(SlowSyscall),
    Sample(Sample),
    Irqoff(Sample),
    Hardirq(HardirqRun),
}

/// Softirq vector names, as in /proc/softirqs.
pub const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

pub fn softirq_name(vector: u32) -> &'static str {
    SOFTIRQ_NAMES.get(vector as usize).copied().unwrap_or("?")
}

/// Why a record could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record of unknown kind {0}")]
    UnknownKind(u16),
    #[error("record of kind {kind} has size {size}, expected {expected}")]
    BadSize {
        kind: u16,
        size: usize,
        expected: usize,
    },
    #[error("{0} trailing bytes do not form a record")]
    Truncated(usize),
}

/// Decode a buffer of back-to-back records. A record of unknown kind is
/// reported and skipped by its size; a malformed header ends the buffer.
pub fn decode(mut bytes: &[u8]) -> Vec<Result<Event, DecodeError>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let Some(header) = read::<types::record_header>(bytes) else {
            out.push(Err(DecodeError::Truncated(bytes.len())));
            break;
        };
        let size = usize::from(header.size);
        if size < HEADER_SIZE || size > bytes.len() {
            out.push(Err(DecodeError::Truncated(bytes.len())));
            break;
        }
        out.push(decode_one(&header, &bytes[..size]));
        bytes = &bytes[size..];
    }
    out
}

fn decode_one(header: &types::record_header, record: &[u8]) -> Result<Event, DecodeError> {
    match header.kind {
        KIND_RUNQ => Ok(Event::Runq(runq_wait(upgraded(
            header.kind,
            record,
            RUNQ_OLDER,
        )?))),
        KIND_TAKEOVER => Ok(Event::Takeover(runq_wait(upgraded(
            header.kind,
            record,
            RUNQ_OLDER,
        )?))),
        KIND_SOFTIRQ => Ok(Event::Softirq(softirq_delay(exact(header.kind, record)?))),
        KIND_SYSCALL => Ok(Event::Syscall(slow_syscall(exact(header.kind, record)?))),
        KIND_SAMPLE => Ok(Event::Sample(sample(upgraded(
            header.kind,
            record,
            SAMPLE_OLDER,
        )?))),
        KIND_IRQOFF => Ok(Event::Irqoff(sample(upgraded(
            header.kind,
            record,
            SAMPLE_OLDER,
        )?))),
        KIND_HARDIRQ => Ok(Event::Hardirq(hardirq_run(upgraded(
            header.kind,
            record,
            HARDIRQ_OLDER,
        )?))),
        kind => Err(DecodeError::UnknownKind(kind)),
    }
}

/// The record as `T`, which must be exactly its size.
fn exact<T: plain::Plain + Default>(kind: u16, record: &[u8]) -> Result<T, DecodeError> {
    let expected = std::mem::size_of::<T>();
    if record.len() != expected {
        return Err(DecodeError::BadSize {
            kind,
            size: record.len(),
            expected,
        });
    }
    read(record).ok_or(DecodeError::BadSize {
        kind,
        size: record.len(),
        expected,
    })
}

/// The record as `T`, of its layout or of one of the `older` (shorter) ones, whose missing
/// trailing fields read as zero.
fn upgraded<T: plain::Plain + Default>(
    kind: u16,
    record: &[u8],
    older: &[usize],
) -> Result<T, DecodeError> {
    if !older.contains(&record.len()) {
        return exact(kind, record);
    }
    let mut extended = record.to_vec();
    extended.resize(std::mem::size_of::<T>(), 0);
    exact(kind, &extended)
}

/// Copy a `T` out of the start of `bytes` (no alignment needed).
fn read<T: plain::Plain + Default>(bytes: &[u8]) -> Option<T> {
    let mut value = T::default();
    plain::copy_from_bytes(&mut value, bytes).ok()?;
    Some(value)
}

fn runq_wait(e: types::runq_event) -> RunqWait {
    RunqWait {
        cpu: e.hdr.cpu,
        ts_ns: e.hdr.ts,
        wait_ns: e.wait_ns,
        waiter: task_ref(&e.waiter),
        ran: task_ref(&e.ran),
        ran_syscall: u32::try_from(e.ran_syscall)
            .ok()
            .map(|nr| (nr, e.ran_syscall_ns)),
        steal_ns: u64::from(e.steal_us) * 1000,
        throttle: (e.throttled_cgroup != 0).then_some(WaitThrottle {
            cgroup: e.throttled_cgroup,
            covered_ns: e.throttled_ns,
        }),
        migrated: (e.migrations != 0).then_some(WaitMigrated {
            from_cpu: e.waited_from_cpu,
            migrations: e.migrations,
        }),
    }
}

fn softirq_delay(e: types::softirq_event) -> SoftirqDelay {
    SoftirqDelay {
        cpu: e.hdr.cpu,
        ts_ns: e.hdr.ts,
        delay_ns: e.delay_ns,
        vector: e.vector,
        in_ksoftirqd: e.in_ksoftirqd != 0,
        ctx: task_ref(&e.ctx),
        ctx_syscall: u32::try_from(e.ctx_syscall).ok(),
    }
}

const PATH_DENTRIES: u32 = types::path_kind::PATH_DENTRIES.0;
const PATH_USER: u32 = types::path_kind::PATH_USER.0;
const PATH_FD_REUSED: u32 = types::path_kind::PATH_FD_REUSED.0;
/// How a file whose fd was reused during the call reads where its path would.
const FD_REUSED: &str = "(unknown: its fd was reused during the call)";
const PATH_UNKNOWN: u32 = types::path_kind::PATH_UNKNOWN.0;
/// How a file that cannot be told reads where its path would.
const UNKNOWN_FILE: &str = "(unknown)";
const IRQ_RUN_HRTIMER: u32 = types::irq_run_source::IRQ_RUN_HRTIMER.0;
const S_IFMT_SOCK: u32 = 0o140000;
const S_IFMT_FIFO: u32 = 0o010000;

fn slow_syscall(e: types::syscall_event) -> SlowSyscall {
    let used = &e.path[..(e.path_len as usize).min(e.path.len())];
    let path = FilePath::from_kernel(
        e.path_kind,
        used,
        e.path_truncated != 0,
        e.inode_mode,
        e.inode,
    );
    SlowSyscall {
        cpu: e.hdr.cpu,
        ts_ns: e.hdr.ts,
        task: task_ref(&e.task),
        nr: u32::try_from(e.nr).unwrap_or(u32::MAX),
        wall_ns: e.wall_ns,
        oncpu_ns: e.oncpu_ns,
        softirq_ns: e.softirq_ns,
        fd: (e.path_kind == PATH_DENTRIES).then_some(e.fd),
        path,
    }
}

/// Join dentry names written leaf first ("memory.stat\0pod1\0memory\0")
/// into "/memory/pod1/memory.stat"; files without a name get one.
fn dentry_path(leaf_first: &[u8], truncated: bool, mode: u32, inode: u64) -> FilePath {
    let names: Vec<String> = leaf_first
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    let nameless = names.is_empty() || names.iter().all(|n| n == "/");
    match mode {
        S_IFMT_SOCK if nameless => FilePath::Special {
            kind: "socket",
            inode,
        },
        S_IFMT_FIFO if nameless => FilePath::Special {
            kind: "pipe",
            inode,
        },
        _ if nameless && inode != 0 && mode == 0 => FilePath::Special {
            kind: "anon_inode",
            inode,
        },
        _ => {
            let mut path = String::new();
            if truncated {
                path.push_str("...");
            }
            for name in names.iter().rev().filter(|n| n.as_str() != "/") {
                path.push('/');
                path.push_str(name);
            }
            if path.is_empty() {
                path.push('/');
            }
            FilePath::Resolved { path, truncated }
        }
    }
}

fn sample(e: types::sample_event) -> Sample {
    let frames = |stack: &[u64], bytes: u32| -> Vec<u64> {
        let n = (bytes as usize / 8).min(stack.len());
        stack[..n].iter().copied().filter(|&a| a != 0).collect()
    };
    Sample {
        cpu: e.hdr.cpu,
        ts_ns: e.hdr.ts,
        task: task_ref(&e.task),
        gap_ns: e.gap_ns,
        gap_steal_ns: e.gap_steal_ns,
        syscall: u32::try_from(e.syscall).ok(),
        kernel_stack: frames(&e.kstack, e.kstack_len),
        user_stack: frames(&e.ustack, e.ustack_len),
    }
}

fn hardirq_run(e: types::hardirq_event) -> HardirqRun {
    HardirqRun {
        cpu: e.hdr.cpu,
        ts_ns: e.hdr.ts,
        run_ns: e.run_ns,
        irq: e.irq,
        handler: comm_str(&e.name),
        hrtimer: (e.source == IRQ_RUN_HRTIMER).then_some(e.function),
        steal_ns: e.steal_ns,
        ctx: task_ref(&e.ctx),
    }
}

fn task_ref(t: &types::task_ref) -> TaskRef {
    TaskRef {
        pid: t.pid,
        tid: t.tid,
        cgroup: t.cgroup,
        comm: comm_str(&t.comm),
    }
}

/// A kernel comm (NUL-padded, not always valid UTF-8) as a string.
pub fn comm_str(comm: &[u8]) -> String {
    let len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..len]).into_owned()
}

/// Encoders for tests elsewhere in the crate.
#[cfg(test)]
pub mod testing;

#[cfg(test)]
mod tests;
