//! Real-kernel tests of a slow call whose fd another thread closes and reuses while the call
//! runs: one thread reads a 64 MiB file in one read() (tens of ms on the CPU, copying it),
//! another closes that fd meanwhile and opens a new file, which gets the same number. The read
//! goes on with the file it started on (it holds a reference); stalltop must not name the new
//! file, which the fd names when the call ends: exact mode compares the fd's file at entry and
//! exit; sampled mode, which first sees the call at a sampler tick, tells by the position lock
//! such a read holds on its own file. And the other side of that lock: threads that write one
//! shared log wait for it inside their calls, and keep their file.

use std::os::fd::IntoRawFd;
use std::time::Duration;

use super::*;
use super::{config, pin_to, until_clean, Contaminated};
use crate::event::{self, Event, FilePath, SlowSyscall};

const FILE_BYTES: usize = 64 << 20;
/// The other thread closes the fd this long into the read: in sampled mode mostly before the
/// first tick finds the call (the sampler's period is 1.4 ms).
const CLOSE_AFTER: Duration = Duration::from_micros(200);

/// What the reading thread saw.
struct Read {
    tid: u32,
    bytes: usize,
    /// The new file got the read's fd number while the read ran.
    reused: bool,
}

/// Whose fd table the reading thread uses.
#[derive(Clone, Copy, PartialEq)]
enum FdTable {
    /// The process's, shared with the thread that may close the fd.
    Shared,
    /// A copy of its own (unshare): no other thread can close its fd.
    Own,
}

/// Reads `big` whole in one call on one thread, while (if `reuse`) another closes its fd after
/// CLOSE_AFTER and opens `other`.
fn read_while_reused(
    big: &std::path::Path,
    other: &std::path::Path,
    reuse: bool,
    table: FdTable,
) -> Read {
    let fd = std::fs::File::open(big).unwrap().into_raw_fd();
    let started = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            // On one CPU: the sampler sees a call that moves to another CPU as two.
            pin_to(1);
            if table == FdTable::Own {
                // SAFETY: gives this thread a copy of the fd table; it ends with the thread.
                assert_eq!(unsafe { libc::unshare(libc::CLONE_FILES) }, 0, "unshare");
            }
            let mut buf = vec![0u8; FILE_BYTES];
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            started.wait();
            // SAFETY: `buf` is FILE_BYTES long and alive for the call.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), FILE_BYTES) };
            (tid, n)
        });
        started.wait();
        let reused = reuse && {
            std::thread::sleep(CLOSE_AFTER);
            // SAFETY: the fd is ours; the read holds its own reference to the file.
            unsafe { libc::close(fd) };
            let new = std::fs::File::create(other).unwrap().into_raw_fd();
            if new != fd {
                // SAFETY: `new` is ours, and not `fd` (closed below).
                unsafe { libc::close(new) };
            }
            new == fd
        };
        let (tid, n) = reader.join().unwrap();
        // SAFETY: `fd` is open again (the new file, or still the big one) and ours to close.
        unsafe { libc::close(fd) };
        Read {
            tid,
            bytes: usize::try_from(n).unwrap_or(0),
            reused,
        }
    })
}

fn slow_read_of(records: &[u8], tid: u32) -> Option<SlowSyscall> {
    event::decode(records).into_iter().find_map(|e| match e {
        Ok(Event::Syscall(c)) if c.task.tid == tid && c.nr == libc::SYS_read as u32 => Some(c),
        _ => None,
    })
}

/// One attempt; contaminated when the read ended before the fd could be reused.
fn read_once(
    syscalls: SyscallMode,
    reuse: bool,
    table: FdTable,
) -> Result<SlowSyscall, Contaminated> {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.dat");
    std::fs::write(&big, vec![7u8; FILE_BYTES]).unwrap();
    let other = dir.path().join("new-owner.db");
    let config = ProbeConfig {
        syscalls,
        ..config(AttachMode::TpBtf)
    };
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    let read = read_while_reused(&big, &other, reuse, table);
    if reuse && !read.reused {
        return Err(Contaminated("the new file got another fd number".into()));
    }
    if reuse && read.bytes != FILE_BYTES {
        return Err(Contaminated(format!(
            "the fd was reused before the read began (it read {} bytes)",
            read.bytes
        )));
    }
    assert_eq!(read.bytes, FILE_BYTES, "the read went on with its own file");
    let records = session.poll(Duration::from_millis(100));
    let call = slow_read_of(&records, read.tid)
        .unwrap_or_else(|| panic!("the 64 MiB read was not listed as slow"));
    if reuse && call.wall_ns < CLOSE_AFTER.as_nanos() as u64 {
        return Err(Contaminated(format!(
            "the read ended after {} ns, before the fd was reused",
            call.wall_ns
        )));
    }
    Ok(call)
}

/// The same read without the reuse names its file: the tests below can tell.
fn a_slow_read_names_its_file(syscalls: SyscallMode, table: FdTable) {
    let mut call = None;
    until_clean(|| read_once(syscalls, false, table).map(|c| call = Some(c)));
    let call = call.unwrap();
    assert!(
        matches!(&call.path, FilePath::Resolved { path, .. } if path.ends_with("/big.dat")),
        "{call:?}"
    );
}

#[test]
fn tp_btf_a_slow_read_names_its_file() {
    a_slow_read_names_its_file(SyscallMode::Exact, FdTable::Shared);
}

