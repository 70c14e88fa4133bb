//! Slow syscalls (docs/cases.md, cases 1, 2 and 5): a thread named `culprit`, pinned to
//! CPU 1 next to the 1 ms victim, makes long in-kernel calls on known files, one every
//! `SPACING_NS`: read of `/proc/<pid>/smaps` while 2 GB of 4 KiB pages are mapped, munmap of those
//! 2 GB, getdents64 with a 4 MiB buffer over a directory of 120k entries, write of
//! `memory.force_empty` over thousands of zombie memory cgroups; and a second `culprit` thread
//! makes posix_fadvise(DONTNEED) on a 1 GB cached file, then glog-style appends each followed by
//! fadvise (case 5, whose contention does not reproduce on 6.18: it feeds the syscall table and
//! its latency distribution). Each thread times its own calls (wall, CPU clock, time runnable,
//! switches). Everything slow to build (memory, directory, zombies, cached file) is built before
//! the window opens, and removed when the fixture drops.

use std::ffi::CString;
use std::fs::{self, File};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

use super::cgroup::CpuCgroup;
use super::memcg::{self, Zombies};
use super::setup;
use super::stats::Percentiles;
use super::task::{self, Window};
use super::victim_log::{self, Late};
use super::{victim, Cgroups, Injected, Measured, CPU};

pub const COMM: &str = "culprit";
/// v1 cpu cgroup of the culprit (default weight, like the victim's).
pub const CGROUP: &str = "stalltop_culprit";
/// The fadvise calls come from a second `culprit` thread in a cgroup of its own, so each
/// cgroup's syscall rows hold only the calls the checks expect (glog's appends are writes too).
pub const GLOG_CGROUP: &str = "stalltop_glog";

/// Anonymous memory mapped (4 KiB pages) for the smaps read and the munmap.
const MAPPED_BYTES: usize = 2 << 30;
/// Entries of the getdents64 directory: with 7-byte names a dirent takes 32 bytes, so all of
/// them (and "." and "..") fit in one 4 MiB buffer; the call after it returns 0 at once.
const DIR_ENTRIES: usize = 120_000;
const GETDENTS_BUFFER: usize = 4 << 20;
/// Zombie memory cgroups for force_empty to reclaim.
const ZOMBIES: usize = 4_000;
/// The cached file dropped by the first fadvise.
const CACHED_FILE_BYTES: usize = 1 << 30;
const WRITE_CHUNK: usize = 1 << 20;
/// glog: this many 4 KiB appends, each followed by fadvise(DONTNEED) of the whole file.
const GLOG_APPENDS: usize = 200;
const GLOG_APPEND_BYTES: usize = 4096;
/// The smaps reads use a buffer this big (the kernel returns about a page per read anyway).
const READ_BUFFER: usize = 64 * 1024;
/// The victim settles this long before the first call.
const FIRST_CALL_NS: u64 = 300_000_000;
/// Calls start this far apart, so stalls around one do not merge with the next.
const SPACING_NS: u64 = 400_000_000;
/// The calls and the glog loop need this much of the window.
const MIN_WINDOW_NS: u64 = FIRST_CALL_NS + 5 * SPACING_NS;

/// Where the directory of many entries lives: tmpfs, because ext4 caps hard links at 65000 and
/// making 120k inodes there takes seconds; the cost of the call is the walk and the copy-out.
const DIR_PARENT: &str = "/dev/shm";
const DIR_NAME: &str = "stalltop-getdents";
/// The cached file and the zombies' page cache live on a disk file system, where fadvise
/// DONTNEED and force_empty have page cache to drop: /var/tmp, as /tmp is a tmpfs on many
/// systems (Debian 13, Fedora), whose pages no call can drop.
const FILES_PARENT: &str = "/var/tmp";
const FILES_NAME: &str = "stalltop-slow-syscall";

