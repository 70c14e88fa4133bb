//! Real-kernel tests of the probes (root, as in CI), one file per subject under
//! src/probe/tests/, and the builders they share: a probe configuration for this host, two
//! threads of ours fighting for one CPU, retries of attempts that foreign load contaminated,
//! pinning, naming and timing threads, scratch cgroups, and reads of the probes' state.

mod budget;
mod fallback;
mod fd_reuse;
mod floor;
mod handlers;
mod hardirq;
mod holders;
mod migration;
mod prune;
mod ring;
mod runq_stacks;
mod sampled;
mod sched;
mod selfcheck;
mod sleepers;
mod softirq;
mod steal;
mod steps;
mod syscall_hooks;
mod throttles;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::*;
use crate::event::{self, Event};
use crate::host;
use crate::modes::{Attach, AttachMode, StealSource, SyscallMode};

/// Workload tests pin threads to one CPU; run them one at a time.
pub(super) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub(super) const CPU: usize = 1;

pub(super) const SPIN: Duration = Duration::from_millis(400);

pub(super) fn config(attach: AttachMode) -> ProbeConfig {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "probe tests load BPF programs: run them as root (CI does)"
    );
    ProbeConfig {
        attach,
        runq_threshold_ns: 1_000_000,
        stall_threshold_ns: 10_000_000,
        syscall_wall_threshold_ns: 10_000_000,
        syscall_oncpu_threshold_ns: 1_000_000,
        hardirq_threshold_ns: HARDIRQ_THRESHOLD_NS,
        sample_hz: DEFAULT_SAMPLE_HZ,
        record_rate: 1000,
        syscalls: SyscallMode::Exact,
        cgroup_v1_cpu: crate::cgroup::Hierarchy::detect()
            .expect("a cgroup hierarchy")
            .uses_v1_cpu(),
        ksoftirqd: host::ksoftirqd_threads(),
        features: KernelFeatures::detect(),
        steal: choose_steal_source(
            &crate::vm::Machine::detect(),
            &KernelFeatures::detect(),
            crate::vm::steal_accounted(),
        ),
        cost_guard: None,
    }
}

/// `config` on a kernel that keeps no sched_info, as the detection itself finds it: waits
/// that read 0 and never grow (/proc/<pid>/schedstat's `0 0 0` before 5.14 without schedstats
/// or delay accounting). Waits are then timed from wakeups.
pub(super) fn without_sched_info(config: ProbeConfig) -> ProbeConfig {
    let features = KernelFeatures::detect_with_run_delay(&|| Some(0));
    assert!(features.runq_from_wakeup(), "{features:?}");
    ProbeConfig { features, ..config }
}

/// The cgroup id the probes attribute this process to.
pub(super) fn own_cgroup_id(config: &ProbeConfig) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(cgroup_dir_of("self", config))
        .unwrap()
        .ino()
}

/// The directory of process `pid`'s cgroup (`self`: this one) in the attributed hierarchy,
/// from /proc/<pid>/cgroup: the cpu controller's under v1, the unified one under v2.
pub(super) fn cgroup_dir_of(pid: &str, config: &ProbeConfig) -> std::path::PathBuf {
    let hierarchy = crate::cgroup::Hierarchy::detect().unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = cgroups
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let wanted = if config.cgroup_v1_cpu {
                controllers.split(',').any(|c| c == "cpu")
            } else {
                controllers.is_empty()
            };
            wanted.then(|| path.to_string())
        })
        .unwrap_or_else(|| panic!("the cgroup of process {pid}"));
    hierarchy.root().join(path.trim_start_matches('/'))
}

/// A thread named `name`, pinned to CPU, busy for `spin`.
pub(super) fn spinner(
    name: &'static std::ffi::CStr,
    spin: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        set_name(name);
        pin_to(CPU);
        let end = Instant::now() + spin;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    })
}

/// Foreign load on CPU 1 (another task running between the spinners) can
/// hide the waits we look for; such an attempt is retried, at most this
/// many times. A clean attempt that fails, fails the test.
const ATTEMPTS: usize = 3;

