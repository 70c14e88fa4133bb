//! The raw_tp handlers driven with BPF_PROG_TEST_RUN (ctx = u64 args),
//! loaded but not attached (root, as in CI): each handler's own logic on
//! exact inputs.

use std::mem::MaybeUninit;
use std::time::Duration;

use libbpf_rs::skel::Skel;
use libbpf_rs::{MapCore, MapFlags, ProgramInput, RingBufferBuilder};

use super::*;
use super::{config, own_cgroup_id, pin_to, syscall_row, ONE_AT_A_TIME};
use crate::event::{self, FilePath};
use crate::probe::skel::{types, StalltopSkel};

const NET_RX: u64 = 3;
const FADVISE64: u64 = 221;

fn test_run(skel: &StalltopSkel<'_>, program: &str, args: &[u64]) {
    let prog = skel
        .object()
        .progs_mut()
        .find(|p| p.name() == program)
        .unwrap_or_else(|| panic!("no program {program}"));
    let mut ctx: Vec<u8> = args.iter().flat_map(|a| a.to_ne_bytes()).collect();
    let input = ProgramInput {
        context_in: Some(&mut ctx),
        ..Default::default()
    };
    prog.test_run(input)
        .unwrap_or_else(|e| panic!("test run of {program}: {e}"));
}

/// The handlers driven with a NULL regs pointer read zero arguments: a
/// call about fd 0. This points fd 0 at a file of the test's, and gives the
/// process its own fd 0 back when dropped.
struct Fd0 {
    saved: i32,
}

impl Fd0 {
    fn point_at(file: &std::fs::File) -> Fd0 {
        // SAFETY: dup of an fd of this process.
        let saved = unsafe { libc::dup(0) };
        assert!(saved >= 0, "dup(0)");
        let fd0 = Fd0 { saved };
        fd0.repoint(file);
        fd0
    }

    /// Another file behind fd 0, as when a thread closes it and the number is reused.
    fn repoint(&self, file: &std::fs::File) {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto fd 0 of an fd this process owns; `Drop` restores fd 0.
        assert_eq!(unsafe { libc::dup2(file.as_raw_fd(), 0) }, 0);
    }
}

impl Drop for Fd0 {
    fn drop(&mut self) {
        // SAFETY: restoring fd 0 from the descriptor saved in `point_at`.
        unsafe {
            libc::dup2(self.saved, 0);
            libc::close(self.saved);
        }
    }
}

fn drain_events(skel: &StalltopSkel<'_>) -> Vec<event::Event> {
    let bytes = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let sink = std::rc::Rc::clone(&bytes);
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.events, move |r: &[u8]| {
            sink.borrow_mut().extend_from_slice(r);
            0
        })
        .unwrap();
    builder.build().unwrap().consume().unwrap();
    let bytes = bytes.borrow();
    event::decode(&bytes)
        .into_iter()
        .map(|e| e.unwrap())
        .collect()
}

/// A 3 ms fadvise of fd 0, pointed at `file`, through the enter and exit handlers
/// (`meanwhile` runs between them): the one event it sends.
fn slow_fadvise_of_fd0(
    skel: &StalltopSkel<'_>,
    file: &std::fs::File,
    meanwhile: impl FnOnce(&Fd0),
) -> event::SlowSyscall {
    let fd0 = Fd0::point_at(file);
    test_run(skel, "raw_sys_enter", &[0, FADVISE64]);
    std::thread::sleep(Duration::from_millis(3));
    meanwhile(&fd0);
    test_run(skel, "raw_sys_exit", &[0, 0]);
    drop(fd0);
    let events = drain_events(skel);
    let [event::Event::Syscall(call)] = events.as_slice() else {
        panic!("{events:?}")
    };
    call.clone()
}

/// `path` as a call's resolved file.
fn resolved(path: &std::path::Path) -> FilePath {
    FilePath::Resolved {
        path: path.canonicalize().unwrap().to_string_lossy().into_owned(),
        truncated: false,
    }
}

