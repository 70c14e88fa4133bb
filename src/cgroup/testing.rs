//! Fixtures for the real-kernel tests of this module: root check and
//! cgroups that are removed even when a test fails. Test builds only.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

/// These tests create cgroups, which needs root. The suite runs as root in
/// CI, so a non-root run is a misconfiguration to report, not to skip.
pub(super) fn assert_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test creates cgroups under /sys/fs/cgroup and needs root: \
         run the suite as root (sudo -E cargo test)"
    );
}

/// Cgroup directories made for one test, and a busy child process inside
/// them; Drop kills the child and removes the directories.
pub(super) struct TestCgroups {
    dirs: Vec<PathBuf>,
    child: Option<Child>,
}

impl TestCgroups {
    /// Makes each of `dirs` (the same cgroup in several hierarchies).
    pub(super) fn create(dirs: &[PathBuf]) -> TestCgroups {
        let mut made = TestCgroups {
            dirs: Vec::new(),
            child: None,
        };
        for dir in dirs {
            fs::create_dir(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
            made.dirs.push(dir.clone());
        }
        made
    }

    /// Starts a process spinning on a CPU and moves it into every cgroup.
    pub(super) fn spin_inside(&mut self) {
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sh");
        let pid = child.id().to_string();
        self.child = Some(child);
        for dir in &self.dirs {
            let procs = dir.join("cgroup.procs");
            fs::write(&procs, &pid).unwrap_or_else(|e| panic!("write {}: {e}", procs.display()));
        }
    }
}

impl Drop for TestCgroups {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        for dir in &self.dirs {
            // The killed child may take a moment to leave the cgroup.
            for _ in 0..50 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
