//! Culprits: stalls aggregated by who caused them (comm, container,
//! syscall, path pattern), and the path patterns that make the files of
//! many cgroups or processes one row.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

/// One stall as the aggregation sees it.
pub struct StallCause {
    pub comm: String,
    pub container: String,
    pub syscall: Option<String>,
    pub path: Option<String>,
    pub stall_id: u64,
    /// The stall's span.
    pub duration_ns: u64,
    /// The longest single wait in it.
    pub longest_wait_ns: u64,
    pub end_ns: u64,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct CulpritRow {
    pub comm: String,
    pub container: String,
    pub syscall: Option<String>,
    pub path: Option<String>,
    /// Stalls it held the CPU in.
    pub count: u64,
    /// Their spans, summed.
    pub total_stall_ns: u64,
    /// The longest single wait in them (not a span).
    pub worst_ns: u64,
    /// The stall that wait was in.
    pub worst_stall_id: u64,
    pub last_seen_ns: u64,
    pub last_seen_unix_ns: u64,
}

/// Aggregate stalls by culprit, paths collapsed to patterns; most stall
/// time first.
pub fn aggregate(causes: &[StallCause]) -> Vec<CulpritRow> {
    let patterns = collapse(causes.iter().filter_map(|c| c.path.as_deref()));
    let mut rows: BTreeMap<(String, String, Option<String>, Option<String>), CulpritRow> =
        BTreeMap::new();
    for c in causes {
        let path = c
            .path
            .as_ref()
            .map(|p| patterns.get(p).cloned().unwrap_or_else(|| p.clone()));
        let key = (
            c.comm.clone(),
            c.container.clone(),
            c.syscall.clone(),
            path.clone(),
        );
        let row = rows.entry(key).or_insert_with(|| CulpritRow {
            comm: c.comm.clone(),
            container: c.container.clone(),
            syscall: c.syscall.clone(),
            path,
            count: 0,
            total_stall_ns: 0,
            worst_ns: 0,
            worst_stall_id: c.stall_id,
            last_seen_ns: 0,
            last_seen_unix_ns: 0,
        });
        row.count += 1;
        row.total_stall_ns += c.duration_ns;
        if c.longest_wait_ns > row.worst_ns {
            row.worst_ns = c.longest_wait_ns;
            row.worst_stall_id = c.stall_id;
        }
        row.last_seen_ns = row.last_seen_ns.max(c.end_ns);
    }
    let mut rows: Vec<CulpritRow> = rows.into_values().collect();
    rows.sort_by(|a, b| {
        b.total_stall_ns
            .cmp(&a.total_stall_ns)
            .then(b.count.cmp(&a.count))
    });
    rows
}

/// A path with its ids replaced by `*`: numbers (pids), and components with
/// a long hex run (pod UIDs, container ids, hashes).
pub fn path_pattern(path: &str) -> String {
    path.split('/')
        .map(|c| if is_id(c) { "*" } else { c })
        .collect::<Vec<_>>()
        .join("/")
}

fn is_id(component: &str) -> bool {
    if !component.is_empty() && component.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    let mut run = 0;
    for b in component.bytes() {
        if b.is_ascii_hexdigit() {
            run += 1;
            if run >= 8 {
                return true;
            }
        } else if b != b'-' && b != b'_' {
            run = 0;
        }
    }
    false
}

/// Path -> pattern for a set of paths: ids become `*`, and where at least
/// three paths differ in one component only (same depth, same file name),
/// that component becomes `*` too ("memory.stat of many cgroups").
fn collapse<'a>(paths: impl Iterator<Item = &'a str>) -> HashMap<String, String> {
    let mut by_shape: HashMap<(usize, String), Vec<Vec<String>>> = HashMap::new();
    let mut out = HashMap::new();
    for path in paths {
        if out.contains_key(path) {
            continue;
        }
        let pattern = path_pattern(path);
        let parts: Vec<String> = pattern.split('/').map(str::to_string).collect();
        let leaf = parts.last().cloned().unwrap_or_default();
        by_shape.entry((parts.len(), leaf)).or_default().push(parts);
        out.insert(path.to_string(), pattern);
    }
    for group in by_shape.values() {
        let mut distinct = group.clone();
        distinct.sort();
        distinct.dedup();
        if distinct.len() < 3 {
            continue;
        }
        let first = &distinct[0];
        let differing: Vec<usize> = (0..first.len())
            .filter(|&i| distinct.iter().any(|p| p[i] != first[i]))
            .collect();
        if differing.len() != 1 {
            continue;
        }
        let mut merged = first.clone();
        merged[differing[0]] = "*".into();
        let merged = merged.join("/");
        for pattern in out.values_mut() {
            if distinct.iter().any(|p| p.join("/") == *pattern) {
                *pattern = merged.clone();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_stars() {
        assert_eq!(
            path_pattern("/sys/fs/cgroup/memory/kubepods/burstable/pod0f1e2d3c-aaaa-bbbb-cccc-000000000001/4c5f7e9a1b2c3d4e/memory.stat"),
            "/sys/fs/cgroup/memory/kubepods/burstable/*/*/memory.stat"
        );
        assert_eq!(path_pattern("/proc/4242/smaps"), "/proc/*/smaps");
        assert_eq!(path_pattern("/proc/slabinfo"), "/proc/slabinfo");
        assert_eq!(path_pattern("/var/log/app.INFO"), "/var/log/app.INFO");
    }

    fn cause(comm: &str, path: &str, ns: u64) -> StallCause {
        StallCause {
            comm: comm.into(),
            container: "host".into(),
            syscall: Some("read".into()),
            path: Some(path.into()),
            stall_id: ns,
            duration_ns: ns,
            longest_wait_ns: ns / 2,
            end_ns: ns,
        }
    }

    /// Case 1: cadvisor reading memory.stat of many cgroups is one row.
    #[test]
    fn many_cgroups_files_collapse_into_one_culprit() {
        let rows = aggregate(&[
            cause("cadvisor", "/sys/fs/cgroup/memory/web/memory.stat", 100),
            cause("cadvisor", "/sys/fs/cgroup/memory/db/memory.stat", 120),
            cause("cadvisor", "/sys/fs/cgroup/memory/cache/memory.stat", 130),
            cause("ss", "/proc/slabinfo", 189),
        ]);
        assert_eq!(rows.len(), 2);
        let cadvisor = &rows[0];
        assert_eq!(
            cadvisor.path.as_deref(),
            Some("/sys/fs/cgroup/memory/*/memory.stat")
        );
        assert_eq!(
            (cadvisor.count, cadvisor.total_stall_ns, cadvisor.worst_ns),
            (3, 350, 65)
        );
        assert_eq!(cadvisor.worst_stall_id, 130);
        assert_eq!(rows[1].path.as_deref(), Some("/proc/slabinfo"));
    }

    #[test]
    fn two_similar_paths_stay_apart() {
        let rows = aggregate(&[
            cause("app", "/data/a/file", 1),
            cause("app", "/data/b/file", 1),
        ]);
        assert_eq!(rows.len(), 2);
    }
}
