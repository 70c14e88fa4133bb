//! `cargo xtask run [-- ARGS]`: install what is missing, build release,
//! start stalltop (the live view unless ARGS say otherwise).

use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::prereqs;
use crate::workspace::{cargo, workspace_root};

#[derive(clap::Args)]
pub struct Args {
    /// Passed to stalltop, e.g. `-- record -o x.stl -d 10s`.
    #[arg(last = true)]
    stalltop_args: Vec<String>,
}

pub fn main(args: &Args) -> Result<()> {
    prereqs::ensure()?;
    cargo(&["build", "--release", "-p", "stalltop"])?;
    let binary = workspace_root().join("target/release/stalltop");
    // exec: stalltop owns the terminal and its exit code from here on.
    let err = Command::new(&binary).args(&args.stalltop_args).exec();
    Err(err).with_context(|| format!("starting {}", binary.display()))?;
    bail!("exec returned")
}
