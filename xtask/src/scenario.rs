//! `cargo xtask scenario`: real, bounded scheduler stalls injected on CPU 1 by threads of this
//! process in v1 cpu cgroups (one file per scenario); each run prints its own ground truth as one
//! JSON object on stdout, diagnostics on stderr.

mod burstreq;
mod cgroup;
pub mod churn;
pub mod command;
mod hog;
pub mod host;
pub mod ksoftirqd;
mod memcg;
pub mod migration;
pub mod moved_sleeper;
mod netns;
mod noisy_neighbour;
pub mod pods;
mod quiet;
mod setup;
pub mod slow_syscall;
mod stats;
mod task;
mod throttle;
pub mod throttle_enqueue;
mod throttle_moved;
mod victim;
pub mod victim_log;

use std::fmt;
use std::time::Duration;

use anyhow::{bail, ensure, Result};
use clap::ValueEnum;
use serde::Serialize;

use crate::interrupt;
use burstreq::RequestStats;
use cgroup::{CpuCgroup, CpuStat};
use host::Contamination;
/// CLOCK_MONOTONIC, the clock of the ground truths' times (and of stalltop's).
pub use task::monotonic_ns;
use task::Window;
use victim::VictimStats;

pub use stats::Percentiles;

/// The CPU every scenario thread is pinned to; CPU 0 stays free for the rest of the VM.
pub const CPU: usize = 1;
/// The length `scenario-tests` uses; keep `Args::duration`'s default_value in step.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(5);
/// Hard cap on any scenario's busy loops (safety on a shared VM).
const MAX_DURATION: Duration = Duration::from_secs(30);
/// Percentiles need a few thousand victim periods.
const MIN_DURATION: Duration = Duration::from_secs(1);
/// A scenario with a quota keeps its idle cgroup this long after its final cpu.stat read, so a
/// recorder that polls cpu.stat sees the final counters before the cgroup disappears.
const LINGER: Duration = Duration::from_secs(1);

#[derive(clap::Args)]
pub struct Args {
    /// Which stall to inject.
    name: Name,
    /// How long the load runs (e.g. 5s, 1500ms; at most 30s).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    duration: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Name {
    /// A 1 ms victim waker behind two hogs of 10x its cgroup's weight (docs/cases.md, case 4).
    NoisyNeighbour,
    /// Bursty 4-thread requests in a cgroup with a 15 ms / 100 ms CFS quota (case 3).
    Throttle,
    /// The same requests in a child cgroup without a quota, the quota on its parent.
    ThrottleParent,
    /// The victim and the requests alone, no hogs and no quota: the baseline.
    Quiet,
    /// Long in-kernel syscalls with known files (smaps, munmap, getdents64, force_empty,
    /// fadvise) next to the victim (cases 1, 2, 5).
    SlowSyscall,
    /// NET_RX saturating CPU 1 while a heavy CFS hog bursts: ksoftirqd/1 waits out each burst
    /// (case 1's mechanism).
    Ksoftirqd,
    /// The victim beside a thread that creates, runs in and removes thousands of short-lived
    /// cgroups (pod churn): more than stalltop's kernel maps hold.
    Churn,
    /// A waiter woken behind a real-time hog on CPU 0, moved to CPU 1 behind another while it
    /// waits (case 4's tail: load balancing moves waiting tasks).
    Migration,
    /// A 3-thread request loop on both CPUs under a 12 ms / 100 ms quota: its throttled waits
    /// move between the CPUs.
    ThrottleMoved,
    /// Sleepers woken into a group whose quota another CPU spent, on a CPU where the group had
    /// not run: throttled as they are enqueued (before Linux 6.18).
    ThrottleEnqueue,
    /// A sleeper whose affinity flips while it sleeps, beside busy CPUs: a sleep moved with its
    /// task (delayed dequeue, 6.12+) is no wait.
    MovedSleeper,
}

