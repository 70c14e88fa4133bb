//! `cargo xtask static`: the release stalltop with no shared libraries, copied to
//! target/static/stalltop (where deploy/Containerfile copies it from), and its check.
//!
//! Cargo feature `static` links libbpf, libelf and zlib statically (libbpf from libbpf-sys's
//! vendored source, libelf.a and libz.a from libelf-dev and zlib1g-dev); `+crt-static` links
//! glibc statically. The explicit `--target` keeps those RUSTFLAGS off build scripts and proc
//! macros, which must stay dynamic host programs, and builds in a directory of its own
//! (target/<triple>/release), so the ordinary release build is left as it is.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::scenario::command;
use crate::workspace::{target_dir, workspace_root};

/// The static binary's path, relative to the workspace.
pub const STALLTOP: &str = "target/static/stalltop";

pub fn main() -> Result<()> {
    let stalltop = build()?;
    check(&stalltop)?;
    let size = fs::metadata(&stalltop)?.len();
    eprintln!(
        "{}: {:.1} MiB, no shared libraries",
        stalltop.display(),
        size as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// Builds the static release binary and copies it to [`STALLTOP`]; its path.
pub fn build() -> Result<PathBuf> {
    let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "stalltop",
            "--features",
            "static",
        ])
        .args(["--target", &target])
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        // libbpf-sys names libelf.a and libz.a but not where they are.
        .env("LIBBPF_SYS_LIBRARY_PATH", static_library_dirs()?)
        .current_dir(workspace_root())
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("the static build of stalltop failed: {status}");
    }
    let built = target_dir().join(&target).join("release/stalltop");
    let copy = workspace_root().join(STALLTOP);
    fs::create_dir_all(copy.parent().expect("STALLTOP has a directory"))?;
    fs::copy(&built, &copy)
        .with_context(|| format!("copy {} to {}", built.display(), copy.display()))?;
    Ok(copy)
}

/// The directories of libelf's and zlib's libraries, as pkg-config knows them, `:`-separated.
fn static_library_dirs() -> Result<String> {
    let mut dirs: Vec<String> = Vec::new();
    for package in ["libelf", "zlib"] {
        let dir = command::run("pkg-config", &["--variable=libdir", package])?
            .trim()
            .to_string();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    Ok(dirs.join(":"))
}

/// `binary` has no shared libraries (`ldd` finds none: "statically linked" for the static PIE
/// that `+crt-static` makes, "not a dynamic executable" for a non-PIE one) and runs
/// (`--version`).
pub fn check(binary: &Path) -> Result<()> {
    let path = binary.to_str().context("a binary path in UTF-8")?;
    // ldd exits non-zero for a static non-PIE executable: its output is what counts.
    let ldd = Command::new("ldd")
        .arg(path)
        .output()
        .context("running ldd")?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&ldd.stdout),
        String::from_utf8_lossy(&ldd.stderr)
    );
    if !is_static(&said) {
        bail!("{path} uses shared libraries; ldd says:\n{said}");
    }
    let version = command::run(path, &["--version"])?;
    if !version.starts_with("stalltop ") {
        bail!("`{path} --version` printed {version:?}");
    }
    eprintln!("ldd {path}: {}; {}", said.trim(), version.trim());
    Ok(())
}

fn is_static(ldd_output: &str) -> bool {
    let said = ldd_output.trim();
    said.ends_with("not a dynamic executable") || said == "statically linked"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_says_static_only_for_an_executable_without_libraries() {
        assert!(is_static("\tnot a dynamic executable\n"));
        assert!(is_static("\tstatically linked\n"));
        let dynamic = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                       \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f28)\n\
                       \t/lib64/ld-linux-x86-64.so.2 (0x00007f2a)\n";
        assert!(!is_static(dynamic));
        assert!(!is_static(""));
    }
}
