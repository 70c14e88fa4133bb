//! CPU pressure as the kernel's PSI accounts it: the host's
//! (/proc/pressure/cpu) and each cgroup's (cpu.pressure of the unified
//! hierarchy, which has it whether or not it has controllers: the
//! hierarchy itself on pure v2 hosts, beside the v1 cpu one on hybrid
//! hosts, where a cgroup's unified twin has the same path). Reads only;
//! a file that is missing (no PSI, psi=0, no such cgroup) is left out.

use std::fs;
use std::path::Path;

use crate::stream::{CgroupPressure, Pressure, PressureSnapshot};

const HOST_PRESSURE: &str = "/proc/pressure/cpu";

/// The host's pressure and that of each of `paths` (relative to the
/// hierarchy stalltop attributes by) found under `unified`, at `ts_ns`.
pub fn read_pressure(unified: Option<&Path>, paths: &[String], ts_ns: u64) -> PressureSnapshot {
    PressureSnapshot {
        ts_ns,
        host: fs::read_to_string(HOST_PRESSURE)
            .ok()
            .and_then(|text| parse_pressure(&text)),
        cgroups: unified
            .map(|root| {
                paths
                    .iter()
                    .filter_map(|path| {
                        let file = root.join(path.trim_start_matches('/')).join("cpu.pressure");
                        let pressure = parse_pressure(&fs::read_to_string(file).ok()?)?;
                        Some(CgroupPressure {
                            path: path.clone(),
                            pressure,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// What of PSI this host cannot give, as warnings for the session's
/// header (empty when both the host's and the cgroups' can be read), so
/// that a missing reading is said once rather than shown as zero.
pub fn pressure_warnings(unified: Option<&Path>) -> Vec<String> {
    unavailable(Path::new(HOST_PRESSURE), unified)
}

fn unavailable(host_file: &Path, unified: Option<&Path>) -> Vec<String> {
    let mut warnings = Vec::new();
    let host = fs::read_to_string(host_file)
        .ok()
        .and_then(|text| parse_pressure(&text));
    if host.is_none() {
        warnings.push(format!(
            "CPU pressure (PSI) not read: {} cannot be read (a kernel without \
             CONFIG_PSI, or booted with psi=0); the PSI columns stay empty",
            host_file.display()
        ));
        return warnings;
    }
    match unified {
        None => warnings.push(
            "cgroups' CPU pressure (PSI) not read: no cgroup2 hierarchy is mounted \
             (their cpu.pressure files are there); only the host's is shown"
                .into(),
        ),
        Some(root) if !root.join("cpu.pressure").exists() => warnings.push(format!(
            "cgroups' CPU pressure (PSI) not read: {} has no cpu.pressure; \
             only the host's is shown",
            root.display()
        )),
        Some(_) => {}
    }
    warnings
}

/// A PSI file's `some` and `full` lines: `some avg10=0.00 avg60=0.00
/// avg300=0.00 total=123` (total in microseconds; kernels before 5.13 have
/// no `full` line for cpu). None without a `some` total.
pub fn parse_pressure(text: &str) -> Option<Pressure> {
    let total = |kind: &str| {
        text.lines()
            .find(|line| line.split_whitespace().next() == Some(kind))?
            .split_whitespace()
            .find_map(|field| field.strip_prefix("total="))?
            .parse::<u64>()
            .ok()
    };
    Some(Pressure {
        some_us: total("some")?,
        full_us: total("full"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_lines_give_their_totals() {
        let text = "some avg10=17.57 avg60=40.06 avg300=50.99 total=2777745282\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(
            parse_pressure(text),
            Some(Pressure {
                some_us: 2_777_745_282,
                full_us: Some(0)
            })
        );
        // Before 5.13 cpu had no `full` line.
        let old = "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n";
        assert_eq!(
            parse_pressure(old),
            Some(Pressure {
                some_us: 42,
                full_us: None
            })
        );
        assert_eq!(parse_pressure(""), None);
        assert_eq!(parse_pressure("some avg10=1 total=x\n"), None);
    }

    #[test]
    fn missing_psi_is_said_in_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("cpu");
        let unified = dir.path().join("unified");
        fs::create_dir_all(&unified).unwrap();
        // No host file: a kernel without PSI; nothing else is read.
        let warnings = unavailable(&host, Some(&unified));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("not read") && warnings[0].contains("CONFIG_PSI"));
        fs::write(&host, "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n").unwrap();
        // The host's is there; no unified hierarchy, or one without PSI.
        let warnings = unavailable(&host, None);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("no cgroup2 hierarchy"));
        let warnings = unavailable(&host, Some(&unified));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("has no cpu.pressure"));
        fs::write(unified.join("cpu.pressure"), "some total=1\n").unwrap();
        assert!(unavailable(&host, Some(&unified)).is_empty());
    }

    #[test]
    fn cgroups_are_read_under_the_unified_root_by_their_path() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("kubepods/pod-a");
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("cpu.pressure"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=700\n",
        )
        .unwrap();
        let paths = vec!["/kubepods/pod-a".to_string(), "/gone".to_string()];
        let snapshot = read_pressure(Some(root.path()), &paths, 9);
        assert_eq!(snapshot.ts_ns, 9);
        assert_eq!(
            snapshot.cgroups,
            vec![CgroupPressure {
                path: "/kubepods/pod-a".into(),
                pressure: Pressure {
                    some_us: 1500,
                    full_us: Some(700)
                }
            }]
        );
        assert!(read_pressure(None, &paths, 9).cgroups.is_empty());
    }
}
