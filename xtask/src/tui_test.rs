//! `cargo xtask tui-test`: the live view end to end, as a user drives it. Runs
//! target/release/stalltop in a tmux pane (its own tmux server) beside a real noisy-neighbour
//! scenario, checks the victim's stall and the hog culprit appear, opens the culprit's details,
//! quits with q, then checks the terminal is restored and stalltop's BPF programs are gone.
//! Builds nothing; leaves no tmux server, process or cgroup behind.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{self, Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use crate::interrupt;
use crate::scenario::{self, Name};

/// The pane's size: wide enough for the four tables side by side.
const WIDTH: u16 = 160;
const HEIGHT: u16 = 48;
/// The scenario's runq waits are 2-8 ms; report them as stalls.
const RUNQ_THRESHOLD: &str = "2ms";
const SCENARIO_LENGTH: Duration = Duration::from_secs(8);
/// Another scenario (another engineer, scenario-tests) may hold the lock: wait this long for it.
const LOCK_WAIT: Duration = Duration::from_secs(300);
const LOCK_RETRY: Duration = Duration::from_secs(5);
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// After the scenario ends, the screen gets this long to show its stalls.
const SHOW_GRACE: Duration = Duration::from_secs(5);
const KEY_TIMEOUT: Duration = Duration::from_secs(10);
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long after stalltop exits its programs may still be listed while the kernel frees them.
const PROGRAM_FREE_TIMEOUT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(250);
/// Between keys, so the terminal never merges them (Esc then a key reads as Alt+key).
const KEY_GAP: Duration = Duration::from_millis(300);
/// Warm-up before the CPU measurement starts.
const WARM_UP: Duration = Duration::from_secs(5);
/// The live view's CPU budget at 1 s refresh, percent of one core.
const CPU_TARGET_PERCENT: f64 = 1.0;

#[derive(clap::Args)]
pub struct Args {
    /// Instead, measure the live view's own CPU use (utime + stime of all its threads) for this
    /// many seconds at the default 1 s refresh, and fail above 1% of a core.
    #[arg(long, value_name = "SECONDS")]
    idle_cpu: Option<u64>,
}

pub fn main(args: &Args) -> Result<()> {
    interrupt::install()?;
    let stalltop = stalltop_binary()?;
    require_tool("tmux", &["-V"], "apt-get install tmux")?;
    require_tool("bpftool", &["version"], "apt-get install bpftool")?;
    let workdir = std::env::temp_dir().join(format!("stalltop-tui-{}", process::id()));
    fs::create_dir_all(&workdir).with_context(|| format!("mkdir {}", workdir.display()))?;
    let result = match args.idle_cpu {
        Some(seconds) => measure_cpu(&stalltop, &workdir, Duration::from_secs(seconds)),
        None => drive(&stalltop, &workdir),
    };
    match &result {
        Ok(()) => {
            fs::remove_dir_all(&workdir).with_context(|| format!("rm -r {}", workdir.display()))?
        }
        Err(_) => eprintln!("tui-test: screens and logs kept in {}", workdir.display()),
    }
    result
}

fn stalltop_binary() -> Result<PathBuf> {
    let path = crate::workspace_root().join("target/release/stalltop");
    ensure!(
        path.is_file(),
        "{} is missing: build it first with `cargo build --release` (tui-test builds nothing)",
        path.display()
    );
    Ok(path)
}

fn require_tool(name: &str, args: &[&str], install: &str) -> Result<()> {
    match Command::new(name).args(args).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => bail!(
            "`{name} {}` failed ({}): install it ({install})",
            args.join(" "),
            out.status
        ),
        Err(e) => {
            bail!("{name} is missing ({e}): install it ({install}); the terminal test needs it")
        }
    }
}

