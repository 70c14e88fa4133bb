//! `cargo xtask kernel-matrix`: boots Debian's stock kernels under QEMU, two at a time, and in
//! each runs the probe tests and the static `stalltop record` + `report --json` in every
//! mode over a small load; checks what came back; `--write-docs` writes docs/kernels.md from it.

pub(crate) mod binaries;
pub(crate) mod checks;
pub(crate) mod docs;
mod guest;
mod guest_output;
mod guest_script;
mod host;
pub(crate) mod initramfs;
mod kernels;
mod modes;
pub(crate) mod qemu;
mod report;

use std::collections::VecDeque;
use std::fs;
use std::path::Path;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::builder::PossibleValuesParser;

use self::docs::KernelRun;
use self::guest::{Judged, Target};
use self::guest_output::GuestOutput;
use self::guest_script::Plan;
use self::kernels::{Kernel, FLAVOURS};
use self::modes::{Mode, SYSCALL_MODES};
use crate::scenario::command;
use crate::workspace::{target_dir, workspace_root};
use crate::{arm64_verify, interrupt, prereqs};

/// Each mode records this long over the load.
const RECORD: Duration = Duration::from_secs(3);
/// Limits inside a guest. Under TCG a passing guest boots in ~10 s, and loads stalltop's
/// programs in a few seconds; one load that runs into the verifier's 1,000,000-instruction
/// limit takes about a minute. The limits only bound a failing guest, so that the whole matrix
/// stays within CI's time even then (five guests, two at a time: 3 x 1,230 s at most). The
/// probe tests load every family about thirty times: on Debian 6.1 generic they passed in
/// ~250 s before the softirq exit and hrtimer programs, and ran past 300 s with them; with the
/// start-up check's tests and the moved sleeper they pass in 376-447 s (6.1 rt the longest);
/// with the enqueue throttle test too, the generic 6.1 and 6.12 guests passed them in 207-244 s.
const PROBE_TESTS_LIMIT: Duration = Duration::from_secs(600);
const RECORD_LIMIT: Duration = Duration::from_secs(60);
const REPORT_LIMIT: Duration = Duration::from_secs(30);
/// Firmware, kernel and initramfs unpacking before the guest's first step (~10 s seen).
const BOOT_ALLOWANCE: Duration = Duration::from_secs(90);
/// A guest silent on both serial ports this long froze whole (its script's heartbeat comes every
/// `guest_script::HEARTBEAT`; seen: a guest silent from right after boot until its limit).
const SILENCE_LIMIT: Duration = Duration::from_secs(120);
/// Guests booted at once. Each emulates its CPUs on one host thread (`qemu::run`), so two
/// share this machine kind's 2 CPUs without slowing each other.
const GUESTS_AT_ONCE: usize = 2;

#[derive(clap::Args)]
pub struct Args {
    /// Write docs/kernels.md from this run, with a line for the host's kernel (recorded on
    /// this machine, no QEMU).
    #[arg(long)]
    write_docs: bool,
    /// Boot only this flavour (repeatable; default: every one).
    #[arg(
        long = "flavour",
        value_name = "NAME",
        value_parser = PossibleValuesParser::new(FLAVOURS.iter().map(|f| f.name))
    )]
    flavours: Vec<String>,
    /// Record only in this syscall mode (repeatable; default: every one).
    #[arg(
        long = "syscalls",
        value_name = "MODE",
        value_parser = PossibleValuesParser::new(SYSCALL_MODES.iter().map(|m| m.name))
    )]
    syscall_modes: Vec<String>,
}

/// One guest's result.
struct GuestRun {
    kernel: Kernel,
    wall: Duration,
    judged: Judged,
}