impl Name {
    pub fn as_str(self) -> &'static str {
        match self {
            Name::NoisyNeighbour => "noisy-neighbour",
            Name::Throttle => "throttle",
            Name::ThrottleParent => "throttle-parent",
            Name::Quiet => "quiet",
            Name::SlowSyscall => "slow-syscall",
            Name::Ksoftirqd => "ksoftirqd",
            Name::Churn => "churn",
            Name::Migration => "migration",
            Name::ThrottleMoved => "throttle-moved",
            Name::ThrottleEnqueue => "throttle-enqueue",
            Name::MovedSleeper => "moved-sleeper",
        }
    }

    /// How long `scenario-tests` runs it: churn needs more cgroups than the maps hold, and the
    /// waits moved by the scheduler or the kernel's delayed dequeue come a few a second.
    pub fn test_duration(self) -> Duration {
        match self {
            Name::Churn => Duration::from_secs(20),
            Name::ThrottleMoved => Duration::from_secs(10),
            Name::MovedSleeper => Duration::from_secs(8),
            _ => DEFAULT_DURATION,
        }
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scenario's ground truth, measured by the scenario itself.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub name: &'static str,
    pub cpu: usize,
    pub duration_ns: u64,
    /// CLOCK_MONOTONIC when the load started and after it was cleaned up.
    pub start_ns: u64,
    pub end_ns: u64,
    #[serde(flatten)]
    pub measured: Measured,
    #[serde(flatten)]
    pub injected: Injected,
    pub contamination: Contamination,
}

/// What one scenario's workloads measured.
#[derive(Debug, Default, Serialize)]
pub struct Measured {
    pub cgroups: Cgroups,
    pub victim: Option<VictimStats>,
    pub requests: Option<RequestStats>,
    /// cpu.stat delta of the requests' cgroup (throttle-parent: of its parent, which has the
    /// quota), read at start and end by the scenario.
    pub cpu_stat: Option<CpuStatDelta>,
}

/// What the stall scenarios (slow-syscall, ksoftirqd) measured besides `Measured`.
#[derive(Debug, Default, Serialize)]
pub struct Injected {
    /// slow-syscall: the culprit's calls as it timed them.
    pub slow_syscall: Option<slow_syscall::Truth>,
    /// ksoftirqd: the hog's bursts, the flood and CPU 1's softnet counters.
    pub ksoftirqd: Option<ksoftirqd::Truth>,
    /// churn: the short-lived cgroups made.
    pub churn: Option<churn::Truth>,
    /// migration: the waiter's rounds as it timed them.
    pub migration: Option<migration::Truth>,
    /// throttle-enqueue: the rounds' cgroups and how long each sleeper was kept off its CPU.
    pub throttle_enqueue: Option<throttle_enqueue::Truth>,
    /// moved-sleeper: what the sleeper measured.
    pub moved_sleeper: Option<moved_sleeper::Truth>,
}

