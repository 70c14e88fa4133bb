//! `stalltop` with no subcommand: the live view. Starts the probes, runs
//! the one event loop (entries, ticks, input, signals -> `Msg` -> update,
//! draw when the view changed) that replay shares, and detaches the probes
//! and restores the terminal on every way out. Decides nothing shown (app)
//! and draws nothing itself (ui).

use std::time::Duration;

use crossterm::event::Event;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::app::{App, Msg};
use crate::cli::{CpuBudget, ProbeArgs};
use crate::host;
use crate::source::{self, LiveSource};
use crate::stream::Entry;
use crate::tui::{Input, Tui};
use crate::{ui, Failure};

/// Entries waiting for the loop; the probe thread blocks when it is full
/// (the kernel side then counts what the ring buffer cannot hold as lost).
const ENTRY_QUEUE: usize = 256;

pub async fn run(probe_args: &ProbeArgs, delay: Duration) -> Result<(), Failure> {
    let (config, hierarchy) = source::probe_config(probe_args, CpuBudget::Off)?;
    let start_ns = host::monotonic_ns();
    let (tx, entries) = mpsc::channel::<Entry>(ENTRY_QUEUE);
    let source = LiveSource::start(config.clone(), hierarchy.clone(), tx)?;
    let header = source::session_header(&config, &hierarchy, start_ns, &source.info);
    let mut app = App::live(header, delay);
    let mut probes = Probes {
        source: Some(source),
        entries,
    };
    let result = run_loop(&mut app, Some(&mut probes.entries)).await;
    // The terminal is already restored; now detach (also done on unwind).
    drop(probes);
    result
}

/// The probes and their channel; dropping this detaches them, whichever
/// way the view ends.
struct Probes {
    source: Option<LiveSource>,
    entries: mpsc::Receiver<Entry>,
}

impl Drop for Probes {
    fn drop(&mut self) {
        // A closed channel makes the probe thread's sends fail, so it
        // stops even if it was blocked on a full queue.
        self.entries.close();
        if let Some(source) = self.source.take() {
            source.join();
            tracing::info!("live view: probes detached");
        }
    }
}

/// The loop of the live view and of replay (`entries` is None): every
/// input becomes a `Msg` for `App::update`; the screen is drawn only when
/// the app's view changed. The terminal is restored when this returns.
pub async fn run_loop(
    app: &mut App,
    mut entries: Option<&mut mpsc::Receiver<Entry>>,
) -> Result<(), Failure> {
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Failure::io)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(Failure::io)?;
    let mut hangup = signal(SignalKind::hangup()).map_err(Failure::io)?;
    let mut tui = Tui::enter().map_err(Failure::io)?;
    let size = tui.size().map_err(Failure::io)?;
    app.update(Msg::Resize {
        width: size.width,
        height: size.height,
    });
    app.update(Msg::Tick {
        now_ns: host::monotonic_ns(),
    });
    let mut input = Input::new();
    let mut tick = tokio::time::interval(app.tick_interval());
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut drawn = None;
    loop {
        if drawn != Some(app.version()) {
            tui.draw(|frame| ui::render(frame, app))
                .map_err(Failure::io)?;
            drawn = Some(app.version());
        }
        if let Some(text) = app.take_clipboard() {
            tui.copy(&text).map_err(Failure::io)?;
        }
        if app.quitting() {
            break;
        }
        tokio::select! {
            entry = async {
                match entries.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => None,
                }
            }, if entries.is_some() => match entry {
                Some(entry) => app.update(Msg::Entry(Box::new(entry))),
                None => {
                    return Err(Failure::Other(
                        "the probes stopped on their own; run with --log FILE to see why".into(),
                    ))
                }
            },
            _ = tick.tick() => app.update(Msg::Tick { now_ns: host::monotonic_ns() }),
            event = input.next() => match event {
                Some(Ok(Event::Key(key))) => app.update(Msg::Key(key)),
                Some(Ok(Event::Mouse(mouse))) => app.update(Msg::Mouse(mouse)),
                Some(Ok(Event::Resize(width, height))) => {
                    app.update(Msg::Resize { width, height })
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(Failure::io(e)),
                None => break, // the terminal went away
            },
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = hangup.recv() => break,
        }
    }
    Ok(())
}
