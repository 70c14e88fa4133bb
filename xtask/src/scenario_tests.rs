//! `cargo xtask scenario-tests`: runs the real `stalltop record` around each scenario, one at a
//! time, and checks `stalltop report --json` against the ground truth the scenario measured.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{self, Command};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::checks;
use crate::checks::irqoff::IrqoffGaps;
use crate::checks::quiet::HostSteal;
use crate::checks::report::{Report, SyscallMode};
use crate::child::Child;
use crate::interrupt;
use crate::scenario::{self, Name, Outcome};

/// stalltop starts this long before the scenario so its probes are attached.
const ATTACH_WAIT: Duration = Duration::from_millis(1500);
/// stalltop records this much longer than the scenario runs.
const RECORD_EXTRA: Duration = Duration::from_secs(2);
/// After its --duration, stalltop gets this long to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(10);
const REPORT_TIMEOUT: Duration = Duration::from_secs(60);
/// A contaminated run is retried up to this many times, after a pause for the other workload.
const RETRIES: u32 = 3;
const RETRY_PAUSE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(100);

#[derive(clap::Args)]
pub struct Args {
    /// Run one scenario only (noisy-neighbour also runs quiet, its baseline).
    #[arg(long, value_name = "NAME")]
    only: Option<Name>,
    /// stalltop's --syscalls mode for every recording.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = SyscallMode::Sampled)]
    pub syscalls: SyscallMode,
    /// Run the scenarios this many times in a row (e.g. `--only ksoftirqd --repeat 10`: a
    /// check that passes on average but not every time fails here); every run must pass.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
}

/// One scenario's recorded run.
struct Recorded {
    outcome: Outcome,
    report: Report,
}

enum Verdict {
    Pass,
    Fail(String),
    /// Every attempt was contaminated: nothing was checked.
    Inconclusive(String),
    /// The kernel lacks the mechanism the scenario shows: not run, and said so.
    NotApplicable(String),
}

struct Row {
    name: Name,
    attempts: u32,
    verdict: Verdict,
    summary: String,
}

pub fn main(args: &Args) -> Result<()> {
    interrupt::install()?;
    let stalltop = stalltop_binary()?;
    let workdir = std::env::temp_dir().join(format!(
        "stalltop-scenarios-{}-{}",
        args.syscalls.name(),
        process::id()
    ));
    fs::create_dir_all(&workdir).with_context(|| format!("mkdir {}", workdir.display()))?;
    let plan: &[Name] = match args.only {
        None => &[
            Name::Quiet,
            Name::NoisyNeighbour,
            Name::Throttle,
            Name::ThrottleParent,
            Name::SlowSyscall,
            Name::Ksoftirqd,
            Name::Churn,
            Name::Migration,
            Name::ThrottleMoved,
            Name::ThrottleEnqueue,
            Name::MovedSleeper,
        ],
        Some(Name::NoisyNeighbour) => &[Name::Quiet, Name::NoisyNeighbour],
        Some(Name::Quiet) => &[Name::Quiet],
        Some(Name::Throttle) => &[Name::Throttle],
        Some(Name::ThrottleParent) => &[Name::ThrottleParent],
        Some(Name::SlowSyscall) => &[Name::SlowSyscall],
        Some(Name::Ksoftirqd) => &[Name::Ksoftirqd],
        Some(Name::Churn) => &[Name::Churn],
        Some(Name::Migration) => &[Name::Migration],
        Some(Name::ThrottleMoved) => &[Name::ThrottleMoved],
        Some(Name::ThrottleEnqueue) => &[Name::ThrottleEnqueue],
        Some(Name::MovedSleeper) => &[Name::MovedSleeper],
    };
    let mut baseline: Option<Report> = None;
    let mut rows = Vec::new();
    let runs = (0..args.repeat).flat_map(|_| plan.iter().copied());
    for name in runs {
        let row = if name == Name::NoisyNeighbour && baseline.is_none() {
            Row {
                name,
                attempts: 0,
                verdict: Verdict::Fail("not run: no clean quiet baseline to compare with".into()),
                summary: String::new(),
            }
        } else if let Some(reason) = not_applicable(name)? {
            Row {
                name,
                attempts: 0,
                verdict: Verdict::NotApplicable(reason),
                summary: String::new(),
            }
        } else {
            run_checked(&stalltop, &workdir, name, args.syscalls, &mut baseline)
                .with_context(|| format!("recordings so far in {}", workdir.display()))?
        };
        match &row.verdict {
            Verdict::Fail(message) | Verdict::Inconclusive(message) => {
                eprintln!("{name}: FAILED\n{message}");
            }
            Verdict::NotApplicable(reason) => eprintln!("{name}: {reason}"),
            Verdict::Pass => {}
        }
        rows.push(row);
    }
    print_table(&rows);
    let failed = rows
        .iter()
        .filter(|row| !matches!(row.verdict, Verdict::Pass | Verdict::NotApplicable(_)))
        .count();
    if failed > 0 {
        bail!(
            "{failed} of {} scenario checks did not pass; recordings and logs kept in {}",
            rows.len(),
            workdir.display()
        );
    }
    fs::remove_dir_all(&workdir).with_context(|| format!("rm -r {}", workdir.display()))?;
    Ok(())
}

