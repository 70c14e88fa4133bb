//! Where the workspace and its build live, and cargo run inside it: the paths and the one cargo
//! call every xtask command shares.

use std::path::{Path, PathBuf};

/// The cargo workspace this xtask belongs to.
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
}

/// Where cargo builds: CARGO_TARGET_DIR, or the workspace's target/.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// Run cargo with `args` in the workspace; fail on a non-zero exit.
pub fn cargo(args: &[&str]) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(args)
        .current_dir(workspace_root())
        .status()?;
    if !status.success() {
        anyhow::bail!("`cargo {}` failed: {status}", args.join(" "));
    }
    Ok(())
}
