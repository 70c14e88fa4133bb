//! The v1 cpu cgroups a scenario creates: a lock so one scenario at a time owns their names,
//! stale cleanup, cpu.shares and CFS bandwidth, cpu.stat, and removal on drop. On a hybrid host
//! each also has a threaded twin of the same path in the unified hierarchy, holding the same
//! threads, so the kernel's CPU pressure (PSI, cpu.pressure) of its tasks is there to compare.

use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

/// Mount point of the v1 cpu hierarchy; cgroup paths are reported relative to it.
pub const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";
/// The hybrid host's cgroup2 mount, where the twins are made (when it is there).
const UNIFIED_ROOT: &str = "/sys/fs/cgroup/unified";

/// How long removal waits for exiting threads to leave a cgroup (rmdir returns EBUSY meanwhile).
const REMOVE_ATTEMPTS: u32 = 50;
const REMOVE_BACKOFF: Duration = Duration::from_millis(20);

/// Serializes scenarios across processes: the cgroup names are fixed, so a second run would
/// remove the first one's cgroups as "stale". The kernel drops the lock when a run dies.
const LOCK_FILE: &str = "/run/lock/stalltop-scenario.lock";

/// Held while a scenario runs; closing the file releases the lock.
pub struct ScenarioLock {
    _file: File,
}

impl ScenarioLock {
    pub fn acquire() -> Result<Self> {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK_FILE)
            .with_context(|| format!("open {LOCK_FILE}"))?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                bail!("another scenario is running on this host ({LOCK_FILE} is locked)");
            }
            return Err(err).with_context(|| format!("flock {LOCK_FILE}"));
        }
        Ok(ScenarioLock { _file: file })
    }
}

/// One v1 cpu cgroup, removed (tasks moved to the root, quota reset, rmdir) when dropped. A name
/// with a slash makes a child of an existing one: declare it after its parent, so it is dropped
/// first.
pub struct CpuCgroup {
    dir: PathBuf,
    path: String,
    /// Its threaded twin in the unified hierarchy, if the host has one.
    twin: Option<PathBuf>,
}

/// Counters of a cgroup's cpu.stat; `throttled_ns` is v1's `throttled_time`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuStat {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

impl CpuStat {
    fn parse(text: &str) -> Result<Self> {
        let mut stat = CpuStat::default();
        let mut seen = 0;
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            let field = match key {
                "nr_periods" => &mut stat.nr_periods,
                "nr_throttled" => &mut stat.nr_throttled,
                "throttled_time" => &mut stat.throttled_ns,
                _ => continue,
            };
            *field = value
                .trim()
                .parse()
                .with_context(|| format!("cpu.stat line {line:?}"))?;
            seen += 1;
        }
        ensure!(
            seen == 3,
            "cpu.stat lacks nr_periods/nr_throttled/throttled_time: {text:?}"
        );
        Ok(stat)
    }

    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: CpuStat) -> CpuStat {
        CpuStat {
            nr_periods: self.nr_periods.saturating_sub(earlier.nr_periods),
            nr_throttled: self.nr_throttled.saturating_sub(earlier.nr_throttled),
            throttled_ns: self.throttled_ns.saturating_sub(earlier.throttled_ns),
        }
    }
}

impl CpuCgroup {
    /// Creates `<CPU_ROOT>/<name>`, first removing a stale one left by an earlier crashed run.
    pub fn create(name: &str) -> Result<Self> {
        let root = Path::new(CPU_ROOT);
        ensure!(
            root.join("cpu.shares").exists() && root.join("cpu.cfs_quota_us").exists(),
            "no cgroup v1 cpu hierarchy at {CPU_ROOT}: the scenarios need the v1 cpu controller \
             (cpu.shares, cpu.cfs_quota_us)"
        );
        let dir = root.join(name);
        if dir.exists() {
            eprintln!(
                "removing stale cgroup {} from an earlier run",
                dir.display()
            );
            remove(&dir)
                .with_context(|| format!("stale cgroup {} could not be removed", dir.display()))?;
        }
        fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
        Ok(CpuCgroup {
            dir,
            path: format!("/{name}"),
            twin: create_twin(name)?,
        })
    }

    /// Path relative to the cpu hierarchy root, e.g. "/stalltop_victim".
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn set_shares(&self, shares: u64) -> Result<()> {
        self.write("cpu.shares", &shares.to_string())
    }

    /// Real-time CPU time its tasks may use per cpu.rt_period_us (1 s), on each CPU.
    pub fn set_rt_runtime(&self, runtime_us: u64) -> Result<()> {
        self.write("cpu.rt_runtime_us", &runtime_us.to_string())
    }

    pub fn set_bandwidth(&self, period_us: u64, quota_us: u64) -> Result<()> {
        self.write("cpu.cfs_period_us", &period_us.to_string())?;
        self.write("cpu.cfs_quota_us", &quota_us.to_string())
    }

    /// The configured quota in microseconds, -1 when unlimited.
    pub fn quota_us(&self) -> Result<i64> {
        self.read_number("cpu.cfs_quota_us")
    }

    pub fn period_us(&self) -> Result<i64> {
        self.read_number("cpu.cfs_period_us")
    }

