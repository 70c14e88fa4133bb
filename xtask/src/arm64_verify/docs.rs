//! The arm64 section at the end of docs/kernels.md: written by `arm64-verify --write-docs`,
//! kept as it is when `kernel-matrix --write-docs` writes the rest.

use std::fmt::Write;

use super::results::ProgramResult;
use crate::matrix::checks::VERIFIED_INSNS_BUDGET;
use crate::matrix::docs::thousands;

/// The section's heading, which starts it.
const HEADING: &str = "## arm64: Debian 6.1 under the verifier";

/// What the section says besides its table.
pub struct Run<'a> {
    /// The kernel's .deb and `uname -r`.
    pub deb: &'a str,
    pub release: &'a str,
    /// `2026-11-27`.
    pub date: &'a str,
    pub commit: &'a str,
    /// The object's compiled-in knobs: `syscalls_hooked=1`, ...
    pub knobs: &'a [String],
    /// What each mode sets over them: `sampled: syscalls_hooked=0, ...; off: ...`.
    pub mode_knobs: &'a str,
    pub wall_secs: u64,
}

pub fn render(run: &Run, results: &[ProgramResult]) -> String {
    let largest = results
        .iter()
        .filter_map(|r| Some((r, r.verified_insns?)))
        .max_by_key(|&(_, insns)| insns)
        .map(|(r, insns)| {
            format!(
                "Largest program: {} in {} mode, {} verified instructions ({}% of the budget of \
                 {} the kernel matrix holds every program to; over it, arm64-verify fails).\n\n",
                r.program,
                r.mode.name(),
                thousands(insns),
                insns * 100 / VERIFIED_INSNS_BUDGET,
                thousands(VERIFIED_INSNS_BUDGET)
            )
        })
        .unwrap_or_default();
    let mut section = format!(
        "{HEADING}\n\n\
         Written by `cargo xtask arm64-verify --write-docs` on {date} from commit {commit}; \
         `cargo xtask kernel-matrix --write-docs` keeps this section as it is.\n\n\
         Debian's stock arm64 kernel {release} (`{deb}`) boots under `qemu-system-aarch64 -M \
         virt -cpu max` (TCG, 1 vCPU), and Debian's arm64 `bpftool prog loadall` loads each \
         program section of the arm64 object build.rs compiles, one at a time; a bpf_prog \
         iterator (`xtask/arm64/verified_insns.bpf.c`) reads each program's verified \
         instructions, which no bpftool prints. A program counts as loaded only where its \
         tracepoint exists on that kernel. The guest took {wall} s.\n\n\
         Each syscall mode is verified with the knobs the loader sets for it on a kernel like \
         the x86 6.1 guest (run-queue waits from sched_info, no steal source), set in a copy \
         of the object's .rodata, and loads the sections whose programs the x86 6.1 guest \
         loads in that mode, so its counts are the comparison. The compiled-in knobs: {knobs}; \
         over them, {mode_knobs} (the pending mask's offset is a placeholder: only whether it \
         is set shapes the code); every map at its declared size.\n\n\
         {largest}\
         | program | section | mode | arm64 6.1 | verified insns | x86 6.1 |\n\
         |---|---|---|---|---:|---:|\n",
        date = run.date,
        commit = run.commit,
        release = run.release,
        deb = run.deb,
        wall = run.wall_secs,
        mode_knobs = run.mode_knobs,
        knobs = run
            .knobs
            .iter()
            .map(|knob| format!("`{knob}`"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    for result in results {
        let _ = writeln!(
            section,
            "| {} | {} | {} | {} | {} | {} |",
            result.program,
            result.section,
            result.mode.name(),
            result.outcome.describe(),
            count(result.verified_insns),
            count(result.x86_insns),
        );
    }
    section
}

/// `doc` with its arm64 section (from `HEADING` to the end) replaced by `section`.
pub fn replace_section(doc: &str, section: &str) -> String {
    let rest = match doc.find(HEADING) {
        Some(start) => &doc[..start],
        None => doc,
    };
    format!("{}\n\n{section}", rest.trim_end())
}

/// The arm64 section of `doc`, if it has one.
pub fn section_of(doc: &str) -> Option<&str> {
    doc.find(HEADING).map(|start| &doc[start..])
}

/// `102,211`; an empty cell for none.
fn count(value: Option<u64>) -> String {
    value.map(thousands).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_replaces_the_old_one_at_the_end_or_is_appended() {
        let matrix = "# Kernels\n\n## 6.1.0-56-amd64\n\ntable\n";
        let once = replace_section(matrix, &format!("{HEADING}\n\nfirst\n"));
        assert_eq!(
            once,
            format!("{}\n\n{HEADING}\n\nfirst\n", matrix.trim_end())
        );
        let twice = replace_section(&once, &format!("{HEADING}\n\nsecond\n"));
        assert_eq!(
            twice,
            format!("{}\n\n{HEADING}\n\nsecond\n", matrix.trim_end())
        );
        assert_eq!(section_of(&twice), Some(&*format!("{HEADING}\n\nsecond\n")));
        assert_eq!(section_of(matrix), None);
    }
}
