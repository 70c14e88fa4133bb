//! Compiles bpf/stalltop.bpf.c into a libbpf-rs skeleton in OUT_DIR, and the same object for
//! the other supported architecture; both objects stay there (OUT_DIR/stalltop.<arch>.bpf.o):
//! every build checks that bpf/ compiles for both, `cargo xtask arm64-verify` loads the arm64
//! one in an arm64 guest, and `cargo xtask bpf-stack` adds up the stack of each program's call
//! chains in both. xtask asks cargo for them rather than compile them itself: xtask must build
//! on a machine with no C library or header, before it installs them.

use std::env;
use std::ffi::OsString;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

/// Rust's `target_arch` names of the architectures bpf/ compiles for, each with its
/// bpf/vmlinux/<arch>/vmlinux.h.
const ARCHES: [&str; 2] = ["x86_64", "aarch64"];

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");

    SkeletonBuilder::new()
        .source("bpf/stalltop.bpf.c")
        .clang_args(clang_args(&arch))
        .obj(out_dir.join(format!("stalltop.{arch}.bpf.o")))
        .build_and_generate(out_dir.join("stalltop.skel.rs"))
        .expect("failed to build the BPF skeleton from bpf/stalltop.bpf.c");

    for other in ARCHES.into_iter().filter(|a| *a != arch) {
        SkeletonBuilder::new()
            .source("bpf/stalltop.bpf.c")
            .clang_args(clang_args(other))
            .obj(out_dir.join(format!("stalltop.{other}.bpf.o")))
            .build()
            .unwrap_or_else(|err| panic!("compiling bpf/stalltop.bpf.c for {other}: {err:#}"));
    }

    println!("cargo:rerun-if-changed=bpf");
}

/// The clang arguments beyond those libbpf-cargo adds itself (`-g -O2 -target bpf` and
/// libbpf's headers) for Rust's `target_arch`. `-D__TARGET_ARCH_*` selects the register layout
/// bpf_tracing.h's PT_REGS_*_SYSCALL macros read syscall arguments with; libbpf-cargo would
/// derive it from CARGO_CFG_TARGET_ARCH, which is the host's only.
fn clang_args(target_arch: &str) -> Vec<OsString> {
    let kernel_arch = match target_arch {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("no BPF build for {other}: x86_64 and aarch64 only"),
    };
    let vmlinux_dir = PathBuf::from("bpf/vmlinux").join(target_arch);
    if !vmlinux_dir.join("vmlinux.h").exists() {
        panic!(
            "no bpf/vmlinux/{target_arch}/vmlinux.h: generate it with \
             `cargo xtask vmlinux --arch {target_arch}`"
        );
    }
    vec![
        "-Wall".into(),
        "-Werror".into(),
        "-mcpu=v3".into(),
        format!("-D__TARGET_ARCH_{kernel_arch}").into(),
        "-I".into(),
        "bpf".into(),
        "-I".into(),
        vmlinux_dir.into_os_string(),
    ]
}
