//! Command-line definitions and validation (clap). No I/O.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::model::TimeSpec;
use crate::modes::{AttachMode, SyscallMode};

const ABOUT: &str = "Find the CPU stalls your application did not cause.

stalltop watches every CPU for stalls: a softirq (NET_RX...) that waited, a
ksoftirqd that could not run, a task stuck on the run queue or behind a CFS
quota. For each it names who held the CPU: process, container, syscall,
file, kernel stack.";

const EXAMPLES: &str = "Examples:
  sudo stalltop                              live view (q quits, ? lists keys)
  sudo stalltop record -o node.stl -d 60s    record a minute, headless
  stalltop report node.stl                   summary of a recording
  stalltop report node.stl --json            the same as one JSON object
  stalltop replay node.stl                   browse a recording in the live view
  sudo stalltop serve --flight-dir DIR       Prometheus metrics on :9750, flight recorder
  stalltop completions bash                  shell completions; `stalltop man` prints the man page

Durations take a unit: 500us, 2ms, 10s, 5m.";

/// `--help` (not `-h`) adds how to read what stalltop shows.
const EXAMPLES_AND_READING: &str = "Examples:
  sudo stalltop                              live view (q quits, ? lists keys)
  sudo stalltop --runq-threshold 2ms         ... also report waits for a CPU from 2 ms
  sudo stalltop record -o node.stl -d 60s    record a minute, headless
  stalltop report node.stl                   summary of a recording
  stalltop report node.stl --json            the same as one JSON object
  stalltop replay node.stl                   browse a recording in the live view
  sudo stalltop serve --flight-dir DIR       Prometheus metrics on :9750, flight recorder
  stalltop completions bash                  shell completions; `stalltop man` prints the man page

Durations take a unit: 500us, 2ms, 10s, 5m.

Reading a stall line (the live view's and replay's stall pane):
  AGE  CPU    DUR KIND     WAITED              CULPRIT CHAIN
   2s    3  105ms softirq  NET_RX+ksoftirqd/3  cadvisor[2101] cadvisor.service › read › /sys/fs/cgroup/memory/web/memory.stat › 148ms on-CPU
  Two seconds ago CPU 3 stalled for 105 ms: the NET_RX softirq and ksoftirqd/3
  waited while cadvisor (pid 2101, in cadvisor.service) held the CPU inside
  read() of memory.stat, 148 ms of it running in the kernel. KIND says what
  waited: runq (a runnable task), ksoftirqd, softirq, or irqs-off (no timer
  tick: interrupts were off, or the hypervisor did not run the vCPU).
  Before anything crosses a threshold the pane lists each cgroup's worst wait
  so far instead, marked runq<10ms, with the task that most often held the CPU.
  Enter opens the full chain with kernel and user stacks; `stalltop report`
  prints the same facts one stall per line.";

const RECORD_EXAMPLES: &str = "Examples:
  sudo stalltop record -o node.stl -d 60s                    a minute
  sudo stalltop record -o node.stl                           until Ctrl-C or SIGTERM
  sudo stalltop record -o node.stl --runq-threshold 2ms      waits for a CPU from 2 ms too";

const REPORT_EXAMPLES: &str = "Examples:
  stalltop report node.stl                          the summary, worst stalls first
  stalltop report node.stl --json                   one JSON object (jq-friendly; docs/report.schema.json)
  stalltop report node.stl --container shop         what hurt the containers matching `shop`
  stalltop report node.stl --pid 4242               ... or one process
  stalltop report node.stl --from 12:03 --to 12:05  a window, in UTC (or +90s from the start)
  stalltop report node.stl --runq-threshold 20ms    only waits of 20 ms and more
  stalltop report node.stl --all --sort newest      every row, newest first
  stalltop report node.stl --perfetto node.pftrace
                                                    a timeline for ui.perfetto.dev: a track per CPU
                                                    with each stall, a track per waiting task, flows
                                                    from each stall to its waits, softirq counters

Reading a stall line of the summary:
  cpu 3  +4.512s 12:03:05.123Z softirq  105ms (3 waits): NET_RX and ksoftirqd/3 waited 104ms x1; held by cadvisor[2101] (cadvisor.service) in read /sys/fs/cgroup/memory/web/memory.stat, 148ms on-CPU, at mem_cgroup_nr_lru_pages
  4.5 s into the recording (12:03:05 UTC) CPU 3 stalled: 105 ms from the first
  of 3 merged waits to the end of the last; ksoftirqd/3's own longest wait was
  104 ms (x1: once); who held the CPU (pid, container), the syscall and file
  it was in, its time on the CPU, and the kernel function the sampler found it
  in most often. A span is no one's wait: the longest single wait is what a
  task felt. Durations under a microsecond read <1us; a percentile is the range
  of the histogram bucket that holds it; ~ marks a sampled value, known to
  about one sampler tick.";

