//! `cargo xtask bench`: what stalltop costs, measured in one run as
//! interleaved rounds of variants per workload: nothing attached, empty
//! tp_btf programs on the same tracepoints (the floor), minimal programs
//! doing the core of stalltop's measures there the plain way (the
//! reference, xtask/floor/bpf/minimal.bpf.c), and `stalltop record` with
//! and without its syscall hooks. Each attached variant runs the workload twice: once
//! timed with BPF run-time statistics off (they add a clock pair to every
//! invocation), once with them on for per-program ns per invocation.
//! Reports those, stalltop's user-space CPU, probe events/s, lost events
//! and the workload's slowdown, as medians with min-max.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::interrupt;

/// stalltop attaches within this long of starting.
const ATTACH_WAIT: Duration = Duration::from_millis(1500);
const GETPID_CALLS: u32 = 2_000_000;

#[derive(clap::Args)]
pub struct Args {
    /// Interleaved rounds (each runs every variant of every workload once).
    #[arg(long, default_value_t = 10)]
    rounds: u32,
    /// Also write the markdown report to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Workload {
    /// `perf bench sched messaging -g 5 -l 1000`: scheduler and
    /// syscall heavy (about 60k switches, 4M syscalls).
    Messaging,
    /// `perf bench sched pipe -l 100000`: two tasks handing a token back and
    /// forth, about 200k context switches with short waits: the ordinary
    /// path of the scheduler probe.
    Pipe,
    /// GETPID_CALLS getpid() calls: the per-syscall cost, undiluted.
    Getpid,
}

const WORKLOADS: [Workload; 3] = [Workload::Messaging, Workload::Pipe, Workload::Getpid];

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Messaging => "perf bench sched messaging -g 5 -l 1000",
            Workload::Pipe => "perf bench sched pipe -l 100000",
            Workload::Getpid => "getpid() x 2M",
        }
    }

    /// Wall time of one run, in seconds.
    fn run(self) -> Result<f64> {
        match self {
            Workload::Messaging => perf_bench(&["messaging", "-g", "5", "-l", "1000"]),
            Workload::Pipe => perf_bench(&["pipe", "-l", "100000"]),
            Workload::Getpid => {
                let start = Instant::now();
                for _ in 0..GETPID_CALLS {
                    // SAFETY: getpid has no arguments and cannot fail.
                    unsafe { libc::syscall(libc::SYS_getpid) };
                }
                Ok(start.elapsed().as_secs_f64())
            }
        }
    }
}

/// `perf bench sched ARGS`; its "Total time" in seconds.
fn perf_bench(args: &[&str]) -> Result<f64> {
    let out = Command::new("perf")
        .args(["bench", "sched"])
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .context("running `perf bench` (install linux-perf)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Total time:"))
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no `Total time` in perf bench output: {text}"))
}

const VARIANTS: [Variant; 5] = [
    Variant::None,
    Variant::Floor,
    Variant::Minimal,
    Variant::Stalltop,
    Variant::StalltopNoSyscalls,
];

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Variant {
    None,
    Floor,
    /// bench-floor --minimal: a run-queue histogram per cgroup and a
    /// syscall latency histogram, nothing more.
    Minimal,
    Stalltop,
    /// `stalltop record --no-syscalls`: what the syscall hooks cost.
    StalltopNoSyscalls,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::None => "nothing attached",
            Variant::Floor => "empty tp_btf programs",
            Variant::Minimal => "minimal reference programs",
            Variant::Stalltop => "stalltop record",
            Variant::StalltopNoSyscalls => "stalltop record --no-syscalls",
        }
    }
}

/// One workload run under one variant.
#[derive(Default)]
struct Run {
    /// Timed with statistics off.
    wall_s: f64,
    /// Program name -> (invocations, ns) during the workload.
    programs: BTreeMap<String, (u64, u64)>,
    /// stalltop's own user+system CPU during the workload.
    user_cpu_s: f64,
    lost_events: u64,
}

