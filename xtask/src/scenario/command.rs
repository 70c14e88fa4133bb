//! External programs a fixture needs (`ip`, `tc`, `clang`): run with a time limit, killed when
//! it passes, failures reported with the program's own stderr.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Every command a fixture runs finishes well within this (clang takes ~0.2 s).
pub const TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(10);

/// Fails with a message naming `program` when it is not on PATH.
pub fn require(program: &str, why: &str) -> Result<()> {
    let found = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false);
    if !found {
        bail!("`{program}` is not on PATH: {why}");
    }
    Ok(())
}

/// Runs `program args...` to completion within `TIMEOUT`; returns its stdout.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let line = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start `{line}`"))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("wait for `{line}`"))?
        {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{line}` still running after {TIMEOUT:?}: killed");
        }
        thread::sleep(POLL);
    };
    // The outputs are small (error messages, a few lines); the pipes never filled up.
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).ok();
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut stderr).ok();
    }
    if !status.success() {
        bail!("`{line}` failed ({status}): {}", stderr.trim());
    }
    Ok(stdout)
}