/// Why `name` cannot show what it checks on this kernel, if it cannot.
fn not_applicable(name: Name) -> Result<Option<String>> {
    match name {
        Name::ThrottleEnqueue => scenario::throttle_enqueue::not_applicable(),
        _ => Ok(None),
    }
}

/// How long to wait for the load average to fall under the contamination limit before an
/// attempt: a build that just finished (as in CI) leaves it high for a minute or so.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

pub fn wait_for_load_to_settle() -> Result<()> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let mut said = false;
    loop {
        let load = scenario::host::loadavg_1m()?;
        if load <= checks::contamination::MAX_LOADAVG_BEFORE || Instant::now() > deadline {
            return Ok(());
        }
        if !said {
            eprintln!(
                "waiting up to {SETTLE_TIMEOUT:?} for the load average ({load:.2}) to settle"
            );
            said = true;
        }
        pause(Duration::from_secs(2))?;
    }
}

/// Runs `name` until a clean (uncontaminated) attempt, then checks it; a quiet run's report
/// becomes the baseline for noisy-neighbour.
fn run_checked(
    stalltop: &Path,
    workdir: &Path,
    name: Name,
    syscalls: SyscallMode,
    baseline: &mut Option<Report>,
) -> Result<Row> {
    let mut why = String::new();
    for attempt in 1..=RETRIES + 1 {
        wait_for_load_to_settle()?;
        let recorded = match record(stalltop, workdir, name, syscalls, attempt) {
            Ok(recorded) => recorded,
            Err(err) if interrupt::requested() => return Err(err),
            Err(err) => {
                return Ok(Row {
                    name,
                    attempts: attempt,
                    verdict: Verdict::Fail(format!("{err:#}")),
                    summary: String::new(),
                })
            }
        };
        let outcome = &recorded.outcome;
        let summary = outcome.summary();
        let contamination = &outcome.contamination;
        let gaps = irqoff_gaps(&recorded);
        eprintln!("{name}: attempt {attempt}: {}", gaps.summary());
        let reason = checks::contamination::other_workload(contamination)
            .or_else(|| vm_contamination(name, &recorded, &gaps));
        if let Some(reason) = reason {
            eprintln!("{name}: attempt {attempt} contaminated ({reason}): result discarded");
            why = reason;
            if attempt <= RETRIES {
                eprintln!("{name}: retrying in {RETRY_PAUSE:?}");
                pause(RETRY_PAUSE)?;
            }
            continue;
        }
        let cgroups = &outcome.measured.cgroups;
        let report = &recorded.report;
        eprintln!("{name}: why: {}", checks::why::summary(report));
        let result = match name {
            Name::Quiet => checks::quiet::check(report, cgroups, &host_steal(outcome))
                .map(|excused| {
                    if excused > 0 {
                        eprintln!(
                            "{name}: {excused} waits over the threshold only with the \
                             hypervisor's steal: excused"
                        );
                    }
                })
                .and_then(|()| {
                    checks::irqoff::check(report, &gaps, victim_worst_stall_ns(outcome))
                }),
            Name::NoisyNeighbour => match baseline {
                Some(baseline) => checks::noisy_neighbour::check(
                    &recorded.report,
                    baseline,
                    cgroups,
                    victim_worst_stall_ns(outcome),
                )
                .and_then(|()| match &cgroups.victim {
                    Some(victim) => checks::why::check_noisy(
                        report,
                        baseline,
                        victim,
                        checks::noisy_neighbour::NOISY_COMM,
                    ),
                    None => Err("ground truth names no victim cgroup".into()),
                })
                .and_then(|()| {
                    let named = [&cgroups.victim, &cgroups.noisy];
                    let named: Vec<&str> =
                        named.into_iter().flatten().map(String::as_str).collect();
                    checks::pressure::check(report, &named)
                }),
                None => Err("no quiet baseline".into()),
            },
            // The quota's cgroup is the truth's; the waits checked are the requests' cgroup's
            // (the same one, or throttle-parent's child of it).
            Name::Throttle | Name::ThrottleParent => {
                match (&outcome.measured.cpu_stat, &cgroups.requests) {
                    (Some(truth), Some(requests)) => {
                        checks::throttle::check(report, truth, requests)
                            .and_then(|()| checks::why::check_throttle(report, truth, requests))
                            .and_then(|()| checks::pressure::check(report, &[requests]))
                    }
                    _ => Err(format!(
                        "the {name} scenario measured no cpu.stat or no requests"
                    )),
                }
            }
            Name::SlowSyscall => match (&outcome.injected.slow_syscall, &cgroups.victim) {
                (Some(truth), Some(victim)) => checks::slow_syscall(report, truth)
                    .and_then(|()| checks::why::check_slow_syscall(report, truth, victim)),
                _ => Err("the slow-syscall scenario measured no calls or no victim".into()),
            },
            Name::Churn => match (&outcome.injected.churn, &outcome.measured.victim) {
                (Some(truth), Some(victim)) => {
                    checks::churn::check(report, truth, cgroups, victim.lateness.count)
                }
                _ => Err("the churn scenario measured no cgroups or no victim".into()),
            },
            Name::Migration => match &outcome.injected.migration {
                Some(truth) => checks::migration::check(report, truth),
                None => Err("the migration scenario measured no rounds".into()),
            },
            Name::ThrottleMoved => match &outcome.measured.cpu_stat {
                Some(truth) => checks::throttle_edges::check_moved(report, truth),
                None => Err("the throttle-moved scenario measured no cpu.stat".into()),
            },
            Name::ThrottleEnqueue => match &outcome.injected.throttle_enqueue {
                Some(truth) => checks::throttle_edges::check_enqueue(report, truth),
                None => Err("the throttle-enqueue scenario measured no rounds".into()),
            },
            Name::MovedSleeper => match &outcome.injected.moved_sleeper {
                Some(truth) => checks::moved_sleeper::check(report, truth),
                None => Err("the moved-sleeper scenario measured no sleeps".into()),
            },
            Name::Ksoftirqd => match &outcome.injected.ksoftirqd {
                Some(truth) => {
                    eprintln!(
                        "{name}: {}",
                        checks::ksoftirqd::summary(report, truth, outcome.cpu as u32)
                    );
                    checks::ksoftirqd::check(report, truth, outcome.cpu as u32)
                        .and_then(|()| checks::why::check_ksoftirqd(report, truth.hog_comm))
                }
                None => Err("the ksoftirqd scenario measured no bursts".into()),
            },
        };
        // Whatever the scenario, a long stall's culprit comes with its stack.
        let result = result.and_then(|()| checks::stacks::check(report));
        if name == Name::Quiet {
            *baseline = Some(recorded.report);
        }
        let verdict = match result {
            Ok(()) => Verdict::Pass,
            Err(message) => Verdict::Fail(message),
        };
        return Ok(Row {
            name,
            attempts: attempt,
            verdict,
            summary,
        });
    }
    Ok(Row {
        name,
        attempts: RETRIES + 1,
        verdict: Verdict::Inconclusive(format!(
            "all {} attempts were contaminated, the last by {why}",
            RETRIES + 1
        )),
        summary: String::new(),
    })
}

