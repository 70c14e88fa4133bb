//! `stalltop record`: probes -> recording file, headless, until --duration
//! or SIGINT/SIGTERM.

use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::cli::{CpuBudget, ProbeArgs, RecordArgs};
use crate::failure::Failure;
use crate::host;
use crate::record::Writer;
use crate::source::{self, LiveSource};
use crate::stream::Entry;

pub async fn run(args: &RecordArgs, probe_args: &ProbeArgs) -> Result<(), Failure> {
    // Headless: nobody watches the probes' cost, so do not pay for it.
    let (config, hierarchy) = source::probe_config(probe_args, CpuBudget::Off)?;
    let start_ns = host::monotonic_ns();
    let (tx, mut rx) = mpsc::channel::<Entry>(256);
    let source = LiveSource::start(config.clone(), hierarchy.clone(), tx)?;
    let header = source::session_header(&config, &hierarchy, start_ns, &source.info);
    let mut writer = match Writer::create(&args.output, &header) {
        Ok(w) => w,
        Err(e) => {
            source.join();
            return Err(Failure::Output(format!("{}: {e}", args.output.display())));
        }
    };
    // Taken before the line that says the probes are attached: a script that signals once it
    // reads the line stops the recording cleanly. Until here a signal ends the process (nothing
    // stays attached: the kernel drops programs with their last fd).
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Failure::io)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(Failure::io)?;
    eprintln!(
        "stalltop: recording to {} ({} probes){}",
        args.output.display(),
        source.info.attach,
        match args.duration {
            Some(d) => format!(" for {d:?}"),
            None => ", Ctrl-C to stop".into(),
        }
    );

    let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::MAX / 4));
    tokio::pin!(deadline);
    let mut flush = tokio::time::interval(source::SNAPSHOT_INTERVAL);
    let mut entries = 0u64;
    let mut write_error = None;
    loop {
        tokio::select! {
            entry = rx.recv() => match entry {
                Some(entry) => {
                    if let Err(e) = writer.write(&entry) {
                        write_error = Some(e.to_string());
                        break;
                    }
                    entries += 1;
                }
                None => break, // the probe thread ended on its own
            },
            _ = flush.tick() => {
                if let Err(e) = writer.flush_chunk() {
                    write_error = Some(e.to_string());
                    break;
                }
            }
            _ = &mut deadline => break,
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
        }
    }

    // Drain: the probe thread sends its final snapshot, then closes.
    source.request_stop();
    while let Some(entry) = rx.recv().await {
        if write_error.is_none() {
            match writer.write(&entry) {
                Ok(()) => entries += 1,
                Err(e) => write_error = Some(e.to_string()),
            }
        }
    }
    source.join();
    if let Some(e) = write_error {
        return Err(Failure::Output(format!("{}: {e}", args.output.display())));
    }
    let bytes = writer
        .finish()
        .map_err(|e| Failure::Output(format!("{}: {e}", args.output.display())))?;
    eprintln!(
        "stalltop: wrote {entries} entries ({bytes} bytes) to {}",
        args.output.display()
    );
    Ok(())
}