pub fn main(args: &Args) -> Result<()> {
    interrupt::install()?;
    prereqs::ensure()?;
    command::require(
        "qemu-system-x86_64",
        "the matrix boots its kernels with it (Debian package qemu-system-x86)",
    )?;
    let workdir = target_dir().join("kernel-matrix");
    let modes: Vec<Mode> = Mode::all()
        .into_iter()
        .filter(|mode| selected(&args.syscall_modes, mode.syscalls.name))
        .collect();
    let plan = Plan {
        modes,
        record: RECORD,
        probe_tests_limit: PROBE_TESTS_LIMIT,
        record_limit: RECORD_LIMIT,
        report_limit: REPORT_LIMIT,
    };

    // The tree the binaries are built from, named before anything else can change it.
    let commit = tree_commit()?;
    let binaries = binaries::build()?;
    let mut kernels = Vec::new();
    for &flavour in FLAVOURS {
        if selected(&args.flavours, flavour.name) {
            kernels.push(kernels::fetch(flavour, &workdir.join("kernels"))?);
        }
    }
    let initramfs = workdir.join("initramfs.cpio");
    let entries = initramfs::guest_entries(
        guest_script::init_script(&plan),
        &binaries.stalltop,
        &binaries.probe_tests,
    )?;
    initramfs::write(&entries, &initramfs)?;

    let started = Instant::now();
    let runs = run_guests(kernels, &plan, &initramfs, &workdir)?;
    let total = started.elapsed();
    print_summary(&runs, total);

    let mut failures: usize = runs.iter().map(|run| run.judged.failures.len()).sum();
    if args.write_docs {
        failures += write_docs(runs, &binaries.stalltop, &plan, &workdir, &commit)?;
    }
    if failures > 0 {
        bail!(
            "{failures} kernel-matrix checks failed; guest logs in {}",
            workdir.display()
        );
    }
    Ok(())
}

fn selected(chosen: &[String], name: &str) -> bool {
    chosen.is_empty() || chosen.iter().any(|c| c == name)
}

/// `git describe --always` of the workspace, `-dirty` if it has changes beyond
/// docs/kernels.md.
pub(crate) fn tree_commit() -> Result<String> {
    let root = workspace_root().display().to_string();
    let commit = command::run("git", &["-C", &root, "describe", "--always"])?;
    // The file this writes is no change to the code it measured (arm64-verify runs after the
    // matrix wrote it).
    let changed = command::run(
        "git",
        &[
            "-C",
            &root,
            "status",
            "--porcelain",
            "--",
            ".",
            ":!docs/kernels.md",
        ],
    )?;
    Ok(match changed.trim().is_empty() {
        true => commit.trim().to_string(),
        false => format!("{}-dirty", commit.trim()),
    })
}