fn victim_worst_stall_ns(outcome: &Outcome) -> u64 {
    outcome
        .measured
        .victim
        .map_or(0, |victim| victim.worst_stall_ns())
}

/// stalltop's irqs-off gaps on the scenario's CPU while its window was open, judged by the
/// victim where the scenario has one (without one, every gap counts as possible).
fn irqoff_gaps(recorded: &Recorded) -> IrqoffGaps<'_> {
    let outcome = &recorded.outcome;
    let victim_max = match outcome.measured.victim {
        Some(victim) => victim.worst_stall_ns(),
        None => u64::MAX / 4,
    };
    checks::irqoff::sort_by_victim(
        &recorded.report,
        outcome.cpu as u32,
        outcome.start_ns,
        outcome.start_ns + outcome.duration_ns,
        victim_max,
    )
}

/// The hypervisor's steal on the scenario's CPU over its window, for the quiet check.
fn host_steal(outcome: &Outcome) -> HostSteal {
    HostSteal {
        cpu: outcome.cpu as u32,
        start_ns: outcome.start_ns,
        end_ns: outcome.end_ns,
        steal_ns: outcome.contamination.steal_ns,
        tick_ns: scenario::host::tick_ns(),
    }
}

/// Why a run is the VM's rather than stalltop's to answer for: quiet is judged only when no
/// irqs-off gap the victim allows fell in its window (such a gap is the host stopping the vCPU
/// and can make anything late) and the host took at most a fifth of its CPU; noisy-neighbour only
/// when the host's steal cannot explain the victim being later than its longest wait; ksoftirqd
/// only with enough bursts the host left alone; slow-syscall only when each of its own calls is
/// clearly over or under stalltop's thresholds.
fn vm_contamination(name: Name, recorded: &Recorded, gaps: &IrqoffGaps) -> Option<String> {
    let outcome = &recorded.outcome;
    match name {
        Name::Quiet if !gaps.possible.is_empty() => Some(format!(
            "{} irqs-off/hypervisor gaps on CPU {} in the window (the victim was up to {} us \
             late)",
            gaps.possible.len(),
            outcome.cpu,
            victim_worst_stall_ns(outcome) / 1000
        )),
        Name::Quiet => checks::contamination::quiet_steal(
            outcome.contamination.steal_ns,
            outcome.end_ns - outcome.start_ns,
        )
        .or_else(|| {
            checks::contamination::quiet_kernel_holder(
                &recorded.report,
                &outcome.measured.cgroups,
                checks::contamination::is_kernel_thread,
            )
        }),
        Name::Ksoftirqd => outcome
            .injected
            .ksoftirqd
            .as_ref()
            .and_then(checks::contamination::ksoftirqd),
        Name::NoisyNeighbour => checks::contamination::noisy_neighbour(
            &recorded.report,
            &outcome.measured.cgroups,
            victim_worst_stall_ns(outcome),
            outcome.contamination.steal_ns,
        ),
        Name::SlowSyscall => outcome.injected.slow_syscall.as_ref().and_then(|truth| {
            checks::contamination::slow_syscall(&recorded.report.settings, truth)
        }),
        _ => None,
    }
}

