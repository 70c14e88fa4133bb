//! cgroup id -> path relative to the hierarchy root, cached, with rescans of
//! cgroupfs on misses that are rate-limited. Reads directories only; knows
//! nothing of containers or control files.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::walk;
use super::Hierarchy;

/// At most one rescan per this much time, however many ids miss.
const RESCAN_INTERVAL: Duration = Duration::from_secs(1);
/// How long an id a rescan did not find stops triggering rescans. Ids are
/// never reused, so this only bounds how long the entry is kept.
const NEGATIVE_TTL: Duration = Duration::from_secs(60);

/// Resolves the cgroup ids the BPF side reports (kernfs node ids, which are
/// the inode numbers of the cgroup directories).
pub struct Resolver {
    root: PathBuf,
    /// Ids handed out by `resolve`; kept after the cgroup is removed, since
    /// late events may still name it.
    resolved: HashMap<u64, String>,
    /// Every cgroup seen by the last rescan.
    scanned: HashMap<u64, String>,
    /// Ids a rescan did not find, with when.
    missing: HashMap<u64, Instant>,
    last_scan: Option<Instant>,
    /// Resolved since the last `resolved_since_last_call`.
    new: Vec<(u64, String)>,
}

impl Resolver {
    /// Resolves ids of `h`; reads nothing until the first `resolve`.
    pub fn new(h: &Hierarchy) -> Resolver {
        Resolver {
            root: h.root().clone(),
            resolved: HashMap::new(),
            scanned: HashMap::new(),
            missing: HashMap::new(),
            last_scan: None,
            new: Vec::new(),
        }
    }

    /// The path of cgroup `id` relative to the hierarchy root ("/" for the
    /// root), or None if no such cgroup exists (any more).
    pub fn resolve(&mut self, id: u64) -> Option<String> {
        self.resolve_at(id, Instant::now())
    }

