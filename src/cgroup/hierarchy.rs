//! Which cgroup hierarchy the BPF side's cgroup ids refer to, and where its
//! controllers are mounted, from /proc/self/mountinfo. Reads nothing else;
//! never walks or writes cgroupfs.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use procfs::process::MountInfo;

use super::CgroupError;
use crate::modes::CgroupHierarchy;

const MOUNTINFO: &str = "/proc/self/mountinfo";

/// The hierarchy cgroup ids are taken from. On v1 and hybrid hosts every
/// task sits at the cgroup2 root, so only the v1 cpu hierarchy tells
/// containers apart; on pure v2 hosts the unified one does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    V1Cpu {
        cpu_mount: PathBuf,
        cpuset_mount: Option<PathBuf>,
        cpuacct_mount: Option<PathBuf>,
        /// Hybrid hosts: the cgroup2 mount beside the v1 ones, where each
        /// cgroup's CPU pressure (PSI) is.
        unified_mount: Option<PathBuf>,
    },
    Unified {
        mount: PathBuf,
    },
}

impl Hierarchy {
    /// The v1 cpu hierarchy if that controller is mounted, else cgroup2.
    pub fn detect() -> Result<Hierarchy, CgroupError> {
        let text = fs::read_to_string(MOUNTINFO).map_err(CgroupError::Mountinfo)?;
        Hierarchy::detect_from(&text)
    }

    /// `detect` on the text of a mountinfo file.
    pub fn detect_from(mountinfo: &str) -> Result<Hierarchy, CgroupError> {
        let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
        let v1 = |controller: &str| {
            pick(&mounts, |m| {
                m.fstype == "cgroup" && m.super_options.contains_key(controller)
            })
        };
        let unified = pick(&mounts, |m| m.fstype == "cgroup2");
        if let Some(cpu_mount) = v1("cpu") {
            return Ok(Hierarchy::V1Cpu {
                cpu_mount,
                cpuset_mount: v1("cpuset"),
                cpuacct_mount: v1("cpuacct"),
                unified_mount: unified,
            });
        }
        match unified {
            Some(mount) => Ok(Hierarchy::Unified { mount }),
            None => Err(CgroupError::NotMounted),
        }
    }

    /// True when the BPF side must read the v1 cpu cgroup's id rather than
    /// the default (unified) one.
    pub fn uses_v1_cpu(&self) -> bool {
        matches!(self, Hierarchy::V1Cpu { .. })
    }

    /// Which hierarchy it is, as a recording's settings name it.
    pub fn kind(&self) -> CgroupHierarchy {
        match self {
            Hierarchy::V1Cpu { .. } => CgroupHierarchy::V1Cpu,
            Hierarchy::Unified { .. } => CgroupHierarchy::Unified,
        }
    }

    /// Where cgroups' cpu.pressure files are: the unified hierarchy, the
    /// one ids refer to or (hybrid hosts) the one beside it.
    pub fn pressure_root(&self) -> Option<&Path> {
        match self {
            Hierarchy::V1Cpu { unified_mount, .. } => unified_mount.as_deref(),
            Hierarchy::Unified { mount } => Some(mount),
        }
    }

    /// The mount point ids and paths are relative to.
    pub fn root(&self) -> &PathBuf {
        match self {
            Hierarchy::V1Cpu { cpu_mount, .. } => cpu_mount,
            Hierarchy::Unified { mount } => mount,
        }
    }
}

/// The fields of one mountinfo line that matter here. procfs splits the
/// line; the mount point's octal escapes are undone here (procfs keeps them).
struct Mount {
    /// The directory of the hierarchy mounted here ("/" unless it is a bind
    /// mount of a subtree or seen from inside a cgroup namespace).
    root: String,
    mount_point: PathBuf,
    fstype: String,
    super_options: HashMap<String, Option<String>>,
}

impl Mount {
    /// None for a line of another shape.
    fn parse(line: &str) -> Option<Mount> {
        let m = MountInfo::from_line(line).ok()?;
        Some(Mount {
            root: m.root,
            mount_point: PathBuf::from(unescape(&m.mount_point.to_string_lossy())),
            fstype: m.fs_type,
            super_options: m.super_options,
        })
    }
}

/// The first matching mount of a whole hierarchy, else the first matching
/// bind mount of a subtree.
fn pick(mounts: &[Mount], wanted: impl Fn(&Mount) -> bool) -> Option<PathBuf> {
    mounts
        .iter()
        .filter(|m| wanted(m))
        .min_by_key(|m| m.root != "/")
        .map(|m| m.mount_point.clone())
}