/// The scripted session: start, watch the scenario's stall appear, open its culprit, quit, check.
fn drive(stalltop: &Path, workdir: &Path) -> Result<()> {
    let tmux = Tmux::start(workdir)?;
    let log = workdir.join("stalltop.log");
    let run = tmux.launch(stalltop, &["--runq-threshold", RUNQ_THRESHOLD], &log)?;
    eprintln!(
        "tui-test: stalltop (pid {}) is live in tmux with {} BPF programs",
        run.pid,
        run.programs.len()
    );

    // Only the stalls between the victim and the hog, as a user chasing them would.
    tmux.filter("comm:victim comm:hog")?;
    eprintln!("tui-test: running scenario noisy-neighbour ({SCENARIO_LENGTH:?})");
    let scenario = thread::spawn(|| run_scenario_when_free(SCENARIO_LENGTH));
    // The model may later fold a victim/hog stall into a longer one with another waiter: freeze
    // the screen (p) as soon as one shows, and drill down on what is frozen.
    let finished = || scenario.is_finished();
    let frozen = freeze_on_victim_hog_stall(&tmux, &finished);
    let outcome = scenario
        .join()
        .map_err(|_| anyhow::anyhow!("the scenario thread panicked"))?;
    let outcome = outcome.context("scenario noisy-neighbour")?;
    eprintln!("tui-test: scenario ground truth: {}", outcome.summary());
    frozen?;
    eprintln!("tui-test: a stall between the victim and the hog is on screen (paused)");

    // Open the newest.
    tmux.keys(&["Enter"])?;
    let stall = tmux.wait_for(
        "the stall's details",
        |s| s.contains("Stall #"),
        Deadline::After(KEY_TIMEOUT),
    )?;
    // Whichever waited, both sides are named with their cgroups.
    for expected in [
        "What waited",
        "Culprit",
        "victim",
        "hog",
        "/stalltop_victim",
        "/stalltop_noisy",
    ] {
        ensure!(
            stall.contains(expected),
            "the stall's details lack `{expected}`:\n{stall}"
        );
    }
    eprintln!("tui-test: a victim/hog stall opens with both tasks and their cgroups");
    tmux.keys(&["Escape"])?;

    // The hog as a culprit: the culprits table is the next pane.
    tmux.filter("comm:hog container:stalltop_noisy")?;
    tmux.keys(&["Tab", "Enter"])?;
    let culprit = tmux.wait_for(
        "the hog's culprit details",
        |s| s.contains("Culprit hog"),
        Deadline::After(KEY_TIMEOUT),
    )?;
    ensure!(
        culprit.contains("/stalltop_noisy") && culprit.contains("caused"),
        "the culprit details do not show the hog of /stalltop_noisy:\n{culprit}"
    );
    eprintln!("tui-test: the hog's culprit details open");
    tmux.keys(&["Escape", "p"])?;
    tmux.wait_for(
        "the live screen again",
        |s| s.contains("● LIVE") && !s.contains("Culprit hog"),
        Deadline::After(KEY_TIMEOUT),
    )?;

    run.quit(&tmux)?;
    tmux.check_restored()?;
    eprintln!("tui-test: q quit, terminal restored, BPF programs detached: PASS");
    drop(tmux);

    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let tmux = Tmux::start(workdir)?;
        let run = tmux.launch(stalltop, &[], &workdir.join(format!("stalltop-{name}.log")))?;
        run.kill(&tmux, signal)?;
        tmux.check_restored()?;
        eprintln!("tui-test: {name}: terminal restored, BPF programs detached: PASS");
    }
    Ok(())
}

/// Wait for a stall between the victim and the hog, then pause; if a refresh between the
/// capture and the key replaced it, resume and wait again.
fn freeze_on_victim_hog_stall(tmux: &Tmux, finished: &dyn Fn() -> bool) -> Result<()> {
    loop {
        tmux.wait_for(
            "a stall between the victim and the hog",
            victim_hog_stall_shown,
            Deadline::GraceAfter(finished),
        )?;
        tmux.keys(&["p"])?;
        let paused = tmux.wait_for(
            "the paused screen",
            |s| s.contains("PAUSED"),
            Deadline::After(KEY_TIMEOUT),
        )?;
        if victim_hog_stall_shown(&paused) {
            return Ok(());
        }
        tmux.keys(&["p"])?;
    }
}

/// A row of the feed (the left half of the wide layout) naming both the victim and the hog:
/// one waited while the other held the CPU.
fn victim_hog_stall_shown(screen: &str) -> bool {
    table_rows(screen, "CULPRIT CHAIN", 0..usize::from(WIDTH / 2))
        .iter()
        .any(|row| row.contains("victim[") && row.contains("hog["))
}

/// The data rows of the table pane whose column titles contain `title`, cut to the terminal
/// columns `columns` (the wide layout puts two panes side by side).
fn table_rows(screen: &str, title: &str, columns: std::ops::Range<usize>) -> Vec<String> {
    let lines: Vec<String> = screen
        .lines()
        .map(|line| {
            line.chars()
                .skip(columns.start)
                .take(columns.len())
                .collect()
        })
        .collect();
    let Some(titles) = lines.iter().position(|l| l.contains(title)) else {
        return Vec::new();
    };
    lines[titles + 1..]
        .iter()
        .take_while(|l| !l.starts_with('└'))
        .cloned()
        .collect()
}

