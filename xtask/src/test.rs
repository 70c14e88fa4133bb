//! `cargo xtask test`: the whole suite, as CI runs it. xtask's own dependencies (no crate that
//! builds C), formatting and lints, unit and root integration tests (real BPF; the build compiles
//! the BPF object for x86_64 and arm64), the Prometheus rules (promtool), the static binary
//! (`cargo xtask static`: no shared libraries, and it runs), then the scenario tests (in every
//! syscall mode), the terminal test and the fleet test (`serve` under a real Prometheus) against
//! the release binary, the arm64 object through an arm64 kernel's verifier, and the kernel
//! matrix, whose guests run the static one; one at a time. Before the static binary, the
//! stack of the BPF programs' call chains (bpf_stack.rs), from the objects the release build
//! wrote.

use std::process::Command;

use anyhow::{bail, Context, Result};

use clap::ValueEnum;

use crate::checks::report::SyscallMode;
use crate::workspace::cargo;
use crate::{bpf_stack, commit_shape, prereqs, static_build};

pub fn main() -> Result<()> {
    step("xtask builds without C libraries", xtask_builds_no_c)?;
    step("commit shape", commit_shape::check)?;
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
    step("unit and root integration tests", || {
        cargo(&["test", "--workspace"])
    })?;
    step(
        "alert and recording rules (promtool check and unit tests)",
        rules,
    )?;
    step("release build", || {
        cargo(&["build", "--release", "-p", "stalltop"])
    })?;
    step(
        "BPF call chains' stack (at most 512 bytes, frames rounded up to 32)",
        bpf_stack::main,
    )?;
    step("static binary (no shared libraries)", static_build::main)?;
    // Every scenario in every syscall mode (sampled is the default).
    for mode in SyscallMode::value_variants() {
        step(
            &format!("scenario tests, --syscalls {}", mode.name()),
            || xtask(&["scenario-tests", "--syscalls", mode.name()]),
        )?;
    }
    step("terminal test", || xtask(&["tui-test"]))?;
    step("fleet test (serve under a real Prometheus)", || {
        xtask(&["fleet-test"])
    })?;
    // About a minute: the release build above has compiled the arm64 object.
    step("arm64 verifier (Debian 6.1 arm64 under QEMU)", || {
        xtask(&["arm64-verify"])
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

/// deploy/prometheus/stalltop-rules.yaml is valid and passes its unit tests, a case that fires
/// and series that stay silent for each alert (xtask/src/monitoring_checks.rs checks there are
/// both).
fn rules() -> Result<()> {
    let dir = crate::workspace::workspace_root().join("deploy/prometheus");
    for args in [
        ["check", "rules", "stalltop-rules.yaml"],
        ["test", "rules", "stalltop-rules.test.yaml"],
    ] {
        let status = Command::new("promtool")
            .args(args)
            .current_dir(&dir)
            .status()
            .context("running promtool (apt-get install prometheus)")?;
        if !status.success() {
            bail!("`promtool {}` in {} failed", args.join(" "), dir.display());
        }
    }
    Ok(())
}

/// Crates that compile C (or find C libraries) in their build scripts.
const C_BUILDERS: [&str; 5] = ["cc", "cmake", "pkg-config", "bindgen", "autotools"];

/// On a fresh machine `cargo xtask run` and `cargo xtask test` must build xtask before it can
/// install clang, libelf-dev and the rest (prereqs.rs): so no crate xtask depends on, directly
/// or through a build script, may compile C. libbpf-cargo did (libbpf-sys builds libbpf).
fn xtask_builds_no_c() -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "xtask",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .current_dir(crate::workspace::workspace_root())
        .output()
        .context("running cargo tree")?;
    if !output.status.success() {
        bail!(
            "cargo tree -p xtask failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let tree = String::from_utf8_lossy(&output.stdout);
    let builders = c_builders_in(&tree);
    if !builders.is_empty() {
        bail!(
            "xtask depends on crates that build C ({}): it would not build on a fresh machine; \
             see `cargo tree -p xtask -e normal,build -i {}`",
            builders.join(", "),
            builders[0]
        );
    }
    Ok(())
}

/// The C-building crates among the lines of `cargo tree --prefix none` (`name vX.Y.Z ...`).
fn c_builders_in(tree: &str) -> Vec<&str> {
    let mut found: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| C_BUILDERS.contains(name))
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// The BPF C sources follow .clang-format (vmlinux.h is generated, not ours).
fn c_format() -> Result<()> {
    let root = crate::workspace::workspace_root();
    let mut sources = Vec::new();
    for dir in ["bpf", "xtask/floor/bpf", "xtask/arm64"] {
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
        bail!(
            "bpf/ is not formatted: run \
             `clang-format -i bpf/*.[ch] xtask/floor/bpf/*.[ch] xtask/arm64/*.c`"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::c_builders_in;

    #[test]
    fn c_builders_are_found_in_a_tree_that_builds_libbpf() {
        let tree = "xtask v0.1.0 (/w/xtask)\nanyhow v1.0.0\nlibbpf-cargo v0.27.2\n\
                    libbpf-sys v1.7.0+v1.7.0\ncc v1.2.0\npkg-config v0.3.0\ncc v1.2.0\n";
        assert_eq!(c_builders_in(tree), ["cc", "pkg-config"]);
    }

    #[test]
    fn a_pure_rust_tree_has_no_c_builders() {
        let tree = "xtask v0.1.0 (/w/xtask)\nrustix v1.1.6\nlinux-raw-sys v0.9.0\nlibc v0.2.0\n";
        assert!(c_builders_in(tree).is_empty());
    }
}
