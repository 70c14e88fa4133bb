//! The live source: a thread that runs the probe session, resolves cgroup
//! names (and the Kubernetes names of their pods and containers) and polls
//! CFS throttling, and sends `Entry`s into a bounded channel. Replay reads
//! the same entries from a recording instead.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::modes::StealSource;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::cgroup::{self, Hierarchy, Resolver};
use crate::cli::CpuBudget;
use crate::cost_guard::{Change, CostGuard};
use crate::cpulist::CpuList;
use crate::event::{self, Event, Sample};
use crate::host;
use crate::kubelet::{self, PodNamer};
use crate::probe::{self, ObjectStorage, ProbeConfig, ProbeError, ProbeInfo, Session};
use crate::stream::{
    Entry, GuardState, Header, KernelSnapshot, NameTable, Settings, ThrottleSnapshot,
};
use crate::symbols::StackNamer;

/// How often aggregate maps and cgroupfs are read.
pub const SNAPSHOT_INTERVAL: Duration = Duration::from_secs(1);
/// Longest wait for ring-buffer data: bounds how late a record is shown.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);
/// How often the map entries of removed cgroups are freed.
const PRUNE_INTERVAL_NS: u64 = 2_000_000_000;
/// cpu.pressure files read per snapshot at most (one per cgroup that waited):
/// about 30 us each (open, read, close; measured here from Python), so a
/// host with this many waiting cgroups spends some 60 ms a second on them.
const MAX_PRESSURE_CGROUPS: usize = 2_048;

pub struct LiveSource {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    pub info: ProbeInfo,
}

impl LiveSource {
    /// Load and attach the probes in a new thread; returns once they are
    /// attached (or failed to).
    pub fn start(
        config: ProbeConfig,
        hierarchy: Hierarchy,
        tx: mpsc::Sender<Entry>,
    ) -> Result<LiveSource, ProbeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("stalltop-probe".into())
            .spawn(move || run(config, hierarchy, tx, thread_stop, ready_tx))
            .expect("spawning a thread");
        match ready_rx.recv() {
            Ok(Ok(info)) => Ok(LiveSource { stop, thread, info }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ProbeError::Attach {
                    detail: "the probe thread ended during start-up".into(),
                })
            }
        }
    }

    /// Ask the thread to send its last entries and end; the channel closes
    /// when it has. Keep receiving until then, then `join`.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Wait for the thread; the probes are detached when this returns.
    pub fn join(self) {
        self.request_stop();
        if self.thread.join().is_err() {
            tracing::error!("the probe thread panicked");
        }
    }
}

fn run(
    config: ProbeConfig,
    hierarchy: Hierarchy,
    tx: mpsc::Sender<Entry>,
    stop: Arc<AtomicBool>,
    ready: std::sync::mpsc::SyncSender<Result<ProbeInfo, ProbeError>>,
) {
    // Before the probes attach: the stack namer's start-up work is not done on the watched host.
    let mut names = Names::new(&hierarchy);
    let mut storage = ObjectStorage::default();
    let mut session = match Session::start(&config, &mut storage) {
        Ok(session) => session,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(session.info()));
    let mut online = CpuList::online().ok();
    let mut guard = config.cost_guard.map(|share| {
        let cpus = online.as_ref().map_or(1, |o| o.iter().count().max(1));
        CostGuard::new(share * cpus as f64, session.steps(), host::monotonic_ns())
    });
    let mut pruner = Pruner::default();
    let mut next_snapshot = host::monotonic_ns();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let records = session.poll(POLL_TIMEOUT);
        if !records.is_empty() {
            let events: Vec<Event> = event::decode(&records).into_iter().flatten().collect();
            if !names.send_new(&events, &[], &tx)
                || tx.blocking_send(Entry::Records(records)).is_err()
            {
                break; // the consumer is gone
            }
        }
        let now = host::monotonic_ns();
        if stopping || now >= next_snapshot {
            next_snapshot = now + SNAPSHOT_INTERVAL.as_nanos() as u64;
            follow_online_cpus(&mut session, &mut online);
            let mut kernel = session.snapshot(now);
            kernel.removed_cgroups = pruner.prune(&session, &hierarchy, &kernel, now);
            if let Some(guard) = &mut guard {
                kernel.cost_guard =
                    Some(Box::new(follow_budget(guard, &mut session, &kernel, now)));
            }
            if !send_snapshots(kernel, &hierarchy, &mut names, &tx, now) {
                break;
            }
        }
        if stopping {
            break;
        }
    }
    drop(session);
    tracing::info!("probes detached");
}

/// A CPU online for the first time since boot has a new ksoftirqd thread,
/// which the probes were not told of at start: when the online CPUs
/// change, tell them every CPU's thread again (a few hundred us of /proc).
fn follow_online_cpus(session: &mut Session<'_>, online: &mut Option<CpuList>) {
    let now = CpuList::online().ok();
    if now == *online {
        return;
    }
    *online = now;
    if let Err(e) = session.set_ksoftirqd(&host::ksoftirqd_threads()) {
        tracing::warn!("telling the probes each CPU's ksoftirqd thread: {e}");
    }
}

