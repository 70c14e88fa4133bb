//! The Debian packages stalltop needs to build, test and bench, installed
//! with apt when missing (as root), so one command works on a fresh host.

use std::process::Command;

use anyhow::{bail, Context, Result};

/// Build: clang compiles bpf/ (clang-format checks its style),
/// libelf/zlib/pkg-config build the vendored libbpf; bpftool, tmux,
/// iproute2 and perf are used by tests and bench, redis-server and
/// redis-tools (redis-benchmark) by the bench's server workload,
/// prometheus (and its promtool) by the fleet test, python3-venv by
/// tests/perfetto/decode (Perfetto's Python protos in a venv);
/// the kernel matrix boots its guests with QEMU and runs busybox in them,
/// arm64-verify its arm64 guest.
const PACKAGES: &[&str] = &[
    "clang",
    "clang-format",
    "libelf-dev",
    "zlib1g-dev",
    "pkg-config",
    "make",
    "bpftool",
    "tmux",
    "iproute2",
    "linux-perf",
    "qemu-system-x86",
    "qemu-system-arm",
    "busybox-static",
    "redis-server",
    "redis-tools",
    "prometheus",
    "python3-venv",
];

pub fn ensure() -> Result<()> {
    let missing: Vec<&str> = PACKAGES.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() {
        bail!(
            "missing packages: {}; run as root (sudo) so they can be installed, or install them",
            missing.join(" ")
        );
    }
    eprintln!("installing missing packages: {}", missing.join(" "));
    run(Command::new("apt-get").arg("update").arg("-qq"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}
