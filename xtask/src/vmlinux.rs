//! `cargo xtask vmlinux`: regenerates bpf/vmlinux/<arch>/vmlinux.h from the running kernel's BTF.

use std::ffi::CStr;
use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

pub fn main() -> Result<()> {
    let arch = arch()?;
    ensure!(
        Path::new(KERNEL_BTF).exists(),
        "{KERNEL_BTF} is missing: the kernel needs CONFIG_DEBUG_INFO_BTF=y"
    );
    let dir = crate::workspace_root().join("bpf/vmlinux").join(arch);
    fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
    let output = Command::new("bpftool")
        .args(["btf", "dump", "file", KERNEL_BTF, "format", "c"])
        .output()
        .context("run bpftool (install it: it ships with linux-tools or as `bpftool`)")?;
    if !output.status.success() {
        bail!(
            "bpftool btf dump failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let header = dir.join("vmlinux.h");
    let partial = dir.join("vmlinux.h.partial");
    fs::write(&partial, &output.stdout).with_context(|| format!("write {}", partial.display()))?;
    fs::rename(&partial, &header).with_context(|| format!("replace {}", header.display()))?;
    eprintln!("wrote {} ({} bytes)", header.display(), output.stdout.len());
    Ok(())
}

/// `uname -m`, mapped to the Rust target_arch names build.rs looks up.
fn arch() -> Result<&'static str> {
    // SAFETY: utsname is plain old data; all zeroes is a valid value.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is valid, writable storage for uname to fill.
    if unsafe { libc::uname(&mut name) } != 0 {
        bail!("uname: {}", std::io::Error::last_os_error());
    }
    // SAFETY: uname NUL-terminates every field, so `machine` is a valid C string.
    let machine = unsafe { CStr::from_ptr(name.machine.as_ptr()) }.to_string_lossy();
    match machine.as_ref() {
        "x86_64" => Ok("x86_64"),
        "aarch64" | "arm64" => Ok("aarch64"),
        other => {
            bail!("no vmlinux.h layout for machine {other:?} (x86_64 and aarch64 are supported)")
        }
    }
}
