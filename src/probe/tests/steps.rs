//! The cost guard's steps on a real running session (root, as in CI):
//! exact syscalls stepped down to sampled and back (the hooks come off and
//! back, sampled calls are found meanwhile, no call whose entry or exit
//! fell in between is timed), softirq delays still timed from the raise
//! meanwhile, the sampler at half rate, stacks off.

use std::time::Duration;

use super::sampled::long_read;
use super::softirq::{assert_delays_from_raises, stream_seen};
use super::*;
use super::{config, own_cgroup_id, ONE_AT_A_TIME};
use crate::event::{self, Event};
use crate::host;
use crate::modes::{SoftirqDelay, Step};
use crate::stream::SoftirqStats;

/// The runs so far of the probe `name` (all CPUs).
fn runs(session: &Session<'_>, name: &str) -> u64 {
    session
        .snapshot(host::monotonic_ns())
        .programs
        .iter()
        .find(|p| p.name == name)
        .map_or(0, |p| p.run_count)
}

/// `n` getpid calls.
fn getpids(n: usize) {
    for _ in 0..n {
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() };
    }
}

/// Reads of the calling thread's tid found in `records`.
fn reads_of(records: &[u8], tid: u32) -> Vec<event::SlowSyscall> {
    let read = syscalls::Sysno::read as u32;
    event::decode(records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Syscall(s)) if s.task.tid == tid && s.nr == read => Some(s),
            _ => None,
        })
        .collect()
}

#[test]
fn tp_btf_exact_syscalls_step_down_to_sampled_and_back() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        syscalls: SyscallMode::Exact,
        cost_guard: Some(0.02),
        ..config(AttachMode::TpBtf)
    };
    let own_cgroup = own_cgroup_id(&config);
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    assert_eq!(session.steps(), Step::ALL);
    let before = runs(&session, "sys_enter");
    getpids(10_000);
    assert!(runs(&session, "sys_enter") - before >= 10_000);

    // A pipe read that blocks across the step down ends meanwhile (its
    // exit unseen), and the next one, entered meanwhile, ends after the
    // step back up: neither may be timed from the first one's entry.
    let (first, second) = (pipe(), pipe());
    let (reader_tx, reader_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        reader_tx.send(()).unwrap();
        read_byte(first.0);
        reader_tx.send(()).unwrap();
        read_byte(second.0);
    });
    reader_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(100));

    session.step(Step::Syscalls, true).unwrap();
    assert_eq!(session.info().syscalls, SyscallMode::Sampled);
    let detached = runs(&session, "sys_enter");
    getpids(10_000);
    write_byte(first.1);
    reader_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        runs(&session, "sys_enter"),
        detached,
        "sys_enter ran with the hooks off"
    );
    // A long read is found by the sampler instead.
    session.poll(Duration::from_millis(10));
    let (tid, wall, _, _) = long_read(None);
    std::thread::sleep(Duration::from_millis(20));
    let records = session.poll(Duration::from_millis(50));
    let sampled = reads_of(&records, tid);
    assert!(!sampled.is_empty(), "the {wall} ns read was not sampled");

    session.step(Step::Syscalls, false).unwrap();
    assert_eq!(session.info().syscalls, SyscallMode::Exact);
    let attached = runs(&session, "sys_enter");
    getpids(10_000);
    assert!(runs(&session, "sys_enter") - attached >= 10_000);
    let resumed = std::time::Instant::now();
    std::thread::sleep(Duration::from_millis(50));
    write_byte(second.1);
    reader.join().unwrap();
    let longest = resumed.elapsed().as_nanos() as u64;
    let read = syscalls::Sysno::read as u32;
    let table = session.snapshot(host::monotonic_ns()).syscalls;
    let ours = table
        .iter()
        .filter(|s| s.cgroup == own_cgroup && s.nr == read)
        .map(|s| s.max_ns)
        .max()
        .unwrap_or(0);
    assert!(
        ours < longest,
        "a read of {ours} ns: timed from an entry before the step back up ({longest} ns ago)"
    );
    // A long read is timed by the hooks again.
    let (tid, wall, _, _) = long_read(None);
    let records = session.poll(Duration::from_millis(50));
    let hooked = reads_of(&records, tid);
    assert!(
        hooked
            .iter()
            .any(|r| r.wall_ns >= wall / 2 && r.wall_ns <= wall + 1_000_000),
        "the {wall} ns read: {hooked:#?}"
    );
}

