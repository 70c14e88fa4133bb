//! `cargo xtask test`: the whole suite, as CI runs it. Formatting and lints,
//! the BPF object compiled for arm64, unit and root integration tests (real
//! BPF), then the scenario tests (in every syscall mode), the terminal test and the
//! kernel matrix against the release binary, one at a time.

use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{bpf_object, cargo, prereqs};

pub fn main() -> Result<()> {
    prereqs::ensure()?;
    step("formatting", || cargo(&["fmt", "--all", "--", "--check"]))?;
    step("lints", || {
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    // The build compiles the host's object; this checks arm64's on any host.
    step("BPF object for arm64", || {
        let object = bpf_object::compile("aarch64")?;
        eprintln!("compiled {}", object.display());
        Ok(())
    })?;
    step("unit and root integration tests", || {
        cargo(&["test", "--workspace"])
    })?;
    step("release build", || {
        cargo(&["build", "--release", "-p", "stalltop"])
    })?;
    // Every scenario in every syscall mode (sampled is the default).
    for mode in ["sampled", "exact", "off"] {
        step(&format!("scenario tests, --syscalls {mode}"), || {
            xtask(&["scenario-tests", "--syscalls", mode])
        })?;
    }
    step("terminal test", || xtask(&["tui-test"]))?;
    step("kernel matrix", || xtask(&["kernel-matrix"]))?;
    eprintln!("\n== all tests passed");
    Ok(())
}

fn step(name: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
    eprintln!("\n== {name}");
    f().map_err(|e| e.context(format!("{name} failed")))
}

/// Another xtask command, as its own process (its own signal handling).
fn xtask(args: &[&str]) -> Result<()> {
    let exe = std::env::current_exe().context("locating the xtask binary")?;
    let status = Command::new(exe).args(args).status()?;
    if !status.success() {
        bail!("`cargo xtask {}` failed: {status}", args.join(" "));
    }
    Ok(())
}
