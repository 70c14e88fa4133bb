//! What the guest's console says about each program, judged against what the x86 6.1 guest of
//! the kernel matrix loads (docs/kernels.md).

use std::collections::{BTreeMap, BTreeSet};

use super::guest_script::MARK;
use super::object::LoadUnit;
use crate::checks::report::SyscallMode;

/// The marked lines of the guest's console.
#[derive(Debug, Default)]
pub struct GuestReport {
    /// `uname -r` in the guest.
    pub kernel: Option<String>,
    /// The guest went through every load unit.
    pub done: bool,
    no_tracepoint: BTreeSet<usize>,
    /// `bpftool -j prog show` of each loaded program, by load unit and program name.
    shown: BTreeMap<(usize, String), String>,
    failed: BTreeSet<usize>,
    /// The end of each failed load's log.
    logs: BTreeMap<usize, Vec<String>>,
    /// Verified instructions by program id, from the iterator.
    insns: BTreeMap<u64, u64>,
    /// The end of the log of the iterator's failed pin.
    pub iterator_log: Vec<String>,
}

impl GuestReport {
    pub fn parse(console: &str) -> Self {
        let mut report = GuestReport::default();
        for line in console.lines() {
            let Some(at) = line.find(MARK) else {
                continue;
            };
            let line = line[at + MARK.len()..].trim_end_matches('\r').trim_start();
            let (what, rest) = line.split_once(' ').unwrap_or((line, ""));
            let (unit, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let number = unit.parse::<u64>().ok();
            let unit = unit.parse::<usize>().ok();
            match (what, unit) {
                ("kernel", _) => report.kernel = Some(rest_of(line)),
                ("done", _) => report.done = true,
                ("iterator-log", _) => report.iterator_log.push(rest_of(line)),
                ("insns", _) => {
                    if let (Some(id), Ok(insns)) = (number, rest.trim().parse::<u64>()) {
                        report.insns.insert(id, insns);
                    }
                }
                ("no-tracepoint", Some(unit)) => {
                    report.no_tracepoint.insert(unit);
                }
                ("failed", Some(unit)) => {
                    report.failed.insert(unit);
                }
                ("log", Some(unit)) => report.logs.entry(unit).or_default().push(rest.into()),
                ("show", Some(unit)) => {
                    let (program, json) = rest.split_once(' ').unwrap_or((rest, ""));
                    report.shown.insert((unit, program.into()), json.into());
                }
                _ => {}
            }
        }
        report
    }

    /// The end of the log of load unit `unit`, if its load failed.
    pub fn log(&self, unit: usize) -> &[String] {
        self.logs.get(&unit).map_or(&[], Vec::as_slice)
    }
}

/// What is after the first word.
fn rest_of(line: &str) -> String {
    line.split_once(' ').map_or("", |(_, rest)| rest).to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Passed the verifier, and its tracepoint exists (or it needs none).
    Loaded,
    /// Its tracepoint is not on this kernel: it cannot attach, whether or not it loaded.
    NoTracepoint { loaded: bool },
    /// The load failed: why (the verifier's verdict, or libbpf's).
    Failed(String),
    /// The guest stopped before it.
    NotRun,
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Outcome::Loaded => "loaded".into(),
            Outcome::NoTracepoint { loaded: true } => "loaded, but no tracepoint".into(),
            Outcome::NoTracepoint { loaded: false } => "no tracepoint".into(),
            Outcome::Failed(why) => format!("FAILED: {why}"),
            Outcome::NotRun => "not run (the guest stopped)".into(),
        }
    }
}

/// The programs the x86 6.1 generic guest loads: by program, its verified instructions in each
/// syscall mode it loads in.
pub type X86Programs = BTreeMap<String, BTreeMap<SyscallMode, u64>>;

/// One program's result on arm64 in one syscall mode, beside the x86 6.1 guest's.
#[derive(Debug)]
pub struct ProgramResult {
    pub program: String,
    pub section: String,
    pub mode: SyscallMode,
    pub outcome: Outcome,
    pub verified_insns: Option<u64>,
    /// The instructions the x86 6.1 guest verified for it in the same mode, if it loads there.
    pub x86_insns: Option<u64>,
}

impl ProgramResult {
    /// A program the x86 6.1 guest loads in this mode that did not load, attachable, on arm64.
    pub fn regressed(&self) -> bool {
        self.x86_insns.is_some() && self.outcome != Outcome::Loaded
    }
}