/// An exact session times softirq delays from the raise program (its
/// sampler was loaded without ticks that start them): stepping the
/// syscall hooks down and back up leaves that program attached, and the
/// session says so.
#[test]
fn exact_softirq_delays_stay_timed_from_the_raise_across_the_syscalls_step() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        syscalls: SyscallMode::Exact,
        cost_guard: Some(0.02),
        ..config(AttachMode::Auto)
    };
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    assert_eq!(session.info().softirq_delay, SoftirqDelay::Exact);
    let delays_then =
        |session: &Session<'_>| stream_seen(|| session.snapshot(host::monotonic_ns())).net_rx;
    let before = delays_then(&session);
    assert_delays_from_raises(&before);

    session.step(Step::Syscalls, true).unwrap();
    assert_eq!(session.info().softirq_delay, SoftirqDelay::Exact);
    let raises = runs(&session, "softirq_raise");
    let down = delays_then(&session);
    assert!(
        runs(&session, "softirq_raise") > raises,
        "softirq_raise stopped running"
    );
    assert_stream_delays_timed(&before, &down, "hooks off");

    session.step(Step::Syscalls, false).unwrap();
    assert_eq!(session.info().softirq_delay, SoftirqDelay::Exact);
    let up = delays_then(&session);
    assert_stream_delays_timed(&down, &up, "hooks back");
}

/// Nearly every NET_RX run between two rows of one session (their counts
/// are since it started) had a delay timed: one per raise.
fn assert_stream_delays_timed(from: &SoftirqStats, to: &SoftirqStats, when: &str) {
    let runs = to.count - from.count;
    let delays = to.delay.count() - from.delay.count();
    assert!(
        runs > 1000 && delays * 10 >= runs * 9,
        "{when}: {delays} of {runs} NET_RX runs had a delay timed"
    );
}

#[test]
fn tp_btf_the_sampler_slows_to_half_and_stacks_come_off() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        syscalls: SyscallMode::Sampled,
        cost_guard: Some(0.02),
        ..config(AttachMode::TpBtf)
    };
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    assert_eq!(session.steps(), [Step::Sampler, Step::Stacks]);
    // Every CPU busy meanwhile: an idle CPU's cpu-clock does not tick.
    let ticks_in_busy_second = |session: &mut Session<'_>| {
        let before = runs(session, "cpu_sample");
        busy_every_cpu(Duration::from_secs(1));
        runs(session, "cpu_sample") - before
    };
    let cpus = crate::cpulist::CpuList::online().unwrap().iter().count() as f64;
    let full = ticks_in_busy_second(&mut session);
    let expected = cpus * f64::from(config.sample_hz);
    assert!(
        (0.8..1.1).contains(&(full as f64 / expected)),
        "{full} ticks in a busy second, {expected} expected"
    );
    session.step(Step::Sampler, true).unwrap();
    let half = ticks_in_busy_second(&mut session);
    let ratio = half as f64 / full as f64;
    assert!((0.4..0.6).contains(&ratio), "{full} ticks, then {half}");
    session.step(Step::Sampler, false).unwrap();
    let again = ticks_in_busy_second(&mut session);
    assert!(
        again as f64 >= 0.8 * full as f64,
        "{full} ticks, then {again}"
    );

    // A long read is sampled with its stacks, then without. Only samples
    // inside the read count: the thread's user-space fill of its buffer can
    // be sampled too, as the holder of CPU 1 while another task waits there,
    // and user space has no kernel stack.
    let read_nr = libc::SYS_read as u32;
    let stacks = |session: &mut Session<'_>| {
        session.poll(Duration::from_millis(10));
        let (tid, _, _, _) = long_read(None);
        let records = session.poll(Duration::from_millis(50));
        let samples: Vec<usize> = event::decode(&records)
            .into_iter()
            .filter_map(|e| match e {
                Ok(Event::Sample(s)) if s.task.tid == tid && s.syscall == Some(read_nr) => {
                    Some(s.kernel_stack.len())
                }
                _ => None,
            })
            .collect();
        assert!(!samples.is_empty(), "no sample of the read");
        samples
    };
    assert!(stacks(&mut session).iter().all(|&n| n > 0));
    session.step(Step::Stacks, true).unwrap();
    assert!(stacks(&mut session).iter().all(|&n| n == 0));
}

/// A thread pinned to each online CPU, spinning for `d`.
fn busy_every_cpu(d: Duration) {
    let end = std::time::Instant::now() + d;
    let spinners: Vec<_> = crate::cpulist::CpuList::online()
        .unwrap()
        .iter()
        .map(|cpu| {
            std::thread::spawn(move || {
                pin_to(cpu as usize);
                while std::time::Instant::now() < end {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    for spinner in spinners {
        spinner.join().unwrap();
    }
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two fds into the array.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    assert_eq!(rc, 0);
    (fds[0], fds[1])
}

fn read_byte(fd: i32) {
    let mut byte = 0u8;
    // SAFETY: read fills one byte of `byte`.
    let n = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
    assert_eq!(n, 1);
}

fn write_byte(fd: i32) {
    // SAFETY: write sends one byte from a static buffer.
    let n = unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
    assert_eq!(n, 1);
}