/// The cost guard's turn at a snapshot: what stalltop spent so far (its
/// process, and its programs by their own timing), the step the guard asks
/// for made (or refused) and logged; returns its state for the snapshot.
fn follow_budget(
    guard: &mut CostGuard,
    session: &mut Session<'_>,
    kernel: &KernelSnapshot,
    now: u64,
) -> GuardState {
    let bpf_ns: u64 = kernel.programs.iter().map(|p| p.run_time_ns).sum();
    let spent = host::process_cpu_ns() + bpf_ns;
    if let Some(change) = guard.observe(now, spent) {
        let state = guard.state();
        let (down, what) = match change {
            Change::Down(step) => (true, format!("stepping down: {}", step.down())),
            Change::Up(step) => (false, format!("stepping back up: {}", step.up())),
        };
        match session.step(change.step(), down) {
            Ok(()) => tracing::warn!(
                "stalltop's cost {:.3} CPUs against a budget of {:.3}: {what}",
                state.cost_cpus,
                state.budget_cpus
            ),
            Err(e) => {
                tracing::warn!("cost guard: {what} failed: {e}");
                guard.refused(change);
            }
        }
    }
    guard.state()
}

/// Frees the map entries of removed cgroups, so pod churn cannot fill the
/// maps: a cgroup is taken for removed when the maps held it at the
/// previous pass and a walk of the hierarchy, made after that pass, did not
/// find it (a cgroup created since then is never in that set). Each pass
/// returns the cgroups it found removed.
#[derive(Default)]
struct Pruner {
    in_maps: HashSet<u64>,
    next_ns: u64,
}

impl Pruner {
    fn prune(
        &mut self,
        session: &Session<'_>,
        hierarchy: &Hierarchy,
        kernel: &KernelSnapshot,
        now: u64,
    ) -> Vec<u64> {
        if now < self.next_ns {
            return Vec::new();
        }
        self.next_ns = now + PRUNE_INTERVAL_NS;
        let live = cgroup::live_cgroups(hierarchy);
        let mut removed = Vec::new();
        // An unreadable hierarchy says nothing of what was removed.
        if !live.is_empty() {
            removed = self
                .in_maps
                .iter()
                .copied()
                .filter(|id| !live.contains(id))
                .collect();
            removed.sort_unstable();
            let deleted = session.prune_cgroups(&|id| removed.binary_search(&id).is_ok());
            if deleted > 0 {
                tracing::debug!("freed {deleted} map entries of removed cgroups");
            }
        }
        self.in_maps = snapshot_cgroups(kernel).into_iter().collect();
        removed
    }
}

/// Kernel maps and cgroupfs (CFS bandwidth, and CPU pressure of the
/// cgroups that waited), with the names they mention sent first.
fn send_snapshots(
    kernel: KernelSnapshot,
    hierarchy: &Hierarchy,
    names: &mut Names,
    tx: &mpsc::Sender<Entry>,
    now: u64,
) -> bool {
    let throttle = ThrottleSnapshot {
        ts_ns: now,
        cgroups: cgroup::read_throttling(hierarchy),
    };
    if !names.send_new(&[], &snapshot_cgroups(&kernel), tx) {
        return false;
    }
    let waited: Vec<String> = kernel
        .runq
        .iter()
        .take(MAX_PRESSURE_CGROUPS)
        .filter_map(|r| names.resolver.resolve(r.cgroup))
        .collect();
    let pressure = cgroup::read_pressure(hierarchy.pressure_root(), &waited, now);
    tx.blocking_send(Entry::Kernel(kernel)).is_ok()
        && tx.blocking_send(Entry::Throttle(throttle)).is_ok()
        && tx.blocking_send(Entry::Pressure(pressure)).is_ok()
}

/// Names the cgroup ids and stack addresses that events and snapshots
/// mention (each once), and the pods and containers of those cgroups, and
/// sends the new ones ahead of them.
struct Names {
    resolver: Resolver,
    pods: PodNamer,
    stacks: StackNamer,
}

impl Names {
    fn new(hierarchy: &Hierarchy) -> Names {
        Names {
            resolver: Resolver::new(hierarchy),
            pods: PodNamer::new(Path::new(kubelet::LOG_ROOT)),
            stacks: StackNamer::new(),
        }
    }

