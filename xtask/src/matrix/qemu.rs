//! Boots one guest under QEMU (TCG: KVM guests hang on this machine kind), an x86_64 or an
//! arm64 one, and waits for it to power off, killing it past its time limit, when it falls
//! silent, or on SIGINT/SIGTERM.

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

/// An emulated machine: QEMU's program and options, and the kernel's name of its console.
pub struct Machine {
    pub qemu: &'static str,
    pub options: &'static [&'static str],
    pub console: &'static str,
}

/// thread=single: one host thread runs both vCPUs in turn. With a thread per vCPU (QEMU's
/// default here), guests froze whole or livelocked while kernel text was patched in 5 of 7
/// boots of one CI run.
pub const X86_64: Machine = Machine {
    qemu: "qemu-system-x86_64",
    options: &["-accel", "tcg,thread=single", "-cpu", "max", "-smp", "2"],
    console: "ttyS0",
};

/// One vCPU: the verifier runs on one anyway. pauth-impdef: QEMU's own pointer-authentication
/// hash, much cheaper to emulate than the architected one the kernel signs every return with.
pub const AARCH64: Machine = Machine {
    qemu: "qemu-system-aarch64",
    options: &[
        "-M",
        "virt",
        "-cpu",
        "max,pauth-impdef=on",
        "-accel",
        "tcg",
        "-smp",
        "1",
    ],
    console: "ttyAMA0",
};

/// One guest's files and limit.
pub struct Guest<'a> {
    pub machine: &'a Machine,
    pub kernel: &'a Path,
    pub initramfs: &'a Path,
    /// Written by the guest on its second serial port; None: it writes them on its console
    /// (arm64's virt machine has one serial port).
    pub results: Option<PathBuf>,
    /// The kernel console (first serial port).
    pub console: PathBuf,
    /// QEMU's own messages.
    pub qemu_log: PathBuf,
    pub limit: Duration,
    /// Killed when neither serial port got a byte for this long (the guest's script writes a
    /// heartbeat to the console): the guest froze whole in the emulator.
    pub silence_limit: Duration,
}

/// Why a guest was killed when it fell silent (see `Guest::silence_limit`).
#[derive(Debug)]
pub struct Silent(pub Duration);

impl std::fmt::Display for Silent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the guest wrote nothing on either serial port for {:?}: killed",
            self.0
        )
    }
}

impl std::error::Error for Silent {}

/// Runs the guest to its power-off; the wall time it took.
pub fn run(guest: &Guest) -> Result<Duration> {
    let log = File::create(&guest.qemu_log)
        .with_context(|| format!("create {}", guest.qemu_log.display()))?;
    let qemu = guest.machine.qemu;
    let mut command = Command::new(qemu);
    command
        .args(guest.machine.options)
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
        .arg("-append")
        .arg(format!(
            "console={} loglevel=5 panic=-1 noirqdebug softlockup_panic=1 \
             softlockup_all_cpu_backtrace=1 sysctl.kernel.panic_on_rcu_stall=1",
            guest.machine.console
        ))
        .arg("-serial")
        .arg(serial_file(&guest.console));
    if let Some(results) = &guest.results {
        command.arg("-serial").arg(serial_file(results));
    }
    command
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
    let mut child = command.spawn().with_context(|| format!("start {qemu}"))?;
    let mut watch = SilenceWatch::new(guest.silence_limit, started);
    let outcome = loop {
        if let Some(status) = child.try_wait()? {
            break if status.success() {
                Ok(started.elapsed())
            } else {
                Err(anyhow::anyhow!(
                    "{qemu} failed ({status}); see {}",
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
        let written = file_len(&guest.console) + guest.results.as_deref().map_or(0, file_len);
        if watch.silent(written, Instant::now()) {
            break Err(Silent(guest.silence_limit).into());
        }
        thread::sleep(POLL);
    };
    if outcome.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    outcome
}

/// Whether a guest has written nothing for longer than its limit, from the bytes its serial
/// ports hold at each poll.
struct SilenceWatch {
    limit: Duration,
    written: u64,
    since: Instant,
}

impl SilenceWatch {
    fn new(limit: Duration, started: Instant) -> Self {
        SilenceWatch {
            limit,
            written: 0,
            since: started,
        }
    }

    fn silent(&mut self, written: u64, now: Instant) -> bool {
        if written != self.written {
            self.written = written;
            self.since = now;
        }
        now.duration_since(self.since) > self.limit
    }
}

/// The length of a file QEMU writes (0 before it exists).
fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |meta| meta.len())
}

fn serial_file(path: &Path) -> String {
    format!("file:{}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_is_silent_only_when_nothing_came_for_longer_than_the_limit() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut watch = SilenceWatch::new(Duration::from_secs(120), start);
        // Booting: nothing yet, within the limit.
        assert!(!watch.silent(0, at(100)));
        assert!(!watch.silent(4096, at(110)));
        // The heartbeat keeps it alive through a long step.
        assert!(!watch.silent(4096, at(229)));
        assert!(!watch.silent(4160, at(230)));
        assert!(!watch.silent(4160, at(350)));
        assert!(watch.silent(4160, at(351)));
        // Never written at all.
        let mut never = SilenceWatch::new(Duration::from_secs(120), start);
        assert!(never.silent(0, at(121)));
    }
}