/// Whether the x86 6.1 guest loads one of `unit`'s programs in `unit`'s mode: the copies worth
/// loading on arm64.
pub fn x86_loads_some(unit: &LoadUnit, x86: &X86Programs) -> bool {
    unit.programs
        .iter()
        .any(|program| x86_insns(x86, program, unit.mode).is_some())
}

fn x86_insns(x86: &X86Programs, program: &str, mode: SyscallMode) -> Option<u64> {
    x86.get(program)?.get(&mode).copied()
}

pub fn judge(units: &[LoadUnit], report: &GuestReport, x86: &X86Programs) -> Vec<ProgramResult> {
    let mut results = Vec::new();
    for (index, unit) in units.iter().enumerate() {
        for program in &unit.programs {
            let shown = report.shown.get(&(index, program.clone()));
            let id = shown.and_then(|json| program_id(json));
            let loaded = id.is_some();
            let verified_insns = id.and_then(|id| report.insns.get(&id).copied());
            let outcome = if report.no_tracepoint.contains(&index) {
                Outcome::NoTracepoint { loaded }
            } else if loaded {
                Outcome::Loaded
            } else if report.failed.contains(&index) {
                Outcome::Failed(failure(program, report.log(index)))
            } else if let Some(json) = shown {
                Outcome::Failed(format!("bpftool prog show: {}", json.trim()))
            } else {
                Outcome::NotRun
            };
            results.push(ProgramResult {
                program: program.clone(),
                section: unit.section.clone(),
                mode: unit.mode,
                outcome,
                verified_insns,
                x86_insns: x86_insns(x86, program, unit.mode),
            });
        }
    }
    results
}

/// The program id in a `bpftool -j prog show` object.
fn program_id(json: &str) -> Option<u64> {
    let shown: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
    shown.get("id")?.as_u64()
}

/// Why `program` did not load, from the end of its unit's load log: the verifier's last line
/// before its count of processed instructions, or else libbpf's or bpftool's last complaint.
/// A program whose section's other program failed says so.
fn failure(program: &str, log: &[String]) -> String {
    let named = |name: &str| format!("prog '{name}':");
    if let Some(other) = log
        .iter()
        .filter(|line| line.contains("prog '") && !line.contains(&named(program)))
        .find_map(|line| line.split("prog '").nth(1)?.split('\'').next())
    {
        return format!("not loaded: {other}, in the same section, failed");
    }
    let end = log
        .iter()
        .position(|line| line.contains("-- END PROG LOAD LOG --"))
        .unwrap_or(log.len());
    let verdict = log[..end].iter().rev().find(|line| {
        !line.starts_with("processed ")
            && !line.starts_with("verification time")
            && !line.starts_with("stack depth")
            && !line.contains("-- BEGIN PROG LOAD LOG --")
    });
    let complaint = log
        .iter()
        .rev()
        .find(|line| line.starts_with("libbpf:") || line.starts_with("Error:"));
    match (end < log.len(), verdict, complaint) {
        (true, Some(verdict), _) => verdict.clone(),
        (_, _, Some(complaint)) => complaint.clone(),
        _ => "no log came back".into(),
    }
}

/// The programs the x86 6.1 generic guest loads, from the rows of docs/kernels.md's
/// `## 6.1.0-N-amd64` section: each with its verified instructions in each syscall mode (of
/// either attach mode: a program's name says which).
pub fn x86_6_1_programs(doc: &str) -> X86Programs {
    let mut programs = X86Programs::new();
    let mut in_section = false;
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            in_section = is_6_1_generic(heading);
            continue;
        }
        if !in_section {
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if let [_, mode, _, _, program, insns] = cells[..] {
            if let (Some(mode), Ok(insns)) = (
                SyscallMode::named(mode),
                insns.replace(',', "").parse::<u64>(),
            ) {
                programs
                    .entry(program.to_owned())
                    .or_default()
                    .insert(mode, insns);
            }
        }
    }
    programs
}