/// Built before the window: removed (memory unmapped, zombies released, files deleted) on drop.
pub struct Fixture {
    mapping: Mapping,
    /// Before `files`: the zombies' page cache lives in files under it.
    zombies: Zombies,
    dir: Scratch,
    _files: Scratch,
    cached_file: PathBuf,
    memory_cgroups_before: u64,
    memory_cgroups_with_zombies: u64,
}

/// A directory this run made, removed with its contents on drop.
struct Scratch {
    path: PathBuf,
}

/// Anonymous memory in 4 KiB pages, populated; unmapped on drop unless the culprit already did.
struct Mapping {
    addr: usize,
    len: usize,
    unmapped: AtomicBool,
}

/// One call, timed by the thread that made it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Timing {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Measured in user space: holds a preemption on the way back from the kernel, which
    /// stalltop's sys_enter..sys_exit does not.
    pub wall_ns: u64,
    /// The thread's own CPU clock across the call: softirqs that interrupted it included, time
    /// the host stole from the vCPU excluded (PARAVIRT_TIME_ACCOUNTING), unlike stalltop's
    /// switch-to-switch on-CPU time.
    pub oncpu_ns: u64,
    /// Time the thread was runnable while another task ran (schedstat run_delay), inside the
    /// call or on its way out: `wall - runq_wait` is the least the call can have lasted in the
    /// kernel and the most it can have been on the CPU, stolen time aside.
    pub runq_wait_ns: u64,
    /// Times the thread was switched back in during the call (schedstat pcount): 0 means it
    /// held the CPU throughout; 1, that it lost it once, inside the call or on its way out.
    pub switches: u64,
    /// The victim's worst lateness among wake-ups due during the call (0: none over 1 ms).
    pub victim_late_ns: u64,
}

/// The calls of one syscall on one file (a read loop, a getdents64 loop, a single call).
#[derive(Clone, Debug, Serialize)]
pub struct Call {
    pub syscall: &'static str,
    pub tid: u32,
    /// The caller's cpu cgroup (stalltop's container for it).
    pub cgroup: String,
    /// The file the calls work on, as the kernel names it; None for munmap.
    pub path: Option<String>,
    pub calls: Vec<Timing>,
}

impl Timing {
    /// The least time the call can have spent in the kernel: its wall time without the time
    /// it was runnable (a preemption on the way out is in the former only).
    pub fn in_kernel_at_least(&self) -> u64 {
        self.wall_ns.saturating_sub(self.runq_wait_ns)
    }
}

impl Call {
    fn new(syscall: &'static str, path: Option<&Path>) -> Self {
        Call {
            syscall,
            tid: setup::gettid(),
            cgroup: String::new(),
            path: path.map(|p| p.to_string_lossy().into_owned()),
            calls: Vec::new(),
        }
    }

    /// The slowest call's wall time, for the summary line.
    pub fn slowest(&self) -> Timing {
        self.calls
            .iter()
            .copied()
            .max_by_key(|t| t.wall_ns)
            .unwrap_or(Timing {
                start_ns: 0,
                end_ns: 0,
                wall_ns: 0,
                oncpu_ns: 0,
                runq_wait_ns: 0,
                switches: 0,
                victim_late_ns: 0,
            })
    }
}

/// The fadvise64 calls: one on the whole cached file, then one after each glog append.
#[derive(Debug, Serialize)]
pub struct Fadvise {
    pub tid: u32,
    pub cgroup: String,
    pub path: String,
    /// Of each call's wall time, and of its least time in the kernel
    /// (`Timing::in_kernel_at_least`): the call's time in the kernel lies between the two (a
    /// preemption on the way out of a 20 us call, e.g. by the victim's 200 us of work, is in
    /// the wall time only).
    pub wall: Percentiles,
    pub in_kernel_at_least: Percentiles,
    pub cached_bytes: usize,
}

#[derive(Debug, Serialize)]
pub struct ZombieCount {
    pub made: usize,
    /// /proc/cgroups memory num_cgroups: before, with the zombies, after the culprit's
    /// force_empty (the kernel frees the cgroups asynchronously after their pages).
    pub memory_cgroups_before: u64,
    pub memory_cgroups_with_zombies: u64,
    pub memory_cgroups_after: u64,
}

