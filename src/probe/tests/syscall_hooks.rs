//! The hooked syscall family on real calls: calls that sleep by design are timed but not listed
//! as slow, and calls are timed across switches, CPUs and cgroups.

use std::time::{Duration, Instant};

use super::*;

/// How long each call of `block_three_ways` is kept waiting.
const BLOCKED: Duration = Duration::from_millis(30);

/// A thread blocks BLOCKED in each of a read of an empty pipe, flock and fcntl(F_OFD_SETLKW),
/// released by this one; returns the thread's id.
fn block_three_ways() -> i32 {
    let path = std::env::temp_dir().join(format!("stalltop-lock-test-{}", std::process::id()));
    let file = |p: &std::path::Path| std::fs::File::create(p).unwrap();
    let (holder, waiter) = (file(&path), file(&path));
    let _ = std::fs::remove_file(&path);
    let lock = |l_type: i32| libc::flock {
        l_type: l_type as i16,
        l_whence: libc::SEEK_SET as i16,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    let mut pipe = [0; 2];
    use std::os::fd::AsRawFd;
    let (held, wanted) = (holder.as_raw_fd(), waiter.as_raw_fd());
    // SAFETY: pipe writes two fds into the array; flock and fcntl get open fds and a flock
    // struct that outlives the call.
    unsafe {
        assert_eq!(libc::pipe(pipe.as_mut_ptr()), 0);
        assert_eq!(libc::flock(held, libc::LOCK_EX), 0);
        assert_eq!(
            libc::fcntl(held, libc::F_OFD_SETLK, &lock(libc::F_WRLCK)),
            0
        );
    }
    let blocked = std::thread::spawn(move || {
        let mut byte = 0u8;
        // SAFETY: as above; read fills one byte of `byte`.
        unsafe {
            assert_eq!(libc::read(pipe[0], (&mut byte as *mut u8).cast(), 1), 1);
            assert_eq!(libc::flock(wanted, libc::LOCK_EX), 0);
            assert_eq!(
                libc::fcntl(wanted, libc::F_OFD_SETLKW, &lock(libc::F_WRLCK)),
                0
            );
            libc::gettid()
        }
    });
    std::thread::sleep(BLOCKED);
    // SAFETY: as above; write sends one byte.
    unsafe { assert_eq!(libc::write(pipe[1], b"x".as_ptr().cast(), 1), 1) };
    std::thread::sleep(BLOCKED);
    // SAFETY: as above.
    unsafe { assert_eq!(libc::flock(held, libc::LOCK_UN), 0) };
    std::thread::sleep(BLOCKED);
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            libc::fcntl(held, libc::F_OFD_SETLK, &lock(libc::F_UNLCK)),
            0
        )
    };
    let tid = blocked.join().unwrap();
    // SAFETY: the pipe's fds are ours and closed once.
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    tid
}

/// Calls that sleep by design are timed but never listed as slow for their wall time: a read
/// of a pipe, flock and fcntl(F_OFD_SETLKW), each kept waiting 30 ms.
#[test]
fn tp_btf_syscalls_that_sleep_by_design_are_timed_not_listed_as_slow() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Only the wall rule is under test: an emulated guest spends over 1 ms of CPU in the
    // blocked calls, which the on-CPU rule rightly lists.
    let config = ProbeConfig {
        syscall_oncpu_threshold_ns: BLOCKED.as_nanos() as u64,
        ..config(AttachMode::TpBtf)
    };
    let own_cgroup = own_cgroup_id(&config);
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    let tid = block_three_ways() as u32;
    let records = session.poll(Duration::from_millis(100));
    let snapshot = session.snapshot(host::monotonic_ns());

    let calls = [
        ("read", libc::SYS_read as u32),
        ("flock", libc::SYS_flock as u32),
        ("fcntl", libc::SYS_fcntl as u32),
    ];
    for (name, nr) in calls {
        let row = syscall_row(&snapshot, own_cgroup, nr)
            .unwrap_or_else(|| panic!("{name} not counted: {:?}", snapshot.syscalls));
        assert!(
            row.max_ns >= BLOCKED.as_nanos() as u64 / 2,
            "{name} was not timed as blocked: {row:?}"
        );
    }
    let listed: Vec<_> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Syscall(c)) if c.task.tid == tid => Some(c),
            _ => None,
        })
        .collect();
    assert!(listed.is_empty(), "listed as slow: {listed:#?}");
}

