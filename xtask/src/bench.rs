//! `cargo xtask bench`: what stalltop costs, measured in one run as
//! interleaved rounds, each running every workload under every variant in
//! a rotating order: nothing attached, empty programs on stalltop's
//! tracepoints (the floor), minimal reference programs
//! (xtask/floor/bpf/minimal.bpf.c), `stalltop record` in each syscall mode
//! and, when their binaries are given, bcc libbpf-tools' runqlat, syscount
//! and syscount -L. Slowdowns are paired by round against nothing
//! attached. Each attached variant runs its workload twice: timed with BPF
//! run-time statistics off (they add a clock pair to every invocation),
//! then with them on for each program's ns per invocation. The cost guard
//! section (bench/guard.rs) holds the heaviest workload for a while under
//! `stalltop serve --syscalls exact` with and without a CPU budget.

mod guard;
mod guard_report;
mod probe_stats;
mod report;
mod stats;
mod tool;
mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::{interrupt, prereqs};
use probe_stats::{cost_by_tracepoint, process_cpu_s, program_counters, program_names, StatsOn};
use report::{IdleCpu, Results, Run};
use tool::{Binaries, Variant, VARIANTS};
use workload::{RedisServer, Workload, WORKLOADS};

#[derive(clap::Args)]
pub struct Args {
    /// Interleaved rounds (each runs every variant of every workload once).
    #[arg(long, default_value_t = 8)]
    rounds: u32,
    /// A directory holding bcc libbpf-tools' `runqlat` and `syscount`
    /// binaries, measured beside stalltop (docs/performance.md says how to
    /// build them). Without it their columns are left out.
    #[arg(long, value_name = "DIR")]
    references: Option<PathBuf>,
    /// Also measure `stalltop record`'s CPU for this long with no workload
    /// running; 0 skips it.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    idle_seconds: u64,
    /// Also write the markdown report to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Run only this workload (repeatable; default: every one). With fewer workloads and
    /// variants, more rounds fit in the same time: a sharper median for one question.
    #[arg(long = "workload", value_name = "NAME")]
    workloads: Vec<Workload>,
    /// Measure only this variant beside nothing attached (repeatable; default: every one,
    /// the references when --references names them).
    #[arg(long = "variant", value_name = "NAME")]
    variants: Vec<Variant>,
    /// The cost guard section: in each round, sched messaging back to back for this long
    /// under nothing attached, `stalltop serve --syscalls exact --max-cpu off` and the same
    /// with --guard-max-cpu; 0 skips it. At least 30 (three steps and a window after them).
    #[arg(long, default_value_t = 40, value_name = "SECONDS")]
    guard_seconds: u64,
    /// The cost guard section's budget, in percent of the node (serve's default: 2).
    #[arg(long, default_value_t = 2.0, value_name = "PERCENT")]
    guard_max_cpu: f64,
    /// Only the cost guard section: no variants, no idle measurement.
    #[arg(long)]
    guard_only: bool,
}

pub fn main(args: &Args) -> Result<()> {
    interrupt::install()?;
    prereqs::ensure()?;
    let root = crate::workspace::workspace_root();
    let binaries = Binaries {
        stalltop: root.join("target/release/stalltop"),
        floor: root.join("target/release/bench-floor"),
        references: args.references.clone(),
    };
    for binary in [&binaries.stalltop, &binaries.floor] {
        if !binary.exists() {
            bail!(
                "{} is missing: run `cargo build --release -p stalltop -p bench-floor` first",
                binary.display()
            );
        }
    }
    if let Some(dir) = &binaries.references {
        for name in ["runqlat", "syscount"] {
            if !dir.join(name).exists() {
                bail!("{} is missing from --references", dir.join(name).display());
            }
        }
    }
    if binaries.references.is_none() {
        if let Some(reference) = args.variants.iter().find(|v| v.is_reference()) {
            bail!(
                "--variant {} needs --references DIR with bcc libbpf-tools' binaries",
                reference.name()
            );
        }
    }
    if args.guard_seconds != 0 && args.guard_seconds < 30 {
        bail!("--guard-seconds must be 0 or at least 30");
    }
    if args.guard_only && args.guard_seconds == 0 {
        bail!("--guard-only with --guard-seconds 0 measures nothing");
    }
    let variants: Vec<Variant> = VARIANTS
        .into_iter()
        .filter(|v| !v.is_reference() || binaries.references.is_some())
        .filter(|v| *v == Variant::Nothing || args.variants.is_empty() || args.variants.contains(v))
        .collect();
    let workloads: Vec<Workload> = WORKLOADS
        .into_iter()
        .filter(|w| !args.guard_only && (args.workloads.is_empty() || args.workloads.contains(w)))
        .collect();
    let (runs, idle) = if args.guard_only {
        (Runs::new(), None)
    } else {
        let scratch = std::env::temp_dir().join(format!("stalltop-bench-{}", std::process::id()));
        std::fs::create_dir_all(&scratch)?;
        let recording = scratch.join("bench.stl");
        let measured = measure_all(args, &binaries, &workloads, &variants, &recording);
        let _ = std::fs::remove_dir_all(&scratch);
        measured?
    };
    let cpus = thread::available_parallelism()?.get();
    let guard = (args.guard_seconds > 0)
        .then(|| {
            guard::measure(
                &binaries.stalltop,
                args.rounds,
                args.guard_seconds,
                args.guard_max_cpu,
                cpus,
            )
        })
        .transpose()?;
    let results = Results {
        rounds: args.rounds,
        machine: machine()?,
        workloads,
        variants,
        runs,
        idle,
        guard,
    };
    let report = report::render(&results);
    print!("{report}");
    if let Some(out) = &args.out {
        std::fs::write(out, &report).with_context(|| format!("writing {}", out.display()))?;
    }
    if results
        .guard
        .as_ref()
        .is_some_and(|g| !guard_report::passed(g))
    {
        bail!("the cost guard did not hold its budget (the report says where)");
    }
    Ok(())
}

