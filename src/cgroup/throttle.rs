//! Reads the CFS bandwidth state (quota, period, burst, cpuset, cpu.stat,
//! usage) of every cgroup with a CPU quota from cgroupfs, v1 or v2. Reads
//! only; the parsing lives in `bandwidth`. A cgroup removed mid-walk is
//! skipped silently.

use std::fs;
use std::path::{Path, PathBuf};

use super::bandwidth::{parse_cpu_max, parse_cpu_stat, parse_cpus, parse_u64, parse_v1_quota};
use super::walk;
use super::Hierarchy;
use crate::stream::CgroupThrottle;

/// Every cgroup of `h` that has a CPU quota, in tree order.
pub fn read_throttling(h: &Hierarchy) -> Vec<CgroupThrottle> {
    match h {
        Hierarchy::V1Cpu {
            cpu_mount,
            cpuset_mount,
            cpuacct_mount,
            ..
        } => walk::cgroups(cpu_mount)
            .iter()
            .filter_map(|d| {
                v1_cgroup(
                    &d.absolute,
                    &d.relative,
                    cpuset_mount.as_deref(),
                    cpuacct_mount.as_deref(),
                )
            })
            .collect(),
        Hierarchy::Unified { mount } => walk::cgroups(mount)
            .iter()
            .filter_map(|d| unified_cgroup(mount, &d.absolute, &d.relative))
            .collect(),
    }
}

fn v1_cgroup(
    dir: &Path,
    relative: &str,
    cpuset_mount: Option<&Path>,
    cpuacct_mount: Option<&Path>,
) -> Option<CgroupThrottle> {
    let quota_us = parse_v1_quota(&read(dir, "cpu.cfs_quota_us")?)?;
    let period_us = parse_u64(&read(dir, "cpu.cfs_period_us")?)?;
    let stat = parse_cpu_stat(&read(dir, "cpu.stat")?);
    // cpuacct and cpuset are separate hierarchies (unless co-mounted): the
    // same cgroup may not exist there. Usage of an ancestor would be wrong,
    // but an ancestor's cpuset is what confines this cgroup.
    let usage_ns = cpuacct_mount
        .and_then(|m| read(&below(m, relative), "cpuacct.usage"))
        .and_then(|t| parse_u64(&t));
    let cpus = cpuset_mount
        .and_then(|m| nearest_cpus(m, relative, &["cpuset.effective_cpus", "cpuset.cpus"]));
    Some(CgroupThrottle {
        path: relative.to_string(),
        quota_us,
        period_us,
        burst_us: read(dir, "cpu.cfs_burst_us").and_then(|t| parse_u64(&t)),
        cpus,
        nr_periods: stat.nr_periods,
        nr_throttled: stat.nr_throttled,
        throttled_ns: stat.throttled_ns,
        usage_ns,
    })
}

fn unified_cgroup(mount: &Path, dir: &Path, relative: &str) -> Option<CgroupThrottle> {
    // The root has no cpu.max, nor does a cgroup whose parent does not
    // enable the cpu controller: neither can have a quota.
    let (quota_us, period_us) = parse_cpu_max(&read(dir, "cpu.max")?)?;
    let stat = parse_cpu_stat(&read(dir, "cpu.stat")?);
    Some(CgroupThrottle {
        path: relative.to_string(),
        quota_us,
        period_us,
        burst_us: read(dir, "cpu.max.burst").and_then(|t| parse_u64(&t)),
        // cpuset.cpus.effective exists only where the cpuset controller is
        // enabled; elsewhere the nearest ancestor's applies.
        cpus: nearest_cpus(mount, relative, &["cpuset.cpus.effective"]),
        nr_periods: stat.nr_periods,
        nr_throttled: stat.nr_throttled,
        throttled_ns: stat.throttled_ns,
        usage_ns: stat.usage_ns,
    })
}

