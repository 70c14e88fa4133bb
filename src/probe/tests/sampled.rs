//! Real-kernel tests of sampled syscalls (root, as in CI): no syscall
//! hooks, the CPU sampler finds a long call from the caller's saved user
//! registers, in both families.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use super::{config, own_cgroup_id, pin_to, sleep_until, thread_cpu_ns, ONE_AT_A_TIME};
use crate::event::{self, Event, FilePath};
use crate::host;

/// Bytes one read of /dev/zero copies: tens of ms in the kernel, never
/// sleeping (the kernel zeroes the buffer in one go).
const READ_BYTES: usize = 192 << 20;
const PERIOD_NS: u64 = 1_000_000_000 / DEFAULT_SAMPLE_HZ as u64;
/// The periodic waker's period: 1 ms, as so many timers are.
const WAKER_PERIOD_NS: u64 = 1_000_000;

/// A thread on CPU 1 that wakes every millisecond (absolute deadlines, as
/// the sampler's ticks are) and spins 200 us, until `stop`: it preempts a
/// long call there every millisecond, always in step with the ticks (a
/// call timed by the ticks that find it would lose the stretches between
/// its wake-ups).
fn periodic_waker(stop: Arc<AtomicBool>) -> (u32, std::thread::JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        pin_to(1);
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() } as u32).unwrap();
        let mut deadline = host::monotonic_ns();
        while !stop.load(Ordering::Relaxed) {
            deadline += WAKER_PERIOD_NS;
            sleep_until(deadline);
            let work = Instant::now();
            while work.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
        }
    });
    (rx.recv().unwrap(), thread)
}

/// How long the sleeping read below sleeps halfway, on a page it faults on.
const FAULT_SLEEP: Duration = Duration::from_millis(60);

/// One long read of /dev/zero on CPU 1 by a thread of ours: its tid, wall
/// and CPU time. With `sleep`, it sleeps that long halfway (see
/// `page_supplied_late`).
/// (tid, wall ns, CPU ns, ns it waited runnable for a CPU) of one read.
pub(super) fn long_read(sleep: Option<Duration>) -> (u32, u64, u64, u64) {
    std::thread::spawn(move || {
        pin_to(1);
        let mut buf = vec![1u8; READ_BYTES]; // touched: no page faults inside the call
        let handler = sleep.map(|sleep| page_supplied_late(&mut buf, sleep));
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let (start, cpu, waited) = (Instant::now(), thread_cpu_ns(), run_delay_ns());
        // SAFETY: `buf` is writable for READ_BYTES bytes.
        let n = unsafe {
            libc::read(
                std::os::fd::AsRawFd::as_raw_fd(&zero),
                buf.as_mut_ptr().cast(),
                READ_BYTES,
            )
        };
        let (wall, cpu) = (start.elapsed().as_nanos() as u64, thread_cpu_ns() - cpu);
        let waited = run_delay_ns() - waited;
        assert_eq!(n, READ_BYTES as isize);
        if let Some(handler) = handler {
            handler.join().unwrap();
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        (tid, wall, cpu, waited)
    })
    .join()
    .unwrap()
}

/// Time the calling thread has waited runnable for a CPU (schedstat's
/// second field).
fn run_delay_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    stat.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("schedstat's run delay")
}

/// Makes the middle page of `buf` missing and watched by a userfaultfd: a
/// copy into `buf` that reaches it faults and sleeps until the returned
/// handler thread, on CPU 0, supplies the page `sleep` after the fault.
fn page_supplied_late(buf: &mut [u8], sleep: Duration) -> std::thread::JoinHandle<()> {
    let page = procfs::page_size() as usize;
    let middle = buf.as_mut_ptr().wrapping_add(buf.len() / 2);
    let hole = middle.wrapping_add(middle.align_offset(page)); // a whole page of `buf`
    let uffd = userfaultfd::UffdBuilder::new()
        .close_on_exec(true)
        .user_mode_only(false) // the fault comes from the kernel's copy
        .create()
        .expect("a userfaultfd (root)");
    // SAFETY: `hole` is one page inside `buf`, which is not read before the
    // handler fills the page in again.
    let dropped = unsafe { libc::madvise(hole.cast(), page, libc::MADV_DONTNEED) };
    assert_eq!(dropped, 0);
    uffd.register(hole.cast(), page).expect("register the page");
    let hole_address = hole as usize; // an address, to send to the handler
    std::thread::spawn(move || {
        pin_to(0);
        let event = uffd.read_event().expect("a userfaultfd event");
        assert!(
            matches!(event, Some(userfaultfd::Event::Pagefault { .. })),
            "{event:?}"
        );
        std::thread::sleep(sleep);
        // SAFETY: the page is the registered one, missing until now.
        unsafe { uffd.zeropage(hole_address as *mut libc::c_void, page, true) }
            .expect("fill the page");
    })
}

