//! `cargo xtask test`: the whole suite, as CI runs it. Formatting and lints,
//! the BPF object compiled for arm64, unit and root integration tests (real
//! BPF), the static binary (`cargo xtask static`: no shared libraries, and it runs), then the
//! scenario tests (in every syscall mode), the terminal test and the fleet test (`serve` under a
//! real Prometheus) against the release binary, and the kernel matrix, whose guests run the
//! static one; one at a time.

use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{bpf_object, cargo, prereqs, static_build};

pub fn main() -> Result<()> {
    prereqs::ensure()?;
    step("formatting", || cargo(&["fmt", "--all", "--", "--check"]))?;
    step("C formatting (bpf/, .clang-format)", c_format)?;
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
    step("static binary (no shared libraries)", static_build::main)?;
    // Every scenario in every syscall mode (sampled is the default).
    for mode in ["sampled", "exact", "off"] {
        step(&format!("scenario tests, --syscalls {mode}"), || {
            xtask(&["scenario-tests", "--syscalls", mode])
        })?;
    }
    step("terminal test", || xtask(&["tui-test"]))?;
    step("fleet test (serve under a real Prometheus)", || {
        xtask(&["fleet-test"])
    })?;
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

/// The BPF C sources follow .clang-format (vmlinux.h is generated, not ours).
fn c_format() -> Result<()> {
    let root = crate::workspace_root();
    let mut sources = Vec::new();
    for dir in ["bpf", "xtask/floor/bpf"] {
        for entry in std::fs::read_dir(root.join(dir))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "c" || e == "h") {
                sources.push(path);
            }
        }
    }
    sources.sort();
    let status = Command::new("clang-format")
        .args(["--dry-run", "--Werror"])
        .args(&sources)
        .status()
        .context("running clang-format (apt-get install clang-format)")?;
    if !status.success() {
        bail!("bpf/ is not formatted: run `clang-format -i bpf/*.[ch] xtask/floor/bpf/*.[ch]`");
    }
    Ok(())
}
