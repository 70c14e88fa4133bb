//! Syscall numbers of this architecture: names, and which argument names
//! the file a call is about (the BPF side reads it for slow calls). Pure.

use std::str::FromStr;

use syscalls::Sysno;

/// Size of the BPF `syscall_arg` table (SYSCALL_NR_MAX in bpf/stalltop.h).
pub const NR_MAX: usize = 512;

/// How the BPF side finds the file of a call (SYSCALL_ARG_* values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FileArg {
    None = 0,
    Fd0 = 1,
    Fd1 = 2,
    Path0 = 3,
    Path1 = 4,
}

/// Calls that sleep by design: their wall time alone does not make them
/// slow (SYSCALL_WAITS).
const WAITS: &[&str] = &[
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "nanosleep",
    "clock_nanosleep",
    "futex",
    "futex_waitv",
    "wait4",
    "waitid",
    "pause",
    "rt_sigtimedwait",
    "rt_sigsuspend",
    "io_getevents",
    "io_pgetevents",
    "msgrcv",
    "semop",
    "semtimedop",
    "accept",
    "accept4",
];
const WAITS_FLAG: u8 = 0x80;

/// Calls whose first argument is a file descriptor.
const FD0: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "fadvise64",
    "getdents",
    "getdents64",
    "ioctl",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "fallocate",
    "ftruncate",
    "readahead",
    "flock",
    "fstat",
    "fstatfs",
    "lseek",
    "fcntl",
    "splice",
    "tee",
    "copy_file_range",
    "sendfile",
    "fchmod",
    "fchown",
    "fgetxattr",
    "fsetxattr",
    "flistxattr",
    "syncfs",
    "recvfrom",
    "sendto",
    "recvmsg",
    "sendmsg",
    "recvmmsg",
    "sendmmsg",
    "accept",
    "accept4",
    "connect",
    "bind",
    "listen",
];
/// Calls whose second argument is a file descriptor.
const FD1: &[&str] = &["vmsplice"];
/// Calls whose first argument is a path.
const PATH0: &[&str] = &[
    "open",
    "creat",
    "stat",
    "lstat",
    "statfs",
    "access",
    "truncate",
    "unlink",
    "mkdir",
    "rmdir",
    "rename",
    "link",
    "symlink",
    "readlink",
    "chmod",
    "chown",
    "lchown",
    "chdir",
    "chroot",
    "execve",
    "getxattr",
    "lgetxattr",
    "setxattr",
    "listxattr",
    "mknod",
    "utime",
    "utimes",
    "acct",
    "swapon",
    "swapoff",
    "uselib",
];
/// Calls whose second argument is a path (the first is a directory fd).
const PATH1: &[&str] = &[
    "openat",
    "openat2",
    "newfstatat",
    "statx",
    "unlinkat",
    "mkdirat",
    "mknodat",
    "fchownat",
    "futimesat",
    "renameat",
    "renameat2",
    "linkat",
    "readlinkat",
    "fchmodat",
    "fchmodat2",
    "faccessat",
    "faccessat2",
    "execveat",
    "utimensat",
    "name_to_handle_at",
    "symlinkat",
];

/// The name of syscall `nr`, or `syscall_<nr>` if this build does not know it.
pub fn name(nr: u32) -> String {
    Sysno::new(nr as usize).map_or_else(|| format!("syscall_{nr}"), |s| s.name().to_string())
}

/// The BPF `syscall_arg` table: entry `nr` says where call `nr` keeps its
/// file, and whether it sleeps by design.
pub fn file_arg_table() -> [u8; NR_MAX] {
    let mut table = [FileArg::None as u8; NR_MAX];
    for (names, how) in [
        (FD0, FileArg::Fd0),
        (FD1, FileArg::Fd1),
        (PATH0, FileArg::Path0),
        (PATH1, FileArg::Path1),
    ] {
        for name in names {
            // A call this architecture lacks (e.g. `open` on arm64) is skipped.
            if let Ok(sysno) = Sysno::from_str(name) {
                if let Some(slot) = table.get_mut(sysno.id() as usize) {
                    *slot = how as u8;
                }
            }
        }
    }
    for name in WAITS {
        if let Ok(sysno) = Sysno::from_str(name) {
            if let Some(slot) = table.get_mut(sysno.id() as usize) {
                *slot |= WAITS_FLAG;
            }
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_file_arguments_of_well_known_calls() {
        assert_eq!(name(Sysno::read.id() as u32), "read");
        assert_eq!(name(Sysno::fadvise64.id() as u32), "fadvise64");
        assert_eq!(name(100_000), "syscall_100000");
        let table = file_arg_table();
        let of = |s: Sysno| table[s.id() as usize];
        assert_eq!(of(Sysno::read), FileArg::Fd0 as u8);
        assert_eq!(of(Sysno::fadvise64), FileArg::Fd0 as u8);
        assert_eq!(of(Sysno::getdents64), FileArg::Fd0 as u8);
        assert_eq!(of(Sysno::openat), FileArg::Path1 as u8);
        assert_eq!(of(Sysno::getpid), FileArg::None as u8);
        assert_eq!(of(Sysno::epoll_wait), WAITS_FLAG);
        assert_eq!(of(Sysno::accept4), FileArg::Fd0 as u8 | WAITS_FLAG);
    }

    #[test]
    fn the_abi_header_agrees_on_table_size_and_codes() {
        use crate::event::testing::abi_define;
        assert_eq!(abi_define("SYSCALL_NR_MAX"), Some(NR_MAX as u64));
        for (name, how) in [
            ("SYSCALL_ARG_NONE", FileArg::None),
            ("SYSCALL_ARG_FD0", FileArg::Fd0),
            ("SYSCALL_ARG_FD1", FileArg::Fd1),
            ("SYSCALL_ARG_PATH0", FileArg::Path0),
            ("SYSCALL_ARG_PATH1", FileArg::Path1),
        ] {
            assert_eq!(abi_define(name), Some(how as u64), "{name}");
        }
        assert_eq!(abi_define("SYSCALL_WAITS"), Some(u64::from(WAITS_FLAG)));
    }
}
