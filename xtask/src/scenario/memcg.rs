//! Zombie v1 memory cgroups: each one is made by mkdir, a process joining it and
//! writing a 16 KiB file (page cache charged to it), leaving, and rmdir. Its page cache keeps the
//! offline cgroup alive. Writing the parent's `memory.force_empty` reclaims it all (the
//! slow-syscall culprit does that: a long in-kernel write); deleting the files frees it too.
//! Dropping `Zombies` releases them either way and removes the parent.

use std::ffi::CString;
use std::fs::{self, File};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};

use super::cgroup::rmdir_emptied;

/// Mount point of the v1 memory hierarchy.
pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";
/// The parent of the zombies, under `MEMORY_ROOT`.
const PARENT: &str = "stalltop_zombies";
/// Page cache each zombie is left holding.
const FILE_BYTES: usize = 16 * 1024;

/// The parent memory cgroup, its zombie children and the files whose page cache they hold.
pub struct Zombies {
    parent: PathBuf,
    files: PathBuf,
    count: usize,
}

/// The paths of one zombie, ready for the child (which must not allocate).
struct Step {
    cgroup: CString,
    tasks: CString,
    file: CString,
}

/// What the child's exit code names when a step failed.
const STEP_NAMES: [&str; 6] = [
    "ok",
    "mkdir of a child cgroup",
    "joining it",
    "writing its file",
    "going back to the root cgroup",
    "rmdir of the child cgroup",
];

impl Step {
    fn new(cgroup: &Path, file: &Path) -> Result<Self> {
        Ok(Step {
            cgroup: c_path(cgroup)?,
            tasks: c_path(&cgroup.join("tasks"))?,
            file: c_path(file)?,
        })
    }
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .with_context(|| format!("{} has a NUL byte", path.display()))
}

/// The forked child: page cache is charged to the memory cgroup of the process's mm owner (its
/// first thread), so the zombie maker is a single-threaded process of its own. Returns the
/// failed step (an index of STEP_NAMES), 0 when all went well.
///
/// # Safety
/// Only for the child of a fork: makes raw syscalls only, on the buffers it is given.
unsafe fn make_in_child(steps: &[Step], root_tasks: &CString, page: &[u8]) -> i32 {
    let mut digits = [0u8; 20];
    let mut len = 0;
    let mut pid = libc::getpid() as u32;
    loop {
        digits[digits.len() - 1 - len] = b'0' + (pid % 10) as u8;
        len += 1;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    let pid = &digits[digits.len() - len..];
    let write_all = |path: &CString, flags: libc::c_int, bytes: &[u8]| -> bool {
        let fd = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o644);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, bytes.as_ptr().cast(), bytes.len()) == bytes.len() as isize;
        libc::close(fd) == 0 && ok
    };
    for step in steps {
        if libc::mkdir(step.cgroup.as_ptr(), 0o755) != 0 {
            return 1;
        }
        if !write_all(&step.tasks, libc::O_WRONLY, pid) {
            return 2;
        }
        if !write_all(
            &step.file,
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
            page,
        ) {
            return 3;
        }
        if !write_all(root_tasks, libc::O_WRONLY, pid) {
            return 4;
        }
        if libc::rmdir(step.cgroup.as_ptr()) != 0 {
            return 5;
        }
    }
    0
}

impl Zombies {
    /// Makes `count` zombies under `<MEMORY_ROOT>/stalltop_zombies`, their files in `files` (a
    /// fresh directory on a disk file system: tmpfs pages cannot be reclaimed without swap), by
    /// a forked child that inherits the calling thread's CPU affinity.
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
        let steps = (0..count)
            .map(|i| {
                Step::new(
                    &zombies.parent.join(format!("z{i}")),
                    &files.join(format!("z{i}")),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let root_tasks = c_path(&Path::new(MEMORY_ROOT).join("tasks"))?;
        let page = vec![b'z'; FILE_BYTES];
        // SAFETY: the child only makes async-signal-safe syscalls on memory prepared above (no
        // allocation, no locks) and leaves with _exit, as a forked child of a threaded process
        // must.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error()).context("fork the zombie maker");
        }
        if pid == 0 {
            // SAFETY: see above; this is the child.
            unsafe { libc::_exit(make_in_child(&steps, &root_tasks, &page)) }
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above; `status` is a valid int to write.
        if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
            return Err(io::Error::last_os_error()).context("wait for the zombie maker");
        }
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            let code = libc::WEXITSTATUS(status);
            let what = STEP_NAMES.get(code as usize).copied().unwrap_or("?");
            bail!("the zombie maker failed (wait status {status:#x}: {what})");
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
        rmdir_emptied(dir, "tasks", &root_tasks)?;
    }
    Ok(())
}
