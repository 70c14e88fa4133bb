//! Syscall numbers per architecture: names, which argument names the file
//! a call is about (the BPF side reads it for slow calls), and which calls
//! sleep by design. The binary uses the table of the architecture it is
//! built for; the tests check every table on any host. Pure.

use std::str::FromStr;

use crate::abi::types::{syscall_arg_how, syscall_table_size};

/// Size of the BPF `syscall_arg` table.
pub const NR_MAX: usize = syscall_table_size::SYSCALL_NR_MAX.0 as usize;

/// How the BPF side finds the file of a call (`enum syscall_arg_how`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FileArg {
    None = syscall_arg_how::SYSCALL_ARG_NONE.0 as u8,
    Fd0 = syscall_arg_how::SYSCALL_ARG_FD0.0 as u8,
    Fd1 = syscall_arg_how::SYSCALL_ARG_FD1.0 as u8,
    Path0 = syscall_arg_how::SYSCALL_ARG_PATH0.0 as u8,
    Path1 = syscall_arg_how::SYSCALL_ARG_PATH1.0 as u8,
}

const WAITS_FLAG: u8 = syscall_arg_how::SYSCALL_WAITS.0 as u8;
const WAITS_ON_STREAM_FLAG: u8 = syscall_arg_how::SYSCALL_WAITS_ON_STREAM.0 as u8;
const WAITS_FOR_LOCK_FLAG: u8 = syscall_arg_how::SYSCALL_WAITS_FOR_LOCK.0 as u8;
const LOCKS_POS_FLAG: u8 = syscall_arg_how::SYSCALL_LOCKS_POS.0 as u8;

/// Calls that lock their file's position while they run when another thread shares the fd
/// table (fdget_pos; SYSCALL_LOCKS_POS): the sampler tells by that lock whether the fd still
/// names the call's file.
const POSITION_LOCKERS: &[&str] = &[
    "read",
    "write",
    "readv",
    "writev",
    "lseek",
    "getdents64",
    "getdents",
];

/// Reads that sleep by design on a socket, pipe or terminal (SYSCALL_WAITS_ON_STREAM): the
/// BPF side looks at the fd's file only for a call over the wall threshold.
const STREAM_READS: &[&str] = &["read", "readv", "recvfrom", "recvmsg", "recvmmsg"];
/// Calls that sleep by design when they wait for a lock (SYSCALL_WAITS_FOR_LOCK).
const LOCK_WAITS: &[&str] = &["fcntl"];

/// Calls that sleep by design: their wall time alone does not make them
/// slow (SYSCALL_WAITS). These exist on every architecture.
const WAITS: &[&str] = &[
    "epoll_pwait",
    "epoll_pwait2",
    "ppoll",
    "pselect6",
    "nanosleep",
    "clock_nanosleep",
    "futex",
    "futex_waitv",
    "wait4",
    "waitid",
    "rt_sigtimedwait",
    "rt_sigsuspend",
    "io_getevents",
    "io_pgetevents",
    "msgrcv",
    "semop",
    "semtimedop",
    "accept",
    "accept4",
    "connect",
    "flock",
    "io_uring_enter",
    "mq_timedreceive",
    "restart_syscall",
];

/// Where calls keep their file; these exist on every architecture.
const FILE_ARGS: &[(FileArg, &[&str])] = &[
    (
        FileArg::Fd0,
        &[
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
        ],
    ),
    (FileArg::Fd1, &["vmsplice"]),
    (
        FileArg::Path0,
        &[
            "statfs",
            "truncate",
            "chdir",
            "chroot",
            "execve",
            "getxattr",
            "lgetxattr",
            "setxattr",
            "listxattr",
            "acct",
            "swapon",
            "swapoff",
        ],
    ),
    // The first argument is a directory fd.
    (
        FileArg::Path1,
        &[
            "openat",
            "openat2",
            "newfstatat",
            "statx",
            "unlinkat",
            "mkdirat",
            "mknodat",
            "fchownat",
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
        ],
    ),
];