/// `6.1.0-56-amd64`, not the cloud or rt flavour.
fn is_6_1_generic(release: &str) -> bool {
    release
        .strip_prefix("6.1.0-")
        .and_then(|rest| rest.strip_suffix("-amd64"))
        .is_some_and(|abi| abi.parse::<u32>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(section: &str, programs: &[&str]) -> LoadUnit {
        LoadUnit {
            mode: SyscallMode::Exact,
            section: section.into(),
            programs: programs.iter().map(|p| p.to_string()).collect(),
            object: Vec::new(),
        }
    }

    #[test]
    fn the_x86_programs_come_from_the_6_1_generic_section_with_each_modes_count() {
        let doc = "## 6.1.0-56-amd64\n\n| attach | syscalls | family | load | program | verified insns |\n\
                   |---|---|---|---:|---|---:|\n\
                   | tp-btf | sampled | sched | 2,200 ms | btf_sched_switch | 102,211 |\n\
                   | tp-btf | exact | sched | 3,073 ms | btf_sched_switch | 92,950 |\n\
                   | raw-tp | off | sched | 3,143 ms | set_ksoftirqd | 12 |\n\n\
                   ## 6.1.0-56-cloud-amd64\n\n\
                   | tp-btf | sampled | sched | 2,616 ms | btf_only_on_cloud | 1 |\n";
        let programs = x86_6_1_programs(doc);
        let modes =
            |pairs: &[(SyscallMode, u64)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
        assert_eq!(
            programs.into_iter().collect::<Vec<_>>(),
            [
                (
                    "btf_sched_switch".to_string(),
                    modes(&[
                        (SyscallMode::Exact, 92_950),
                        (SyscallMode::Sampled, 102_211)
                    ])
                ),
                (
                    "set_ksoftirqd".to_string(),
                    modes(&[(SyscallMode::Off, 12)])
                )
            ]
        );
    }

    #[test]
    fn each_program_is_judged_from_the_marked_console_lines() {
        let units = [
            unit("tp_btf/sched_switch", &["btf_sched_switch"]),
            unit("raw_tp/gone", &["raw_gone"]),
            unit("raw_tp", &["set_ksoftirqd", "read_kernel_values"]),
            unit("perf_event", &["btf_cpu_sample"]),
        ];
        let console = "\
[    1.0] booting\n\
arm64-verify: kernel 6.1.0-56-arm64\r\n\
arm64-verify: show 0 btf_sched_switch {\"id\":5,\"name\":\"btf_sched_switc\"}\n\
[    9.1] arm64-verify: alive\n\
arm64-verify: insns 1 25\n\
arm64-verify: insns 5 99001\n\
arm64-verify: no-tracepoint 1\n\
arm64-verify: show 1 raw_gone {\"id\":6}\n\
arm64-verify: insns 6 10\n\
arm64-verify: failed 2\n\
arm64-verify: log 2 libbpf: prog 'read_kernel_values': BPF program load failed: Permission denied\n\
arm64-verify: log 2 libbpf: prog 'read_kernel_values': -- BEGIN PROG LOAD LOG --\n\
arm64-verify: log 2 R1 invalid mem access 'scalar'\n\
arm64-verify: log 2 processed 12 insns (limit 1000000)\n\
arm64-verify: log 2 -- END PROG LOAD LOG --\n";
        let report = GuestReport::parse(console);
        assert_eq!(report.kernel.as_deref(), Some("6.1.0-56-arm64"));
        assert!(!report.done);
        let exact = |insns: u64| BTreeMap::from([(SyscallMode::Exact, insns)]);
        let x86 = X86Programs::from([
            ("btf_sched_switch".to_string(), exact(92_950)),
            ("read_kernel_values".to_string(), exact(125)),
            (
                "btf_cpu_sample".to_string(),
                BTreeMap::from([(SyscallMode::Sampled, 96_287)]),
            ),
        ]);
        assert!(x86_loads_some(&units[0], &x86));
        assert!(!x86_loads_some(&units[3], &x86), "not in exact mode");
        let results = judge(&units, &report, &x86);
        let outcomes: Vec<(&str, Outcome, Option<u64>)> = results
            .iter()
            .map(|r| (r.program.as_str(), r.outcome.clone(), r.verified_insns))
            .collect();
        assert_eq!(
            outcomes,
            [
                ("btf_sched_switch", Outcome::Loaded, Some(99_001)),
                ("raw_gone", Outcome::NoTracepoint { loaded: true }, Some(10)),
                (
                    "set_ksoftirqd",
                    Outcome::Failed(
                        "not loaded: read_kernel_values, in the same section, failed".into()
                    ),
                    None
                ),
                (
                    "read_kernel_values",
                    Outcome::Failed("R1 invalid mem access 'scalar'".into()),
                    None
                ),
                ("btf_cpu_sample", Outcome::NotRun, None),
            ]
        );
        let regressed: Vec<&str> = results
            .iter()
            .filter(|r| r.regressed())
            .map(|r| r.program.as_str())
            .collect();
        assert_eq!(regressed, ["read_kernel_values"]);
    }
}
