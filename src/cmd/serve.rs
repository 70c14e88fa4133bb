//! `stalltop serve`: probes -> metrics over HTTP and flight recordings,
//! headless, until SIGINT/SIGTERM (then everything detaches, exit 0).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::cli::{ProbeArgs, ServeArgs, SERVE_CPU_BUDGET};
use crate::failure::Failure;
use crate::fleet::families::FlightCounts;
use crate::fleet::flight::Plan;
use crate::fleet::flight_dir::FlightDir;
use crate::fleet::http::{self, Ask, Channels, Published, Question, Shared};
use crate::fleet::node::{Node, Settings};
use crate::host;
use crate::modes::Step;
use crate::source::{self, LiveSource};
use crate::stream::{Entry, GuardState, KernelSnapshot};

/// How often metrics are refreshed and dumps come due.
const TICK: Duration = Duration::from_secs(1);
/// Questions of HTTP clients waiting for the loop; more wait in their
/// connection (bounded there).
const MAX_WAITING_ASKS: usize = 8;

pub async fn run(args: &ServeArgs, probe_args: &ProbeArgs) -> Result<(), Failure> {
    let (config, hierarchy) = source::probe_config(probe_args, SERVE_CPU_BUDGET)?;
    // Before the probes: a port in use fails with nothing loaded.
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::Other(format!("cannot listen on {}: {e}", args.listen)))?;
    let flight_dir = match &args.flight_dir {
        Some(dir) => Some(
            FlightDir::open(dir, args.flight_max)
                .map_err(|e| Failure::Output(format!("{}: {e}", dir.display())))?,
        ),
        None => None,
    };
    let start_ns = host::monotonic_ns();
    let (tx, mut rx) = mpsc::channel::<Entry>(256);
    let source = LiveSource::start(config.clone(), hierarchy.clone(), tx)?;
    let header = source::session_header(&config, &hierarchy, start_ns, &source.info);
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Failure::io)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(Failure::io)?;
    let mut user1 = signal(SignalKind::user_defined1()).map_err(Failure::io)?;

    let settings = Settings {
        max_containers: args.max_series_containers as usize,
        trigger_ns: args.trigger.as_nanos() as u64,
        keep_ns: flight_dir.as_ref().map(|_| args.keep.as_nanos() as u64),
    };
    let mut node = Node::new(header, &settings, start_ns);
    let shared: Shared = Arc::new(Mutex::new(Published {
        flight: flight_dir.is_some(),
        ..Published::default()
    }));
    let (dumps, mut dump_rx) = mpsc::channel(1);
    let (asks, mut ask_rx) = mpsc::channel(MAX_WAITING_ASKS);
    let server = tokio::spawn(http::serve(
        listener,
        Arc::clone(&shared),
        Channels { dumps, asks },
    ));
    eprintln!(
        "stalltop: serving http://{}/metrics ({} probes){}{}",
        args.listen,
        source.info.attach,
        match &args.flight_dir {
            Some(dir) => format!(
                "; flight recordings of stalls of {:?} or more in {}",
                args.trigger,
                dir.display()
            ),
            None => String::new(),
        },
        match config.cost_guard {
            Some(share) => format!("; CPU budget {}% of the node", share * 100.0),
            None => "; no CPU budget".into(),
        }
    );
    // What did not come up, or was turned off at start, one line each.
    for warning in &source.info.warnings {
        eprintln!("stalltop: {warning}");
    }

    let mut flight = FlightCounts::default();
    let mut degraded = Vec::new();
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            entry = rx.recv() => match entry {
                Some(entry) => apply(&mut node, &entry, &mut degraded),
                None => break, // the probe thread ended on its own
            },
            _ = tick.tick() => {
                let due = node.tick(host::monotonic_ns()).unwrap_or_else(|e| {
                    tracing::warn!("flight window: {e}");
                    Vec::new()
                });
                for plan in due {
                    write_dump(&node, &plan, flight_dir.as_ref(), &mut flight);
                }
                publish(&node, &shared, flight);
            }
            Some(ask) = ask_rx.recv() => answer(&node, ask),
            _ = dump_rx.recv() => { node.trigger_now(host::monotonic_ns()); }
            _ = user1.recv() => {
                if !node.trigger_now(host::monotonic_ns()) {
                    eprintln!("stalltop: SIGUSR1 asks for a flight recording, but serve has no --flight-dir");
                }
            }
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
        }
    }

    server.abort();
    source.request_stop();
    while let Some(entry) = rx.recv().await {
        apply(&mut node, &entry, &mut degraded);
    }
    source.join();
    // Dumps planned but not yet due are written with what there is.
    if let Ok(due) = node.tick(u64::MAX) {
        for plan in due {
            write_dump(&node, &plan, flight_dir.as_ref(), &mut flight);
        }
    }
    eprintln!("stalltop: probes detached");
    Ok(())
}

fn apply(node: &mut Node, entry: &Entry, degraded: &mut Vec<Step>) {
    if let Err(e) = node.apply(entry) {
        tracing::warn!("flight window: {e}");
    }
    if let Entry::Kernel(KernelSnapshot {
        cost_guard: Some(guard),
        ..
    }) = entry
    {
        log_steps(guard, degraded);
    }
}

/// Says on stderr each step the cost guard took since the last snapshot.
fn log_steps(guard: &GuardState, degraded: &mut Vec<Step>) {
    let cost = format!(
        "stalltop's cost {:.3} CPUs against a budget of {:.3} (--max-cpu)",
        guard.cost_cpus, guard.budget_cpus
    );
    for step in guard.down.iter().filter(|s| !degraded.contains(s)) {
        eprintln!("stalltop: {cost}: stepping down: {}", step.down());
    }
    for step in degraded.iter().filter(|s| !guard.down.contains(s)) {
        eprintln!("stalltop: {cost}: stepping back up: {}", step.up());
    }
    degraded.clone_from(&guard.down);
}

fn write_dump(node: &Node, plan: &Plan, dir: Option<&FlightDir>, counts: &mut FlightCounts) {
    let (Some(dir), Some((header, chunks))) = (dir, node.dump(plan)) else {
        return;
    };
    match dir.write(&header, node.wall_clock_ns(plan.trigger_ns), chunks) {
        Ok(path) => {
            counts.dumps += 1;
            eprintln!("stalltop: wrote flight recording {}", path.display());
        }
        Err(e) => {
            counts.failed += 1;
            eprintln!("stalltop: cannot write a flight recording: {e}");
        }
    }
    match dir.prune() {
        Ok(deleted) => counts.deleted += deleted,
        Err(e) => eprintln!("stalltop: cannot prune the flight directory: {e}"),
    }
}

fn publish(node: &Node, shared: &Shared, flight: FlightCounts) {
    let probe_cpu_ns = host::process_cpu_ns() + node.bpf_run_time_ns();
    let families = node.families(probe_cpu_ns as f64 / 1e9, flight);
    shared.lock().unwrap_or_else(|e| e.into_inner()).families = families;
}

/// `/stalls` and `/why`, computed when a client asks.
fn answer(node: &Node, ask: Ask) {
    let json = match ask.question {
        Question::Stalls => node.recent_stalls_json(),
        Question::Why => node.why_json(),
    };
    // A client that went away meanwhile needs no answer.
    let _ = ask.answer.send(json);
}
