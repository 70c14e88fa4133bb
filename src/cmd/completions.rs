//! `stalltop completions SHELL` and `stalltop man`: shell completions and the
//! man page, both generated from the clap definitions in cli.rs, so they
//! list exactly the options `--help` does.

use std::io::{self, Write};

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::failure::Failure;

pub fn completions(shell: Shell) -> Result<(), Failure> {
    print(&completions_text(shell))
}

pub fn man() -> Result<(), Failure> {
    print(&man_page()?)
}

fn completions_text(shell: Shell) -> Vec<u8> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "stalltop", &mut out);
    out
}

/// The man page, in roff: the options, the subcommands, the examples and
/// how to read a stall line (the `--help` text).
fn man_page() -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(Failure::io)?;
    Ok(out)
}

fn print(bytes: &[u8]) -> Result<(), Failure> {
    io::stdout()
        .lock()
        .write_all(bytes)
        .map_err(|e| Failure::Output(format!("standard output: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_offer_every_subcommand_and_option() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = String::from_utf8(completions_text(shell)).expect("UTF-8");
            for word in ["record", "report", "replay", "runq-threshold", "syscalls"] {
                assert!(text.contains(word), "{shell}: `{word}` missing");
            }
        }
    }

    #[test]
    fn the_man_page_has_the_options_and_the_examples() {
        let page = String::from_utf8(man_page().expect("renders")).expect("UTF-8");
        for expected in [
            ".TH stalltop",
            "runq\\-threshold",
            "record",
            "Examples:",
            "Reading a stall line",
        ] {
            assert!(page.contains(expected), "`{expected}` missing:\n{page}");
        }
    }
}
