//! The two stalltop binaries a guest runs, built (or found up to date) by cargo: the static
//! release `stalltop` (`cargo xtask static`'s), and the unit-test binary whose probe tests load
//! the BPF programs.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::static_build;
use crate::workspace::workspace_root;

pub struct Binaries {
    pub stalltop: PathBuf,
    pub probe_tests: PathBuf,
}

pub fn build() -> Result<Binaries> {
    let stalltop = static_build::build()?;
    static_build::check(&stalltop)?;
    let tests = cargo_messages(&["test", "-p", "stalltop", "--no-run"])?;
    Ok(Binaries {
        stalltop,
        probe_tests: test_executable(&tests).context("cargo built no stalltop unit-test binary")?,
    })
}

/// Runs cargo with `--message-format=json`; its stdout (one JSON message a line).
pub fn cargo_messages(args: &[&str]) -> Result<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(args)
        .arg("--message-format=json")
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo")?;
    if !output.status.success() {
        bail!("`cargo {}` failed: {}", args.join(" "), output.status);
    }
    String::from_utf8(output.stdout).context("cargo's messages in UTF-8")
}

#[derive(Deserialize)]
struct Message {
    reason: String,
    target: Option<Target>,
    profile: Option<Profile>,
    executable: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Target {
    name: String,
    kind: Vec<String>,
}

#[derive(Deserialize)]
struct Profile {
    test: bool,
}

/// The `stalltop` binary target's test harness executable among cargo's messages.
fn test_executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Message>(line).ok())
        .filter(|message| message.reason == "compiler-artifact")
        .filter(|message| {
            message.target.as_ref().is_some_and(|target| {
                target.name == "stalltop" && target.kind.iter().any(|kind| kind == "bin")
            }) && message.profile.as_ref().is_some_and(|p| p.test)
        })
        .find_map(|message| message.executable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bin_target_s_test_build_is_told_from_its_normal_build() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"stalltop","kind":["lib"]},"profile":{"test":true},"executable":null}
{"reason":"compiler-artifact","target":{"name":"stalltop","kind":["bin"]},"profile":{"test":false},"executable":"/t/debug/stalltop"}
{"reason":"compiler-artifact","target":{"name":"cli","kind":["test"]},"profile":{"test":true},"executable":"/t/debug/deps/cli-1"}
{"reason":"compiler-artifact","target":{"name":"stalltop","kind":["bin"]},"profile":{"test":true},"executable":"/t/debug/deps/stalltop-77aa"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            test_executable(messages),
            Some(PathBuf::from("/t/debug/deps/stalltop-77aa"))
        );
        assert_eq!(test_executable(""), None);
    }
}
