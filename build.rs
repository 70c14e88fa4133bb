//! Compiles bpf/stalltop.bpf.c into a libbpf-rs skeleton in OUT_DIR.

use std::env;
use std::ffi::OsString;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let vmlinux_dir = PathBuf::from("bpf/vmlinux").join(&arch);
    if !vmlinux_dir.join("vmlinux.h").exists() {
        panic!(
            "no bpf/vmlinux/{arch}/vmlinux.h: generate it with `cargo xtask vmlinux` on a {arch} host"
        );
    }

    SkeletonBuilder::new()
        .source("bpf/stalltop.bpf.c")
        .clang_args([
            OsString::from("-Wall"),
            OsString::from("-Werror"),
            OsString::from("-mcpu=v3"),
            OsString::from("-Ibpf"),
            OsString::from("-I"),
            vmlinux_dir.into_os_string(),
        ])
        .build_and_generate(out_dir.join("stalltop.skel.rs"))
        .expect("failed to build the BPF skeleton from bpf/stalltop.bpf.c");

    println!("cargo:rerun-if-changed=bpf");
}