const SERVE_EXAMPLES: &str = "Examples:
  sudo stalltop serve                                        metrics on 127.0.0.1:9750
  sudo stalltop serve --listen 0.0.0.0:9750 --flight-dir /var/lib/stalltop/flight
                                                             ... and keep 2 minutes before each stall of 50ms+
  curl -s localhost:9750/metrics | grep stalltop_stalls      what Prometheus scrapes
  curl -s localhost:9750/stalls                              the recent stalls, as JSON
  curl -s localhost:9750/why                                 why containers waited, the last minute
  curl -s -X POST localhost:9750/dump                        write a flight recording now (also: kill -USR1)
  stalltop report /var/lib/stalltop/flight/node-7-20261125T120000.123Z.stl
SIGTERM or Ctrl-C detaches the probes and exits 0.";

const REPLAY_EXAMPLES: &str = "Examples:
  stalltop replay node.stl             play from the start in recording time
  stalltop replay node.stl -d 0.5      refresh twice a second
Keys beyond the live view's: n/N next/previous stall, [ ] seek 10s, . , step, g G start/end.";
#[derive(Parser, Debug)]
#[command(
    name = "stalltop",
    version,
    about = ABOUT,
    after_help = EXAMPLES,
    after_long_help = EXAMPLES_AND_READING
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub probe: ProbeArgs,

    /// Write logs to FILE (they never go to the screen).
    #[arg(long, value_name = "FILE", global = true)]
    pub log: Option<PathBuf>,

    /// Live view refresh interval, like top's: seconds ("2", "0.5") or a
    /// duration ("500ms").
    #[arg(short, long, value_name = "DELAY", default_value = "1", value_parser = parse_delay)]
    pub delay: Duration,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record headless to a file until --duration passes or Ctrl-C.
    #[command(after_help = RECORD_EXAMPLES)]
    Record(RecordArgs),
    /// Summarize a recording (text, or --json).
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Compare two recordings (before and after a change): each container's
    /// waits and what kept it waiting, stalls by kind, the top culprits.
    #[command(after_help = DIFF_EXAMPLES)]
    Diff(DiffArgs),
    /// Browse a recording in the live view, in recording time.
    #[command(after_help = REPLAY_EXAMPLES)]
    Replay(ReplayArgs),
    /// Run headless and unattended (systemd, a Kubernetes DaemonSet):
    /// Prometheus metrics over HTTP, and a flight recorder that keeps the
    /// minutes before each long stall on disk.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Print shell completions for stalltop (e.g. `stalltop completions bash >
    /// /etc/bash_completion.d/stalltop`).
    Completions(CompletionsArgs),
    /// Print stalltop's man page (roff; e.g. `stalltop man > stalltop.1`).
    Man,
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Probe settings shared by the live view and `record`.
#[derive(Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Report a task that waited longer than this for a CPU.
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_threshold, global = true)]
    pub runq_threshold: Duration,

    /// Report a softirq delay, ksoftirqd wait or irqs-off gap longer than this (a stall).
    #[arg(long, visible_alias = "threshold", value_name = "DURATION", default_value = "10ms", value_parser = parse_threshold, global = true)]
    pub stall_threshold: Duration,

    /// Report a syscall that took longer than this, wall clock.
    #[arg(long, visible_alias = "syscall-threshold", value_name = "DURATION", default_value = "10ms", value_parser = parse_threshold, global = true)]
    pub syscall_wall_threshold: Duration,

    /// Report a syscall that ran longer than this on a CPU (kernel time).
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_threshold, global = true)]
    pub syscall_oncpu_threshold: Duration,

    /// CPU X-ray sampling rate per CPU (stacks during stalls, irqs-off
    /// gaps, sampled syscalls); 0 turns it off. The default's period
    /// (1.38 ms) is out of step with 1 ms timers: a round rate such as 1000
    /// can tick in step with a periodic task and miss what runs between.
    #[arg(long, value_name = "HZ", default_value_t = crate::probe::DEFAULT_SAMPLE_HZ, value_parser = clap::value_parser!(u32).range(0..=10_000), global = true)]
    pub sample_hz: u32,

    /// Most records (stalls, slow calls, samples) each CPU sends per second
    /// of each kind; beyond it they are counted, not sent (histograms and
    /// tables still include them). Protects the host under overload.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(10..=1_000_000), global = true)]
    pub record_rate: u32,

    /// How syscalls are watched. `sampled` hooks none: the CPU sampler
    /// finds the calls that hold a CPU (syscall, file, time in the kernel
    /// to about a sampler period) at no cost per syscall. `exact` hooks
    /// every syscall's entry and exit (per-call latency distributions,
    /// every slow call; about 0.15 µs per syscall). `off` watches none
    /// (culprits lose their syscall and file; no syscall table). Softirq
    /// run time is timed from entry to exit in every mode; in `sampled`
    /// and `off` the sampler's ticks start softirq delays (no program on
    /// each raise), `exact` times every delay from its raise (as do the
    /// cheap modes where the sampler cannot run).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = SyscallMode::Sampled, global = true)]
    pub syscalls: SyscallMode,

    /// The same as --syscalls off.
    #[arg(long, global = true, conflicts_with = "syscalls")]
    pub no_syscalls: bool,

    /// Which tracepoint programs to load.
    #[arg(long, value_enum, default_value_t = AttachMode::Auto, global = true)]
    pub attach: AttachMode,

    /// Most CPU stalltop may use, as a share of the node: its process and
    /// its BPF programs, measured all the time (e.g. 2%, 0.5%; `off`). Over
    /// it for 5 s, it steps down, one step at a time: exact syscalls
    /// sampled (the hooks on every syscall come off), the sampler at half
    /// rate, stacks off; and back up when there is room. Each step is
    /// logged and shown. `serve` keeps 2% unless told otherwise; the live
    /// view and `record` keep none unless given one.
    #[arg(long, value_name = "PERCENT", value_parser = parse_cpu_budget, global = true)]
    pub max_cpu: Option<CpuBudget>,
}