    fn send_new(&mut self, events: &[Event], cgroups: &[u64], tx: &mpsc::Sender<Entry>) -> bool {
        for id in events
            .iter()
            .flat_map(event_cgroups)
            .chain(cgroups.iter().copied())
        {
            self.resolver.resolve(id);
        }
        let samples: Vec<&Sample> = events
            .iter()
            .filter_map(|e| match e {
                Event::Sample(s) | Event::Irqoff(s) => Some(s),
                _ => None,
            })
            .collect();
        let callbacks: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::Hardirq(h) => h.hrtimer,
                _ => None,
            })
            .collect();
        let symbols = self.stacks.name(&samples, &callbacks);
        let cgroups = self.resolver.resolved_since_last_call();
        let pods = self
            .pods
            .name(cgroups.iter().map(|(_, path)| path.as_str()));
        let table = NameTable {
            cgroups,
            kernel_symbols: symbols.kernel,
            user_symbols: symbols.user,
            pods: pods.pods.into_iter().collect(),
            containers: pods.containers.into_iter().collect(),
        };
        table == NameTable::default() || tx.blocking_send(Entry::Names(table)).is_ok()
    }
}

fn event_cgroups(e: &Event) -> Vec<u64> {
    match e {
        Event::Runq(w) | Event::Takeover(w) => [w.waiter.cgroup, w.ran.cgroup]
            .into_iter()
            .chain(w.throttle.map(|t| t.cgroup))
            .collect(),
        Event::Softirq(s) => vec![s.ctx.cgroup],
        Event::Syscall(s) => vec![s.task.cgroup],
        Event::Sample(s) | Event::Irqoff(s) => vec![s.task.cgroup],
        Event::Hardirq(h) => vec![h.ctx.cgroup],
    }
}

fn snapshot_cgroups(k: &KernelSnapshot) -> Vec<u64> {
    k.runq
        .iter()
        .map(|r| r.cgroup)
        .chain(
            k.preemptors
                .iter()
                .flat_map(|p| [p.victim_cgroup, p.preemptor_cgroup]),
        )
        .chain(k.syscalls.iter().map(|s| s.cgroup))
        .chain(k.files.iter().map(|f| f.cgroup))
        .collect()
}

/// The header of a live session: this host, its clocks, the settings the
/// probes loaded with, and the optional probes that did not come up.
pub fn session_header(
    config: &ProbeConfig,
    hierarchy: &Hierarchy,
    start_ns: u64,
    info: &ProbeInfo,
) -> Header {
    Header {
        host: host::info(),
        start_ns,
        wall_clock_offset_ns: host::wall_clock_offset_ns(),
        settings: Settings {
            runq_threshold_ns: config.runq_threshold_ns,
            stall_threshold_ns: config.stall_threshold_ns,
            syscall_wall_threshold_ns: config.syscall_wall_threshold_ns,
            syscall_oncpu_threshold_ns: config.syscall_oncpu_threshold_ns,
            sample_hz: config.sample_hz,
            attach: info.attach,
            cgroup_hierarchy: hierarchy.kind(),
            syscalls: info.syscalls,
            softirq_time: info.softirq_time,
            softirq_delay_timing: Some(info.softirq_delay),
            steal: info.steal,
            runq_wait: Some(info.runq_wait),
            throttle: Some(info.throttle),
        },
        warnings: info
            .warnings
            .iter()
            .cloned()
            .chain(cgroup::pressure_warnings(hierarchy.pressure_root()))
            .collect(),
        probes: info.probes.clone(),
        trigger: None,
        recorder_pid: Some(std::process::id()),
    }
}

/// The probe configuration and the hierarchy to attribute by, from the
/// command line and this host.
/// The probes' configuration from the command line; `budget` is the cost
/// guard's when `--max-cpu` does not say (serve's, or none).
pub fn probe_config(
    args: &crate::cli::ProbeArgs,
    budget: CpuBudget,
) -> Result<(ProbeConfig, Hierarchy), crate::failure::Failure> {
    probe::preflight()?;
    let hierarchy = Hierarchy::detect()?;
    let config = ProbeConfig {
        attach: args.attach,
        runq_threshold_ns: args.runq_threshold.as_nanos() as u64,
        stall_threshold_ns: args.stall_threshold.as_nanos() as u64,
        syscall_wall_threshold_ns: args.syscall_wall_threshold.as_nanos() as u64,
        syscall_oncpu_threshold_ns: args.syscall_oncpu_threshold.as_nanos() as u64,
        hardirq_threshold_ns: probe::HARDIRQ_THRESHOLD_NS,
        sample_hz: args.sample_hz,
        record_rate: args.record_rate,
        syscalls: args.syscall_mode(),
        cgroup_v1_cpu: hierarchy.uses_v1_cpu(),
        ksoftirqd: host::ksoftirqd_threads(),
        features: probe::KernelFeatures::detect(),
        steal: StealSource::None,
        cost_guard: args.max_cpu.unwrap_or(budget).share(),
    };
    let config = ProbeConfig {
        steal: probe::choose_steal_source(
            &crate::vm::Machine::detect(),
            &config.features,
            crate::vm::steal_accounted(),
        ),
        ..config
    };
    Ok((config, hierarchy))
}
