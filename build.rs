//! Compiles bpf/stalltop.bpf.c into a libbpf-rs skeleton in OUT_DIR.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

include!("bpf/clang_args.rs");

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let clang_args = bpf_clang_args(Path::new(""), &arch).unwrap_or_else(|err| panic!("{err}"));

    SkeletonBuilder::new()
        .source("bpf/stalltop.bpf.c")
        .clang_args(clang_args)
        .build_and_generate(out_dir.join("stalltop.skel.rs"))
        .expect("failed to build the BPF skeleton from bpf/stalltop.bpf.c");

    println!("cargo:rerun-if-changed=bpf");
}
