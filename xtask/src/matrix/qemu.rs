//! Boots one guest under qemu-system-x86_64 (TCG: KVM guests hang on this machine kind) and
//! waits for it to power off, killing it past its time limit or on SIGINT/SIGTERM.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::interrupt;

const POLL: Duration = Duration::from_millis(200);
/// Guest memory: the initramfs (binaries included) lives in it.
const MEMORY_MB: u32 = 2048;

/// One guest's files and limit.
pub struct Guest<'a> {
    pub kernel: &'a Path,
    pub initramfs: &'a Path,
    /// Written by the guest on its second serial port.
    pub results: PathBuf,
    /// The kernel console (first serial port).
    pub console: PathBuf,
    /// QEMU's own messages.
    pub qemu_log: PathBuf,
    pub limit: Duration,
}

/// Runs the guest to its power-off; the wall time it took.
pub fn run(guest: &Guest) -> Result<Duration> {
    let log = File::create(&guest.qemu_log)
        .with_context(|| format!("create {}", guest.qemu_log.display()))?;
    let mut command = Command::new("qemu-system-x86_64");
    command
        .args(["-accel", "tcg", "-cpu", "max", "-smp", "2"])
        .args(["-m", &MEMORY_MB.to_string()])
        .args(["-nographic", "-no-reboot", "-monitor", "none"])
        .arg("-kernel")
        .arg(guest.kernel)
        .arg("-initrd")
        .arg(guest.initramfs)
        // panic=-1: a guest kernel panic reboots, which -no-reboot turns into QEMU's exit.
        // noirqdebug: the PREEMPT_RT kernel's threaded 8250 handler finds the emulated UART's
        // interrupt already served so often while results stream out that the kernel disabled
        // IRQ 3 ("nobody cared") and the results port stalled for good.
        // loglevel=5 (not quiet): warnings and call traces reach the console. A guest that
        // hangs (soft lockup, RCU stall) panics at once, with every CPU's stack, rather than
        // sit out its time limit.
        .args([
            "-append",
            "console=ttyS0 loglevel=5 panic=-1 noirqdebug softlockup_panic=1 \
             softlockup_all_cpu_backtrace=1 sysctl.kernel.panic_on_rcu_stall=1",
        ])
        .arg("-serial")
        .arg(serial_file(&guest.console))
        .arg("-serial")
        .arg(serial_file(&guest.results))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: the closure runs between fork and exec and only makes the async-signal-safe
    // prctl syscall.
    unsafe {
        command.pre_exec(|| {
            // The guest dies with xtask, however xtask ends.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = command.spawn().context("start qemu-system-x86_64")?;
    let outcome = loop {
        if let Some(status) = child.try_wait()? {
            break if status.success() {
                Ok(started.elapsed())
            } else {
                Err(anyhow::anyhow!(
                    "qemu-system-x86_64 failed ({status}); see {}",
                    guest.qemu_log.display()
                ))
            };
        }
        if interrupt::requested() {
            break Err(anyhow::anyhow!("interrupted by a signal"));
        }
        if started.elapsed() > guest.limit {
            break Err(anyhow::anyhow!(
                "the guest was still running after {:?}: killed",
                guest.limit
            ));
        }
        thread::sleep(POLL);
    };
    if outcome.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    outcome
}

fn serial_file(path: &Path) -> String {
    format!("file:{}", path.display())
}
