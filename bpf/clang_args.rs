// The clang arguments bpf/stalltop.bpf.c is compiled with, beyond those libbpf-cargo adds
// itself (`-g -O2 -target bpf -fno-stack-protector` and libbpf's headers). Included by build.rs
// (for the architecture being built) and by xtask (which compiles the object for every
// architecture that has a vmlinux.h), so that both compile it the same way.

/// The arguments for Rust's `target_arch` (`x86_64`, `aarch64`), with the paths relative to
/// `root` (the workspace). `-D__TARGET_ARCH_*` selects the register layout bpf_tracing.h's
/// PT_REGS_*_SYSCALL macros read syscall arguments with; libbpf-cargo would derive it from
/// CARGO_CFG_TARGET_ARCH, which only a build script has.
fn bpf_clang_args(
    root: &std::path::Path,
    target_arch: &str,
) -> Result<Vec<std::ffi::OsString>, String> {
    let kernel_arch = match target_arch {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => return Err(format!("no BPF build for {other}: x86_64 and aarch64 only")),
    };
    let vmlinux_dir = root.join("bpf/vmlinux").join(target_arch);
    if !vmlinux_dir.join("vmlinux.h").exists() {
        return Err(format!(
            "no bpf/vmlinux/{target_arch}/vmlinux.h: generate it with \
             `cargo xtask vmlinux --arch {target_arch}`"
        ));
    }
    Ok(vec![
        "-Wall".into(),
        "-Werror".into(),
        "-mcpu=v3".into(),
        format!("-D__TARGET_ARCH_{kernel_arch}").into(),
        "-I".into(),
        root.join("bpf").into_os_string(),
        "-I".into(),
        vmlinux_dir.into_os_string(),
    ])
}