/// `name`, a thread of cgroup `own_cgroup`, kept another of its threads
/// waiting 1 ms or more: the snapshot counts it as that cgroup's preemptor.
pub(super) fn assert_kept_own_cgroup_waiting(
    snapshot: &crate::stream::KernelSnapshot,
    own_cgroup: u64,
    name: &str,
) {
    assert!(
        snapshot
            .preemptors
            .iter()
            .any(|p| p.victim_cgroup == own_cgroup
                && p.preemptor_cgroup == own_cgroup
                && p.comm == name
                && p.wait_ns >= 1_000_000),
        "{name} is no preemptor of {own_cgroup}: {:?}",
        snapshot.preemptors
    );
}

pub(super) fn fight_for_one_cpu(config: ProbeConfig) {
    until_clean(|| fight_once(&config));
}

pub(super) struct Contaminated(pub(super) String);

/// Run `attempt` alone on the probes until one is not contaminated, at most ATTEMPTS times.
pub(super) fn until_clean(mut attempt: impl FnMut() -> Result<(), Contaminated>) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut reasons = Vec::new();
    for _ in 0..ATTEMPTS {
        match attempt() {
            Ok(()) => return,
            Err(Contaminated(why)) => reasons.push(why),
        }
    }
    panic!("every attempt was contaminated by foreign load on cpu {CPU}: {reasons:#?}");
}

fn fight_once(config: &ProbeConfig) -> Result<(), Contaminated> {
    let own_cgroup = own_cgroup_id(config);
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let expected_family = match config.attach {
        AttachMode::RawTp => Attach::RawTp,
        _ => Attach::TpBtf,
    };
    assert_eq!(session.info().attach, expected_family);

    let threads = [spinner(c"st-spin-a", SPIN), spinner(c"st-spin-b", SPIN)];
    let mut records = Vec::new();
    let deadline = Instant::now() + SPIN + Duration::from_millis(300);
    while Instant::now() < deadline {
        records.extend(session.poll(Duration::from_millis(50)));
    }
    threads.into_iter().for_each(|t| t.join().unwrap());
    records.extend(session.poll(Duration::from_millis(10)));
    let snapshot = session.snapshot(host::monotonic_ns());

    let spinners = ["st-spin-a", "st-spin-b"];
    let waits: Vec<_> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Runq(w)) if spinners.contains(&w.waiter.comm.as_str()) => Some(w),
            _ => None,
        })
        .collect();
    let behind_sibling = waits.iter().any(|w| {
        spinners.contains(&w.ran.comm.as_str())
            && w.ran.comm != w.waiter.comm
            && w.cpu == CPU as u32
            && w.wait_ns >= 1_000_000
            && w.waiter.cgroup == own_cgroup
    });
    if !behind_sibling {
        let foreign: Vec<&str> = waits
            .iter()
            .map(|w| w.ran.comm.as_str())
            .filter(|c| !spinners.contains(c))
            .collect();
        assert!(
            !foreign.is_empty(),
            "no wait of one spinner behind the other on cpu {CPU} in cgroup {own_cgroup}: {waits:#?}"
        );
        return Err(Contaminated(format!("spinners waited behind {foreign:?}")));
    }

    let ours = snapshot
        .runq
        .iter()
        .find(|r| r.cgroup == own_cgroup)
        .unwrap_or_else(|| panic!("no runq stats for cgroup {own_cgroup}: {:?}", snapshot.runq));
    assert!(ours.count >= waits.len() as u64);
    assert!(ours.max_ns >= 1_000_000, "{ours:?}");
    assert!(ours.preempted_same_cgroup >= 1, "{ours:?}");
    // Each spinner kept the other waiting.
    for spinner in spinners {
        assert_kept_own_cgroup_waiting(&snapshot, own_cgroup, spinner);
    }
    // stalltop times its own probes: its cost is known without turning on
    // BPF statistics for every program on the host.
    let switches = snapshot
        .programs
        .iter()
        .find(|p| p.name == "sched_switch")
        .unwrap_or_else(|| panic!("no sched_switch cost: {:?}", snapshot.programs));
    assert!(
        switches.run_count > 0 && switches.run_time_ns > 0,
        "{switches:?}"
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
            .unwrap()
            .trim(),
        "0",
        "host-wide BPF statistics are on"
    );
    assert!(snapshot.counters.lost.iter().all(|(_, n)| *n == 0));
    if config.syscalls == SyscallMode::Off {
        assert!(snapshot.syscalls.is_empty(), "{:?}", snapshot.syscalls);
    }

    let ids = program_ids_of_this_process();
    assert!(!ids.is_empty(), "the session's programs are not loaded?");
    drop(session);
    let left: Vec<u32> = program_ids_of_this_process();
    assert!(
        left.is_empty(),
        "programs still loaded after the session ended: {left:?}"
    );
    Ok(())
}

