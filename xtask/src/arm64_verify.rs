//! `cargo xtask arm64-verify`: boots Debian 12's stock arm64 6.1 kernel under QEMU (TCG) and
//! loads every program of the arm64 BPF object build.rs compiles through its verifier; prints
//! each program's result and verified instructions beside the x86 6.1 guest's, and fails when
//! a program that guest loads does not load, attachable, on arm64, or verifies past the
//! matrix's budget. `--write-docs` writes the result into docs/kernels.md.

pub(crate) mod docs;
pub(crate) mod elf;
mod guest_files;
mod guest_script;
mod iterator;
pub(crate) mod object;
mod results;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use self::results::{GuestReport, Outcome, ProgramResult};
use crate::checks::report::SyscallMode;
use crate::matrix::checks::VERIFIED_INSNS_BUDGET;
use crate::matrix::initramfs::{self, Content, Entry};
use crate::matrix::qemu;
use crate::scenario::command;
use crate::vmlinux::debian_arm64;
use crate::workspace::{target_dir, workspace_root};
use crate::{interrupt, matrix, prereqs};

/// The whole guest, boot included. Under TCG it boots in about a minute; each load takes
/// seconds, one that runs into the verifier's limit of a million instructions about a minute.
const GUEST_LIMIT: Duration = Duration::from_secs(20 * 60);
/// The guest's heartbeat comes every 15 s: this long without a line, it froze whole.
const SILENCE_LIMIT: Duration = Duration::from_secs(120);

/// A placeholder for where the pending-softirq mask sits from the run queue: the loader finds
/// it in the kernel's BTF; only whether it is set shapes the code the verifier walks.
const PENDING_PLACEHOLDER: i64 = -89_136;

/// The syscall modes verified, each with the knobs src/probe/loader.rs sets for it on a kernel
/// like the x86 6.1 guest (run-queue waits from sched_info, no steal source, no task storage):
/// `exact` is the object's compiled-in knobs; the cheap modes hook no syscalls and start
/// softirq delays at sampler ticks, and `sampled` follows calls from the ticks.
const MODES: [(SyscallMode, &[(&str, i64)]); 3] = [
    (SyscallMode::Exact, &[]),
    (
        SyscallMode::Sampled,
        &[
            ("syscalls_hooked", 0),
            ("syscalls_sampled", 1),
            ("softirq_delay_ticks", 1),
            ("softirq_pending_from_rq", PENDING_PLACEHOLDER),
        ],
    ),
    (
        SyscallMode::Off,
        &[
            ("syscalls_hooked", 0),
            ("softirq_delay_ticks", 1),
            ("softirq_pending_from_rq", PENDING_PLACEHOLDER),
        ],
    ),
];

#[derive(clap::Args)]
pub struct Args {
    /// Write the result into docs/kernels.md (its arm64 section).
    #[arg(long)]
    write_docs: bool,
}

pub fn main(args: &Args) -> Result<()> {
    interrupt::install()?;
    prereqs::ensure()?;
    command::require(
        "qemu-system-aarch64",
        "it boots the arm64 kernel (Debian package qemu-system-arm)",
    )?;
    let workdir = target_dir().join("arm64-verify");
    fs::create_dir_all(&workdir).with_context(|| format!("mkdir -p {}", workdir.display()))?;
    let commit = matrix::tree_commit()?;
    let object = object::build()?;
    let object = fs::read(&object).with_context(|| format!("read {}", object.display()))?;
    let knobs = object::knobs(&object)?;
    let docs_path = workspace_root().join("docs/kernels.md");
    let doc =
        fs::read_to_string(&docs_path).with_context(|| format!("read {}", docs_path.display()))?;
    let x86 = results::x86_6_1_programs(&doc);
    ensure!(
        !x86.is_empty(),
        "{} has no table of the x86 6.1 guest's programs",
        docs_path.display()
    );
    let units = units_of_every_mode(&object, &x86)?;

    let cache = debian_arm64::cache_dir();
    let kernel = debian_arm64::newest_kernel(&cache)?;
    let initramfs = workdir.join("initramfs.cpio");
    initramfs::write(&guest_entries(&units, &cache, &workdir)?, &initramfs)?;
    let guest = qemu::Guest {
        machine: &qemu::AARCH64,
        kernel: &kernel.vmlinuz,
        initramfs: &initramfs,
        results: None,
        console: workdir.join("console.log"),
        qemu_log: workdir.join("qemu.log"),
        limit: GUEST_LIMIT,
        silence_limit: SILENCE_LIMIT,
    };
    eprintln!(
        "arm64-verify: booting {} ({}), at most {:?}",
        kernel.release(),
        kernel.deb,
        guest.limit
    );
    let started = Instant::now();
    let outcome = qemu::run(&guest);
    let wall = started.elapsed();
    if interrupt::requested() {
        bail!("interrupted by a signal");
    }
    let console = fs::read(&guest.console)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let report = GuestReport::parse(&console);
    let results = results::judge(&units, &report, &x86);
    let release = report.kernel.clone().unwrap_or_else(|| kernel.release());
    print_table(&results, &release, &knobs, wall);

    if args.write_docs {
        let date = command::run("date", &["-u", "+%F"])?;
        let run = docs::Run {
            deb: &kernel.deb,
            release: &release,
            date: date.trim(),
            commit: &commit,
            knobs: &knobs,
            mode_knobs: &mode_knobs(),
            wall_secs: wall.as_secs(),
        };
        let doc = docs::replace_section(&doc, &docs::render(&run, &results));
        fs::write(&docs_path, doc).with_context(|| format!("write {}", docs_path.display()))?;
        eprintln!("arm64-verify: wrote {}", docs_path.display());
    }

    if let Err(err) = outcome {
        bail!("{err:#}; the guest's console: {}", guest.console.display());
    }
    ensure!(
        report.done,
        "the guest stopped before its last load; its console: {}",
        guest.console.display()
    );
    let uncounted: Vec<&str> = results
        .iter()
        .filter(|result| result.verified_insns.is_none() && result.outcome == Outcome::Loaded)
        .map(|result| result.program.as_str())
        .collect();
    ensure!(
        uncounted.is_empty(),
        "the iterator gave no verified instructions for {}; its pin's log: {}",
        uncounted.join(", "),
        report.iterator_log.join(" / ")
    );
    let regressed: Vec<&str> = results
        .iter()
        .filter(|result| result.regressed())
        .map(|result| result.program.as_str())
        .collect();
    ensure!(
        regressed.is_empty(),
        "programs the x86 6.1 guest loads did not load on arm64: {}; their logs are in {}",
        regressed.join(", "),
        guest.console.display()
    );
    let over: Vec<String> = results
        .iter()
        .filter_map(|result| match result.verified_insns {
            Some(insns) if insns > VERIFIED_INSNS_BUDGET => Some(format!(
                "{} in {} mode ({})",
                result.program,
                result.mode.name(),
                matrix::docs::thousands(insns)
            )),
            _ => None,
        })
        .collect();
    ensure!(
        over.is_empty(),
        "over the budget of {} verified instructions the kernel matrix holds x86 to: {}",
        matrix::docs::thousands(VERIFIED_INSNS_BUDGET),
        over.join(", ")
    );
    Ok(())
}