/// stalltop's CPU budget (`--max-cpu`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CpuBudget {
    Off,
    /// A share of the node's CPUs (0.02: 2%).
    Share(f64),
}

impl CpuBudget {
    pub fn share(self) -> Option<f64> {
        match self {
            CpuBudget::Off => None,
            CpuBudget::Share(share) => Some(share),
        }
    }
}

/// serve's budget. In the messaging overload the guard brings serve from
/// exact syscalls under it within its reaction time and holds it there
/// (docs/performance.md, "The cost guard").
pub const SERVE_CPU_BUDGET: CpuBudget = CpuBudget::Share(0.02);

impl ProbeArgs {
    pub fn syscall_mode(&self) -> SyscallMode {
        if self.no_syscalls {
            SyscallMode::Off
        } else {
            self.syscalls
        }
    }
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The recording to write (created with mode 0600; replaced if it exists).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// Stop after this long (default: run until Ctrl-C or SIGTERM).
    #[arg(short, long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address and port to serve /metrics, /healthz, /stalls, /why and POST /dump
    /// on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9750")]
    pub listen: std::net::SocketAddr,

    /// Keep recordings of the minutes around long stalls in DIR (created
    /// 0700 if missing; each file 0600, readable by `report` and `replay`).
    /// Without it, nothing is written to disk.
    #[arg(long, value_name = "DIR")]
    pub flight_dir: Option<PathBuf>,

    /// How much of the past a flight recording holds before its trigger.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration, requires = "flight_dir")]
    pub keep: Duration,

    /// A stall at least this long writes a flight recording (so do SIGUSR1
    /// and POST /dump).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse_threshold, requires = "flight_dir")]
    pub trigger: Duration,