#[derive(Debug, Serialize)]
pub struct Truth {
    pub comm: &'static str,
    pub pid: u32,
    pub cpu: usize,
    /// The long calls, in order.
    pub calls: Vec<Call>,
    pub fadvise: Fadvise,
    pub zombies: ZombieCount,
    pub victim_comm: &'static str,
    /// The victim's wake-ups at least 1 ms late.
    pub victim_late: Vec<Late>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(err) = fs::remove_dir_all(&self.path) {
            eprintln!("warning: {} was not removed: {err}", self.path.display());
        }
    }
}

impl Scratch {
    /// Creates `path`, first removing a stale one left by an earlier crashed run.
    fn create(path: PathBuf) -> Result<Self> {
        if path.exists() {
            eprintln!("removing stale {} from an earlier run", path.display());
            fs::remove_dir_all(&path).with_context(|| format!("rm -r {}", path.display()))?;
        }
        fs::create_dir(&path).with_context(|| format!("mkdir {}", path.display()))?;
        Ok(Scratch { path })
    }
}

impl Mapping {
    /// Maps `len` bytes with huge pages disabled and faults every page in.
    fn populated(len: usize) -> Result<Self> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mmap the 2 GB region");
        }
        let mapping = Mapping {
            addr: addr as usize,
            len,
            unmapped: false.into(),
        };
        for (advice, what) in [
            (libc::MADV_NOHUGEPAGE, "MADV_NOHUGEPAGE"),
            (libc::MADV_POPULATE_WRITE, "MADV_POPULATE_WRITE"),
        ] {
            // SAFETY: the range is exactly the mapping made above, still mapped.
            if unsafe { libc::madvise(addr, len, advice) } != 0 {
                return Err(std::io::Error::last_os_error()).context(what);
            }
        }
        Ok(mapping)
    }

    /// munmap, timed by the caller; at most once.
    fn unmap(&self) -> Result<()> {
        if self.unmapped.swap(true, Ordering::SeqCst) {
            bail!("the region was already unmapped");
        }
        // SAFETY: the mapping made by `populated`, unmapped only here (guarded by `unmapped`);
        // nothing holds references into it.
        if unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) } != 0 {
            return Err(std::io::Error::last_os_error()).context("munmap");
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if !*self.unmapped.get_mut() {
            let _ = self.unmap();
        }
    }
}

impl Fixture {
    /// Builds everything on a setup thread pinned to CPU 1 (takes ~5 s), for a window of
    /// `duration`.
    pub fn prepare(duration: Duration) -> Result<Self> {
        ensure!(
            duration.as_nanos() >= u128::from(MIN_WINDOW_NS),
            "slow-syscall needs a window of at least {} ms for its calls",
            MIN_WINDOW_NS / 1_000_000
        );
        let memory_cgroups_before = memcg::memory_cgroups()?;
        ensure!(
            !is_tmpfs(Path::new(FILES_PARENT))?,
            "slow-syscall needs {FILES_PARENT} on a disk file system (it is a tmpfs here): \
             fadvise and force_empty would find no page cache to drop"
        );
        let files = Scratch::create(Path::new(FILES_PARENT).join(FILES_NAME))?;
        let dir = Scratch::create(Path::new(DIR_PARENT).join(DIR_NAME))?;
        let files_path = files.path.clone();
        let dir_path = dir.path.clone();
        eprintln!(
            "slow-syscall: building {ZOMBIES} zombie memory cgroups, {DIR_ENTRIES} directory \
             entries, a {} MiB cached file and {} MiB of mapped memory",
            CACHED_FILE_BYTES >> 20,
            MAPPED_BYTES >> 20
        );
        let (zombies, cached_file, mapping) = setup::on_cpu(CPU, "setup", move || {
            let zombies = Zombies::make(ZOMBIES, &files_path.join("zombies"))?;
            let cached_file = write_cached_file(&files_path.join("app.log"))?;
            make_entries(&dir_path)?;
            let mapping = Mapping::populated(MAPPED_BYTES)?;
            Ok((zombies, cached_file, mapping))
        })?;
        Ok(Fixture {
            mapping,
            zombies,
            dir,
            _files: files,
            cached_file,
            memory_cgroups_before,
            memory_cgroups_with_zombies: memcg::memory_cgroups()?,
        })
    }
}