type Runs = BTreeMap<(Workload, Variant), Vec<Run>>;

fn measure_all(
    args: &Args,
    binaries: &Binaries,
    workloads: &[Workload],
    variants: &[Variant],
    recording: &Path,
) -> Result<(Runs, Option<IdleCpu>)> {
    let idle = if args.idle_seconds > 0 {
        eprintln!("stalltop record alone for {} s", args.idle_seconds);
        Some(idle_cpu(binaries, recording, args.idle_seconds)?)
    } else {
        None
    };
    let redis = RedisServer::start()?;
    // The first run of each is slower (a fresh server's keys and memory,
    // binaries and page cache): one untimed run before the rounds.
    for workload in workloads {
        workload.run(&redis)?;
    }
    let mut runs = Runs::new();
    for round in 0..args.rounds {
        for &workload in workloads {
            // Rotate the order each round so no variant always goes first.
            for i in 0..variants.len() {
                let variant = variants[(i + round as usize) % variants.len()];
                if interrupt::requested() {
                    bail!("interrupted");
                }
                let run = run_once(workload, variant, binaries, &redis, recording)
                    .with_context(|| format!("{} under {}", workload.name(), variant.name()))?;
                eprintln!(
                    "round {}/{}: {:<55} {:<18} {:.3}s{}",
                    round + 1,
                    args.rounds,
                    workload.name(),
                    variant.name(),
                    run.outcome.wall_s,
                    run.outcome
                        .requests_per_s
                        .map_or(String::new(), |r| format!(" {r:.0} req/s"))
                );
                runs.entry((workload, variant)).or_default().push(run);
            }
        }
    }
    Ok((runs, idle))
}

fn run_once(
    workload: Workload,
    variant: Variant,
    binaries: &Binaries,
    redis: &RedisServer,
    recording: &Path,
) -> Result<Run> {
    let Some(tool) = tool::attach(variant, binaries, recording)? else {
        return Ok(Run {
            outcome: workload.run(redis)?,
            ..Run::default()
        });
    };
    let measured = measure(workload, redis, tool.pid());
    let stopped = tool.stop();
    let mut run = measured?;
    stopped?;
    if variant.is_stalltop() {
        run.lost_events = tool::lost_events(&binaries.stalltop, recording)?;
    }
    Ok(run)
}

/// Time the workload with the tool of process `pid` attached, then run it
/// again with run-time statistics on for what its programs did.
fn measure(workload: Workload, redis: &RedisServer, pid: u32) -> Result<Run> {
    let cpu_before = process_cpu_s(pid)?;
    let outcome = workload.run(redis)?;
    let tool_cpu_s = process_cpu_s(pid)? - cpu_before;
    let stats = StatsOn::enable()?;
    let before = program_counters(pid)?;
    workload.run(redis)?;
    let after = program_counters(pid)?;
    drop(stats);
    Ok(Run {
        outcome,
        programs: cost_by_tracepoint(&before, &after, &program_names()?),
        tool_cpu_s,
        lost_events: 0,
    })
}

/// `stalltop record`'s CPU over `seconds` with no workload running.
fn idle_cpu(binaries: &Binaries, recording: &Path, seconds: u64) -> Result<IdleCpu> {
    let tool =
        tool::attach(Variant::Stalltop, binaries, recording)?.context("stalltop is a tool")?;
    let cpu_before = process_cpu_s(tool.pid())?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    while Instant::now() < deadline && !interrupt::requested() {
        thread::sleep(Duration::from_millis(200));
    }
    let cpu_s = process_cpu_s(tool.pid())? - cpu_before;
    let elapsed = start.elapsed().as_secs_f64();
    tool.stop()?;
    if interrupt::requested() {
        bail!("interrupted");
    }
    Ok(IdleCpu {
        seconds: elapsed,
        cpu_s,
    })
}

/// The kernel release and the CPU count.
fn machine() -> Result<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")?;
    let cpus = thread::available_parallelism()?.get();
    Ok(format!("Linux {}, {cpus} CPUs", release.trim()))
}
