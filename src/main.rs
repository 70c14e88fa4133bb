//! stalltop: find the CPU stalls your application did not cause. Thin:
//! parse the command line, set up logging, run a mode, map its failure to
//! an exit code.

mod abi;
mod app;
mod cgroup;
mod cli;
mod cmd;
mod cost_guard;
mod cpulist;
mod event;
mod failure;
mod fleet;
mod histogram;
mod host;
mod kubelet;
mod model;
mod perfetto;

mod modes;
mod probe;
mod record;
mod source;
mod stream;
mod symbols;
mod syscall_table;
mod tui;
mod ui;
mod vm;

use std::process::ExitCode;

use cli::Command;
use failure::Failure;

fn main() -> ExitCode {
    let cli = cli::parse();
    if let Err(e) = init_logging(cli.log.as_deref()) {
        eprintln!("stalltop: cannot open the log file: {e}");
        return ExitCode::from(1);
    }
    let result = match &cli.command {
        Some(Command::Report(args)) => cmd::report::run(args),
        Some(Command::Diff(args)) => cmd::diff::run(args),
        Some(Command::Record(args)) => block_on(cmd::record::run(args, &cli.probe)),
        Some(Command::Replay(args)) => block_on(cmd::replay::run(args)),
        Some(Command::Serve(args)) => block_on(cmd::serve::run(args, &cli.probe)),
        Some(Command::Completions(args)) => cmd::completions::completions(args.shell),
        Some(Command::Man) => cmd::completions::man(),
        None => block_on(cmd::live::run(&cli.probe, cli.delay)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stalltop: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn block_on<F: std::future::Future<Output = Result<(), Failure>>>(f: F) -> Result<(), Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Failure::io)?
        .block_on(f)
}

/// Logs (ours and libbpf's) go to `path` only; never to the terminal.
fn init_logging(path: Option<&std::path::Path>) -> std::io::Result<()> {
    probe::route_libbpf_logs();
    let Some(path) = path else {
        return Ok(());
    };
    let file = std::fs::File::create(path)?;
    tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STALLTOP_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .init();
    Ok(())
}
