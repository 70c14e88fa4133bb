//! The terminal the test drives: a tmux server of its own, stalltop launched in its pane, the
//! screen captured and keys sent, and the checks that stalltop left the terminal and the kernel
//! as it found them.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use rustix::process::{kill_process, Pid, Signal};

use crate::interrupt;

const START_TIMEOUT: Duration = Duration::from_secs(30);
/// After a bounded background job ends, the screen gets this long to show its effect.
const SHOW_GRACE: Duration = Duration::from_secs(5);
pub const KEY_TIMEOUT: Duration = Duration::from_secs(10);
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long after stalltop exits its programs may still be listed while the kernel frees them.
const PROGRAM_FREE_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(250);
/// Between keys, so the terminal never merges them (Esc then a key reads as Alt+key).
const KEY_GAP: Duration = Duration::from_millis(300);

/// How long `Tmux::wait_for` waits.
#[derive(Clone, Copy)]
pub enum Deadline<'a> {
    After(Duration),
    /// Until a bounded background job (the scenario) finished, and a grace period after.
    GraceAfter(&'a dyn Fn() -> bool),
}

/// A tmux server of our own (its socket in the work directory), killed and its socket
/// removed when dropped.
pub struct Tmux {
    socket: PathBuf,
    workdir: PathBuf,
    /// stalltop processes started in the pane, waited for (or killed) on drop.
    launched: RefCell<Vec<u32>>,
}

/// stalltop running in the pane.
pub struct Running {
    pub pid: u32,
    /// BPF program ids it holds (from /proc/<pid>/fdinfo).
    pub programs: BTreeSet<u64>,
}

