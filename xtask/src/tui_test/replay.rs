//! The replay's keys as a user presses them, on a committed recording of a real noisy
//! neighbour (tests/fixtures/noisy.stl): the timeline spans the recording at open, `w` jumps to
//! the worst stall, Enter opens it with UTC times, `y` copies the popup to the clipboard (tmux's
//! paste buffer, by OSC 52), `:` goes to a time, q quits with the terminal restored. Needs no
//! BPF and no scenario.

use std::path::Path;

use anyhow::{ensure, Result};

use super::tmux::{Deadline, Tmux, KEY_TIMEOUT};

const SIZE: (u16, u16) = (120, 40);

pub fn drive(stalltop: &Path, workdir: &Path) -> Result<()> {
    let recording = crate::workspace::workspace_root().join("tests/fixtures/noisy.stl");
    let tmux = Tmux::start(workdir, SIZE.0, SIZE.1)?;
    tmux.start_replay(stalltop, &recording, &workdir.join("replay.log"))?;
    // The 8.2 s recording fits the 10 s zoom: the whole of it, from its start.
    tmux.wait_for(
        "a timeline over the whole recording",
        |s| s.contains("+0.000s to +10.000s of the recording"),
        Deadline::After(KEY_TIMEOUT),
    )?;
    eprintln!("tui-test: replay: the timeline spans the recording at open");

    tmux.keys(&["w"])?;
    let worst = tmux.wait_for(
        "the worst stall selected",
        |s| s.contains("the worst stall: #"),
        Deadline::After(KEY_TIMEOUT),
    )?;
    let status = worst
        .lines()
        .find(|l| l.contains("the worst stall: #"))
        .unwrap_or_default()
        .trim()
        .to_string();
    eprintln!("tui-test: replay: w says `{status}`");

    tmux.keys(&["Enter"])?;
    let popup = tmux.wait_for(
        "the worst stall's details",
        |s| s.contains("Stall #") && s.contains("Culprit"),
        Deadline::After(KEY_TIMEOUT),
    )?;
    ensure!(
        popup.contains("hog") && popup.contains("/stalltop_noisy") && popup.contains("Z "),
        "the worst stall's details lack the hog, its cgroup or UTC times:\n{popup}"
    );
    let id = status
        .split('#')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    ensure!(
        popup.contains(&format!("Stall #{id} ")),
        "w selected #{id}, Enter opened another:\n{popup}"
    );

    tmux.keys(&["y"])?;
    tmux.wait_for(
        "the copy's confirmation",
        |s| s.contains("copied") && s.contains("lines to the clipboard"),
        Deadline::After(KEY_TIMEOUT),
    )?;
    let copied = tmux.clipboard()?;
    ensure!(
        copied.starts_with(&format!("Stall #{id} on CPU"))
            && copied.contains("What waited")
            && copied.contains("hog"),
        "the clipboard does not hold the popup as text:\n{copied}"
    );
    eprintln!(
        "tui-test: replay: y copied the popup ({} lines)",
        copied.lines().count()
    );

    tmux.keys(&["Escape", ":"])?;
    tmux.type_text("+3s")?;
    tmux.keys(&["Enter"])?;
    let at = tmux.wait_for(
        "the cursor at +3s",
        |s| s.contains("at +3.000s "),
        Deadline::After(KEY_TIMEOUT),
    )?;
    ensure!(
        at.lines().next().is_some_and(|l| l.contains("Z of 0:08.2")),
        "the header does not give the cursor in UTC:\n{at}"
    );
    tmux.keys(&[":"])?;
    tmux.type_text("99:99")?;
    tmux.keys(&["Enter"])?;
    tmux.wait_for(
        "a clear error for a bad time",
        |s| s.contains("is not a time"),
        Deadline::After(KEY_TIMEOUT),
    )?;
    eprintln!("tui-test: replay: : went to +3s and refused 99:99 with a reason");

    tmux.replay_quit()?;
    eprintln!("tui-test: replay: q quit, terminal restored: PASS");
    Ok(())
}
