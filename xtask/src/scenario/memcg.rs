//! Zombie v1 memory cgroups (repro.md B): each one is made by mkdir, a thread joining it and
//! writing a 16 KiB file (page cache charged to it), leaving, and rmdir. Its page cache keeps the
//! offline cgroup alive. Writing the parent's `memory.force_empty` reclaims it all (the
//! slow-syscall culprit does that: a long in-kernel write); deleting the files frees it too.
//! Dropping `Zombies` releases them either way and removes the parent.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};

use super::setup;

/// Mount point of the v1 memory hierarchy.
pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";
/// The parent of the zombies, under `MEMORY_ROOT`.
const PARENT: &str = "stalltop_zombies";
/// Page cache each zombie is left holding.
const FILE_BYTES: usize = 16 * 1024;
const REMOVE_ATTEMPTS: u32 = 50;
const REMOVE_BACKOFF: Duration = Duration::from_millis(20);

/// The parent memory cgroup, its zombie children and the files whose page cache they hold.
pub struct Zombies {
    parent: PathBuf,
    files: PathBuf,
    count: usize,
}

/// Moves the calling thread back to the root memory cgroup when dropped, so no early return
/// leaves it inside a cgroup that is about to be removed.
struct BackToRoot;

impl Drop for BackToRoot {
    fn drop(&mut self) {
        if let Err(err) = join_root() {
            eprintln!("warning: could not move the setup thread back to the root memory cgroup: {err:#}");
        }
    }
}

impl Zombies {
    /// Makes `count` zombies under `<MEMORY_ROOT>/stalltop_zombies`, their files in `files` (a
    /// fresh directory on a disk file system: tmpfs pages cannot be reclaimed without swap).
    /// Moves the calling thread through the cgroups: call it on a setup thread.
    pub fn make(count: usize, files: &Path) -> Result<Self> {
        let root = Path::new(MEMORY_ROOT);
        ensure!(
            root.join("memory.force_empty").exists(),
            "no cgroup v1 memory hierarchy at {MEMORY_ROOT} (memory.force_empty): the \
             slow-syscall scenario needs the v1 memory controller"
        );
        let parent = root.join(PARENT);
        if parent.exists() {
            eprintln!(
                "removing stale memory cgroup {} from an earlier run",
                parent.display()
            );
            release(&parent, None)?;
        }
        fs::create_dir(&parent).with_context(|| format!("mkdir {}", parent.display()))?;
        let zombies = Zombies {
            parent,
            files: files.to_owned(),
            count,
        };
        fs::create_dir(files).with_context(|| format!("mkdir {}", files.display()))?;
        let _back = BackToRoot;
        let page = vec![b'z'; FILE_BYTES];
        let tid = setup::gettid().to_string();
        for i in 0..count {
            let child = zombies.parent.join(format!("z{i}"));
            fs::create_dir(&child).with_context(|| format!("mkdir {}", child.display()))?;
            write_knob(&child.join("tasks"), &tid)?;
            let file = files.join(format!("z{i}"));
            fs::write(&file, &page).with_context(|| format!("write {}", file.display()))?;
            join_root()?;
            fs::remove_dir(&child).with_context(|| format!("rmdir {}", child.display()))?;
        }
        // Clean page cache makes force_empty pure reclaim, with no writeback to wait for.
        let dir = File::open(files).with_context(|| format!("open {}", files.display()))?;
        // SAFETY: syncfs on a file descriptor we own; no memory is involved.
        if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
            return Err(io::Error::last_os_error()).context("syncfs");
        }
        Ok(zombies)
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// The file whose write reclaims every zombie's page cache.
    pub fn force_empty_path(&self) -> PathBuf {
        self.parent.join("memory.force_empty")
    }
}

impl Drop for Zombies {
    fn drop(&mut self) {
        if let Err(err) = release(&self.parent, Some(&self.files)) {
            eprintln!(
                "warning: zombie memory cgroups under {} were not released: {err:#}",
                self.parent.display()
            );
        }
    }
}

/// Live memory cgroups counted by the kernel (/proc/cgroups), zombies included.
pub fn memory_cgroups() -> Result<u64> {
    let text = fs::read_to_string("/proc/cgroups").context("read /proc/cgroups")?;
    let line = text
        .lines()
        .find(|line| line.split_whitespace().next() == Some("memory"))
        .context("/proc/cgroups has no memory line")?;
    line.split_whitespace()
        .nth(2)
        .context("short memory line in /proc/cgroups")?
        .parse()
        .with_context(|| format!("/proc/cgroups: {line:?}"))
}

fn join_root() -> Result<()> {
    write_knob(
        &Path::new(MEMORY_ROOT).join("tasks"),
        &setup::gettid().to_string(),
    )
}

/// One write(2) of `value`, as cgroup files want it.
fn write_knob(path: &Path, value: &str) -> Result<()> {
    File::options()
        .write(true)
        .open(path)
        .and_then(|mut file| file.write_all(value.as_bytes()))
        .with_context(|| format!("write {value} to {}", path.display()))
}

/// Reclaims the parent's page cache (freeing the zombies), deletes the files, moves stray tasks
/// out, removes leftover live children (a crashed run) and the parent.
fn release(parent: &Path, files: Option<&Path>) -> Result<()> {
    // EBUSY if a task is still inside; the files' removal below frees the zombies anyway.
    let _ = fs::write(parent.join("memory.force_empty"), "0");
    if let Some(files) = files {
        if files.exists() {
            fs::remove_dir_all(files).with_context(|| format!("rm -r {}", files.display()))?;
        }
    }
    let root_tasks = Path::new(MEMORY_ROOT).join("tasks");
    let mut dirs = vec![parent.to_owned()];
    for entry in fs::read_dir(parent).with_context(|| format!("list {}", parent.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    // Children first.
    for dir in dirs.iter().rev() {
        remove_cgroup_dir(dir, &root_tasks)?;
    }
    Ok(())
}

fn remove_cgroup_dir(dir: &Path, root_tasks: &Path) -> Result<()> {
    for _ in 0..REMOVE_ATTEMPTS {
        let tasks = fs::read_to_string(dir.join("tasks"))
            .with_context(|| format!("read {}/tasks", dir.display()))?;
        for tid in tasks.split_whitespace() {
            // ESRCH when the thread is exiting: it leaves on its own.
            let _ = fs::write(root_tasks, tid);
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