/// Writes and syncs the file fadvise drops, so its pages are cached and clean.
fn write_cached_file(path: &Path) -> Result<PathBuf> {
    let mut file = File::create(path).with_context(|| format!("create {}", path.display()))?;
    let chunk = vec![b'l'; WRITE_CHUNK];
    for _ in 0..CACHED_FILE_BYTES / WRITE_CHUNK {
        file.write_all(&chunk)
            .with_context(|| format!("write {}", path.display()))?;
    }
    file.sync_all()
        .with_context(|| format!("fsync {}", path.display()))?;
    fs::canonicalize(path).with_context(|| format!("canonicalize {}", path.display()))
}

/// `DIR_ENTRIES` hard links to one empty file.
fn make_entries(dir: &Path) -> Result<()> {
    let target = dir.join("target");
    File::create(&target).with_context(|| format!("create {}", target.display()))?;
    for i in 0..DIR_ENTRIES - 1 {
        let link = dir.join(format!("e{i:06}"));
        fs::hard_link(&target, &link).with_context(|| format!("link {}", link.display()))?;
    }
    Ok(())
}

/// The calling thread's schedstat (on-CPU ns, run_delay ns, timeslices), read with pread64 so
/// the reads stay out of the `read` row of the culprit's cgroup.
struct Schedstat {
    file: File,
}

impl Schedstat {
    fn open() -> Result<Self> {
        let path = format!("/proc/self/task/{}/schedstat", setup::gettid());
        let file = File::open(&path).with_context(|| format!("open {path}"))?;
        Ok(Schedstat { file })
    }

    fn read(&self) -> Result<(u64, u64)> {
        let mut buffer = [0u8; 96];
        let n = self
            .file
            .read_at(&mut buffer, 0)
            .context("read the thread's schedstat")?;
        let text = std::str::from_utf8(&buffer[..n]).context("schedstat is not text")?;
        let fields: Vec<u64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .with_context(|| format!("schedstat: {text:?}"))?;
        match fields[..] {
            [_, run_delay, timeslices] => Ok((run_delay, timeslices)),
            _ => bail!("schedstat: {text:?}"),
        }
    }

    /// Runs `call`, timing it; the timing is appended to `into`. The wall clock (vDSO, no
    /// syscall) sits right around the call; the schedstat reads and the thread CPU clock
    /// (syscalls themselves, ~1 us each) sit outside it, so a microseconds-long call is not
    /// timed with them. A wait just outside the wall interval (a preemption on the way out)
    /// can still land in the runnable time: it only lowers the "least time in the kernel".
    fn timed<T>(&self, into: &mut Call, call: impl FnOnce() -> T) -> Result<T> {
        let (waited_before, slices_before) = self.read()?;
        let cpu_before = task::thread_cpu_ns();
        let start_ns = task::monotonic_ns();
        let result = call();
        let end_ns = task::monotonic_ns();
        let oncpu_ns = task::thread_cpu_ns() - cpu_before;
        let (waited_after, slices_after) = self.read()?;
        into.calls.push(Timing {
            start_ns,
            end_ns,
            wall_ns: end_ns - start_ns,
            oncpu_ns,
            runq_wait_ns: waited_after - waited_before,
            switches: slices_after - slices_before,
            victim_late_ns: 0,
        });
        Ok(result)
    }
}