/// One attempt: stalltop records while the scenario runs in this process, then reports.
fn record(
    stalltop: &Path,
    workdir: &Path,
    name: Name,
    syscalls: SyscallMode,
    attempt: u32,
) -> Result<Recorded> {
    let stem = format!("{name}-{}-{attempt}", syscalls.name());
    let recording = workdir.join(format!("{stem}.stl"));
    let duration = name.test_duration();
    let record_for = duration + RECORD_EXTRA;
    eprintln!(
        "{name}: attempt {attempt}: stalltop record -> {}",
        recording.display()
    );
    let mut recorder = None;
    // stalltop starts once the scenario's fixture is built, so the build stays out of the
    // recording, and attaches before the window opens.
    let outcome = scenario::run(name, duration, || {
        let mut child = Child::spawn(
            Command::new(stalltop)
                .arg("record")
                .arg("-o")
                .arg(&recording)
                .args(["--syscalls", syscalls.name()])
                .args(["--duration", &stalltop_duration(record_for)]),
            "stalltop record",
            &workdir.join(format!("{stem}.record.log")),
            None,
        )?;
        child.wait_while_running(ATTACH_WAIT)?;
        recorder = Some(child);
        Ok(())
    })?;
    eprintln!(
        "{name}: ground truth {}",
        serde_json::to_string(&outcome).context("serialize the ground truth")?
    );
    recorder
        .context("the scenario finished without starting stalltop")?
        .wait_for_exit(record_for + EXIT_GRACE)?;

    let json = workdir.join(format!("{stem}.report.json"));
    Child::spawn(
        Command::new(stalltop)
            .arg("report")
            .arg(&recording)
            .arg("--json"),
        "stalltop report",
        &workdir.join(format!("{stem}.report.log")),
        Some(&json),
    )?
    .wait_for_exit(REPORT_TIMEOUT)?;
    let text = fs::read_to_string(&json).with_context(|| format!("read {}", json.display()))?;
    let report = Report::parse(&text)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("stalltop report {} --json", recording.display()))?;
    perfetto_decodes(stalltop, workdir, &stem, &recording, &json)?;
    Ok(Recorded { outcome, report })
}

