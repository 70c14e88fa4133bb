//! The bpf_prog iterator the guest reads each loaded program's verified instructions from
//! (xtask/arm64/verified_insns.bpf.c: no bpftool prints them), compiled for the arm64 kernel.

use std::path::Path;
use std::process::Command;

use anyhow::{ensure, Context, Result};

use crate::workspace::workspace_root;

const SOURCE: &str = "xtask/arm64/verified_insns.bpf.c";

/// Compiles the iterator into `out`. Its only kernel types come from arm64's vmlinux.h (CO-RE
/// relocated at load); it needs no libbpf header.
pub fn build(out: &Path) -> Result<()> {
    let root = workspace_root();
    let status = Command::new("clang")
        .args([
            "-g", "-O2", "-target", "bpf", "-mcpu=v3", "-Wall", "-Werror", "-I",
        ])
        .arg(root.join("bpf/vmlinux/aarch64"))
        .arg("-c")
        .arg(root.join(SOURCE))
        .arg("-o")
        .arg(out)
        .status()
        .context("run clang")?;
    ensure!(
        status.success(),
        "clang failed to compile {SOURCE}: {status}"
    );
    Ok(())
}