    /// Most disk the flight directory's recordings take; the oldest are
    /// deleted first (e.g. 500MiB, 1GiB).
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size, requires = "flight_dir")]
    pub flight_max: u64,

    /// Containers with series of their own in the metrics (at most 23
    /// series each: the default keeps a node of up to 10 CPUs within 2,000
    /// series); the rest are summed under container="other". The
    /// places go to the containers that waited most recently: one whose
    /// cgroups were removed gives its place up at once (its series end a
    /// minute later), one idle for a minute gives it to a newcomer.
    #[arg(long, value_name = "N", default_value_t = 70, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_series_containers: u32,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A recording written by `stalltop record` (or a flight recording).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Print one JSON object instead of text (every row; docs/report.schema.json).
    #[arg(long)]
    pub json: bool,
    /// Write the recording as a Perfetto trace (its native protobuf
    /// format) to OUT instead of a report: open it in ui.perfetto.dev or
    /// query it with Perfetto's trace processor.
    #[arg(long, value_name = "OUT", conflicts_with = "json")]
    pub perfetto: Option<PathBuf>,

    /// Start the report at TIME: an offset into the recording (+90s), a UTC
    /// time of day (12:03:05) or a UTC date and time (2026-11-26T12:03:05Z).
    #[arg(long, value_name = "TIME", value_parser = TimeSpec::parse)]
    pub from: Option<TimeSpec>,

    /// End the report at TIME (as --from).
    #[arg(long, value_name = "TIME", value_parser = TimeSpec::parse)]
    pub to: Option<TimeSpec>,

    /// Only what hurt the containers (or cgroups) whose name holds TEXT:
    /// the stalls their tasks waited in, with their own waits, and who held
    /// the CPU then.
    #[arg(long, value_name = "TEXT")]
    pub container: Option<String>,

    /// Only what hurt process PID (as --container).
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,

    /// Rows per list in the text (stalls, waits, culprits, calls); the rest
    /// are counted on a "... N more" line.
    #[arg(long, value_name = "N", default_value_t = 15, conflicts_with = "all")]
    pub limit: usize,

    /// Every row of every list in the text.
    #[arg(long)]
    pub all: bool,

    /// The order of the text's stalls and waits: `worst` (the longest single
    /// wait first) or `newest`.
    #[arg(long, value_enum, default_value_t = ListOrder::Worst)]
    pub sort: ListOrder,

    /// The recording's thresholds, or higher ones the user gave on the
    /// command line (--runq-threshold, --stall-threshold): filled in by
    /// `parse`, not by clap.
    #[arg(skip)]
    pub thresholds: GivenThresholds,
}

/// --runq-threshold and --stall-threshold when given on the command line
/// (a report can raise the recording's thresholds, never lower them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GivenThresholds {
    pub runq: Option<Duration>,
    pub stall: Option<Duration>,
}

/// How the text report orders its lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ListOrder {
    /// The longest single wait first.
    Worst,
    /// The latest first.
    Newest,
}

const DIFF_EXAMPLES: &str = "Examples:
  stalltop diff before.stl after.stl                 what changed, as text
  stalltop diff before.stl after.stl --json          ... as one JSON object
  stalltop diff before.stl after.stl --fail-if 'wait_change_pct(\"shop\") > 50'
  stalltop diff before.stl after.stl --fail-if 'stalls(\"runq\") > 2 * stalls_before(\"runq\") || new_culprits > 0'

--fail-if takes an expression (evalexpr: numbers, + - * /, < <= > >= == !=,
&& || !, parentheses) over what the diff measured (numbers with a fraction:
compare with < and >, or == 0.0); exit code 10 when it is
true, 0 when false. Its values (before = A, after = B; ms are milliseconds):
  wait_ms(C)  wait_ms_before(C)      run-queue wait of the containers named C, summed
  wait_change_pct(C)                 its change, percent of before (100 when before is 0)
  p99_ms(C)  p99_ms_before(C)        their p99 wait (the worst of them)
  stalls(K)  stalls_before(K)        stalls of kind K (runq, throttled, ksoftirqd,
                                     softirq, irqoff, or \"\" for all)
  culprit_ms(N)  culprit_ms_before(N)  stall time the culprits named N held the CPU in
  new_culprits                       culprits in B that were not in A
C and N match a part of the name (as report --container); K a whole kind.";

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The recording before the change (A).
    #[arg(value_name = "A")]
    pub before: PathBuf,

    /// The recording after the change (B).
    #[arg(value_name = "B")]
    pub after: PathBuf,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,

    /// Exit 10 when EXPR is true of the comparison (see below).
    #[arg(long, value_name = "EXPR", value_parser = crate::cmd::diff::parse_condition)]
    pub fail_if: Option<crate::cmd::diff::Condition>,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A recording written by `stalltop record`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Refresh interval, as for the live view.
    #[arg(short, long, value_name = "DELAY", default_value = "1", value_parser = parse_delay)]
    pub delay: Duration,
}