impl Tmux {
    /// A server whose one pane is `width` x `height`.
    pub fn start(workdir: &Path, width: u16, height: u16) -> Result<Tmux> {
        let tmux = Tmux {
            socket: workdir.join("tmux.sock"),
            workdir: workdir.to_path_buf(),
            launched: Default::default(),
        };
        let (w, h) = (width.to_string(), height.to_string());
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "tui",
            "-x",
            &w,
            "-y",
            &h,
            "-e",
            "PS1=$ ",
            "--",
            "bash",
            "--norc",
            "--noprofile",
        ])?;
        Ok(tmux)
    }

    fn run(&self, args: &[&str]) -> Result<Output> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .context("running tmux")?;
        ensure!(
            out.status.success(),
            "`tmux {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(out)
    }

    pub fn capture(&self) -> Result<String> {
        let out = self.run(&["capture-pane", "-p", "-t", "tui"])?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn display(&self, format: &str) -> Result<String> {
        let out = self.run(&["display-message", "-p", "-t", "tui", format])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Named keys (Enter, Tab, Escape...) one at a time.
    pub fn keys(&self, keys: &[&str]) -> Result<()> {
        for key in keys {
            self.run(&["send-keys", "-t", "tui", key])?;
            thread::sleep(KEY_GAP);
        }
        Ok(())
    }

    /// Replace the filter with `filter` (/, Ctrl-U, text, Enter).
    pub fn filter(&self, filter: &str) -> Result<()> {
        self.keys(&["/", "C-u"])?;
        self.literal(filter)?;
        self.keys(&["Enter"])
    }

    /// Text typed as is.
    fn literal(&self, text: &str) -> Result<()> {
        self.run(&["send-keys", "-t", "tui", "-l", text])?;
        thread::sleep(KEY_GAP);
        Ok(())
    }

    /// Text typed as it is (into a prompt).
    pub fn type_text(&self, text: &str) -> Result<()> {
        self.literal(text)
    }

    /// What a program put on the clipboard by OSC 52: tmux's newest paste buffer (with
    /// set-clipboard on, which `start_replay` sets).
    pub fn clipboard(&self) -> Result<String> {
        let out = self.run(&["show-buffer"])?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `stalltop replay FILE` in the pane, up once its replay header shows; q must end it with
    /// exit code 0 (checked by `replay_quit`).
    pub fn start_replay(&self, stalltop: &Path, file: &Path, log: &Path) -> Result<()> {
        self.run(&["set-option", "-g", "set-clipboard", "on"])?;
        let command = format!(
            "{} replay {} --log {}; echo stalltop-exit=$?",
            stalltop.display(),
            file.display(),
            log.display()
        );
        self.literal(&command)?;
        self.keys(&["Enter"])?;
        self.wait_for(
            "the replay's first screen",
            |s| s.contains("REPLAY"),
            Deadline::After(START_TIMEOUT),
        )
        .map(|_| ())
    }

    /// q ends a replay with exit code 0, the terminal restored.
    pub fn replay_quit(&self) -> Result<()> {
        self.keys(&["q"])?;
        let screen = self.wait_for(
            "the replay's exit",
            |s| s.lines().any(|l| l.trim().starts_with("stalltop-exit=")),
            Deadline::After(EXIT_TIMEOUT),
        )?;
        ensure!(
            screen.lines().any(|l| l.trim() == "stalltop-exit=0"),
            "the replay exited with an error:\n{screen}"
        );
        self.check_restored()
    }

    /// Poll the screen until `done` holds, or fail at the deadline.
    pub fn wait_for(
        &self,
        what: &str,
        done: impl Fn(&str) -> bool,
        deadline: Deadline<'_>,
    ) -> Result<String> {
        let start = Instant::now();
        let mut finished_at: Option<Instant> = None;
        let mut screen = String::new();
        loop {
            screen = self.capture().unwrap_or(screen);
            if done(&screen) {
                return Ok(screen);
            }
            ensure!(
                !interrupt::requested(),
                "interrupted while waiting for {what}"
            );
            let late = match deadline {
                Deadline::After(limit) => start.elapsed() > limit,
                Deadline::GraceAfter(finished) => {
                    if finished() {
                        finished_at.get_or_insert_with(Instant::now);
                    }
                    finished_at.is_some_and(|at| at.elapsed() > SHOW_GRACE)
                }
            };
            if late {
                let _ = fs::write(self.workdir.join("last-screen.txt"), &screen);
                bail!("timed out waiting for {what}; the screen was:\n{screen}");
            }
            thread::sleep(POLL);
        }
    }

    /// Start stalltop in the pane, wait for the live view, find its pid and programs.
    pub fn launch(&self, stalltop: &Path, args: &[&str], log: &Path) -> Result<Running> {
        let command = format!(
            "{} {} --log {}; echo stalltop-exit=$?",
            stalltop.display(),
            args.join(" "),
            log.display()
        );
        self.literal(&command)?;
        self.keys(&["Enter"])?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let screen = self.capture()?;
            if screen.contains("● LIVE") {
                break;
            }
            // The typed command line holds the marker too: only its output line counts.
            let exited = screen
                .lines()
                .any(|l| l.trim().starts_with("stalltop-exit="));
            if exited || Instant::now() > deadline {
                let log = fs::read_to_string(log).unwrap_or_default();
                bail!("stalltop did not come up live; the screen:\n{screen}\nits log:\n{log}");
            }
            thread::sleep(POLL);
        }
        let shell: u32 = self
            .display("#{pane_pid}")?
            .parse()
            .context("the pane's pid")?;
        let pid = child_named(shell, "stalltop")?;
        self.launched.borrow_mut().push(pid);
        let programs = bpf_programs_of(pid)?;
        ensure!(
            !programs.is_empty(),
            "stalltop (pid {pid}) holds no BPF programs"
        );
        let loaded = loaded_programs()?;
        ensure!(
            programs.is_subset(&loaded),
            "bpftool does not list stalltop's programs {programs:?}"
        );
        Ok(Running { pid, programs })
    }

    /// The pane is back to the shell as it was: normal screen, cursor shown, no mouse
    /// reporting, cooked tty.
    pub fn check_restored(&self) -> Result<()> {
        for (flag, want) in [
            ("#{alternate_on}", "0"),
            ("#{cursor_flag}", "1"),
            ("#{mouse_any_flag}", "0"),
        ] {
            let got = self.display(flag)?;
            ensure!(
                got == want,
                "after quitting, tmux says {flag} is {got}, not {want}"
            );
        }
        self.literal("stty -a | grep -qwE -- '-(icanon|echo)' && echo tty=raw || echo tty=cooked")?;
        self.keys(&["Enter"])?;
        let screen = self.wait_for(
            "the tty mode",
            |s| {
                s.lines()
                    .any(|l| l.trim() == "tty=cooked" || l.trim() == "tty=raw")
            },
            Deadline::After(KEY_TIMEOUT),
        )?;
        ensure!(
            screen.lines().any(|l| l.trim() == "tty=cooked"),
            "the terminal was left in raw mode:\n{screen}"
        );
        Ok(())
    }
}

impl Running {
    /// Press q; stalltop must exit 0 and its programs must be gone.
    pub fn quit(&self, tmux: &Tmux) -> Result<()> {
        tmux.keys(&["q"])?;
        self.ended(tmux, "q")
    }

    /// Send `signal` to stalltop (which this test started); the same exit checks as `quit`.
    pub fn kill(&self, tmux: &Tmux, signal: Signal) -> Result<()> {
        kill_process(pid(self.pid)?, signal).with_context(|| format!("kill {}", self.pid))?;
        self.ended(tmux, &format!("{signal:?}"))
    }

    /// stalltop exited 0 after `how`, and its programs are gone.
    fn ended(&self, tmux: &Tmux, how: &str) -> Result<()> {
        let deadline = Instant::now() + EXIT_TIMEOUT;
        let screen = loop {
            let screen = tmux.capture()?;
            if screen
                .lines()
                .any(|l| l.trim().starts_with("stalltop-exit="))
            {
                break screen;
            }
            ensure!(
                Instant::now() < deadline,
                "stalltop did not exit after {how}:\n{screen}"
            );
            thread::sleep(POLL);
        };
        ensure!(
            screen.lines().any(|l| l.trim() == "stalltop-exit=0"),
            "stalltop exited with an error:\n{screen}"
        );
        ensure!(
            !Path::new(&format!("/proc/{}", self.pid)).exists(),
            "stalltop {} still runs",
            self.pid
        );
        // The kernel frees a closed program asynchronously: give it a moment.
        let deadline = Instant::now() + PROGRAM_FREE_TIMEOUT;
        loop {
            let left: Vec<u64> = loaded_programs()?
                .intersection(&self.programs)
                .copied()
                .collect();
            if left.is_empty() {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "stalltop's BPF programs {left:?} are still loaded {PROGRAM_FREE_TIMEOUT:?} after it quit"
            );
            thread::sleep(POLL);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Closes the pane: a stalltop still running gets SIGHUP, restores and detaches.
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        let _ = fs::remove_file(&self.socket);
        // Leave nothing running: give each stalltop time to detach, then kill it.
        for &pid in self.launched.borrow().iter() {
            let alive = || Path::new(&format!("/proc/{pid}")).exists();
            let deadline = Instant::now() + EXIT_TIMEOUT;
            while alive() && Instant::now() < deadline {
                thread::sleep(POLL);
            }
            if alive() {
                eprintln!("tui-test: stalltop {pid} outlived its terminal; killing it");
                if let Ok(pid) = self::pid(pid) {
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
        }
    }
}

/// The pid of the child of `parent` whose comm is `comm`.
fn child_named(parent: u32, comm: &str) -> Result<u32> {
    for process in procfs::process::all_processes()
        .context("listing /proc")?
        .flatten()
    {
        let Ok(stat) = process.stat() else {
            continue;
        };
        if stat.comm == comm && u32::try_from(stat.ppid).ok() == Some(parent) {
            return Ok(process.pid as u32);
        }
    }
    bail!("no process {comm} under the pane's shell {parent}")
}

fn pid(pid: u32) -> Result<Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .with_context(|| format!("{pid} is not a process id"))
}

/// Ids of the BPF programs whose fds (programs, links) process `pid` holds.
fn bpf_programs_of(pid: u32) -> Result<BTreeSet<u64>> {
    let mut ids = BTreeSet::new();
    for entry in fs::read_dir(format!("/proc/{pid}/fdinfo"))?.flatten() {
        let Ok(info) = fs::read_to_string(entry.path()) else {
            continue;
        };
        ids.extend(
            info.lines()
                .filter_map(|l| l.strip_prefix("prog_id:"))
                .filter_map(|v| v.trim().parse::<u64>().ok()),
        );
    }
    Ok(ids)
}

/// Ids of every BPF program loaded on the host, per `bpftool prog show`.
fn loaded_programs() -> Result<BTreeSet<u64>> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "--json"])
        .output()
        .context("running bpftool")?;
    ensure!(
        out.status.success(),
        "bpftool prog show failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let programs: Vec<serde_json::Value> =
        serde_json::from_slice(&out.stdout).context("bpftool's JSON")?;
    Ok(programs.iter().filter_map(|p| p["id"].as_u64()).collect())
}
