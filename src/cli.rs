//! Command-line definitions and validation (clap). No I/O.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::probe::{AttachMode, SyscallMode};

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

Durations take a unit: 500us, 2ms, 10s, 5m.";

#[derive(Parser, Debug)]
#[command(name = "stalltop", version, about = ABOUT, after_help = EXAMPLES)]
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
    Record(RecordArgs),
    /// Summarize a recording (text, or --json).
    Report(ReportArgs),
    /// Browse a recording in the live view, in recording time.
    Replay(ReplayArgs),
}

/// Probe settings shared by the live view and `record`.
#[derive(Args, Debug, Clone)]
pub struct ProbeArgs {
    /// Report a task that waited longer than this for a CPU.
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_threshold, global = true)]
    pub runq_threshold: Duration,

    /// Report a softirq delay or ksoftirqd wait longer than this (a stall).
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_threshold, global = true)]
    pub threshold: Duration,

    /// Report a syscall that took longer than this, wall clock.
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_threshold, global = true)]
    pub syscall_threshold: Duration,

    /// Report a syscall that ran longer than this on a CPU (kernel time).
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_threshold, global = true)]
    pub syscall_oncpu_threshold: Duration,

    /// CPU X-ray sampling rate per CPU (stacks during stalls, irqs-off
    /// gaps); 0 turns it off.
    #[arg(long, value_name = "HZ", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(0..=10_000), global = true)]
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
    /// (culprits lose their syscall and file; no syscall table).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = SyscallMode::Sampled, global = true)]
    pub syscalls: SyscallMode,

    /// The same as --syscalls off.
    #[arg(long, global = true, conflicts_with = "syscalls")]
    pub no_syscalls: bool,

    /// Which tracepoint programs to load.
    #[arg(long, value_enum, default_value_t = AttachMode::Auto, global = true)]
    pub attach: AttachMode,
}

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
pub struct ReportArgs {
    /// A recording written by `stalltop record`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
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

/// "500us", "2ms", "10s", "5m", "1h" (also "ns"); a unit is required.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit; write e.g. {text}ms or {text}s"))?;
    let (number, unit) = text.split_at(split);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number"))?;
    let ns_per_unit: u64 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => {
            return Err(format!(
                "unknown unit `{unit}` in `{text}`; use ns, us, ms, s, m or h"
            ))
        }
    };
    value
        .checked_mul(ns_per_unit)
        .map(Duration::from_nanos)
        .ok_or_else(|| format!("`{text}` is too long"))
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
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("99999999999999999h")
            .unwrap_err()
            .contains("too long"));
    }

    #[test]
    fn thresholds_have_a_floor() {
        assert!(parse_threshold("500us")
            .unwrap_err()
            .contains("1ms minimum"));
        assert_eq!(parse_threshold("1ms"), Ok(Duration::from_millis(1)));
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