/// x86_64's own calls: the older ones the generic table (arm64) left out
/// in favour of the `*at`, `p*` and `*64` calls above.
const X86_64_WAITS: &[&str] = &["epoll_wait", "poll", "select", "pause", "vfork"];
const X86_64_FILE_ARGS: &[(FileArg, &[&str])] = &[
    (FileArg::Fd0, &["getdents"]),
    (
        FileArg::Path0,
        &[
            "open", "creat", "stat", "lstat", "access", "unlink", "mkdir", "rmdir", "rename",
            "link", "symlink", "readlink", "chmod", "chown", "lchown", "mknod", "utime", "utimes",
            "uselib",
        ],
    ),
    (FileArg::Path1, &["futimesat"]),
];

/// One architecture's syscall ABI: names and numbers from the `syscalls`
/// crate, and the calls only it has.
struct Abi {
    name: fn(usize) -> Option<&'static str>,
    number: fn(&str) -> Option<usize>,
    own_waits: &'static [&'static str],
    own_file_args: &'static [(FileArg, &'static [&'static str])],
}

#[cfg(any(test, target_arch = "x86_64"))]
const X86_64: Abi = Abi {
    name: |nr| syscalls::x86_64::Sysno::new(nr).map(|s| s.name()),
    number: |name| {
        syscalls::x86_64::Sysno::from_str(name)
            .ok()
            .map(|s| s.id() as usize)
    },
    own_waits: X86_64_WAITS,
    own_file_args: X86_64_FILE_ARGS,
};

/// The generic table's 79 is `newfstatat` on 64-bit architectures
/// (`__NR_newfstatat` in asm-generic/unistd.h); the `syscalls` crate calls
/// it by its 32/64-bit base name, `fstatat`.
#[cfg(any(test, target_arch = "aarch64"))]
const AARCH64_NEWFSTATAT: usize = 79;

#[cfg(any(test, target_arch = "aarch64"))]
const AARCH64: Abi = Abi {
    name: |nr| match nr {
        AARCH64_NEWFSTATAT => Some("newfstatat"),
        _ => syscalls::aarch64::Sysno::new(nr).map(|s| s.name()),
    },
    number: |name| match name {
        "newfstatat" => Some(AARCH64_NEWFSTATAT),
        _ => syscalls::aarch64::Sysno::from_str(name)
            .ok()
            .map(|s| s.id() as usize),
    },
    own_waits: &[],
    own_file_args: &[],
};

#[cfg(target_arch = "x86_64")]
const HOST: Abi = X86_64;
#[cfg(target_arch = "aarch64")]
const HOST: Abi = AARCH64;

impl Abi {
    fn name(&self, nr: u32) -> String {
        (self.name)(nr as usize).map_or_else(|| format!("syscall_{nr}"), str::to_owned)
    }

