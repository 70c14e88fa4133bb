//! One module per subcommand; each wires sources to sinks and returns a
//! `Failure` that main maps to an exit code.

pub mod completions;
pub mod diff;
pub mod live;
pub mod record;
pub mod replay;
pub mod report;
pub mod serve;