/// The first non-empty cpu list among `files` in the cgroup at `relative`
/// under `mount`, else in its nearest ancestor that has one.
fn nearest_cpus(mount: &Path, relative: &str, files: &[&str]) -> Option<String> {
    let mut at = relative;
    loop {
        let dir = below(mount, at);
        let cpus = files
            .iter()
            .find_map(|f| read(&dir, f).and_then(|t| parse_cpus(&t)));
        if cpus.is_some() {
            return cpus;
        }
        if at == "/" || at.is_empty() {
            return None;
        }
        at = at.rsplit_once('/').map_or("/", |(parent, _)| parent);
    }
}

/// The directory of cgroup `relative` ("/a/b") in the hierarchy at `mount`.
fn below(mount: &Path, relative: &str) -> PathBuf {
    mount.join(relative.trim_start_matches('/'))
}

/// A control file's text; None if it is absent or its cgroup is gone.
fn read(dir: &Path, file: &str) -> Option<String> {
    fs::read_to_string(dir.join(file)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::testing::{self, TestCgroups};
    use std::time::{Duration, Instant};

    fn write(dir: &Path, files: &[(&str, &str)]) {
        fs::create_dir_all(dir).unwrap();
        for (name, text) in files {
            fs::write(dir.join(name), text).unwrap();
        }
    }

    const V1_STAT: &str = "nr_periods 3071\nnr_throttled 1422\nthrottled_time 86410275914\n\
                           nr_bursts 0\nburst_time 0\n";

    /// A v1 host: cpu, cpuset and cpuacct each mounted on their own.
    fn fake_v1(root: &Path) -> Hierarchy {
        let (cpu, cpuset, cpuacct) = (root.join("cpu"), root.join("cpuset"), root.join("cpuacct"));
        let no_quota = [
            ("cpu.cfs_quota_us", "-1\n"),
            ("cpu.cfs_period_us", "100000\n"),
            (
                "cpu.stat",
                "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
            ),
        ];
        write(&cpu, &no_quota);
        write(&cpu.join("kubepods"), &no_quota);
        let pod = cpu.join("kubepods/burstable/podabc");
        write(
            &pod,
            &[
                ("cpu.cfs_quota_us", "1200000\n"),
                ("cpu.cfs_period_us", "100000\n"),
                ("cpu.cfs_burst_us", "0\n"),
                ("cpu.stat", V1_STAT),
            ],
        );
        write(
            &pod.join("ctr"),
            &[
                ("cpu.cfs_quota_us", "50000\n"),
                ("cpu.cfs_period_us", "20000\n"),
                (
                    "cpu.stat",
                    "nr_periods 9\nnr_throttled 1\nthrottled_time 77\n",
                ),
            ],
        );
        // Removed between readdir and read: no control files left.
        fs::create_dir_all(cpu.join("gone")).unwrap();
        // Quota but cpu.stat already gone.
        write(
            &cpu.join("half"),
            &[
                ("cpu.cfs_quota_us", "1000\n"),
                ("cpu.cfs_period_us", "10000\n"),
            ],
        );
        write(&cpu.join("garbage"), &[("cpu.cfs_quota_us", "lots\n")]);

        write(
            &cpuset,
            &[
                ("cpuset.cpus", "0-15\n"),
                ("cpuset.effective_cpus", "0-11\n"),
            ],
        );
        write(
            &cpuset.join("kubepods"),
            &[("cpuset.cpus", "\n"), ("cpuset.effective_cpus", "\n")],
        );
        write(
            &cpuset.join("kubepods/burstable/podabc/ctr"),
            &[("cpuset.cpus", "4-7\n")],
        );

        write(&cpuacct, &[("cpuacct.usage", "999999999\n")]);
        write(
            &cpuacct.join("kubepods/burstable/podabc"),
            &[("cpuacct.usage", "123456789\n")],
        );

        Hierarchy::V1Cpu {
            cpu_mount: cpu,
            cpuset_mount: Some(cpuset),
            cpuacct_mount: Some(cpuacct),
            unified_mount: None,
        }
    }

    #[test]
    fn v1_reports_cgroups_with_a_quota_only() {
        let tmp = tempfile::tempdir().unwrap();
        let got = read_throttling(&fake_v1(tmp.path()));
        assert_eq!(
            got,
            [
                CgroupThrottle {
                    path: "/kubepods/burstable/podabc".into(),
                    quota_us: 1_200_000,
                    period_us: 100_000,
                    burst_us: Some(0),
                    // Not in the cpuset hierarchy, nor is its parent; the
                    // empty kubepods cpuset does not restrict, the root does.
                    cpus: Some("0-11".into()),
                    nr_periods: 3071,
                    nr_throttled: 1422,
                    throttled_ns: 86_410_275_914,
                    usage_ns: Some(123_456_789),
                },
                CgroupThrottle {
                    path: "/kubepods/burstable/podabc/ctr".into(),
                    quota_us: 50_000,
                    period_us: 20_000,
                    burst_us: None,
                    // Only cpuset.cpus here (older kernel).
                    cpus: Some("4-7".into()),
                    nr_periods: 9,
                    nr_throttled: 1,
                    throttled_ns: 77,
                    // Usage of an ancestor would be wrong: none.
                    usage_ns: None,
                },
            ]
        );
    }

    #[test]
    fn v1_without_cpuset_and_cpuacct_mounts() {
        let tmp = tempfile::tempdir().unwrap();
        let Hierarchy::V1Cpu { cpu_mount, .. } = fake_v1(tmp.path()) else {
            unreachable!()
        };
        let got = read_throttling(&Hierarchy::V1Cpu {
            cpu_mount,
            cpuset_mount: None,
            cpuacct_mount: None,
            unified_mount: None,
        });
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|c| c.cpus.is_none() && c.usage_ns.is_none()));
    }

    #[test]
    fn unified_reads_cpu_max_and_the_nearest_cpuset() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            &[
                ("cpu.stat", "usage_usec 5\nuser_usec 3\nsystem_usec 2\n"),
                ("cpuset.cpus.effective", "0-7\n"),
            ],
        );
        let slice = root.join("kubepods.slice");
        write(
            &slice,
            &[
                ("cpu.max", "max 100000\n"),
                (
                    "cpu.stat",
                    "usage_usec 1\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
                ),
            ],
        );
        write(
            &slice.join("pod.slice"),
            &[
                ("cpu.max", "15000 100000\n"),
                ("cpu.max.burst", "5000\n"),
                (
                    "cpu.stat",
                    "usage_usec 8523114\nuser_usec 6103114\nsystem_usec 2420000\n\
                     nr_periods 2410\nnr_throttled 311\nthrottled_usec 9120555\n\
                     nr_bursts 0\nburst_usec 0\n",
                ),
            ],
        );
        write(
            &slice.join("pod.slice/sick.scope"),
            &[("cpu.max", "1 2 3 4\n")],
        );
        write(
            &root.join("pinned.slice"),
            &[
                ("cpu.max", "200000 100000\n"),
                ("cpu.stat", "nr_periods 1\n"),
                ("cpuset.cpus.effective", "2-3\n"),
            ],
        );

        let got = read_throttling(&Hierarchy::Unified {
            mount: root.to_path_buf(),
        });
        assert_eq!(
            got,
            [
                CgroupThrottle {
                    path: "/kubepods.slice/pod.slice".into(),
                    quota_us: 15_000,
                    period_us: 100_000,
                    burst_us: Some(5_000),
                    cpus: Some("0-7".into()),
                    nr_periods: 2410,
                    nr_throttled: 311,
                    throttled_ns: 9_120_555_000,
                    usage_ns: Some(8_523_114_000),
                },
                CgroupThrottle {
                    path: "/pinned.slice".into(),
                    quota_us: 200_000,
                    period_us: 100_000,
                    burst_us: None,
                    cpus: Some("2-3".into()),
                    nr_periods: 1,
                    nr_throttled: 0,
                    throttled_ns: 0,
                    usage_ns: None,
                },
            ]
        );
    }

    #[test]
    fn a_missing_mount_gives_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        assert!(read_throttling(&Hierarchy::Unified {
            mount: gone.clone()
        })
        .is_empty());
        assert!(read_throttling(&Hierarchy::V1Cpu {
            cpu_mount: gone,
            cpuset_mount: None,
            cpuacct_mount: None,
            unified_mount: None,
        })
        .is_empty());
    }

    #[test]
    fn nearest_cpus_walks_up_to_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), &[("cpus", "0-1\n")]);
        write(&tmp.path().join("a"), &[("cpus", "1\n")]);
        assert_eq!(
            nearest_cpus(tmp.path(), "/a/b/c", &["cpus"]).as_deref(),
            Some("1")
        );
        assert_eq!(
            nearest_cpus(tmp.path(), "/x", &["cpus"]).as_deref(),
            Some("0-1")
        );
        assert_eq!(
            nearest_cpus(tmp.path(), "/", &["cpus"]).as_deref(),
            Some("0-1")
        );
        assert_eq!(nearest_cpus(tmp.path(), "/a", &["nope"]), None);
    }

    /// Real kernel: a cgroup with a 50% quota and a process spinning in it
    /// is reported with that quota, and the kernel's throttling counts.
    #[test]
    fn reports_a_real_throttled_cgroup() {
        testing::assert_root();
        let h = Hierarchy::detect().expect("this host has cgroups mounted");
        let name = format!("stalltop_test_throttle_{}", std::process::id());
        let relative = format!("/{name}");
        let mut dirs = vec![h.root().join(&name)];
        let (quota_file, quota_text, expected_cpus, expect_usage) = match &h {
            Hierarchy::V1Cpu {
                cpu_mount,
                cpuset_mount,
                cpuacct_mount,
                ..
            } => {
                // Also in cpuacct (if separate) for usage; not in cpuset, so
                // the root's CPUs must be found by walking up.
                if let Some(acct) = cpuacct_mount.as_ref().filter(|&m| m != cpu_mount) {
                    dirs.push(acct.join(&name));
                }
                let cpus = cpuset_mount
                    .as_ref()
                    .and_then(|m| read(m, "cpuset.effective_cpus"))
                    .and_then(|t| parse_cpus(&t));
                ("cpu.cfs_quota_us", "50000", cpus, cpuacct_mount.is_some())
            }
            Hierarchy::Unified { mount } => {
                let cpus = read(mount, "cpuset.cpus.effective").and_then(|t| parse_cpus(&t));
                ("cpu.max", "50000 100000", cpus, true)
            }
        };
        let mut cgroups = TestCgroups::create(&dirs);
        let quota_path = dirs[0].join(quota_file);
        fs::write(&quota_path, quota_text).unwrap_or_else(|e| {
            panic!(
                "write {}: {e} (on cgroup v2, enable the cpu controller: \
                 echo +cpu > cgroup.subtree_control of the parent)",
                quota_path.display()
            )
        });
        cgroups.spin_inside();

        // Spinning at 100% under a 50% quota is throttled every period.
        let deadline = Instant::now() + Duration::from_secs(5);
        let found = loop {
            let found = read_throttling(&h).into_iter().find(|c| c.path == relative);
            let throttled = found.as_ref().is_some_and(|c| c.nr_throttled > 0);
            if throttled || Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let found = found.unwrap_or_else(|| panic!("{relative} not reported"));
        assert_eq!((found.quota_us, found.period_us), (50_000, 100_000));
        assert!(found.nr_periods > 0, "{found:?}");
        assert!(found.nr_throttled > 0, "{found:?}");
        assert!(found.throttled_ns > 0, "{found:?}");
        assert_eq!(found.cpus, expected_cpus);
        if expect_usage {
            assert!(found.usage_ns.is_some_and(|u| u > 0), "{found:?}");
        }
        let burst_file = if h.uses_v1_cpu() {
            "cpu.cfs_burst_us"
        } else {
            "cpu.max.burst"
        };
        if dirs[0].join(burst_file).exists() {
            assert_eq!(found.burst_us, Some(0));
        }
    }
}