#[test]
fn raw_tp_softirq_handlers_time_the_delay_and_hold_the_interrupted_tasks_share() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = ProbeConfig {
        stall_threshold_ns: 1_000_000,
        ..config(AttachMode::RawTp)
    };
    let mut storage = MaybeUninit::uninit();
    let skel = super::loader::load_detached(&config, &mut storage).expect("raw_tp loads");
    pin_to(0);
    test_run(&skel, "raw_softirq_raise", &[NET_RX]);
    test_run(&skel, "raw_softirq_raise", &[NET_RX]); // still pending: not a new raise
    std::thread::sleep(Duration::from_millis(3));
    test_run(&skel, "raw_softirq_entry", &[NET_RX]);
    std::thread::sleep(Duration::from_millis(1));
    test_run(&skel, "raw_softirq_exit", &[NET_RX]);

    let per_cpu = skel
        .maps
        .softirq_by_vector
        .lookup_percpu(&(NET_RX as u32).to_ne_bytes(), MapFlags::ANY)
        .unwrap()
        .unwrap();
    let mut stats = types::softirq_stats::default();
    plain::copy_from_bytes(&mut stats, &per_cpu[0]).unwrap();
    assert_eq!(stats.count, 1);
    assert!(
        stats.delay_max_ns >= 3_000_000 && stats.delay_max_ns < 50_000_000,
        "{stats:?}"
    );
    assert!(stats.run_total_ns >= 1_000_000, "{stats:?}");
    assert_eq!(stats.runs_in_ksoftirqd, 0);

    let events = drain_events(&skel);
    let [event::Event::Softirq(delay)] = events.as_slice() else {
        panic!("{events:?}")
    };
    assert_eq!((delay.cpu, delay.vector, delay.in_ksoftirqd), (0, 3, false));
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    assert_eq!(delay.ctx.tid, tid);

    // Its run time is held for this thread, which it interrupted, in the CPU's state until the
    // thread leaves the CPU or a sampler tick (neither is attached here) settles it.
    let cpu = super::cpu_states(&skel)[0];
    assert_eq!(cpu.stolen_vectors, 1 << NET_RX);
    assert_eq!(cpu.stolen_runs[NET_RX as usize], 1);
    assert_eq!(cpu.stolen_ns[NET_RX as usize], stats.run_total_ns);
    assert_eq!(skel.maps.softirq_stolen.keys().count(), 0);
}

#[test]
fn raw_tp_syscall_handlers_time_a_call_and_name_its_file() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::RawTp);
    let mut storage = MaybeUninit::uninit();
    let skel = super::loader::load_detached(&config, &mut storage).expect("raw_tp loads");
    pin_to(0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.INFO");
    let file = std::fs::File::create(&path).unwrap();
    let call = slow_fadvise_of_fd0(&skel, &file, |_| {});
    assert_eq!((call.nr, call.fd), (FADVISE64 as u32, Some(0)));
    assert!(
        call.wall_ns >= 3_000_000 && call.wall_ns < 50_000_000,
        "{call:?}"
    );
    // No sched programs ran: the whole call counts as one on-CPU slice.
    assert_eq!(call.oncpu_ns, call.wall_ns);
    assert_eq!(call.path, resolved(&path));

    let own_cgroup = own_cgroup_id(&config);
    let snapshot = crate::stream::KernelSnapshot {
        syscalls: super::maps::read_syscalls(&skel),
        ..Default::default()
    };
    let stats = syscall_row(&snapshot, own_cgroup, FADVISE64 as u32)
        .expect("syscall stats for this cgroup");
    assert_eq!(stats.count, 1);
    assert_eq!(stats.wall_total_ns, call.wall_ns);
}

/// Another thread closes a call's fd and the number goes to a new file
/// before the call ends (here: dup2 between the enter and exit handlers):
/// the call is not said to be about the new file, but about an unknown one.
#[test]
fn raw_tp_sys_exit_names_no_file_when_the_fd_was_reused_during_the_call() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::RawTp);
    let mut storage = MaybeUninit::uninit();
    let skel = super::loader::load_detached(&config, &mut storage).expect("raw_tp loads");
    pin_to(0);
    let dir = tempfile::tempdir().unwrap();
    let used = std::fs::File::create(dir.path().join("used.log")).unwrap();
    let reused = std::fs::File::create(dir.path().join("new-owner.db")).unwrap();
    let call = slow_fadvise_of_fd0(&skel, &used, |fd0| fd0.repoint(&reused));
    assert_eq!(call.nr, FADVISE64 as u32);
    assert_eq!(call.path, FilePath::FdReused, "{call:?}");
    assert!(call.path.text().unwrap().contains("reused"));
}

/// A thread with an fd table of its own: no other thread can close its fd meanwhile, so the
/// enter handler notes nothing and the exit names the file its fd names then.
#[test]
fn raw_tp_sys_exit_names_the_file_of_a_thread_with_its_own_fd_table() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let config = config(AttachMode::RawTp);
    let mut storage = MaybeUninit::uninit();
    let skel = super::loader::load_detached(&config, &mut storage).expect("raw_tp loads");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("own.log");
    let file = std::fs::File::create(&path).unwrap();
    let call = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pin_to(0);
                // SAFETY: gives this thread a copy of the fd table; it ends with the thread.
                assert_eq!(unsafe { libc::unshare(libc::CLONE_FILES) }, 0, "unshare");
                slow_fadvise_of_fd0(&skel, &file, |_| {})
            })
            .join()
            .unwrap()
    });
    assert_eq!(call.path, resolved(&path));
}