/// The kernel writes space, tab, newline and backslash in mountinfo paths
/// as `\ooo` octal escapes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match octal_escape(&bytes[i..]) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The byte a `\ooo` escape at the start of `s` stands for.
fn octal_escape(s: &[u8]) -> Option<u8> {
    let [b'\\', a @ b'0'..=b'3', b @ b'0'..=b'7', c @ b'0'..=b'7', ..] = *s else {
        return None;
    };
    Some((a - b'0') * 64 + (b - b'0') * 8 + (c - b'0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This VM: v1 controllers each on their own mount, cgroup2 without
    /// controllers at /sys/fs/cgroup/unified.
    const HYBRID_SEPARATE: &str = "\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// Ubuntu 20.04 style: cpu and cpuacct co-mounted, optional fields
    /// present, cpuset mounted before cpu,cpuacct.
    const HYBRID_COMOUNTED: &str = "\
25 24 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
31 25 0:28 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpuset
32 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
33 25 0:30 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,memory
";

    const PURE_V2: &str = "\
24 22 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
25 22 0:23 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:5 - pstore pstore rw
";

    #[test]
    fn separate_v1_mounts_on_a_hybrid_host_use_the_cpu_hierarchy() {
        let h = Hierarchy::detect_from(HYBRID_SEPARATE).unwrap();
        assert_eq!(
            h,
            Hierarchy::V1Cpu {
                cpu_mount: "/sys/fs/cgroup/cpu".into(),
                cpuset_mount: Some("/sys/fs/cgroup/cpuset".into()),
                cpuacct_mount: Some("/sys/fs/cgroup/cpuacct".into()),
                unified_mount: Some("/sys/fs/cgroup/unified".into()),
            }
        );
        assert!(h.uses_v1_cpu());
        assert_eq!(h.pressure_root(), Some(Path::new("/sys/fs/cgroup/unified")));
        assert_eq!(h.kind(), CgroupHierarchy::V1Cpu);
    }

    #[test]
    fn co_mounted_cpu_and_cpuacct_share_one_mount() {
        let h = Hierarchy::detect_from(HYBRID_COMOUNTED).unwrap();
        assert_eq!(
            h,
            Hierarchy::V1Cpu {
                cpu_mount: "/sys/fs/cgroup/cpu,cpuacct".into(),
                cpuset_mount: Some("/sys/fs/cgroup/cpuset".into()),
                cpuacct_mount: Some("/sys/fs/cgroup/cpu,cpuacct".into()),
                unified_mount: Some("/sys/fs/cgroup/unified".into()),
            }
        );
    }

    #[test]
    fn cpuset_and_cpuacct_alone_are_not_the_cpu_controller() {
        let text = "\
31 25 0:28 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset
32 25 0:29 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
        let h = Hierarchy::detect_from(text).unwrap();
        assert_eq!(
            h,
            Hierarchy::Unified {
                mount: "/sys/fs/cgroup/unified".into()
            }
        );
        assert!(!h.uses_v1_cpu());
        assert_eq!(h.kind(), CgroupHierarchy::Unified);
    }

    #[test]
    fn pure_v2_host_uses_the_unified_hierarchy() {
        assert_eq!(
            Hierarchy::detect_from(PURE_V2).unwrap(),
            Hierarchy::Unified {
                mount: "/sys/fs/cgroup".into()
            }
        );
    }

    #[test]
    fn a_whole_hierarchy_mount_wins_over_an_earlier_subtree_bind_mount() {
        let text = "\
50 40 0:29 /docker/abc /container/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct
51 22 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
";
        let Hierarchy::V1Cpu { cpu_mount, .. } = Hierarchy::detect_from(text).unwrap() else {
            panic!("expected v1 cpu");
        };
        assert_eq!(cpu_mount, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
    }

    #[test]
    fn no_cgroup_mount_is_an_error_naming_the_fix() {
        let text = "25 22 0:23 / /sys/fs/pstore rw - pstore pstore rw\n";
        let err = Hierarchy::detect_from(text).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/proc/self/mountinfo"), "{msg}");
        assert!(msg.contains("mount cgroup2 at /sys/fs/cgroup"), "{msg}");
    }

    #[test]
    fn malformed_lines_are_ignored() {
        let text = format!("garbage\n1 2 3 - cgroup\n - - -\n\n{PURE_V2}");
        assert!(matches!(
            Hierarchy::detect_from(&text),
            Ok(Hierarchy::Unified { .. })
        ));
    }

    #[test]
    fn escaped_mount_points_are_decoded() {
        let text = "60 22 0:40 / /mnt/my\\040cgroups\\134x rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            Hierarchy::detect_from(text).unwrap(),
            Hierarchy::Unified {
                mount: "/mnt/my cgroups\\x".into()
            }
        );
        assert_eq!(unescape("a\\04"), "a\\04");
        assert_eq!(unescape("a\\999b"), "a\\999b");
    }

    #[test]
    fn detects_this_machine() {
        let h = Hierarchy::detect().expect("this host has cgroups mounted");
        assert!(h.root().is_dir(), "{h:?}");
    }
}