/// The cgroups a scenario ran threads in, relative to the cpu hierarchy root ("/stalltop_victim").
#[derive(Debug, Default, Serialize)]
pub struct Cgroups {
    pub victim: Option<String>,
    pub noisy: Option<String>,
    pub requests: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct CpuStatDelta {
    pub cgroup: String,
    /// -1 when the cgroup had no quota.
    pub quota_us: i64,
    pub period_us: i64,
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

impl Outcome {
    /// One line of the key numbers, for progress output and the summary table.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(victim) = &self.measured.victim {
            let l = victim.lateness;
            parts.push(format!(
                "victim late p50/p99/max {}/{}/{} ms, stopped at work up to {} ms",
                ms(l.p50_ns),
                ms(l.p99_ns),
                ms(l.max_ns),
                ms(victim.longest_work_gap_ns)
            ));
        }
        if let Some(requests) = &self.measured.requests {
            let l = requests.latency;
            parts.push(format!(
                "{} requests p50/max {}/{} ms",
                l.count,
                ms(l.p50_ns),
                ms(l.max_ns)
            ));
        }
        if let Some(truth) = &self.injected.churn {
            parts.push(format!("{} short-lived cgroups", truth.cgroups));
        }
        if let Some(truth) = &self.injected.migration {
            let moved = truth.rounds.iter().filter(|r| r.ran_cpu == CPU).count();
            let longest = truth.rounds.iter().map(|r| r.wait_ns()).max().unwrap_or(0);
            parts.push(format!(
                "{moved} of {} waits moved to CPU {CPU}, longest {} ms",
                truth.rounds.len(),
                ms(longest)
            ));
        }
        if let Some(truth) = &self.injected.throttle_enqueue {
            let kept: Vec<u64> = truth
                .rounds
                .iter()
                .flat_map(|r| r.kept_ns.clone())
                .collect();
            parts.push(format!(
                "{} wakeups, kept off their CPU p50/max {}/{} ms",
                kept.len(),
                ms(Percentiles::of(kept.clone()).p50_ns),
                ms(kept.iter().copied().max().unwrap_or(0))
            ));
        }
        if let Some(truth) = &self.injected.moved_sleeper {
            parts.push(format!(
                "{} sleeps, woke at most {} ms late, stopped at work up to {} ms",
                truth.sleeps,
                ms(truth.latest_wakeup_ns),
                ms(truth.longest_work_gap_ns)
            ));
        }
        if let Some(truth) = &self.injected.slow_syscall {
            for call in &truth.calls {
                let slowest = call.slowest();
                parts.push(format!(
                    "{} {} ms (on-CPU {}, runq {})",
                    call.syscall,
                    ms(slowest.wall_ns),
                    ms(slowest.oncpu_ns),
                    ms(slowest.runq_wait_ns)
                ));
            }
            parts.push(format!(
                "{} fadvise64 p50/max {}/{} ms",
                truth.fadvise.wall.count,
                ms(truth.fadvise.wall.p50_ns),
                ms(truth.fadvise.wall.max_ns)
            ));
        }
        if let Some(truth) = &self.injected.ksoftirqd {
            let interrupted: u64 = truth.bursts.iter().map(|b| b.interrupted_ns).sum();
            parts.push(format!(
                "{} bursts, hog interrupted {} ms; {} packets sent, CPU 1 processed {}",
                truth.bursts.len(),
                ms(interrupted),
                truth.flood.sent,
                truth.softnet.processed
            ));
        }
        if let Some(stat) = &self.measured.cpu_stat {
            parts.push(format!(
                "throttled {}/{} periods {} ms",
                stat.nr_throttled,
                stat.nr_periods,
                ms(stat.throttled_ns)
            ));
        }
        parts.push(format!(
            "foreign forks {}, foreign CPU {} ms, load {:.2}, CPU {} steal {} ms",
            self.contamination.foreign_forks,
            self.contamination.foreign_cpu_ns / 1_000_000,
            self.contamination.loadavg_before,
            self.cpu,
            self.contamination.steal_ns / 1_000_000
        ));
        parts.join("; ")
    }
}

fn ms(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e6)
}

impl Cgroups {
    pub fn all(&self) -> impl Iterator<Item = &str> {
        [&self.victim, &self.noisy, &self.requests]
            .into_iter()
            .filter_map(|cgroup| cgroup.as_deref())
    }
}

impl CpuStatDelta {
    fn since(cgroup: &CpuCgroup, start: CpuStat) -> Result<Self> {
        let delta = cgroup.cpu_stat()?.since(start);
        Ok(CpuStatDelta {
            cgroup: cgroup.path().to_owned(),
            quota_us: cgroup.quota_us()?,
            period_us: cgroup.period_us()?,
            nr_periods: delta.nr_periods,
            nr_throttled: delta.nr_throttled,
            throttled_ns: delta.throttled_ns,
        })
    }
}

pub fn main(args: &Args) -> Result<()> {
    interrupt::install()?;
    let outcome = run(args.name, args.duration, || Ok(()))?;
    println!("{}", serde_json::to_string_pretty(&outcome)?);
    Ok(())
}

/// What a scenario builds before its window opens (slow to build, so kept out of a recording).
enum Fixture {
    None,
    SlowSyscall(slow_syscall::Fixture),
    Ksoftirqd(ksoftirqd::Fixture),
}