fn sampled_read_is_found(attach: AttachMode, with_waker: bool) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        syscalls: SyscallMode::Sampled,
        sample_hz: DEFAULT_SAMPLE_HZ,
        ..config(attach)
    };
    let own_cgroup = own_cgroup_id(&config);
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    assert_eq!(session.info().syscalls, SyscallMode::Sampled);
    assert!(
        session.info().warnings.is_empty(),
        "{:?}",
        session.info().warnings
    );
    assert!(
        !session.info().probes.iter().any(|p| p.family == "syscall"),
        "sampled mode hooks no syscall"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let waker = with_waker.then(|| periodic_waker(Arc::clone(&stop)));
    std::thread::sleep(Duration::from_millis(5));
    let (tid, wall, cpu, _) = long_read(None);
    stop.store(true, Ordering::Relaxed);
    let waker_tid = waker.map(|(tid, thread)| {
        thread.join().unwrap();
        tid
    });
    std::thread::sleep(Duration::from_millis(20));
    let records = session.poll(Duration::from_millis(50));
    let snapshot = session.snapshot(host::monotonic_ns());

    let read = syscalls::Sysno::read as u32;
    let ours: Vec<_> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Syscall(s)) if s.task.tid == tid => Some(s),
            _ => None,
        })
        .collect();
    // (Freeing the buffer afterwards is a long munmap of its own.)
    let calls: Vec<_> = ours.iter().filter(|c| c.nr == read).collect();
    if let Some(waker) = waker_tid {
        // Preemption does not end a call; the waker's calls each block.
        assert_eq!(
            calls.len(),
            1,
            "{calls:#?}; the read took {wall} ns, {cpu} ns of CPU; table: {:?}; counters: {:?}",
            snapshot
                .syscalls
                .iter()
                .find(|r| r.nr == read && r.cgroup == own_cgroup),
            snapshot.counters
        );
        let listed: Vec<_> = event::decode(&records)
            .into_iter()
            .filter_map(|e| match e {
                Ok(Event::Syscall(s)) if s.task.tid == waker => Some(s),
                _ => None,
            })
            .collect();
        assert!(
            listed.is_empty(),
            "the waker's naps are listed: {listed:#?}"
        );
    }
    // The call held CPU 1 throughout (a busy neighbour could split it:
    // then each part is its own record, all of the same call).
    assert!(
        !calls.is_empty(),
        "the {wall} ns read was not found: {ours:#?}"
    );
    for call in &calls {
        assert_eq!(call.task.cgroup, own_cgroup, "{call:?}");
        assert_eq!(
            call.path,
            FilePath::Resolved {
                path: "/dev/zero".into(),
                truncated: false
            },
            "{call:?}"
        );
        assert!(call.oncpu_ns <= call.wall_ns + PERIOD_NS, "{call:?}");
    }
    // Its time on the CPU to within two sampler periods: at least the
    // thread's CPU clock (less a period at each end), at most its wall
    // (and a period).
    let held: u64 = calls.iter().map(|c| c.oncpu_ns).sum();
    assert!(
        held + 2 * PERIOD_NS * calls.len() as u64 >= cpu && held <= wall + PERIOD_NS,
        "sampled {held} ns in {} records; the read took {wall} ns, {cpu} ns of CPU: {calls:#?}",
        calls.len()
    );
    // The table counts its time on the CPU for our cgroup.
    let row = snapshot
        .syscalls
        .iter()
        .find(|r| r.cgroup == own_cgroup && r.nr == read)
        .unwrap_or_else(|| panic!("no sampled read row: {:?}", snapshot.syscalls));
    // And its file, the same time.
    let file = snapshot
        .files
        .iter()
        .find(|f| f.cgroup == own_cgroup && f.nr == read && f.path == "/dev/zero")
        .unwrap_or_else(|| panic!("no sampled time on /dev/zero: {:?}", snapshot.files));
    assert!(
        file.calls >= 1 && file.oncpu_ns + 2 * PERIOD_NS >= cpu,
        "{file:?}, the read took {cpu} ns of CPU"
    );
    assert!(
        row.oncpu_total_ns + 2 * PERIOD_NS >= cpu,
        "{} ns sampled in the table, {cpu} ns of CPU",
        row.oncpu_total_ns
    );
}