    /// New id -> path pairs since the previous call, in resolution order.
    pub fn resolved_since_last_call(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.new)
    }

    /// `resolve` with the clock as a parameter, so tests can step time.
    fn resolve_at(&mut self, id: u64, now: Instant) -> Option<String> {
        if let Some(path) = self.resolved.get(&id) {
            return Some(path.clone());
        }
        // 0 is what the BPF side reports for the idle task: never a cgroup.
        if id == 0 {
            return None;
        }
        if let Some(path) = self.lookup_scanned(id) {
            return Some(self.remember(id, path));
        }
        let recently_missing = self
            .missing
            .get(&id)
            .is_some_and(|&t| now.saturating_duration_since(t) < NEGATIVE_TTL);
        let recently_scanned = self
            .last_scan
            .is_some_and(|t| now.saturating_duration_since(t) < RESCAN_INTERVAL);
        if recently_missing || recently_scanned {
            return None;
        }
        self.rescan(now);
        match self.lookup_scanned(id) {
            Some(path) => Some(self.remember(id, path)),
            None => {
                self.missing.insert(id, now);
                None
            }
        }
    }

    fn lookup_scanned(&self, id: u64) -> Option<String> {
        // Before Linux 5.5 a kernfs id was `generation << 32 | inode` while
        // stat shows only the inode; later 64-bit kernels use the inode as
        // the id. The low half is tried only when the full id is unknown.
        let found = self.scanned.get(&id).or_else(|| {
            (id > u64::from(u32::MAX))
                .then(|| self.scanned.get(&(id & u64::from(u32::MAX))))
                .flatten()
        });
        found.cloned()
    }

    fn remember(&mut self, id: u64, path: String) -> String {
        self.missing.remove(&id);
        self.resolved.insert(id, path.clone());
        self.new.push((id, path.clone()));
        path
    }

    fn rescan(&mut self, now: Instant) {
        self.scanned = walk::cgroups(&self.root)
            .into_iter()
            .map(|d| (d.inode, d.relative))
            .collect();
        self.last_scan = Some(now);
        self.missing
            .retain(|_, &mut t| now.saturating_duration_since(t) < NEGATIVE_TTL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::testing::{self, TestCgroups};
    use std::fs;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    fn inode(p: &Path) -> u64 {
        fs::metadata(p).unwrap().ino()
    }

    fn resolver_at(root: &Path) -> Resolver {
        Resolver::new(&Hierarchy::Unified {
            mount: root.to_path_buf(),
        })
    }

    #[test]
    fn resolves_root_and_nested_cgroups_and_reports_each_once() {
        let tmp = tempfile::tempdir().unwrap();
        let pod = tmp.path().join("kubepods/burstable/podabc");
        fs::create_dir_all(&pod).unwrap();
        let mut r = resolver_at(tmp.path());

        assert_eq!(
            r.resolve(inode(&pod)).as_deref(),
            Some("/kubepods/burstable/podabc")
        );
        assert_eq!(r.resolve(inode(tmp.path())).as_deref(), Some("/"));
        assert_eq!(
            r.resolve(inode(&pod)).as_deref(),
            Some("/kubepods/burstable/podabc")
        );
        assert_eq!(
            r.resolved_since_last_call(),
            [
                (inode(&pod), "/kubepods/burstable/podabc".to_string()),
                (inode(tmp.path()), "/".to_string()),
            ]
        );
        assert!(r.resolved_since_last_call().is_empty());
    }

    #[test]
    fn misses_rescan_at_most_once_per_interval() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir(tmp.path().join("a")).unwrap();
        let mut r = resolver_at(tmp.path());
        let t0 = Instant::now();
        let a = inode(&tmp.path().join("a"));
        assert_eq!(r.resolve_at(a, t0).as_deref(), Some("/a"));

        // Created after the scan: not visible until the interval has passed.
        fs::create_dir(tmp.path().join("b")).unwrap();
        let b = inode(&tmp.path().join("b"));
        assert_eq!(r.resolve_at(b, t0 + Duration::from_millis(500)), None);
        assert_eq!(r.resolve_at(b, t0 + Duration::from_millis(999)), None);
        assert_eq!(
            r.resolve_at(b, t0 + Duration::from_millis(1000)).as_deref(),
            Some("/b")
        );
    }

    #[test]
    fn an_unknown_id_does_not_rescan_again_until_its_negative_entry_expires() {
        let tmp = tempfile::tempdir().unwrap();
        let mut r = resolver_at(tmp.path());
        let t0 = Instant::now();
        let unknown = u64::from(u32::MAX) - 7;
        assert_eq!(r.resolve_at(unknown, t0), None);
        assert_eq!(r.last_scan, Some(t0));

        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(r.resolve_at(unknown, t1), None);
        assert_eq!(r.last_scan, Some(t0), "negative cache hit must not rescan");

        // Another id still may rescan once the interval has passed.
        fs::create_dir(tmp.path().join("c")).unwrap();
        let c = inode(&tmp.path().join("c"));
        assert_eq!(r.resolve_at(c, t1).as_deref(), Some("/c"));
        assert_eq!(r.last_scan, Some(t1));

        let t2 = t0 + NEGATIVE_TTL;
        assert_eq!(r.resolve_at(unknown, t2), None);
        assert_eq!(r.last_scan, Some(t2), "expired negative entry rescans");
    }

    #[test]
    fn removed_cgroups_stay_resolved() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        fs::create_dir(&gone).unwrap();
        let id = inode(&gone);
        let mut r = resolver_at(tmp.path());
        let t0 = Instant::now();
        assert_eq!(r.resolve_at(id, t0).as_deref(), Some("/gone"));
        fs::remove_dir(&gone).unwrap();
        r.rescan(t0 + Duration::from_secs(2));
        assert_eq!(
            r.resolve_at(id, t0 + Duration::from_secs(3)).as_deref(),
            Some("/gone")
        );
    }

    #[test]
    fn zero_never_resolves_nor_rescans() {
        let tmp = tempfile::tempdir().unwrap();
        let mut r = resolver_at(tmp.path());
        assert_eq!(r.resolve(0), None);
        assert_eq!(r.last_scan, None);
    }

    #[test]
    fn pre_5_5_ids_with_a_generation_in_the_high_half_resolve_by_inode() {
        let tmp = tempfile::tempdir().unwrap();
        let mut r = resolver_at(tmp.path());
        let now = Instant::now();
        r.scanned = HashMap::from([(17, "/old".to_string())]);
        r.last_scan = Some(now);
        let id = (1u64 << 32) | 17;
        assert_eq!(r.resolve_at(id, now).as_deref(), Some("/old"));
        assert_eq!(r.resolved_since_last_call(), [(id, "/old".to_string())]);
    }

    /// Real kernel: a cgroup created in the hierarchy detected on this host
    /// resolves by its inode.
    #[test]
    fn resolves_a_real_cgroup_by_inode() {
        testing::assert_root();
        let h = Hierarchy::detect().expect("this host has cgroups mounted");
        let name = format!("stalltop_test_resolve_{}", std::process::id());
        let dir = h.root().join(&name);
        let _cgroup = TestCgroups::create(std::slice::from_ref(&dir));
        let id = inode(&dir);

        let mut r = Resolver::new(&h);
        let expected = format!("/{name}");
        assert_eq!(r.resolve(id).as_deref(), Some(expected.as_str()));
        assert_eq!(r.resolve(inode(h.root())).as_deref(), Some("/"));
        assert!(r.resolved_since_last_call().contains(&(id, expected)));
    }
}