impl Fixture {
    fn prepare(name: Name, duration: Duration) -> Result<Self> {
        Ok(match name {
            Name::NoisyNeighbour
            | Name::Throttle
            | Name::ThrottleParent
            | Name::Quiet
            | Name::Churn
            | Name::Migration
            | Name::ThrottleMoved
            | Name::ThrottleEnqueue
            | Name::MovedSleeper => Fixture::None,
            Name::SlowSyscall => Fixture::SlowSyscall(slow_syscall::Fixture::prepare(duration)?),
            Name::Ksoftirqd => Fixture::Ksoftirqd(ksoftirqd::Fixture::prepare(duration)?),
        })
    }
}

/// Runs one scenario to completion in this process; every thread is joined and every cgroup,
/// file and netns removed before it returns, on success, error, panic or SIGINT/SIGTERM alike.
/// `ready` is called once the scenario's fixture is built, just before the window opens
/// (`scenario-tests` starts stalltop there, so the build stays out of the recording).
pub fn run(name: Name, duration: Duration, ready: impl FnOnce() -> Result<()>) -> Result<Outcome> {
    ensure!(
        (MIN_DURATION..=MAX_DURATION).contains(&duration),
        "scenario duration {duration:?} is outside {MIN_DURATION:?}..={MAX_DURATION:?}"
    );
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    ensure!(
        euid == 0,
        "scenarios create cgroups under {}: run as root",
        cgroup::CPU_ROOT
    );
    task::ensure_cpu_allowed(CPU)?;
    let _lock = cgroup::ScenarioLock::acquire()?;
    let fixture = Fixture::prepare(name, duration)?;
    if interrupt::requested() {
        bail!("scenario {name} interrupted by a signal while building its fixture (removed)");
    }
    ready()?;
    let before = host::Before::take(CPU)?;
    eprintln!("scenario {name}: {duration:?} on CPU {CPU}");
    let window = Window::open(CPU, duration);
    let (measured, injected) = match fixture {
        Fixture::None => match name {
            Name::NoisyNeighbour => (noisy_neighbour::run(&window)?, Injected::default()),
            Name::Throttle => (throttle::run(&window)?, Injected::default()),
            Name::ThrottleParent => (throttle::run_under_parent(&window)?, Injected::default()),
            Name::Quiet => (quiet::run(&window)?, Injected::default()),
            Name::Churn => churn::run(&window)?,
            Name::Migration => migration::run(&window)?,
            Name::ThrottleMoved => (throttle_moved::run(&window)?, Injected::default()),
            Name::ThrottleEnqueue => throttle_enqueue::run(&window)?,
            Name::MovedSleeper => moved_sleeper::run(&window)?,
            Name::SlowSyscall | Name::Ksoftirqd => unreachable!("{name} has a fixture"),
        },
        Fixture::SlowSyscall(fixture) => slow_syscall::run(&window, fixture)?,
        Fixture::Ksoftirqd(fixture) => ksoftirqd::run(&window, fixture)?,
    };
    let end_ns = task::monotonic_ns();
    if interrupt::requested() {
        bail!("scenario {name} interrupted by a signal (threads stopped, cgroups removed)");
    }
    let outcome = Outcome {
        name: name.as_str(),
        cpu: CPU,
        duration_ns: duration.as_nanos() as u64,
        start_ns: window.start_ns(),
        end_ns,
        measured,
        injected,
        contamination: before.contamination(window.spawned())?,
    };
    eprintln!("scenario {name}: {}", outcome.summary());
    Ok(outcome)
}

/// Parses "5s" or "1500ms" (a unit is required, as in stalltop's CLI), within the scenario limits.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, Duration::from_millis(1))
    } else if let Some(s) = text.strip_suffix('s') {
        (s, Duration::from_secs(1))
    } else {
        return Err(format!("{text:?} needs a unit: 5s or 1500ms"));
    };
    let count: u32 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 5s or 1500ms"))?;
    let duration = unit * count;
    if !(MIN_DURATION..=MAX_DURATION).contains(&duration) {
        return Err(format!(
            "{text} is outside {MIN_DURATION:?}..={MAX_DURATION:?} (hard cap on a shared VM)"
        ));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_parsed_and_capped() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert!(parse_duration("7").is_err());
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("31s").is_err());
        assert!(parse_duration("500ms").is_err());
        assert!(parse_duration("five").is_err());
    }
}