fn open(path: &Path, flags: libc::c_int) -> Result<OwnedFd> {
    let name = CString::new(path.as_os_str().as_bytes()).context("path with a NUL byte")?;
    // SAFETY: a NUL-terminated path; the returned descriptor is owned below.
    let fd = unsafe { libc::open(name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("open {}", path.display()));
    }
    // SAFETY: open returned a new descriptor nobody else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

fn check(rc: libc::c_long, what: &str) -> Result<usize> {
    if rc < 0 {
        return Err(std::io::Error::last_os_error()).context(what.to_owned());
    }
    Ok(rc as usize)
}

/// Reads `/proc/<pid>/smaps` to the end: the reads that reach the 2 GB mapping are slow (a
/// seq_file record that does not fit a read is built again by the next one, so it may be two).
fn read_smaps(path: &Path, stats: &Schedstat) -> Result<Call> {
    let fd = open(path, libc::O_RDONLY)?;
    let mut call = Call::new("read", Some(path));
    let mut buffer = vec![0u8; READ_BUFFER];
    loop {
        // SAFETY: `buffer` is writable for its whole length.
        let rc = stats.timed(&mut call, || unsafe {
            libc::read(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len())
        })?;
        if check(rc as libc::c_long, "read smaps")? == 0 {
            return Ok(call);
        }
    }
}

/// getdents64 with a 4 MiB buffer until the directory is exhausted.
fn list_directory(path: &Path, stats: &Schedstat) -> Result<Call> {
    let fd = open(path, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let mut call = Call::new("getdents64", Some(path));
    let mut buffer = vec![0u8; GETDENTS_BUFFER];
    loop {
        // SAFETY: getdents64 writes at most `buffer.len()` bytes into `buffer`.
        let rc = stats.timed(&mut call, || unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buffer.as_mut_ptr(),
                buffer.len(),
            )
        })?;
        if check(rc, "getdents64")? == 0 {
            return Ok(call);
        }
    }
}

fn force_empty(path: &Path, stats: &Schedstat) -> Result<Call> {
    let fd = open(path, libc::O_WRONLY)?;
    let mut call = Call::new("write", Some(path));
    // SAFETY: writes one byte from a static buffer.
    let rc = stats.timed(&mut call, || unsafe {
        libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1)
    })?;
    check(rc as libc::c_long, "write memory.force_empty")?;
    Ok(call)
}

/// fadvise(DONTNEED) on the whole cached file, then glog's append + fadvise loop; all the
/// fadvise calls are one group.
fn fadvise(path: &Path, window: &Window, stats: &Schedstat) -> Result<(Call, Fadvise)> {
    let fd = open(path, libc::O_WRONLY | libc::O_APPEND)?;
    let dontneed = |fd: &OwnedFd| {
        // SAFETY: plain integer arguments on a descriptor we own.
        let rc = unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        ensure!(
            rc == 0,
            "posix_fadvise: {}",
            std::io::Error::from_raw_os_error(rc)
        );
        Ok(())
    };
    let mut calls = Call::new("fadvise64", Some(path));
    stats.timed(&mut calls, || dontneed(&fd))??;
    let line = [b'g'; GLOG_APPEND_BYTES];
    for _ in 0..GLOG_APPENDS {
        if window.cancelled() {
            break;
        }
        // SAFETY: writes `line`, a live buffer of that length.
        let written = unsafe { libc::write(fd.as_raw_fd(), line.as_ptr().cast(), line.len()) };
        check(written as libc::c_long, "append to the log")?;
        stats.timed(&mut calls, || dontneed(&fd))??;
    }
    let summary = Fadvise {
        tid: setup::gettid(),
        cgroup: format!("/{GLOG_CGROUP}"),
        path: path.to_string_lossy().into_owned(),
        wall: Percentiles::of(calls.calls.iter().map(|t| t.wall_ns).collect()),
        in_kernel_at_least: Percentiles::of(
            calls.calls.iter().map(Timing::in_kernel_at_least).collect(),
        ),
        cached_bytes: CACHED_FILE_BYTES,
    };
    Ok((calls, summary))
}

