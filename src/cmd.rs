//! One module per subcommand; each wires sources to sinks and returns a
//! `Failure` that main maps to an exit code.

pub mod completions;
pub mod diff;
pub mod live;
pub mod record;
pub mod replay;
pub mod report;
pub mod serve;

use std::io::Write as _;

/// Print a command's output; a reader that went away (`| head`) ends it
/// quietly.
pub fn print_out(text: &str) -> Result<(), crate::failure::Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(crate::failure::Failure::Output(format!("stdout: {e}")))
        }
        _ => Ok(()),
    }
}
