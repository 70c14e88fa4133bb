//! `cargo xtask vmlinux`: regenerates bpf/vmlinux/<arch>/vmlinux.h from a kernel's BTF: the
//! running kernel's for this host's architecture, Debian 12's stock arm64 6.1 kernel for aarch64
//! on another host.

mod btf_blob;
pub(crate) mod debian_arm64;

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use clap::ValueEnum;

const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

#[derive(clap::Args)]
pub struct Args {
    /// The architecture to write the header of (default: this host's).
    #[arg(long, value_enum)]
    arch: Option<Arch>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// Rust's target_arch name, which build.rs looks the directory up by.
    fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }
}

pub fn main(args: &Args) -> Result<()> {
    let host = host_arch()?;
    let arch = args.arch.unwrap_or(host);
    let dir = crate::workspace::workspace_root()
        .join("bpf/vmlinux")
        .join(arch.as_str());
    if arch == host {
        ensure!(
            Path::new(KERNEL_BTF).exists(),
            "{KERNEL_BTF} is missing: the kernel needs CONFIG_DEBUG_INFO_BTF=y"
        );
        return write_header(Path::new(KERNEL_BTF), &dir, "the running kernel");
    }
    if arch != Arch::Aarch64 {
        let arch = arch.as_str();
        bail!("the {arch} header comes from a running {arch} kernel: run this on an {arch} host");
    }
    let cache = debian_arm64::cache_dir();
    fs::create_dir_all(&cache).with_context(|| format!("mkdir {}", cache.display()))?;
    let kernel = debian_arm64::newest_kernel(&cache)?;
    let btf =
        btf_blob::find(&kernel.image).map_err(|err| anyhow::anyhow!("{}: {err}", kernel.deb))?;
    let btf_file = cache.join("vmlinux.btf");
    fs::write(&btf_file, btf).with_context(|| format!("write {}", btf_file.display()))?;
    write_header(&btf_file, &dir, &kernel.deb)
}

/// Writes `dir`/vmlinux.h from the BTF in `btf` (a raw BTF file), atomically.
fn write_header(btf: &Path, dir: &Path, from: &str) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("mkdir {}", dir.display()))?;
    let output = Command::new("bpftool")
        .args(["btf", "dump", "file"])
        .arg(btf)
        .args(["format", "c"])
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
    eprintln!(
        "wrote {} ({} bytes) from {from}",
        header.display(),
        output.stdout.len()
    );
    Ok(())
}

/// `uname -m`, as an architecture stalltop builds for.
fn host_arch() -> Result<Arch> {
    let name = rustix::system::uname();
    let machine = name.machine().to_string_lossy();
    match machine.as_ref() {
        "x86_64" => Ok(Arch::X86_64),
        "aarch64" | "arm64" => Ok(Arch::Aarch64),
        other => {
            bail!("no vmlinux.h layout for machine {other:?} (x86_64 and aarch64 are supported)")
        }
    }
}