/// The culprit's calls, one every `SPACING_NS`, on the calling (pinned) thread.
fn culprit(window: &Window, fixture: &Fixture) -> Result<Vec<Call>> {
    let stats = Schedstat::open()?;
    let smaps = PathBuf::from(format!("/proc/{}/smaps", std::process::id()));
    let mut calls = Vec::new();
    for slot in 0..4 {
        task::sleep_until(window, slot_ns(window, slot))?;
        if window.cancelled() {
            break;
        }
        calls.push(match slot {
            0 => read_smaps(&smaps, &stats)?,
            1 => {
                let mut call = Call::new("munmap", None);
                stats.timed(&mut call, || fixture.mapping.unmap())??;
                call
            }
            2 => list_directory(&fixture.dir.path, &stats)?,
            _ => force_empty(&fixture.zombies.force_empty_path(), &stats)?,
        });
    }
    Ok(calls)
}

/// The glog thread: its calls come after the culprit's four.
fn glog(window: &Window, fixture: &Fixture) -> Result<(Call, Fadvise)> {
    task::sleep_until(window, slot_ns(window, 4))?;
    if window.cancelled() {
        bail!("cancelled before the fadvise calls");
    }
    fadvise(&fixture.cached_file, window, &Schedstat::open()?)
}

fn slot_ns(window: &Window, slot: u64) -> u64 {
    window.start_ns() + FIRST_CALL_NS + slot * SPACING_NS
}

pub fn run(window: &Window, fixture: Fixture) -> Result<(Measured, Injected)> {
    let victim_cgroup = CpuCgroup::create(victim::CGROUP)?;
    victim_cgroup.set_shares(victim::SHARES)?;
    let culprit_cgroup = CpuCgroup::create(CGROUP)?;
    let glog_cgroup = CpuCgroup::create(GLOG_CGROUP)?;
    let (log, mut calls, (fadvise_calls, fadvise)) = thread::scope(|scope| {
        let _cancel = window.cancel_on_drop();
        let victim = window.spawn(scope, victim::COMM, &victim_cgroup, || {
            victim_log::run(window)
        })?;
        let culprit = window.spawn(scope, COMM, &culprit_cgroup, || culprit(window, &fixture))?;
        let glog = window.spawn(scope, COMM, &glog_cgroup, || glog(window, &fixture))?;
        let calls = culprit.join()?;
        let fadvise = glog.join()?;
        anyhow::Ok((victim.join()?, calls, fadvise))
    })?;
    for call in &mut calls {
        call.cgroup = culprit_cgroup.path().to_owned();
    }
    calls.push(Call {
        cgroup: glog_cgroup.path().to_owned(),
        ..fadvise_calls
    });
    for timing in calls.iter_mut().flat_map(|call| call.calls.iter_mut()) {
        timing.victim_late_ns = log.worst_due_between(timing.start_ns, timing.end_ns);
    }
    let zombies = ZombieCount {
        made: fixture.zombies.count(),
        memory_cgroups_before: fixture.memory_cgroups_before,
        memory_cgroups_with_zombies: fixture.memory_cgroups_with_zombies,
        memory_cgroups_after: memcg::memory_cgroups()?,
    };
    drop(fixture);
    let measured = Measured {
        cgroups: Cgroups {
            victim: Some(victim_cgroup.path().to_owned()),
            ..Cgroups::default()
        },
        victim: Some(log.stats),
        ..Measured::default()
    };
    let injected = Injected {
        slow_syscall: Some(Truth {
            comm: COMM,
            pid: std::process::id(),
            cpu: CPU,
            calls,
            fadvise,
            zombies,
            victim_comm: victim::COMM,
            victim_late: log.late,
        }),
        ..Injected::default()
    };
    Ok((measured, injected))
}

/// Whether `path` is on a tmpfs (page cache that is the file itself, never dropped).
fn is_tmpfs(path: &Path) -> Result<bool> {
    let c_path = CString::new(path.as_os_str().as_bytes())?;
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: c_path is a NUL-terminated path and stat is large enough for statfs's result.
    if unsafe { libc::statfs(c_path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statfs {}", path.display()));
    }
    // SAFETY: statfs returned 0, so it filled stat.
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_type == libc::TMPFS_MAGIC)
}
