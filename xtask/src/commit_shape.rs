//! The shape of every commit since BASE (CONTRIBUTING.md, "Commits"): an area-prefixed subject
//! of at most 72 characters, a blank line, a body wrapped at 72 columns (indented quoted output
//! excepted). Merge commits are the lead's bookkeeping and are not checked.

use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::workspace::workspace_root;

/// The last commit before the shape was stated; every later commit follows it.
const BASE: &str = "209b1052819855759dacb27eb05406bfe3f96b65";
const SUBJECT_MAX: usize = 72;
const BODY_WIDTH: usize = 72;

pub fn check() -> Result<()> {
    let base = resolve_base()?;
    let log = git(&[
        "log",
        "--no-merges",
        "--format=%H%x00%B%x01",
        &format!("{base}..HEAD"),
    ])?;
    let mut failures = Vec::new();
    let mut checked = 0;
    for entry in log.split('\u{1}').map(str::trim).filter(|e| !e.is_empty()) {
        let (hash, message) = entry.split_once('\0').unwrap_or((entry, ""));
        checked += 1;
        for problem in problems(message) {
            failures.push(format!("{}: {problem}", &hash[..12.min(hash.len())]));
        }
    }
    if !failures.is_empty() {
        bail!(
            "{} of {checked} commits since {} break the commit shape (CONTRIBUTING.md, \"Commits\"):\n  {}",
            failures.len(),
            &base[..12],
            failures.join("\n  ")
        );
    }
    eprintln!(
        "{checked} commits since {} have the commit shape",
        &base[..12]
    );
    Ok(())
}

/// BASE, or in a clone too shallow to hold it, the oldest commit the clone has.
fn resolve_base() -> Result<String> {
    if git(&["cat-file", "-e", &format!("{BASE}^{{commit}}")]).is_ok() {
        return Ok(BASE.to_string());
    }
    if git(&["rev-parse", "--is-shallow-repository"])?.trim() != "true" {
        bail!("the commit-shape base {BASE} is not in this repository");
    }
    let oldest = git(&["rev-list", "--max-parents=0", "HEAD"])?;
    Ok(oldest.lines().next().context("no commits")?.to_string())
}

/// What is wrong with one commit message (empty: nothing).
fn problems(message: &str) -> Vec<String> {
    let mut lines = message.lines();
    let subject = lines.next().unwrap_or("");
    let mut found = Vec::new();
    if subject.chars().count() > SUBJECT_MAX {
        found.push(format!(
            "subject is {} characters (at most {SUBJECT_MAX})",
            subject.chars().count()
        ));
    }
    if !has_area(subject) {
        found.push(format!("subject does not start with `area: `: {subject:?}"));
    }
    match lines.next() {
        None => found.push("no body (a blank line, then the why and the evidence)".into()),
        Some(line) if !line.trim().is_empty() => {
            found.push("the line after the subject is not blank".into())
        }
        Some(_) => {}
    }
    let body: Vec<&str> = lines.collect();
    if body.iter().all(|l| l.trim().is_empty()) {
        found.push("no body (the why and the evidence)".into());
    }
    for line in &body {
        let quoted = line.starts_with(' ') || line.starts_with('\t');
        if !quoted && line.chars().count() > BODY_WIDTH {
            found.push(format!(
                "body line of {} characters (wrap at {BODY_WIDTH}): {:?}",
                line.chars().count(),
                line.chars().take(40).collect::<String>()
            ));
        }
    }
    found
}

/// `area: what`, the area lower-case words, digits and `/ _ - . ,` (e.g. `bpf/sched`,
/// `abi, failure`).
fn has_area(subject: &str) -> bool {
    let Some((area, rest)) = subject.split_once(": ") else {
        return false;
    };
    !area.is_empty()
        && !rest.trim().is_empty()
        && area.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && area
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "/_-., ".contains(c))
}

fn git(args: &[&str]) -> Result<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(workspace_root())
        .output()
        .context("running git")?;
    if !output.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_shaped_message_has_no_problems() {
        let message = "bpf/sched: keep a wait's culprit across CPUs\n\nWhy, wrapped.\n    quoted output that runs long, long, long, long, long, long, long, long\n";
        assert!(problems(message).is_empty(), "{:?}", problems(message));
    }

    #[test]
    fn a_paragraph_in_the_subject_is_refused() {
        let message = "Blame by time held over the whole wait: 32 slices per CPU (96 ms of 3 ms slices; with 8 a task that held ...)";
        let found = problems(message);
        assert!(
            found.iter().any(|p| p.contains("characters (at most 72)")),
            "{found:?}"
        );
        assert!(found.iter().any(|p| p.contains("area: ")), "{found:?}");
        assert!(found.iter().any(|p| p.contains("no body")), "{found:?}");
    }

    #[test]
    fn a_missing_blank_line_and_a_long_body_line_are_refused() {
        let message = format!("report: times\nbody right away\n{}\n", "x".repeat(80));
        let found = problems(&message);
        assert!(found.iter().any(|p| p.contains("not blank")), "{found:?}");
        assert!(found.iter().any(|p| p.contains("wrap at 72")), "{found:?}");
    }

    #[test]
    fn areas_are_lower_case_paths() {
        assert!(has_area("xtask/matrix: boot 6.12"));
        assert!(has_area("abi, failure: shared vocabulary"));
        assert!(!has_area("Kernel matrix: boot 6.12"));
        assert!(!has_area("report:no space"));
        assert!(!has_area("no area at all"));
    }
}
