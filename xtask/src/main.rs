//! Project chores for stalltop: `cargo xtask <command>`; one module per command.

mod arm64_verify;
mod bench;
mod bpf_stack;
mod checks;
mod child;
#[cfg(test)]
mod code_map;
mod commit_shape;
mod fleet_test;
mod interrupt;
#[cfg(test)]
mod manifest_checks;
mod matrix;
#[cfg(test)]
mod monitoring_checks;
mod prereqs;
mod run;
mod scenario;
mod scenario_tests;
mod static_build;
mod test;
mod tui_test;
mod vmlinux;
mod workspace;

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
    /// Install what is missing, build release and start stalltop (live view).
    Run(run::Args),
    /// The whole test suite, as CI runs it.
    Test,
    /// Inject a real, bounded scheduler stall on CPU 1 and print its ground truth as JSON.
    Scenario(scenario::Args),
    /// Run target/release/stalltop around each scenario and check its report.
    ScenarioTests(scenario_tests::Args),
    /// Regenerate bpf/vmlinux/<arch>/vmlinux.h: from the running kernel's BTF, or for aarch64 on
    /// another host from Debian 12's stock arm64 kernel.
    Vmlinux(vmlinux::Args),
    /// Measure stalltop's cost: ns per probe invocation, CPU, workload slowdown.
    Bench(bench::Args),
    /// Drive target/release/stalltop's live view in tmux against a real scenario.
    TuiTest(tui_test::Args),
    /// Boot Debian's stock kernels under QEMU and run the probe tests and stalltop there.
    KernelMatrix(matrix::Args),
    /// Build the release stalltop with no shared libraries into target/static/stalltop.
    Static,
    /// Boot Debian's stock arm64 6.1 kernel under QEMU and load every program of the arm64 BPF
    /// object through its verifier.
    Arm64Verify(arm64_verify::Args),
    /// Add up the stack of each BPF program's deepest chain of calls, in the objects for both
    /// architectures, against the verifier's 512 bytes.
    BpfStack,
    /// Run target/release/stalltop serve under a real Prometheus through real scenarios.
    FleetTest,
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run::main(&args),
        Command::Test => test::main(),
        Command::Scenario(args) => scenario::main(&args),
        Command::ScenarioTests(args) => scenario_tests::main(&args),
        Command::Vmlinux(args) => vmlinux::main(&args),
        Command::Bench(args) => bench::main(&args),
        Command::TuiTest(args) => tui_test::main(&args),
        Command::KernelMatrix(args) => matrix::main(&args),
        Command::Static => static_build::main(),
        Command::Arm64Verify(args) => arm64_verify::main(&args),
        Command::BpfStack => bpf_stack::main(),
        Command::FleetTest => fleet_test::main(),
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