/// Exact mode notes no file at entry for a thread with its own fd table: it names the file at exit.
#[test]
fn tp_btf_a_slow_read_of_a_thread_with_its_own_fd_table_names_its_file() {
    a_slow_read_names_its_file(SyscallMode::Exact, FdTable::Own);
}

#[test]
fn tp_btf_sampled_a_slow_read_names_its_file() {
    a_slow_read_names_its_file(SyscallMode::Sampled, FdTable::Shared);
}

#[test]
fn tp_btf_a_slow_read_whose_fd_another_thread_reused_names_no_file() {
    let mut call = None;
    until_clean(|| read_once(SyscallMode::Exact, true, FdTable::Shared).map(|c| call = Some(c)));
    let call = call.unwrap();
    assert_eq!(call.path, FilePath::FdReused, "{call:?}");
}

/// Sampled: the first tick that finds the call resolves its fd, usually after the reuse
/// (then the call's file is unknown), now and then before it (then it is the read's own
/// file); never the new file. Of ROUNDS reads, at least one must meet the reuse first.
#[test]
fn tp_btf_sampled_a_slow_read_whose_fd_another_thread_reused_never_names_the_new_file() {
    const ROUNDS: usize = 5;
    let mut paths = Vec::new();
    while paths.len() < ROUNDS {
        until_clean(|| {
            read_once(SyscallMode::Sampled, true, FdTable::Shared).map(|c| paths.push(c.path))
        });
    }
    let own =
        |p: &FilePath| matches!(p, FilePath::Resolved { path, .. } if path.ends_with("/big.dat"));
    assert!(
        paths.iter().all(|p| *p == FilePath::FdReused || own(p)),
        "{paths:#?}"
    );
    assert!(paths.contains(&FilePath::FdReused), "{paths:#?}");
}

/// Threads writing one shared log, as a logging library's threads do: LOG_WRITERS threads
/// append LOG_CHUNK bytes at a time through one fd that nobody closes. Each write holds the
/// file's position lock, so the others wait for it (spinning while the holder runs) inside
/// their own writes: their first tick finds the lock held by a sibling.
const LOG_WRITERS: usize = 4;
const LOG_CHUNK: usize = 4 << 20;
const LOG_WRITES_EACH: usize = 8;

/// The writers' thread ids, and whether every write wrote its whole chunk.
fn write_one_log_from_threads(fd: i32) -> (Vec<u32>, bool) {
    let start = std::sync::Barrier::new(LOG_WRITERS);
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..LOG_WRITERS)
            .map(|_| {
                scope.spawn(|| {
                    let chunk = vec![b'l'; LOG_CHUNK];
                    // SAFETY: gettid has no preconditions.
                    let tid = unsafe { libc::gettid() } as u32;
                    start.wait();
                    let whole = (0..LOG_WRITES_EACH).all(|_| {
                        // SAFETY: `chunk` is LOG_CHUNK long and alive for the call; `fd` is open.
                        let n = unsafe { libc::write(fd, chunk.as_ptr().cast(), LOG_CHUNK) };
                        n == LOG_CHUNK as isize
                    });
                    (tid, whole)
                })
            })
            .collect();
        let done: Vec<(u32, bool)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        (
            done.iter().map(|&(tid, _)| tid).collect(),
            done.iter().all(|&(_, whole)| whole),
        )
    })
}

/// One attempt; contaminated when too few writes held a CPU long enough to be listed (the
/// page cache had the pages at hand).
fn shared_log_once(attach: AttachMode) -> Result<(), Contaminated> {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(dir.path().join("shared.log")).unwrap();
    let config = ProbeConfig {
        syscalls: SyscallMode::Sampled,
        ..config(attach)
    };
    let mut storage = ObjectStorage::default();
    let mut session = Session::start(&config, &mut storage).expect("probes load");
    let (tids, whole) = write_one_log_from_threads(log.as_raw_fd());
    assert!(whole, "a write to the log was short");
    let records = session.poll(Duration::from_millis(100));
    let writes: Vec<SlowSyscall> = event::decode(&records)
        .into_iter()
        .filter_map(|e| match e {
            Ok(Event::Syscall(c))
                if tids.contains(&c.task.tid) && c.nr == libc::SYS_write as u32 =>
            {
                Some(c)
            }
            _ => None,
        })
        .collect();
    if writes.len() < LOG_WRITERS {
        return Err(Contaminated(format!(
            "only {} slow writes of {LOG_WRITERS} threads writing {LOG_WRITES_EACH} x {} MiB",
            writes.len(),
            LOG_CHUNK >> 20
        )));
    }
    let named = |p: &FilePath| matches!(p, FilePath::Resolved { path, .. } if path.ends_with("/shared.log"));
    let others: Vec<&SlowSyscall> = writes.iter().filter(|c| !named(&c.path)).collect();
    assert!(
        others.is_empty(),
        "{} of {} slow writes to the shared log do not name it: {others:#?}",
        others.len(),
        writes.len()
    );
    Ok(())
}

#[test]
fn tp_btf_sampled_threads_sharing_one_log_keep_their_file() {
    until_clean(|| shared_log_once(AttachMode::TpBtf));
}

#[test]
fn raw_tp_sampled_threads_sharing_one_log_keep_their_file() {
    until_clean(|| shared_log_once(AttachMode::RawTp));
}