/// The command line, with the thresholds the user gave a report.
pub fn parse() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let (Some(Command::Report(args)), Some(("report", sub))) =
        (&mut cli.command, matches.subcommand())
    {
        let given = |id: &str| {
            (sub.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
                .then(|| sub.get_one::<Duration>(id).copied())
                .flatten()
        };
        args.thresholds = GivenThresholds {
            runq: given("runq_threshold"),
            stall: given("stall_threshold"),
        };
    }
    cli
}

/// A refresh interval: bare seconds as top takes them ("2", "0.5"), or a
/// duration with a unit; 100ms to 1h.
fn parse_delay(text: &str) -> Result<Duration, String> {
    let delay = match text.trim().parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Duration::from_secs_f64(seconds.min(1e9))
        }
        Ok(_) => return Err(format!("`{text}` is not a positive number of seconds")),
        Err(_) => parse_duration(text)?,
    };
    if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&delay) {
        return Err(format!("`{text}` is outside 100ms..1h"));
    }
    Ok(delay)
}

/// "500us", "2ms", "10s", "5m", "1h", "1m30s" (humantime's units); a unit
/// is required.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| format!("`{}`: {e}", text.trim()))
}

/// A size with a unit: 500MiB, 1GiB, 2GB.
fn parse_size(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|e| format!("`{}`: {e}", text.trim()))
}

/// `--max-cpu`: a percentage of the node ("2%", "0.5%") or "off".
fn parse_cpu_budget(text: &str) -> Result<CpuBudget, String> {
    let text = text.trim();
    if text == "off" {
        return Ok(CpuBudget::Off);
    }
    let percent = text
        .strip_suffix('%')
        .and_then(|p| p.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("`{text}` is not a percentage of the node (2%) or off"))?;
    if !(percent > 0.0 && percent <= 100.0) {
        return Err(format!("`{text}` is outside 0%..100%"));
    }
    Ok(CpuBudget::Share(percent / 100.0))
}

/// A stall threshold: at least 1 ms, so the probes stay cheap.
fn parse_threshold(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_millis(1) {
        return Err(format!("`{text}` is below the 1ms minimum"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations_need_units() {
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("10")
            .unwrap_err()
            .contains("time unit needed"));
        assert!(parse_duration("10 parsecs")
            .unwrap_err()
            .contains("unknown time unit"));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("99999999999999999999h")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn thresholds_have_a_floor() {
        assert!(parse_threshold("500us")
            .unwrap_err()
            .contains("1ms minimum"));
        assert_eq!(parse_threshold("1ms"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn the_cpu_budget_is_a_percentage_or_off() {
        assert_eq!(parse_cpu_budget("2%"), Ok(CpuBudget::Share(0.02)));
        assert_eq!(parse_cpu_budget("0.5%"), Ok(CpuBudget::Share(0.005)));
        assert_eq!(parse_cpu_budget("off"), Ok(CpuBudget::Off));
        assert!(parse_cpu_budget("2").unwrap_err().contains("percentage"));
        assert!(parse_cpu_budget("0%").unwrap_err().contains("outside"));
        assert!(parse_cpu_budget("150%").is_err());
        let cli = Cli::try_parse_from(["stalltop", "serve", "--max-cpu", "off"]).unwrap();
        assert_eq!(cli.probe.max_cpu, Some(CpuBudget::Off));
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn record_parses_output_and_duration() {
        let cli =
            Cli::try_parse_from(["stalltop", "record", "-o", "x.stl", "--duration", "3s"]).unwrap();
        match cli.command {
            Some(Command::Record(r)) => {
                assert_eq!(r.output, PathBuf::from("x.stl"));
                assert_eq!(r.duration, Some(Duration::from_secs(3)));
            }
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["stalltop", "record"]).is_err());
    }

    #[test]
    fn delay_takes_seconds_like_top_or_a_duration() {
        let cli = Cli::try_parse_from(["stalltop", "-d", "2"]).unwrap();
        assert_eq!(
            (cli.delay, cli.command.is_none()),
            (Duration::from_secs(2), true)
        );
        assert_eq!(parse_delay("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_delay("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_delay("0.01").unwrap_err().contains("100ms..1h"));
        assert!(parse_delay("-1").is_err());
        let cli = Cli::try_parse_from(["stalltop", "replay", "x.stl", "-d", "3s"]).unwrap();
        match cli.command {
            Some(Command::Replay(r)) => assert_eq!(r.delay, Duration::from_secs(3)),
            other => panic!("{other:?}"),
        }
        // record keeps -d for its --duration
        let cli = Cli::try_parse_from(["stalltop", "record", "-o", "x", "-d", "5s"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Record(_))));
    }
}
