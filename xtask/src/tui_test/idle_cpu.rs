//! `cargo xtask tui-test --idle-cpu N`: the live view's own CPU use at the default 1 s refresh,
//! every thread's user and system time from /proc, against a budget.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use super::tmux::Tmux;
use super::SIZES;
use crate::interrupt;

/// Warm-up before the CPU measurement starts.
const WARM_UP: Duration = Duration::from_secs(5);
/// The live view's CPU budget at 1 s refresh, percent of one core.
const CPU_TARGET_PERCENT: f64 = 1.0;
const POLL: Duration = Duration::from_millis(250);

/// The live view's own CPU (utime + stime of every thread) over `length` at 1 s refresh.
pub fn measure(stalltop: &Path, workdir: &Path, length: Duration) -> Result<()> {
    let (width, height) = SIZES[0];
    let tmux = Tmux::start(workdir, width, height)?;
    let run = tmux.launch(stalltop, &[], &workdir.join("stalltop-idle.log"))?;
    thread::sleep(WARM_UP);
    let loadavg = || {
        fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let load_before = loadavg();
    let before = thread_ticks(run.pid)?;
    let started = Instant::now();
    while started.elapsed() < length {
        ensure!(!interrupt::requested(), "interrupted");
        thread::sleep(POLL);
    }
    let after = thread_ticks(run.pid)?;
    let seconds = started.elapsed().as_secs_f64();
    let hz = procfs::ticks_per_second() as f64;
    let percent = |ticks: u64| ticks as f64 / hz / seconds * 100.0;
    let (mut user, mut system) = (0.0, 0.0);
    for (tid, (name, (u1, s1))) in &after {
        let (u0, s0) = before.get(tid).map_or((0, 0), |(_, t)| *t);
        let (u, s) = (percent(u1 - u0), percent(s1 - s0));
        eprintln!("tui-test:   thread {name}: user {u:.2}% system {s:.2}%");
        user += u;
        system += s;
    }
    eprintln!(
        "tui-test: live view CPU over {seconds:.0}s at 1s refresh: user {user:.2}% + system \
         {system:.2}% = {:.2}% of one core (target <= {CPU_TARGET_PERCENT}%); load average \
         {load_before} before, {} after",
        user + system,
        loadavg()
    );
    run.quit(&tmux)?;
    ensure!(
        user + system <= CPU_TARGET_PERCENT,
        "the live view used {:.2}% of a core, over the {CPU_TARGET_PERCENT}% target",
        user + system
    );
    Ok(())
}

/// Thread id -> (name, (utime, stime) in clock ticks).
type ThreadTicks = BTreeMap<i32, (String, (u64, u64))>;

/// The CPU times of every thread of process `pid`.
fn thread_ticks(pid: u32) -> Result<ThreadTicks> {
    let process =
        procfs::process::Process::new(pid as i32).with_context(|| format!("/proc/{pid}"))?;
    let mut threads = ThreadTicks::new();
    for task in process
        .tasks()
        .with_context(|| format!("/proc/{pid}/task"))?
        .flatten()
    {
        if let Ok(stat) = task.stat() {
            threads.insert(task.tid, (stat.comm, (stat.utime, stat.stime)));
        }
    }
    Ok(threads)
}
