//! Compiles bpf/floor.bpf.c into a libbpf-rs skeleton, against the
//! project's committed vmlinux.h.

use std::env;
use std::ffi::OsString;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let vmlinux_dir = PathBuf::from("../../bpf/vmlinux").join(arch);
    SkeletonBuilder::new()
        .source("bpf/floor.bpf.c")
        .clang_args([OsString::from("-I"), vmlinux_dir.into_os_string()])
        .build_and_generate(out_dir.join("floor.skel.rs"))
        .expect("failed to build the floor skeleton from bpf/floor.bpf.c");
    println!("cargo:rerun-if-changed=bpf");
}