/// Runs a guest of each kernel, GUESTS_AT_ONCE at a time; their results in the kernels' order.
fn run_guests(
    kernels: Vec<Kernel>,
    plan: &Plan,
    initramfs: &Path,
    workdir: &Path,
) -> Result<Vec<GuestRun>> {
    let queue = Mutex::new(kernels.into_iter().enumerate().collect::<VecDeque<_>>());
    let next = || queue.lock().expect("no guest thread panics").pop_front();
    let per_thread = thread::scope(|scope| {
        let threads: Vec<_> = (0..GUESTS_AT_ONCE)
            .map(|_| {
                scope.spawn(|| {
                    let mut runs = Vec::new();
                    while let Some((index, kernel)) = next() {
                        runs.push((index, run_guest(kernel, plan, initramfs, workdir)?));
                    }
                    anyhow::Ok(runs)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| thread.join().expect("a guest thread panicked"))
            .collect::<Result<Vec<_>>>()
    })?;
    let mut runs: Vec<(usize, GuestRun)> = per_thread.into_iter().flatten().collect();
    runs.sort_by_key(|(index, _)| *index);
    Ok(runs.into_iter().map(|(_, run)| run).collect())
}

/// Boots after an emulator fault before a guest's failures count. Emulated (TCG) guests of the
/// PREEMPT_RT kernel froze whole twice in a row in one CI run (at its first probe test, then at
/// `record --syscalls exact`) where the other boots of that commit passed.
const EMULATOR_FAULT_BOOTS: u32 = 2;

/// Boots `kernel` with the plan's initramfs and judges what it reported. Fails only when
/// interrupted; a guest that failed, timed out or died is a judged failure. A guest whose
/// results port stalled (its console shows the script went on), that livelocked in the
/// emulator while kernel text was patched, or that froze whole, is booted again, up to
/// `EMULATOR_FAULT_BOOTS` times.
fn run_guest(kernel: Kernel, plan: &Plan, initramfs: &Path, workdir: &Path) -> Result<GuestRun> {
    let dir = workdir.join(&kernel.release);
    fs::create_dir_all(&dir).with_context(|| format!("mkdir -p {}", dir.display()))?;
    let mut attempt = boot(&kernel, plan, initramfs, &dir)?;
    for _ in 0..EMULATOR_FAULT_BOOTS {
        let Some(why) = emulator_fault(&attempt) else {
            break;
        };
        eprintln!(
            "kernel-matrix: {}: {why}; failed checks of this boot: {}; booting it once more",
            kernel.release,
            attempt.judged.failures.join("; ")
        );
        attempt = boot(&kernel, plan, initramfs, &dir)?;
    }
    Ok(GuestRun {
        kernel,
        wall: attempt.wall,
        judged: attempt.judged,
    })
}

/// Why a boot failed for the emulator's sake rather than the guest's, if it did.
fn emulator_fault(attempt: &Boot) -> Option<String> {
    match (
        &attempt.stalled_section,
        &attempt.text_patching_lockup,
        &attempt.frozen_after,
    ) {
        (Some(tag), _, _) => Some(format!(
            "the results port stalled while sending {tag} (the console shows the guest went \
             on: a lost UART interrupt, not a guest failure)"
        )),
        (None, Some(lockup), _) => Some(format!(
            "{lockup} while kernel text was patched (int3, or stuck on a static key's nop): a \
             livelock of the emulator's stale translation, not of the guest"
        )),
        (None, None, Some(tag)) => Some(format!(
            "the guest fell silent after {tag}, its console heartbeat too, though each of its \
             steps has a limit of its own: the whole guest froze in the emulator"
        )),
        (None, None, None) => None,
    }
}

/// One boot of a guest.
struct Boot {
    wall: Duration,
    judged: Judged,
    /// Set when the guest was killed with its results port stalled in this section.
    stalled_section: Option<String>,
    /// Set when the guest died of a lockup while kernel text was being patched.
    text_patching_lockup: Option<String>,
    /// Set when the host killed the guest for its silence, with nothing sent since this
    /// section.
    frozen_after: Option<String>,
}

fn boot(kernel: &Kernel, plan: &Plan, initramfs: &Path, dir: &Path) -> Result<Boot> {
    let results = dir.join("results.txt");
    let guest = qemu::Guest {
        machine: &qemu::X86_64,
        kernel: &kernel.vmlinuz,
        initramfs,
        results: Some(results.clone()),
        console: dir.join("console.log"),
        qemu_log: dir.join("qemu.log"),
        limit: BOOT_ALLOWANCE + plan.steps_limit(),
        silence_limit: SILENCE_LIMIT,
    };
    eprintln!(
        "kernel-matrix: booting {} ({} {}), at most {:?}",
        kernel.release, kernel.package, kernel.version, guest.limit
    );
    let started = Instant::now();
    let outcome = qemu::run(&guest);
    let wall = started.elapsed();
    if interrupt::requested() {
        bail!("interrupted by a signal");
    }
    let text = fs::read(&results)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let target = Target {
        release: &kernel.release,
        preempt_rt: kernel.flavour.preempt_rt,
    };
    let output = GuestOutput::parse(&text);
    let mut judged = guest::judge(&output, target, plan);
    let mut stalled_section = None;
    let mut text_patching_lockup = None;
    let mut frozen_after = None;
    if outcome.is_err() || !output.done {
        // The firmware's screen control sequences are no use in a message.
        let console: String = fs::read(&guest.console)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
            .chars()
            .filter(|c| *c == '\n' || !c.is_control())
            .collect();
        if outcome.is_err() {
            stalled_section = guest_output::stalled_section(&console);
        }
        let silent = outcome
            .as_ref()
            .is_err_and(|err| err.downcast_ref::<qemu::Silent>().is_some());
        if silent {
            frozen_after = guest_output::silent_after(&console);
        }
        text_patching_lockup = guest_output::text_patching_lockup(&console);
        let how = match &outcome {
            Err(err) => format!("{err:#}"),
            Ok(_) => "the guest stopped before the end of its script".into(),
        };
        judged.failures.push(format!(
            "{how}; the kernel console ({}) ends:\n{}",
            guest.console.display(),
            guest::console_tail(&console)
        ));
    }
    eprintln!(
        "kernel-matrix: {} done in {:.0?}: {}",
        kernel.release,
        wall,
        verdict(&judged)
    );
    Ok(Boot {
        wall,
        judged,
        stalled_section,
        text_patching_lockup,
        frozen_after,
    })
}

fn verdict(judged: &Judged) -> String {
    match judged.failures.len() {
        0 => "PASS".into(),
        n => format!("FAIL ({n} checks)"),
    }
}

fn print_summary(runs: &[GuestRun], total: Duration) {
    for run in runs {
        if run.judged.failures.is_empty() {
            continue;
        }
        eprintln!("\n{}: failed checks:", run.kernel.release);
        for failure in &run.judged.failures {
            eprintln!("  - {failure}");
        }
    }
    println!("\n{:<22} {:>8}  result", "kernel", "time");
    for run in runs {
        println!(
            "{:<22} {:>7.0?}  {}",
            run.kernel.release,
            run.wall,
            verdict(&run.judged)
        );
    }
    println!("{:<22} {:>7.0?}", "total", total);
}

/// Records on the host, then writes docs/kernels.md from the guests and the host; the host's
/// failed checks.
fn write_docs(
    runs: Vec<GuestRun>,
    stalltop: &Path,
    plan: &Plan,
    workdir: &Path,
    commit: &str,
) -> Result<usize> {
    let (host_modes, host_failures) =
        host::run(stalltop, &plan.modes, plan.record, &workdir.join("host"))?;
    for failure in &host_failures {
        eprintln!("  - {failure}");
    }
    let mut lines: Vec<KernelRun> = runs
        .into_iter()
        .map(|run| KernelRun {
            source: format!(
                "Debian `{}` {} under QEMU",
                run.kernel.package, run.kernel.version
            ),
            note: run.kernel.flavour.note,
            failures: run.judged.failures.len(),
            wall: Some(run.wall),
            release: run.kernel.release,
            modes: run.judged.modes,
        })
        .collect();
    lines.push(KernelRun {
        release: command::run("uname", &["-r"])?.trim().to_string(),
        source: "the machine that ran the matrix, no QEMU (probe families only)".into(),
        note: "",
        failures: host_failures.len(),
        wall: None,
        modes: host_modes,
    });
    let invocation: Vec<String> = std::env::args().skip(1).collect();
    let invocation = format!("cargo xtask {}", invocation.join(" "));
    let path = workspace_root().join("docs/kernels.md");
    let mut doc = docs::render(&lines, &invocation, commit);
    // The arm64 section is `cargo xtask arm64-verify --write-docs`'s: kept as it is.
    let old = fs::read_to_string(&path).unwrap_or_default();
    if let Some(arm64) = arm64_verify::docs::section_of(&old) {
        doc = arm64_verify::docs::replace_section(&doc, arm64);
    }
    fs::write(&path, doc).with_context(|| format!("write {}", path.display()))?;
    eprintln!("kernel-matrix: wrote {}", path.display());
    Ok(host_failures.len())
}
