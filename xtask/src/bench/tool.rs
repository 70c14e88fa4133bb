//! The variants a workload runs under and the processes that attach them
//! (and `stalltop serve` for the cost guard section): started, waited for
//! until their programs are attached, stopped with what they said.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A tool has attached within this long of starting, or failed.
const ATTACH_LIMIT: Duration = Duration::from_secs(30);
/// A tool has exited within this long of SIGINT, or is killed.
const STOP_LIMIT: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, clap::ValueEnum)]
pub enum Variant {
    /// The baseline, always measured.
    #[value(skip)]
    Nothing,
    /// bench-floor: empty programs on the tracepoints stalltop uses.
    #[value(name = "empty")]
    EmptyPrograms,
    /// bench-floor --minimal: a run-queue histogram per cgroup and a
    /// syscall latency histogram, nothing more.
    Minimal,
    /// `stalltop record`: the default, `--syscalls sampled`.
    #[value(name = "stalltop")]
    Stalltop,
    /// `stalltop record --syscalls exact`.
    #[value(name = "exact")]
    StalltopExact,
    /// `stalltop record --syscalls off`.
    #[value(name = "off")]
    StalltopOff,
    /// bcc libbpf-tools `runqlat`: sched_switch, sched_wakeup(_new).
    Runqlat,
    /// bcc libbpf-tools `syscount`: counts on sys_exit (its sys_enter
    /// program stays unattached without -L).
    Syscount,
    /// `syscount -L`: sys_enter and sys_exit, with latency.
    #[value(name = "syscount-l")]
    SyscountLatency,
}

/// In the order of the report's columns.
pub const VARIANTS: [Variant; 9] = [
    Variant::Nothing,
    Variant::EmptyPrograms,
    Variant::Minimal,
    Variant::Stalltop,
    Variant::StalltopExact,
    Variant::StalltopOff,
    Variant::Runqlat,
    Variant::Syscount,
    Variant::SyscountLatency,
];

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Nothing => "nothing attached",
            Variant::EmptyPrograms => "empty programs",
            Variant::Minimal => "minimal reference",
            Variant::Stalltop => "stalltop record",
            Variant::StalltopExact => "--syscalls exact",
            Variant::StalltopOff => "--syscalls off",
            Variant::Runqlat => "runqlat",
            Variant::Syscount => "syscount",
            Variant::SyscountLatency => "syscount -L",
        }
    }

    /// One of the bcc libbpf-tools references, built outside the project.
    pub fn is_reference(self) -> bool {
        matches!(
            self,
            Variant::Runqlat | Variant::Syscount | Variant::SyscountLatency
        )
    }

    pub fn is_stalltop(self) -> bool {
        matches!(
            self,
            Variant::Stalltop | Variant::StalltopExact | Variant::StalltopOff
        )
    }
}

/// Where the tools' binaries are.
pub struct Binaries {
    pub stalltop: PathBuf,
    pub floor: PathBuf,
    /// A directory holding bcc libbpf-tools' `runqlat` and `syscount`.
    pub references: Option<PathBuf>,
}

/// How to start a variant's tool and tell that its programs are attached:
/// a line on its stdout or stderr that it prints only after attaching.
struct Launch {
    command: Command,
    ready_on_stderr: bool,
    ready_line: &'static str,
}

impl Binaries {
    fn launch(&self, variant: Variant, recording: &Path) -> Result<Option<Launch>> {
        let reference = |name: &str| -> Result<Command> {
            let dir = self
                .references
                .as_ref()
                .context("bcc references asked for without --references")?;
            // The bcc tools print to a pipe through stdio's full buffer:
            // line buffering makes their "Tracing ..." line arrive at once.
            let mut command = Command::new("stdbuf");
            command.arg("-oL").arg(dir.join(name));
            Ok(command)
        };
        let stalltop = |mode: &str| {
            let mut command = Command::new(&self.stalltop);
            command
                .args(["record", "-o"])
                .arg(recording)
                .args(["--syscalls", mode]);
            command
        };
        let (command, ready_on_stderr, ready_line) = match variant {
            Variant::Nothing => return Ok(None),
            Variant::EmptyPrograms => (Command::new(&self.floor), false, "attached"),
            Variant::Minimal => {
                let mut command = Command::new(&self.floor);
                command.arg("--minimal");
                (command, false, "attached")
            }
            // stalltop says so on stderr once its probes are attached.
            Variant::Stalltop => (stalltop("sampled"), true, "stalltop: recording to"),
            Variant::StalltopExact => (stalltop("exact"), true, "stalltop: recording to"),
            Variant::StalltopOff => (stalltop("off"), true, "stalltop: recording to"),
            Variant::Runqlat => (reference("runqlat")?, false, "Tracing run queue latency"),
            Variant::Syscount => (reference("syscount")?, false, "Tracing syscalls"),
            Variant::SyscountLatency => {
                let mut command = reference("syscount")?;
                command.arg("-L");
                (command, false, "Tracing syscalls")
            }
        };
        Ok(Some(Launch {
            command,
            ready_on_stderr,
            ready_line,
        }))
    }
}

/// A line of a tool's watched stream, and when it came.
#[derive(Clone, Debug)]
pub struct Said {
    pub at: Instant,
    pub text: String,
}

/// A tool, attached.
pub struct Attached {
    child: Child,
    /// Held open: bench-floor holds its programs until stdin closes.
    stdin: Option<ChildStdin>,
    /// The watched stream, read until the tool exits.
    output: thread::JoinHandle<Vec<Said>>,
    name: &'static str,
}