/// The run-queue waits of thread `tid` in `records`.
pub(super) fn runq_waits_of(records: &[u8], tid: u32) -> Vec<event::RunqWait> {
    event::decode(records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Runq(w)) if w.waiter.tid == tid => Some(w),
            _ => None,
        })
        .collect()
}

/// Ids of the BPF programs this process holds open (from fdinfo).
pub(super) fn program_ids_of_this_process() -> Vec<u32> {
    let mut ids = Vec::new();
    for fd in std::fs::read_dir("/proc/self/fdinfo").unwrap().flatten() {
        if let Ok(info) = std::fs::read_to_string(fd.path()) {
            ids.extend(
                info.lines()
                    .find_map(|l| l.strip_prefix("prog_id:"))
                    .and_then(|id| id.trim().parse::<u32>().ok()),
            );
        }
    }
    ids
}

// ---- helpers of the tests below and of the other probe test modules ----

/// Sleeps until CLOCK_MONOTONIC reads `ns`.
pub(super) fn sleep_until(ns: u64) {
    let at = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    };
    // SAFETY: clock_nanosleep reads `at`; a null remainder is allowed with TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &at,
            std::ptr::null_mut(),
        )
    };
}

/// Spins on this CPU until CLOCK_MONOTONIC reads `ns`.
pub(super) fn spin_until(ns: u64) {
    while host::monotonic_ns() < ns {
        std::hint::spin_loop();
    }
}

/// Pin this thread to `cpu` so every test run lands on one CPU's state.
pub(super) fn pin_to(cpu: usize) {
    // SAFETY: cpu_set_t is plain data set up by CPU_ZERO/CPU_SET.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0
        );
    }
}

pub(super) fn syscall_row(
    snapshot: &crate::stream::KernelSnapshot,
    cgroup: u64,
    nr: u32,
) -> Option<&crate::stream::SyscallStats> {
    snapshot
        .syscalls
        .iter()
        .find(|r| r.cgroup == cgroup && r.nr == nr)
}

