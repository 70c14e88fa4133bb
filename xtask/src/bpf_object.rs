//! Compiles bpf/stalltop.bpf.c for an architecture other than the host's, the way build.rs
//! compiles it for the host: libbpf-cargo, with the clang arguments of bpf/clang_args.rs.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result};
use libbpf_cargo::SkeletonBuilder;

use crate::workspace_root;

include!("../../bpf/clang_args.rs");

/// Compiles the object for Rust's `target_arch` into target/bpf/<arch>/stalltop.bpf.o.
pub fn compile(target_arch: &str) -> Result<PathBuf> {
    let root = workspace_root();
    let clang_args = bpf_clang_args(root, target_arch).map_err(anyhow::Error::msg)?;
    let dir = root.join("target/bpf").join(target_arch);
    fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
    let object = dir.join("stalltop.bpf.o");
    SkeletonBuilder::new()
        .source(root.join("bpf/stalltop.bpf.c"))
        .clang_args(clang_args)
        .obj(&object)
        .build()
        .with_context(|| format!("compiling the BPF object for {target_arch}"))?;
    Ok(object)
}