const SYS_GETPPID: u32 = 110;

const SYS_PSELECT6: u32 = 270;

/// A call entered on one CPU and ended on another (the task was switched
/// out inside it and moved meanwhile) is timed whole; calls that end where
/// they began are counted, for the cgroup that owns the CPU's slot and for
/// another cgroup making the same call there.
#[test]
fn tp_btf_syscalls_are_timed_across_switches_and_cpus_and_per_cgroup() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::TpBtf);
    let own_cgroup = own_cgroup_id(&config);
    let mut storage = ObjectStorage::default();
    let session = Session::start(&config, &mut storage).expect("probes load");

    let (cpu_before, cpu_after, slept, cpu_used) = std::thread::spawn(|| {
        pin_to(0);
        for _ in 0..1000 {
            // SAFETY: getppid takes no arguments.
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        // Move this thread to the other CPU while it sleeps in the call.
        let mover = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            // SAFETY: cpu_set_t is plain data set up by CPU_ZERO/CPU_SET.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(1, &mut set);
                libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set)
            }
        });
        // SAFETY: sched_getcpu has no preconditions.
        let before = unsafe { libc::sched_getcpu() };
        let started = Instant::now();
        let cpu_started = thread_cpu_ns();
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 40_000_000,
        };
        // SAFETY: pselect6 with no descriptors only sleeps; the pointers
        // are null or point at `timeout`, alive for the call.
        unsafe {
            libc::syscall(
                libc::SYS_pselect6,
                0,
                std::ptr::null_mut::<libc::fd_set>(),
                std::ptr::null_mut::<libc::fd_set>(),
                std::ptr::null_mut::<libc::fd_set>(),
                &timeout,
                std::ptr::null::<u8>(),
            )
        };
        let slept = started.elapsed();
        let cpu_used = thread_cpu_ns() - cpu_started;
        assert_eq!(mover.join().unwrap(), 0, "could not move the sleeper");
        // SAFETY: as above.
        let after = unsafe { libc::sched_getcpu() };
        (before, after, slept, cpu_used)
    })
    .join()
    .unwrap();
    assert_eq!((cpu_before, cpu_after), (0, 1));

    let other = ScratchCgroup::create();
    let made = other.run_child_on_cpu(0, || {
        for _ in 0..500 {
            // SAFETY: getppid takes no arguments.
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
    });
    assert!(made, "the child in {} failed", other.dir.display());

    let snapshot = session.snapshot(host::monotonic_ns());
    let sleep = syscall_row(&snapshot, own_cgroup, SYS_PSELECT6).expect("pselect6 counted");
    assert_eq!(sleep.count, 1, "{sleep:?}");
    // Timed whole, from entry on CPU 0 to exit on CPU 1: at least the
    // timeout, at most what the caller's clock saw around the call.
    let seen = slept.as_nanos() as u64;
    assert!(
        sleep.max_ns >= 40_000_000 && sleep.max_ns <= seen,
        "pselect6 timed {} ns, the caller saw {seen} ns",
        sleep.max_ns
    );
    // Asleep, not on a CPU: on a CPU no longer than the thread's own clock
    // counted around the call (a few ms under emulation, far less on
    // hardware), give or take 2 ms.
    assert!(
        sleep.oncpu_total_ns <= cpu_used + 2_000_000,
        "on-CPU {} ns, the thread's CPU clock {cpu_used} ns: {sleep:?}",
        sleep.oncpu_total_ns
    );

    let ours = syscall_row(&snapshot, own_cgroup, SYS_GETPPID).expect("our getppid counted");
    assert!(ours.count >= 1000, "{ours:?}");
    let theirs =
        syscall_row(&snapshot, other.id(), SYS_GETPPID).expect("the other cgroup's getppid");
    assert_eq!(theirs.count, 500, "{theirs:?}");
}