/// Name the calling thread (its comm). No allocation: safe in a forked child.
pub(super) fn set_name(name: &std::ffi::CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string, alive here.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

/// A cgroup of our own in the attributed hierarchy, removed on drop.
pub(super) struct ScratchCgroup {
    dir: std::path::PathBuf,
}

/// The prefix of every scratch cgroup's name, before its process id.
const SCRATCH_PREFIX: &str = "stalltop-probe-test-";

/// Removes the scratch cgroups of test processes that are gone (killed, so
/// their drops never ran), children before their parents.
fn remove_orphaned_scratch_cgroups(root: &std::path::Path) {
    fn remove_tree(dir: &std::path::Path) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    remove_tree(&entry.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !std::path::Path::new("/proc").join(pid).exists() {
            remove_tree(&entry.path());
        }
    }
}

impl ScratchCgroup {
    fn create() -> Self {
        let hierarchy = crate::cgroup::Hierarchy::detect().unwrap();
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(|| remove_orphaned_scratch_cgroups(hierarchy.root()));
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = hierarchy
            .root()
            .join(format!("{SCRATCH_PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        ScratchCgroup { dir }
    }

    /// A cgroup inside this one (remove it first: drop it first).
    fn child(&self) -> Self {
        let dir = self.dir.join("task");
        std::fs::create_dir(&dir).unwrap();
        ScratchCgroup { dir }
    }

    /// A CFS quota of `quota_us` per `period_us`: cpu.cfs_quota_us under v1, cpu.max under
    /// v2 (with the cpu controller enabled at the root for it).
    fn set_quota(&self, quota_us: u64, period_us: u64) {
        let hierarchy = crate::cgroup::Hierarchy::detect().unwrap();
        let write = |file: &str, value: String| {
            let path = self.dir.join(file);
            std::fs::write(&path, &value)
                .unwrap_or_else(|e| panic!("write {value} to {}: {e}", path.display()))
        };
        if hierarchy.uses_v1_cpu() {
            write("cpu.cfs_period_us", period_us.to_string());
            write("cpu.cfs_quota_us", quota_us.to_string());
        } else {
            let control = hierarchy.root().join("cgroup.subtree_control");
            std::fs::write(&control, "+cpu")
                .unwrap_or_else(|e| panic!("enable cpu in {}: {e}", control.display()));
            write("cpu.max", format!("{quota_us} {period_us}"));
        }
    }

    fn id(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&self.dir).unwrap().ino()
    }

    /// Fork a child that pins itself to `cpu`, joins this cgroup, runs
    /// `work` and exits; true if it got there and exited 0.
    fn run_child_on_cpu(&self, cpu: usize, work: fn()) -> bool {
        self.run_child_on_cpu_switching(cpu, work, || ()).is_some()
    }

    /// As `run_child_on_cpu`; on success, how often the child was switched
    /// out while it ran `work`: voluntarily (it slept) and involuntarily (it
    /// was preempted), and what `before_exit` returned, called once the work
    /// is done and before the child exits. Not counted: its switches while it
    /// moved to `cpu` and joined the cgroup, which can block (for an RCU grace
    /// period, or on a lock, more often where spinlocks sleep as on
    /// PREEMPT_RT), and those of its exit (on PREEMPT_RT it can block on
    /// sleeping locks several times): `before_exit` sees neither.
    fn run_child_on_cpu_switching<R>(
        &self,
        cpu: usize,
        work: fn(),
        before_exit: impl FnOnce() -> R,
    ) -> Option<((u64, u64), R)> {
        use std::io::{Read, Write};
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let pipe = || {
            let mut fds = [0; 2];
            // SAFETY: pipe2 writes two new fds into `fds`.
            assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
            // SAFETY: both fds are new and owned here only.
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
        };
        let (counts_read, counts_write) = pipe();
        let (go_read, go_write) = pipe();
        let child = self.fork_child_reporting(
            cpu,
            work,
            Some((counts_write.as_raw_fd(), go_read.as_raw_fd())),
        );
        drop(counts_write); // the child's copy is the only writer left
        let child = child?;
        let mut counts = [0u8; 16];
        let reported = std::fs::File::from(counts_read)
            .read_exact(&mut counts)
            .is_ok();
        let seen = before_exit();
        let _ = std::fs::File::from(go_write).write_all(b"x");
        if !reap(child) || !reported {
            return None;
        }
        let (voluntary, involuntary) = counts.split_at(8);
        Some((
            (
                u64::from_ne_bytes(voluntary.try_into().unwrap()),
                u64::from_ne_bytes(involuntary.try_into().unwrap()),
            ),
            seen,
        ))
    }

    /// Fork a child that pins itself to `cpu`, joins this cgroup, runs `work` and exits;
    /// its pid (`reap` it), or None if fork failed.
    fn fork_child_on_cpu(&self, cpu: usize, work: fn()) -> Option<libc::pid_t> {
        self.fork_child_reporting(cpu, work, None)
    }

    /// As `fork_child_on_cpu`; with `report` (two fds), the child writes to the first how
    /// often it was switched out while it ran `work` (voluntarily, then involuntarily: two
    /// u64s), then waits for a byte on the second before it exits.
    fn fork_child_reporting(
        &self,
        cpu: usize,
        work: fn(),
        report: Option<(std::os::fd::RawFd, std::os::fd::RawFd)>,
    ) -> Option<libc::pid_t> {
        let procs = self.procs_file();
        // SAFETY: after fork the child only makes async-signal-safe calls
        // (open, write, close, sched_setaffinity, raw syscalls, _exit).
        unsafe {
            match libc::fork() {
                0 => {
                    // Pinned first: the cgroup runs nowhere else (its runtime on a CPU it
                    // passed through would stay there).
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    let pinned = libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) == 0;
                    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                    // "0" moves the writer itself.
                    let joined = fd >= 0 && libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                    if joined && pinned {
                        let before = own_switches();
                        work();
                        let after = own_switches();
                        if let Some((counts_fd, go_fd)) = report {
                            let mut counts = [0u8; 16];
                            counts[..8].copy_from_slice(&(after.0 - before.0).to_ne_bytes());
                            counts[8..].copy_from_slice(&(after.1 - before.1).to_ne_bytes());
                            if libc::write(counts_fd, counts.as_ptr().cast(), 16) != 16 {
                                libc::_exit(1);
                            }
                            let mut go = 0u8;
                            libc::read(go_fd, (&mut go as *mut u8).cast(), 1);
                        }
                        libc::_exit(0);
                    }
                    libc::_exit(1);
                }
                -1 => None,
                child => Some(child),
            }
        }
    }

    /// Move process `pid` (all its threads) into this cgroup.
    fn adopt(&self, pid: libc::pid_t) {
        let path = self.dir.join("cgroup.procs");
        std::fs::write(&path, pid.to_string())
            .unwrap_or_else(|e| panic!("move {pid} into {}: {e}", path.display()));
    }

    fn procs_file(&self) -> std::ffi::CString {
        let procs = self.dir.join("cgroup.procs").into_os_string();
        std::ffi::CString::new(procs.into_encoded_bytes()).unwrap()
    }
}

/// How often the calling process was switched out: voluntarily and involuntarily
/// (getrusage: a raw syscall, safe in a forked child).
fn own_switches() -> (u64, u64) {
    // SAFETY: rusage is plain data; getrusage writes it.
    unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        (usage.ru_nvcsw as u64, usage.ru_nivcsw as u64)
    }
}