/// `scenario::run`, waiting while another scenario holds the host's scenario lock.
fn run_scenario_when_free(length: Duration) -> Result<scenario::Outcome> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match scenario::run(Name::NoisyNeighbour, length, || Ok(())) {
            Err(e)
                if format!("{e:#}").contains("another scenario is running")
                    && Instant::now() < deadline =>
            {
                eprintln!("tui-test: another scenario is running; retrying in {LOCK_RETRY:?}");
                thread::sleep(LOCK_RETRY);
                ensure!(!interrupt::requested(), "interrupted");
            }
            result => return result,
        }
    }
}

/// How long `Tmux::wait_for` waits.
#[derive(Clone, Copy)]
enum Deadline<'a> {
    After(Duration),
    /// Until a bounded background job (the scenario) finished, and a grace period after.
    GraceAfter(&'a dyn Fn() -> bool),
}

/// A tmux server of our own (its socket in the work directory), killed and its socket
/// removed when dropped.
struct Tmux {
    socket: PathBuf,
    workdir: PathBuf,
    /// stalltop processes started in the pane, waited for (or killed) on drop.
    launched: std::cell::RefCell<Vec<u32>>,
}

/// stalltop running in the pane.
struct Running {
    pid: u32,
    /// BPF program ids it holds (from /proc/<pid>/fdinfo).
    programs: BTreeSet<u64>,
}

impl Tmux {
    fn start(workdir: &Path) -> Result<Tmux> {
        let tmux = Tmux {
            socket: workdir.join("tmux.sock"),
            workdir: workdir.to_path_buf(),
            launched: Default::default(),
        };
        let (w, h) = (WIDTH.to_string(), HEIGHT.to_string());
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

    fn capture(&self) -> Result<String> {
        let out = self.run(&["capture-pane", "-p", "-t", "tui"])?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn display(&self, format: &str) -> Result<String> {
        let out = self.run(&["display-message", "-p", "-t", "tui", format])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Named keys (Enter, Tab, Escape...) one at a time.
    fn keys(&self, keys: &[&str]) -> Result<()> {
        for key in keys {
            self.run(&["send-keys", "-t", "tui", key])?;
            thread::sleep(KEY_GAP);
        }
        Ok(())
    }

    /// Replace the filter with `filter` (/, Ctrl-U, text, Enter).
    fn filter(&self, filter: &str) -> Result<()> {
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

    /// Poll the screen until `done` holds, or fail at the deadline.
    fn wait_for(
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
    fn launch(&self, stalltop: &Path, args: &[&str], log: &Path) -> Result<Running> {
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
    fn check_restored(&self) -> Result<()> {
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
    fn quit(&self, tmux: &Tmux) -> Result<()> {
        tmux.keys(&["q"])?;
        self.ended(tmux, "q")
    }

    /// Send `signal` to stalltop (which this test started); the same exit checks as `quit`.
    fn kill(&self, tmux: &Tmux, signal: libc::c_int) -> Result<()> {
        // SAFETY: kill(2) with a pid this test started and has not reaped; no memory involved.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, signal) };
        ensure!(
            rc == 0,
            "kill {}: {}",
            self.pid,
            std::io::Error::last_os_error()
        );
        self.ended(tmux, &format!("signal {signal}"))
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
                // SAFETY: kill(2) on a pid this test started; no memory involved.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

/// The pid of the child of `parent` whose comm is `comm`.
fn child_named(parent: u32, comm: &str) -> Result<u32> {
    for entry in fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces, so split at the last ')'.
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("", |(_, n)| n);
        let ppid = tail
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if name == comm && ppid == Some(parent) {
            return Ok(pid);
        }
    }
    bail!("no process {comm} under the pane's shell {parent}")
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

/// The live view's own CPU (utime + stime of every thread) over `length` at 1 s refresh.
fn measure_cpu(stalltop: &Path, workdir: &Path, length: Duration) -> Result<()> {
    let tmux = Tmux::start(workdir)?;
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
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
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
type ThreadTicks = BTreeMap<u32, (String, (u64, u64))>;

/// The CPU times of every thread of process `pid`.
fn thread_ticks(pid: u32) -> Result<ThreadTicks> {
    let mut threads = ThreadTicks::new();
    for entry in fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("", |(_, n)| n).to_string();
        // After the comm: state, then ppid ... utime and stime are fields 14 and 15 of the
        // line, the 11th and 12th numbers after the state.
        let fields: Vec<u64> = tail
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        threads.insert(tid, (name, (fields[10], fields[11])));
    }
    Ok(threads)
}