/// Start `variant`'s tool (None for nothing attached) and wait until its
/// programs are attached. A stalltop variant records to `recording`.
pub fn attach(variant: Variant, binaries: &Binaries, recording: &Path) -> Result<Option<Attached>> {
    let Some(launch) = binaries.launch(variant, recording)? else {
        return Ok(None);
    };
    start(launch, variant.name()).map(Some)
}

/// Start `stalltop serve --syscalls exact` on `listen` with `--max-cpu
/// max_cpu` and wait until its programs are attached; its stderr is
/// watched (the cost guard's steps are logged there).
pub fn serve(stalltop: &Path, listen: &str, max_cpu: &str) -> Result<Attached> {
    let mut command = Command::new(stalltop);
    command
        .args(["serve", "--listen", listen, "--syscalls", "exact"])
        .args(["--max-cpu", max_cpu]);
    let launch = Launch {
        command,
        ready_on_stderr: true,
        // After its probes attached and its listener is bound.
        ready_line: "stalltop: serving http://",
    };
    start(launch, "stalltop serve")
}

fn start(mut launch: Launch, name: &'static str) -> Result<Attached> {
    // The watched stream is piped; stalltop's stdout has nothing, the
    // others' stderr goes to the bench's for their errors.
    if launch.ready_on_stderr {
        launch.command.stdout(Stdio::null()).stderr(Stdio::piped());
    } else {
        launch
            .command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
    }
    let mut child = launch
        .command
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let stream: Box<dyn Read + Send> = if launch.ready_on_stderr {
        Box::new(child.stderr.take().context("piped stderr")?)
    } else {
        Box::new(child.stdout.take().context("piped stdout")?)
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let ready_line = launch.ready_line;
    let output = thread::spawn(move || {
        let mut said = Vec::new();
        for text in BufReader::new(stream).lines().map_while(Result::ok) {
            if text.contains(ready_line) {
                let _ = ready_tx.send(());
            }
            said.push(Said {
                at: Instant::now(),
                text,
            });
        }
        said
    });
    let attached = Attached {
        stdin: child.stdin.take(),
        child,
        output,
        name,
    };
    let deadline = Instant::now() + ATTACH_LIMIT;
    loop {
        match ready_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(()) => return Ok(attached),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let said = attached.stop().err().map(|e| format!("{e:#}"));
                bail!(
                    "{name} exited before attaching: {}",
                    said.unwrap_or_default()
                );
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() > deadline => {
                let _ = attached.stop();
                bail!("{name} did not attach within {ATTACH_LIMIT:?}");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

impl Attached {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT (all the tools stop cleanly on it; bench-floor also on its
    /// stdin closing) and wait for the exit; what it said on the watched
    /// stream, or an error if it failed.
    pub fn stop(mut self) -> Result<Vec<Said>> {
        drop(self.stdin.take());
        signal(&self.child, rustix::process::Signal::INT)?;
        let deadline = Instant::now() + STOP_LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() > deadline {
                self.child.kill()?;
                self.child.wait()?;
                bail!("{} did not stop within {STOP_LIMIT:?} of SIGINT", self.name);
            }
            thread::sleep(Duration::from_millis(20));
        };
        let said = self.output.join().unwrap_or_default();
        // bench-floor takes the default action of SIGINT: killed by it is
        // its normal end.
        let by_sigint =
            std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGINT);
        if !status.success() && !by_sigint {
            let output: Vec<&str> = said.iter().map(|s| s.text.as_str()).collect();
            bail!("{} failed ({status}): {}", self.name, output.join("\n"));
        }
        Ok(said)
    }
}

/// Records a stalltop recording lost, by its report. Fails where a probe
/// family was refused (a verifier error falls back to raw_tp): such a run
/// measures other programs than the ones the bench is about.
pub fn lost_events(stalltop: &Path, recording: &Path) -> Result<u64> {
    let out = Command::new(stalltop)
        .arg("report")
        .arg(recording)
        .arg("--json")
        .output()?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("stalltop report: {}", String::from_utf8_lossy(&out.stderr)))?;
    let refused = refused_probes(&report);
    if !refused.is_empty() {
        bail!("stalltop's probes did not all load: {}", refused.join("; "));
    }
    Ok(report["lost_events"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(|v| v.as_u64()).sum()))
}

/// Each probe family's refusal in a report, as "family (attach): error".
fn refused_probes(report: &serde_json::Value) -> Vec<String> {
    report["probes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|probe| {
            let error = probe["error"].as_str()?;
            Some(format!(
                "{} ({}): {error}",
                probe["family"].as_str().unwrap_or("?"),
                probe["attach"].as_str().unwrap_or("?")
            ))
        })
        .collect()
}

/// Sends `signal` to our own child process.
pub fn signal(child: &Child, signal: rustix::process::Signal) -> Result<()> {
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .context("the child's pid")?;
    rustix::process::kill_process(pid, signal).context("kill")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_family_is_named_with_its_error_and_a_loaded_one_is_not() {
        let report = serde_json::json!({"probes": [
            {"family": "sched", "attach": "tp_btf", "loaded": false,
             "error": "the verifier rejects btf_sched_switch"},
            {"family": "sched", "attach": "raw_tp", "loaded": true, "error": null},
            {"family": "sampler", "attach": "tp_btf", "loaded": true, "error": null},
        ]});
        assert_eq!(
            refused_probes(&report),
            ["sched (tp_btf): the verifier rejects btf_sched_switch"]
        );
        assert!(refused_probes(&serde_json::json!({"probes": []})).is_empty());
    }
}