    /// Every call of this ABI that keeps a file, and where.
    fn file_args(&self) -> impl Iterator<Item = (FileArg, &'static str)> + '_ {
        FILE_ARGS
            .iter()
            .chain(self.own_file_args)
            .flat_map(|&(how, names)| names.iter().map(move |&name| (how, name)))
    }

    fn waits(&self) -> impl Iterator<Item = &'static str> + '_ {
        WAITS.iter().chain(self.own_waits).copied()
    }

    fn file_arg_table(&self) -> [u8; NR_MAX] {
        let mut table = [FileArg::None as u8; NR_MAX];
        // Every listed call exists on its architecture (see the tests).
        let index = |name: &str| (self.number)(name).filter(|&nr| nr < NR_MAX);
        for (how, name) in self.file_args() {
            if let Some(nr) = index(name) {
                table[nr] = how as u8;
            }
        }
        let flagged = [
            (WAITS_FLAG, self.waits().collect::<Vec<_>>()),
            (WAITS_ON_STREAM_FLAG, STREAM_READS.to_vec()),
            (WAITS_FOR_LOCK_FLAG, LOCK_WAITS.to_vec()),
            (LOCKS_POS_FLAG, POSITION_LOCKERS.to_vec()),
        ];
        for (flag, names) in flagged {
            for name in names {
                if let Some(nr) = index(name) {
                    table[nr] |= flag;
                }
            }
        }
        table
    }
}

/// The name of syscall `nr`, or `syscall_<nr>` if this build does not know it.
pub fn name(nr: u32) -> String {
    HOST.name(nr)
}

/// The BPF `syscall_arg` table: entry `nr` says where call `nr` keeps its
/// file, and whether it sleeps by design.
pub fn file_arg_table() -> [u8; NR_MAX] {
    HOST.file_arg_table()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_64_names_and_file_arguments_of_well_known_calls() {
        use syscalls::x86_64::Sysno;
        let nr = |s: Sysno| s.id() as u32;
        assert_eq!(X86_64.name(nr(Sysno::read)), "read");
        assert_eq!(X86_64.name(221), "fadvise64");
        assert_eq!(X86_64.name(100_000), "syscall_100000");
        let table = X86_64.file_arg_table();
        let of = |s: Sysno| table[s.id() as usize];
        assert_eq!(
            of(Sysno::read),
            FileArg::Fd0 as u8 | WAITS_ON_STREAM_FLAG | LOCKS_POS_FLAG
        );
        assert_eq!(of(Sysno::fcntl), FileArg::Fd0 as u8 | WAITS_FOR_LOCK_FLAG);
        assert_eq!(of(Sysno::flock), FileArg::Fd0 as u8 | WAITS_FLAG);
        assert_eq!(of(Sysno::vfork), WAITS_FLAG);
        assert_eq!(of(Sysno::fadvise64), FileArg::Fd0 as u8);
        assert_eq!(of(Sysno::getdents64), FileArg::Fd0 as u8 | LOCKS_POS_FLAG);
        assert_eq!(of(Sysno::getdents), FileArg::Fd0 as u8 | LOCKS_POS_FLAG);
        assert_eq!(of(Sysno::open), FileArg::Path0 as u8);
        assert_eq!(of(Sysno::openat), FileArg::Path1 as u8);
        assert_eq!(of(Sysno::newfstatat), FileArg::Path1 as u8);
        assert_eq!(of(Sysno::getpid), FileArg::None as u8);
        assert_eq!(of(Sysno::epoll_wait), WAITS_FLAG);
        assert_eq!(of(Sysno::accept4), FileArg::Fd0 as u8 | WAITS_FLAG);
    }

    #[test]
    fn arm64_names_and_file_arguments_of_well_known_calls() {
        // Numbers of the generic table (asm-generic/unistd.h, 64-bit).
        let table = AARCH64.file_arg_table();
        for (nr, name, expected) in [
            (
                63,
                "read",
                FileArg::Fd0 as u8 | WAITS_ON_STREAM_FLAG | LOCKS_POS_FLAG,
            ),
            (25, "fcntl", FileArg::Fd0 as u8 | WAITS_FOR_LOCK_FLAG),
            (128, "restart_syscall", WAITS_FLAG),
            (223, "fadvise64", FileArg::Fd0 as u8),
            (61, "getdents64", FileArg::Fd0 as u8 | LOCKS_POS_FLAG),
            (56, "openat", FileArg::Path1 as u8),
            (79, "newfstatat", FileArg::Path1 as u8),
            (80, "fstat", FileArg::Fd0 as u8),
            (172, "getpid", FileArg::None as u8),
            (22, "epoll_pwait", WAITS_FLAG),
            (242, "accept4", FileArg::Fd0 as u8 | WAITS_FLAG),
        ] {
            assert_eq!(AARCH64.name(nr), name, "{nr}");
            assert_eq!(table[nr as usize], expected, "{name}");
        }
        // The old calls x86_64 keeps do not exist there.
        for name in ["open", "stat", "poll", "select", "epoll_wait", "getdents"] {
            assert_eq!((AARCH64.number)(name), None, "{name}");
        }
    }

    #[test]
    fn every_listed_call_exists_on_its_architecture() {
        for (arch, abi) in [("x86_64", &X86_64), ("aarch64", &AARCH64)] {
            let names = abi
                .file_args()
                .map(|(_, name)| name)
                .chain(abi.waits())
                .chain(STREAM_READS.iter().chain(LOCK_WAITS).copied());
            for name in names {
                let nr = (abi.number)(name);
                assert!(nr.is_some_and(|nr| nr < NR_MAX), "{name} on {arch}: {nr:?}");
            }
        }
        // x86_64's own calls are really its own.
        let own = X86_64_FILE_ARGS.iter().flat_map(|(_, names)| names.iter());
        for name in own.chain(X86_64_WAITS) {
            assert_eq!((AARCH64.number)(name), None, "{name} exists on aarch64");
        }
    }

    #[test]
    fn the_binary_uses_its_own_architectures_table() {
        let first = if cfg!(target_arch = "x86_64") {
            "read"
        } else {
            "io_setup"
        };
        assert_eq!(name(0), first);
    }
}
