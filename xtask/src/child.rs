//! Child processes of the tests (stalltop, Prometheus, reports): output to a log file, killed
//! and reaped when dropped, and by the kernel if xtask dies.

use std::fs::{self, File};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{self, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::interrupt;

const POLL: Duration = Duration::from_millis(100);

/// A child process that is SIGKILLed and reaped when dropped, and by the kernel if xtask dies.
pub struct Child {
    inner: process::Child,
    what: &'static str,
    log: PathBuf,
    started: Instant,
}

impl Child {
    /// Spawns `command` with stderr (and stdout unless `stdout` is given) going to `log`.
    pub fn spawn(
        command: &mut Command,
        what: &'static str,
        log: &Path,
        stdout: Option<&Path>,
    ) -> Result<Self> {
        let log_file = File::create(log).with_context(|| format!("create {}", log.display()))?;
        let out_file = match stdout {
            Some(path) => {
                File::create(path).with_context(|| format!("create {}", path.display()))?
            }
            None => log_file.try_clone()?,
        };
        // SAFETY: the closure runs between fork and exec and only makes the async-signal-safe
        // prctl syscall.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let inner = command
            .stdin(Stdio::null())
            .stdout(out_file)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("start {what}"))?;
        Ok(Child {
            inner,
            what,
            log: log.to_owned(),
            started: Instant::now(),
        })
    }

    /// Sleeps for `delay`, failing if the child exits meanwhile.
    pub fn wait_while_running(&mut self, delay: Duration) -> Result<()> {
        let until = Instant::now() + delay;
        while Instant::now() < until {
            if let Some(status) = self.inner.try_wait()? {
                bail!("{} exited early ({status}){}", self.what, self.log_tail());
            }
            self.poll()?;
        }
        Ok(())
    }

    /// Waits until the child exits successfully, at most `limit` after it started; kills it
    /// (on drop) otherwise.
    pub fn wait_for_exit(mut self, limit: Duration) -> Result<()> {
        loop {
            if let Some(status) = self.inner.try_wait()? {
                if !status.success() {
                    bail!("{} failed ({status}){}", self.what, self.log_tail());
                }
                return Ok(());
            }
            if self.started.elapsed() > limit {
                bail!(
                    "{} still running {limit:?} after it started: killed{}",
                    self.what,
                    self.log_tail()
                );
            }
            self.poll()?;
        }
    }

    pub fn id(&self) -> u32 {
        self.inner.id()
    }

    /// Sends SIGTERM and waits until the child exits successfully, at most `grace` from now.
    pub fn stop(mut self, grace: Duration) -> Result<()> {
        let pid = libc::pid_t::try_from(self.inner.id()).context("pid out of range")?;
        // SAFETY: kill has no memory preconditions; the pid is our unreaped child's.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(io::Error::last_os_error()).context("kill -TERM");
        }
        self.started = Instant::now();
        self.wait_for_exit(grace)
    }

    fn poll(&self) -> Result<()> {
        if interrupt::requested() {
            bail!("interrupted by a signal while {} was running", self.what);
        }
        thread::sleep(POLL);
        Ok(())
    }

    fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        format!("\n--- last lines of {} ---\n{tail}", self.log.display())
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Ok(None) = self.inner.try_wait() {
            let _ = self.inner.kill();
            let _ = self.inner.wait();
        }
    }
}