/// Wait for forked child `child`; whether it exited 0.
pub(super) fn reap(child: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: waitpid writes the status of our own child.
    unsafe {
        libc::waitpid(child, &mut status, 0) == child
            && libc::WIFEXITED(status)
            && libc::WEXITSTATUS(status) == 0
    }
}

impl Drop for ScratchCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in ns.
pub(super) fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, alive here.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Each CPU's state as the probes of `skel` hold it.
pub(super) fn cpu_states(skel: &skel::StalltopSkel<'_>) -> Vec<skel::types::cpu_state> {
    use libbpf_rs::{MapCore, MapFlags};
    skel.maps
        .cpus
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .expect("the cpus map")
        .expect("its one entry")
        .iter()
        .map(|bytes| {
            let mut state = skel::types::cpu_state::default();
            plain::copy_from_bytes(&mut state, bytes).expect("a cpu_state");
            state
        })
        .collect()
}

/// A test process killed mid-test leaves its scratch cgroups behind, a child
/// inside its parent; the next test process removes them, and nobody else's.
#[test]
fn scratch_cgroups_of_gone_test_processes_are_removed_children_first() {
    let root = tempfile::tempdir().unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let orphan = root.path().join(format!("{SCRATCH_PREFIX}{}-3", gone.id()));
    std::fs::create_dir_all(orphan.join("task")).unwrap();
    let ours = root
        .path()
        .join(format!("{SCRATCH_PREFIX}{}-0", std::process::id()));
    std::fs::create_dir(&ours).unwrap();
    let foreign = root.path().join("system.slice");
    std::fs::create_dir(&foreign).unwrap();

    remove_orphaned_scratch_cgroups(root.path());

    assert!(!orphan.exists(), "the gone process's cgroups are removed");
    assert!(ours.exists() && foreign.exists(), "the others are kept");
}