    /// Moves the calling thread (only it: v1 `tasks`, not `cgroup.procs`) into this cgroup.
    pub fn join_current_thread(&self) -> Result<()> {
        // SAFETY: gettid has no preconditions.
        self.adopt_thread(unsafe { libc::gettid() })
    }

    /// Moves thread `tid` (only it) into this cgroup, and into its PSI twin if it has one.
    pub fn adopt_thread(&self, tid: libc::pid_t) -> Result<()> {
        self.write("tasks", &tid.to_string())?;
        match &self.twin {
            Some(twin) => {
                let file = twin.join("cgroup.threads");
                fs::write(&file, tid.to_string())
                    .with_context(|| format!("write {tid} to {}", file.display()))
            }
            None => Ok(()),
        }
    }

    pub fn cpu_stat(&self) -> Result<CpuStat> {
        let file = self.dir.join("cpu.stat");
        let text = fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
        CpuStat::parse(&text)
    }

    fn read_number(&self, knob: &str) -> Result<i64> {
        let file = self.dir.join(knob);
        let text = fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{}: {text:?}", file.display()))
    }

    fn write(&self, knob: &str, value: &str) -> Result<()> {
        let file = self.dir.join(knob);
        fs::write(&file, value).with_context(|| format!("write {value} to {}", file.display()))
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        if let Err(err) = remove(&self.dir) {
            eprintln!(
                "warning: cgroup {} was not removed: {err:#}",
                self.dir.display()
            );
        }
        if let Some(twin) = &self.twin {
            if let Err(err) = remove_twin(twin) {
                eprintln!(
                    "warning: cgroup {} was not removed: {err:#}",
                    twin.display()
                );
            }
        }
    }
}

/// On a hybrid host, `<UNIFIED_ROOT>/<name>` as a threaded cgroup (so single threads move in),
/// a stale one removed first; None on a host without it.
fn create_twin(name: &str) -> Result<Option<PathBuf>> {
    let root = Path::new(UNIFIED_ROOT);
    if !root.join("cgroup.threads").exists() {
        return Ok(None);
    }
    let dir = root.join(name);
    if dir.exists() {
        remove_twin(&dir)?;
    }
    fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
    let kind = dir.join("cgroup.type");
    fs::write(&kind, "threaded")
        .with_context(|| format!("write threaded to {}", kind.display()))?;
    Ok(Some(dir))
}

/// Its children first, then its threads back to the unified root, then rmdir.
fn remove_twin(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let entry = entry.with_context(|| format!("read {}", dir.display()))?;
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            remove_twin(&entry.path())?;
        }
    }
    let root_threads = Path::new(UNIFIED_ROOT).join("cgroup.threads");
    rmdir_emptied(dir, "cgroup.threads", &root_threads)
}

/// Removes the child cgroups first (a stale parent left by a crashed run still has them), then
/// lifts the quota (so throttled threads can exit) and empties and removes it.
fn remove(dir: &Path) -> Result<()> {
    remove_children(dir)?;
    fs::write(dir.join("cpu.cfs_quota_us"), "-1")
        .with_context(|| format!("reset {}/cpu.cfs_quota_us", dir.display()))?;
    rmdir_emptied(dir, "tasks", &Path::new(CPU_ROOT).join("tasks"))
}

/// Moves the threads listed in `dir`'s `members` file to `root_members` and rmdirs `dir`,
/// retrying while exiting threads still hold it (rmdir returns EBUSY meanwhile).
pub(super) fn rmdir_emptied(dir: &Path, members: &str, root_members: &Path) -> Result<()> {
    for _ in 0..REMOVE_ATTEMPTS {
        let listed = fs::read_to_string(dir.join(members))
            .with_context(|| format!("read {}/{members}", dir.display()))?;
        for tid in listed.split_whitespace() {
            // ESRCH when the thread is exiting: it leaves on its own.
            let _ = fs::write(root_members, tid);
        }
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(err) if err.kind() == io::ErrorKind::ResourceBusy => {}
            Err(err) => bail!("rmdir {}: {err}", dir.display()),
        }
        thread::sleep(REMOVE_BACKOFF);
    }
    bail!(
        "rmdir {}: still busy after {REMOVE_ATTEMPTS} attempts",
        dir.display()
    )
}

/// rmdir of a cgroup with a child cgroup fails (EBUSY however long it is retried).
fn remove_children(dir: &Path) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("read {}", dir.display()))?;
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            remove(&entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v1_cpu_stat_with_extra_lines() {
        let text = "nr_periods 75\nnr_throttled 21\nthrottled_time 1093000000\nnr_bursts 0\nburst_time 0\n";
        let stat = CpuStat::parse(text).unwrap();
        assert_eq!(
            stat,
            CpuStat {
                nr_periods: 75,
                nr_throttled: 21,
                throttled_ns: 1_093_000_000
            }
        );
        let later = CpuStat {
            nr_periods: 80,
            ..stat
        };
        assert_eq!(later.since(stat).nr_periods, 5);
    }

    #[test]
    fn rejects_a_cpu_stat_without_throttling_counters() {
        assert!(CpuStat::parse("usage_usec 5\n").is_err());
    }
}
