//! Compiles bpf/floor.bpf.c (empty programs) and bpf/minimal.bpf.c (the
//! reference) into libbpf-rs skeletons, against the project's committed
//! vmlinux.h and with its bpf/ headers in the include path.

use std::env;
use std::ffi::OsString;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let vmlinux_dir = PathBuf::from("../../bpf/vmlinux").join(arch);
    for name in ["floor", "minimal"] {
        SkeletonBuilder::new()
            .source(format!("bpf/{name}.bpf.c"))
            .clang_args([
                OsString::from("-I"),
                vmlinux_dir.clone().into_os_string(),
                OsString::from("-I"),
                OsString::from("../../bpf"),
            ])
            .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("failed to build bpf/{name}.bpf.c: {e}"));
    }
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-changed=../../bpf/log2.bpf.h");
}