pub fn main(args: &Args) -> Result<()> {
    interrupt::install()?;
    let stalltop = crate::workspace_root().join("target/release/stalltop");
    let floor = crate::workspace_root().join("target/release/bench-floor");
    for binary in [&stalltop, &floor] {
        if !binary.exists() {
            bail!(
                "{} is missing: run `cargo build --release -p stalltop -p bench-floor` first",
                binary.display()
            );
        }
    }
    let scratch = std::env::temp_dir().join(format!("stalltop-bench-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;

    let variants = VARIANTS;
    let mut runs: BTreeMap<(Workload, Variant), Vec<Run>> = BTreeMap::new();
    for round in 0..args.rounds {
        for workload in WORKLOADS {
            // Rotate the order each round so no variant always goes first.
            for i in 0..variants.len() {
                let variant = variants[(i + round as usize) % variants.len()];
                if interrupt::requested() {
                    bail!("interrupted");
                }
                let run = run_once(workload, variant, &stalltop, &floor, &scratch)
                    .with_context(|| format!("{} under {}", workload.name(), variant.name()))?;
                eprintln!(
                    "round {}/{}: {:<40} {:<22} {:.3}s",
                    round + 1,
                    args.rounds,
                    workload.name(),
                    variant.name(),
                    run.wall_s
                );
                runs.entry((workload, variant)).or_default().push(run);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let report = render(&runs, args.rounds);
    print!("{report}");
    if let Some(out) = &args.out {
        std::fs::write(out, &report).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

fn run_once(
    workload: Workload,
    variant: Variant,
    stalltop: &Path,
    floor: &Path,
    scratch: &Path,
) -> Result<Run> {
    match variant {
        Variant::None => Ok(Run {
            wall_s: workload.run()?,
            ..Run::default()
        }),
        Variant::Floor | Variant::Minimal => {
            let mut child = Command::new(floor)
                .args((variant == Variant::Minimal).then_some("--minimal"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .context("starting bench-floor")?;
            let mut line = String::new();
            BufReader::new(child.stdout.take().context("bench-floor stdout")?)
                .read_line(&mut line)?;
            if line.trim() != "attached" {
                let _ = child.kill();
                bail!("bench-floor did not attach");
            }
            let result = measure(workload, child.id(), false);
            drop(child.stdin.take()); // it exits when stdin closes
            child.wait()?;
            result
        }
        Variant::Stalltop | Variant::StalltopNoSyscalls => {
            let recording = scratch.join("bench.stl");
            let mut child = Command::new(stalltop)
                .args(["record", "-o"])
                .arg(&recording)
                .args(["--duration", "10m"])
                .args((variant == Variant::StalltopNoSyscalls).then_some("--no-syscalls"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting stalltop")?;
            let result =
                wait_attached(&mut child).and_then(|()| measure(workload, child.id(), true));
            stop(&mut child)?;
            let mut run = result?;
            run.lost_events = lost_events(stalltop, &recording)?;
            Ok(run)
        }
    }
}

/// Wait until stalltop holds BPF programs.
fn wait_attached(child: &mut Child) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        thread::sleep(ATTACH_WAIT);
        if let Some(status) = child.try_wait()? {
            bail!("stalltop exited early: {status}");
        }
        if !program_stats(child.id())?.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("stalltop did not attach within 20s");
        }
    }
}

/// Time the workload, then run it again with run-time statistics on for
/// the deltas of the programs process `pid` holds.
fn measure(workload: Workload, pid: u32, count_cpu: bool) -> Result<Run> {
    let cpu_before = process_cpu_s(pid)?;
    let wall_s = workload.run()?;
    let cpu_after = process_cpu_s(pid)?;
    let stats = StatsOn::enable()?;
    let before = program_stats(pid)?;
    workload.run()?;
    let after = program_stats(pid)?;
    drop(stats);
    let names = program_names()?;
    let mut programs: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (id, (cnt, ns)) in after {
        let (cnt0, ns0) = before.get(&id).copied().unwrap_or((0, 0));
        let name = names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("prog#{id}"));
        // One program per CPU (the sampler) shares a name: sum them.
        let entry = programs.entry(name).or_default();
        entry.0 += cnt - cnt0;
        entry.1 += ns - ns0;
    }
    Ok(Run {
        wall_s,
        programs,
        user_cpu_s: if count_cpu {
            cpu_after - cpu_before
        } else {
            0.0
        },
        lost_events: 0,
    })
}

/// kernel.bpf_stats_enabled=1 while held; restored on drop.
struct StatsOn {
    previous: String,
}

const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl StatsOn {
    fn enable() -> Result<StatsOn> {
        let previous = std::fs::read_to_string(STATS_SYSCTL)?.trim().to_string();
        std::fs::write(STATS_SYSCTL, "1").context("enabling kernel.bpf_stats_enabled")?;
        Ok(StatsOn { previous })
    }
}

impl Drop for StatsOn {
    fn drop(&mut self) {
        let _ = std::fs::write(STATS_SYSCTL, &self.previous);
    }
}

/// prog id -> (run_cnt, run_time_ns) of the BPF programs process `pid`
/// holds, from its fdinfo.
fn program_stats(pid: u32) -> Result<HashMap<u32, (u64, u64)>> {
    let mut out = HashMap::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))?.flatten() {
        let Ok(info) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        let field = |name: &str| -> Option<u64> {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
        };
        if let (Some(id), Some(cnt), Some(ns)) =
            (field("prog_id:"), field("run_cnt:"), field("run_time_ns:"))
        {
            out.insert(id as u32, (cnt, ns));
        }
    }
    Ok(out)
}

/// prog id -> name, from bpftool.
fn program_names() -> Result<HashMap<u32, String>> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
        .context("running bpftool (install bpftool)")?;
    let progs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)?;
    Ok(progs
        .iter()
        .filter_map(|p| Some((p["id"].as_u64()? as u32, p["name"].as_str()?.to_string())))
        .collect())
}

/// utime + stime of a process, in seconds.
fn process_cpu_s(pid: u32) -> Result<f64> {
    let stat = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .with_context(|| format!("/proc/{pid}/stat"))?;
    Ok((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

fn stop(child: &mut Child) -> Result<()> {
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .context("the child's pid")?;
    rustix::process::kill_process(pid, rustix::process::Signal::INT).context("kill -INT")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            child.kill()?;
            bail!("stalltop did not stop within 20s of SIGINT");
        }
        thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn lost_events(stalltop: &Path, recording: &Path) -> Result<u64> {
    let out = Command::new(stalltop)
        .arg("report")
        .arg(recording)
        .arg("--json")
        .output()?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("stalltop report: {}", String::from_utf8_lossy(&out.stderr)))?;
    Ok(report["lost_events"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum()))
}

fn median(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    let med = if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    };
    (med, values[0], values[values.len() - 1])
}

fn render(runs: &BTreeMap<(Workload, Variant), Vec<Run>>, rounds: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## `cargo xtask bench` ({rounds} interleaved rounds; medians, min-max in brackets)\n"
    );
    for workload in WORKLOADS {
        let _ = writeln!(out, "### {}\n", workload.name());
        let wall = |v: Variant| median(runs[&(workload, v)].iter().map(|r| r.wall_s).collect());
        let (none, ..) = wall(Variant::None);
        let _ = writeln!(out, "| variant | wall s | vs nothing |\n|---|---|---|");
        for v in VARIANTS {
            let (med, lo, hi) = wall(v);
            let _ = writeln!(
                out,
                "| {} | {med:.3} [{lo:.3}-{hi:.3}] | {:.3}x |",
                v.name(),
                med / none
            );
        }
        let stalltop = &runs[&(workload, Variant::Stalltop)];
        let (cpu, cpu_lo, cpu_hi) = median(
            stalltop
                .iter()
                .map(|r| 100.0 * r.user_cpu_s / r.wall_s)
                .collect(),
        );
        let (events, ..) = median(
            stalltop
                .iter()
                .map(|r| r.programs.values().map(|p| p.0).sum::<u64>() as f64 / r.wall_s)
                .collect(),
        );
        let lost: u64 = stalltop.iter().map(|r| r.lost_events).sum();
        let _ = writeln!(
            out,
            "\nstalltop user space: {cpu:.2}% of one CPU [{cpu_lo:.2}-{cpu_hi:.2}]; probe invocations: {events:.0}/s; lost events over all rounds: {lost}\n"
        );
        let _ = writeln!(
            out,
            "| program | invocations/run | ns/invocation | floor ns | minimal ns |\n|---|---|---|---|---|"
        );
        let per_call = |runs: &[Run], name: &str| {
            median(
                runs.iter()
                    .filter_map(|r| r.programs.get(name))
                    .filter(|p| p.0 > 0)
                    .map(|p| p.1 as f64 / p.0 as f64)
                    .collect::<Vec<_>>(),
            )
        };
        let names: Vec<&String> = stalltop[0].programs.keys().collect();
        for name in names {
            let calls = median(
                stalltop
                    .iter()
                    .filter_map(|r| r.programs.get(name))
                    .map(|p| p.0 as f64)
                    .collect(),
            );
            if calls.0 == 0.0 {
                continue;
            }
            let (ns, lo, hi) = per_call(stalltop, name);
            // The reference program on the same tracepoint, if any: same
            // length prefix, so the same 15-character name truncation.
            let reference_ns = |variant: Variant, prefix: &str| {
                let reference = format!(
                    "{prefix}{}",
                    name.trim_start_matches("btf_").trim_start_matches("raw_")
                );
                let runs = &runs[&(workload, variant)];
                if runs.iter().any(|r| r.programs.contains_key(&reference)) {
                    format!("{:.0}", per_call(runs, &reference).0)
                } else {
                    "-".into()
                }
            };
            let _ = writeln!(
                out,
                "| {name} | {:.0} | {ns:.0} [{lo:.0}-{hi:.0}] | {} | {} |",
                calls.0,
                reference_ns(Variant::Floor, "flr_"),
                reference_ns(Variant::Minimal, "min_"),
            );
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run where every program ran 1000 times for `ns` each.
    fn run(wall_s: f64, programs: &[(&str, u64)]) -> Run {
        Run {
            wall_s,
            programs: programs
                .iter()
                .map(|(name, ns)| (name.to_string(), (1000, 1000 * ns)))
                .collect(),
            ..Run::default()
        }
    }

    #[test]
    fn each_stalltop_program_is_shown_next_to_the_floor_and_minimal_programs_of_its_tracepoint() {
        let mut runs = BTreeMap::new();
        for workload in WORKLOADS {
            // Names as the kernel keeps them: at most 15 characters.
            runs.insert((workload, Variant::None), vec![run(1.0, &[])]);
            runs.insert(
                (workload, Variant::Floor),
                vec![run(1.1, &[("flr_sched_switc", 50), ("flr_sys_exit", 45)])],
            );
            runs.insert(
                (workload, Variant::Minimal),
                vec![run(1.2, &[("min_sched_switc", 200), ("min_sys_exit", 90)])],
            );
            runs.insert(
                (workload, Variant::Stalltop),
                vec![run(
                    1.5,
                    &[
                        ("btf_sched_switc", 400),
                        ("btf_sys_exit", 110),
                        ("cpu_sample", 300),
                    ],
                )],
            );
            runs.insert(
                (workload, Variant::StalltopNoSyscalls),
                vec![run(1.3, &[("btf_sched_switc", 380)])],
            );
        }
        let report = render(&runs, 1);
        assert!(
            report.contains("| btf_sched_switc | 1000 | 400 [400-400] | 50 | 200 |"),
            "{report}"
        );
        assert!(
            report.contains("| btf_sys_exit | 1000 | 110 [110-110] | 45 | 90 |"),
            "{report}"
        );
        assert!(
            report.contains("| cpu_sample | 1000 | 300 [300-300] | - | - |"),
            "{report}"
        );
        assert!(
            report.contains("| minimal reference programs | 1.200 [1.200-1.200] | 1.200x |"),
            "{report}"
        );
    }
}