/// For each mode, a copy of the object with its knobs per section whose programs the x86 6.1
/// guest loads in that mode; every program of the object is in some copy.
fn units_of_every_mode(object: &[u8], x86: &results::X86Programs) -> Result<Vec<object::LoadUnit>> {
    let mut units = Vec::new();
    for (mode, knobs) in MODES {
        let copy = object::with_knobs(object, knobs)?;
        units.extend(
            object::load_units(&copy, mode)?
                .into_iter()
                .filter(|unit| results::x86_loads_some(unit, x86)),
        );
    }
    let every = object::load_units(object, SyscallMode::Exact)?;
    let left_out: Vec<&str> = every
        .iter()
        .flat_map(|unit| &unit.programs)
        .filter(|program| !units.iter().any(|u| u.programs.contains(program)))
        .map(String::as_str)
        .collect();
    ensure!(
        left_out.is_empty(),
        "the x86 6.1 guest loads {} in no mode (docs/kernels.md): nothing to compare with",
        left_out.join(", ")
    );
    Ok(units)
}

/// The initramfs: busybox, bpftool and its libraries, the mount points, `/init`, the
/// iterator and each load unit's object (written under `workdir`).
fn guest_entries(units: &[object::LoadUnit], cache: &Path, workdir: &Path) -> Result<Vec<Entry>> {
    let mut entries = guest_files::entries(cache)?;
    entries.push(Entry {
        path: "/init".into(),
        content: Content::Script(guest_script::init_script(units)),
    });
    entries.extend(initramfs::MOUNT_POINTS.iter().map(|&path| Entry {
        path: path.into(),
        content: Content::Directory,
    }));
    let iterator = workdir.join("verified_insns.bpf.o");
    iterator::build(&iterator)?;
    entries.push(Entry {
        path: guest_script::ITERATOR.into(),
        content: Content::HostFile(iterator),
    });
    let objects = workdir.join("objects");
    fs::create_dir_all(&objects).with_context(|| format!("mkdir -p {}", objects.display()))?;
    for (index, unit) in units.iter().enumerate() {
        let name = format!("{index}.bpf.o");
        let path = objects.join(&name);
        fs::write(&path, &unit.object).with_context(|| format!("write {}", path.display()))?;
        entries.push(Entry {
            path: format!("{}/{name}", guest_script::OBJECTS),
            content: Content::HostFile(path),
        });
    }
    Ok(entries)
}

fn print_table(results: &[ProgramResult], release: &str, knobs: &[String], wall: Duration) {
    println!("\narm64 verifier: {release} under QEMU (TCG), guest {wall:.0?}");
    println!(
        "configuration: the object's compiled-in knobs: {}; per mode: {}",
        knobs.join(", "),
        mode_knobs()
    );
    println!(
        "\n{:<26} {:<28} {:<8} {:>9} {:>9}  result",
        "program", "section", "mode", "verified", "x86"
    );
    for result in results {
        let count = |value: Option<u64>| value.map(matrix::docs::thousands).unwrap_or_default();
        println!(
            "{:<26} {:<28} {:<8} {:>9} {:>9}  {}",
            result.program,
            result.section,
            result.mode.name(),
            count(result.verified_insns),
            count(result.x86_insns),
            result.outcome.describe()
        );
    }
}

/// `sampled: syscalls_hooked=0, ...; off: ...`: the knobs each mode sets over the compiled-in.
fn mode_knobs() -> String {
    MODES
        .iter()
        .map(|(mode, knobs)| {
            let set: Vec<String> = knobs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            match set.is_empty() {
                true => format!("{}: as compiled", mode.name()),
                false => format!("{}: {}", mode.name(), set.join(", ")),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