/// `stalltop report --perfetto` of the recording, decoded by Perfetto's own protos
/// (tests/perfetto/decode): every stall of the report on its CPU's track with its fields.
fn perfetto_decodes(
    stalltop: &Path,
    workdir: &Path,
    stem: &str,
    recording: &Path,
    json: &Path,
) -> Result<()> {
    let trace = workdir.join(format!("{stem}.pftrace"));
    Child::spawn(
        Command::new(stalltop)
            .arg("report")
            .arg(recording)
            .arg("--perfetto")
            .arg(&trace),
        "stalltop report --perfetto",
        &workdir.join(format!("{stem}.perfetto.log")),
        None,
    )?
    .wait_for_exit(REPORT_TIMEOUT)?;
    let decode = crate::workspace::workspace_root().join("tests/perfetto/decode");
    let output = Command::new(&decode)
        .arg(&trace)
        .arg(json)
        .output()
        .with_context(|| format!("running {}", decode.display()))?;
    if !output.status.success() {
        bail!(
            "the Perfetto trace {} does not hold the report's stalls:\n{}",
            trace.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    eprintln!(
        "perfetto: {}",
        String::from_utf8_lossy(&output.stdout).trim()
    );
    Ok(())
}

/// Sleeps for `delay` unless SIGINT/SIGTERM arrives.
pub fn pause(delay: Duration) -> Result<()> {
    let until = Instant::now() + delay;
    while Instant::now() < until {
        if interrupt::requested() {
            bail!("interrupted by a signal");
        }
        thread::sleep(POLL);
    }
    Ok(())
}

pub fn stalltop_binary() -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace::workspace_root().join("target"));
    let binary = target.join("release/stalltop");
    if !binary.is_file() {
        bail!(
            "{} does not exist: run `cargo build --release` first",
            binary.display()
        );
    }
    Ok(binary)
}

/// `--duration` as stalltop takes it: "7s", or "7500ms" when not whole seconds.
fn stalltop_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<16} {:<12} {:>8}  details",
        "scenario", "result", "attempts"
    );
    for row in rows {
        let (result, detail) = match &row.verdict {
            Verdict::Pass => ("PASS", row.summary.as_str()),
            Verdict::Fail(message) => ("FAIL", message.lines().next().unwrap_or_default()),
            Verdict::Inconclusive(message) => ("INCONCLUSIVE", message.as_str()),
            Verdict::NotApplicable(reason) => ("N/A", reason.as_str()),
        };
        println!(
            "{:<16} {result:<12} {:>8}  {detail}",
            row.name.as_str(),
            row.attempts
        );
    }
}
