//! Project chores for stalltop: `cargo xtask <command>`; one module per command.

mod checks;
mod interrupt;
mod scenario;
mod scenario_tests;
mod vmlinux;

use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "stalltop project chores")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inject a real, bounded scheduler stall on CPU 1 and print its ground truth as JSON.
    Scenario(scenario::Args),
    /// Run target/release/stalltop around each scenario and check its report.
    ScenarioTests(scenario_tests::Args),
    /// Regenerate bpf/vmlinux/<arch>/vmlinux.h from the running kernel's BTF.
    Vmlinux,
}

/// The cargo workspace this xtask belongs to.
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Scenario(args) => scenario::main(&args),
        Command::ScenarioTests(args) => scenario_tests::main(&args),
        Command::Vmlinux => vmlinux::main(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            if interrupt::requested() {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