#[test]
fn tp_btf_sampled_syscalls_find_a_long_read_and_its_file() {
    sampled_read_is_found(AttachMode::TpBtf, false);
}

#[test]
fn raw_tp_sampled_syscalls_find_a_long_read_and_its_file() {
    sampled_read_is_found(AttachMode::RawTp, false);
}

/// A periodic waker on the same CPU preempts the read every millisecond,
/// in step with the sampler's ticks, and is itself found in its sleeps now
/// and then: the read is still one call, its time on the CPU measured in
/// full, and the waker's short calls are never listed.
#[test]
fn tp_btf_sampled_syscalls_time_a_long_read_beside_a_periodic_waker() {
    sampled_read_is_found(AttachMode::TpBtf, true);
}

#[test]
fn raw_tp_sampled_syscalls_time_a_long_read_beside_a_periodic_waker() {
    sampled_read_is_found(AttachMode::RawTp, true);
}

/// A call whose thread no tick finds for this long has ended (as
/// SAMPLED_STALE_PERIODS in bpf/syscall_sampled.bpf.h): a read that waits
/// this long for the CPU on a busy host reads as two calls.
const STALE_NS: u64 = 100 * PERIOD_NS;

/// A long call that sleeps halfway (on a page a userfaultfd supplies 60 ms
/// later) is one call: its wall time holds the sleep, its time on the CPU
/// does not. Also when its thread comes back from a task whose switch away
/// the tracepoint does not show (the sampler's tick resumes its stretch).
fn sampled_read_that_sleeps_is_one_call(attach: AttachMode) {
    let config = ProbeConfig {
        syscalls: SyscallMode::Sampled,
        ..config(attach)
    };
    until_clean(|| sleeping_read_once(&config));
}

fn sleeping_read_once(config: &ProbeConfig) -> Result<(), Contaminated> {
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(config, &mut storage).expect("probes load");
    let (tid, wall, cpu, waited) = long_read(Some(FAULT_SLEEP));
    if waited >= STALE_NS {
        return Err(Contaminated(format!(
            "the read waited {waited} ns for the CPU"
        )));
    }
    std::thread::sleep(Duration::from_millis(20));
    let records = session.poll(Duration::from_millis(50));
    let read = syscalls::Sysno::read as u32;
    let calls: Vec<_> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Syscall(s)) if s.task.tid == tid && s.nr == read => Some(s),
            _ => None,
        })
        .collect();
    let [call] = calls.as_slice() else {
        panic!(
            "the read ({wall} ns, {cpu} ns of CPU) is listed {} times: {calls:#?}",
            calls.len()
        );
    };
    let slept = FAULT_SLEEP.as_nanos() as u64;
    assert!(
        wall >= slept + cpu / 2,
        "the read did not sleep: {wall} ns, {cpu} ns of CPU"
    );
    // Its start and end are each known to a period, its start later by as
    // long as the thread waited for the CPU before the first tick found it
    // (a busy host); its time on the CPU to a period at each end of each of
    // its two stretches.
    assert!(
        call.wall_ns + 2 * PERIOD_NS + waited >= wall && call.wall_ns <= wall + PERIOD_NS,
        "listed with {} ns of wall time; the read took {wall} ns, {waited} ns of it waiting \
         for the CPU: {call:?}",
        call.wall_ns
    );
    assert!(
        call.oncpu_ns + 4 * PERIOD_NS >= cpu && call.oncpu_ns + slept <= wall + PERIOD_NS,
        "listed with {} ns on the CPU; the read took {cpu} ns of CPU in {wall} ns: {call:?}",
        call.oncpu_ns
    );
    Ok(())
}

#[test]
fn tp_btf_sampled_syscalls_keep_a_call_that_sleeps_halfway_whole() {
    sampled_read_that_sleeps_is_one_call(AttachMode::TpBtf);
}

#[test]
fn raw_tp_sampled_syscalls_keep_a_call_that_sleeps_halfway_whole() {
    sampled_read_that_sleeps_is_one_call(AttachMode::RawTp);
}
