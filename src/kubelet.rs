//! Kubernetes pod and container names from what the node's kubelet writes
//! under /var/log, readable without API credentials:
//! `pods/<namespace>_<pod>_<uid>/` (a directory per pod) and
//! `containers/<pod>_<namespace>_<container>-<id>.log` (a symlink per
//! container run). Reads those two directory listings only, and only while
//! the pod or container of a new cgroup has no name yet; knows cgroup paths
//! only through `cgroup::pod_ids`.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cgroup::{self, PodNames};

/// Where the kubelet writes its log directories.
pub const LOG_ROOT: &str = "/var/log";
/// At most one read of the directories per this much time.
const REREAD_INTERVAL: Duration = Duration::from_secs(1);
/// How long a pod or container without a name keeps asking for reads. The
/// kubelet makes a container's log symlink before it starts the container,
/// so one still missing after this has none (a pod's sandbox container).
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);
/// Entries read from each directory at most: a node runs a few hundred
/// pods, this bounds the work on a node that kept its logs of many more.
const MAX_ENTRIES: usize = 10_000;

/// A pod uid or a container id seen in a cgroup path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Id {
    Pod(String),
    Container(String),
}

/// Names the pods and containers of new cgroups, each once.
pub struct PodNamer {
    /// The directory holding `pods/` and `containers/`.
    root: PathBuf,
    /// What the last read found.
    found: PodNames,
    /// Ids already handed out with their name.
    named: HashSet<Id>,
    /// Ids without a name yet, with when they were first seen.
    waiting: HashMap<Id, Instant>,
    last_read: Option<Instant>,
}

impl PodNamer {
    /// Names from the log directories under `root` (`LOG_ROOT` on a node);
    /// reads nothing until a cgroup path under kubepods comes.
    pub fn new(root: &Path) -> PodNamer {
        PodNamer {
            root: root.to_path_buf(),
            found: PodNames::default(),
            named: HashSet::new(),
            waiting: HashMap::new(),
            last_read: None,
        }
    }

    /// The names, not handed out before, of the pods and containers of
    /// `paths` (cgroup paths new since the previous call) and of those of
    /// earlier calls still waiting for one.
    pub fn name<'a>(&mut self, paths: impl IntoIterator<Item = &'a str>) -> PodNames {
        self.name_at(paths, Instant::now())
    }

    /// `name` with the clock as a parameter, so tests can step time.
    fn name_at<'a>(&mut self, paths: impl IntoIterator<Item = &'a str>, now: Instant) -> PodNames {
        for ids in paths.into_iter().filter_map(cgroup::pod_ids) {
            let pod = Id::Pod(ids.uid);
            for id in std::iter::once(pod).chain(ids.container.map(Id::Container)) {
                if !self.named.contains(&id) {
                    self.waiting.entry(id).or_insert(now);
                }
            }
        }
        self.waiting
            .retain(|_, &mut since| now.saturating_duration_since(since) < GIVE_UP_AFTER);
        let unknown = self
            .waiting
            .keys()
            .any(|id| lookup(&self.found, id).is_none());
        let recently_read = self
            .last_read
            .is_some_and(|t| now.saturating_duration_since(t) < REREAD_INTERVAL);
        if unknown && !recently_read {
            self.found = read(&self.root);
            self.last_read = Some(now);
        }

        let mut new = PodNames::default();
        let (found, named) = (&self.found, &mut self.named);
        self.waiting.retain(|id, _| {
            let Some(name) = lookup(found, id) else {
                return true;
            };
            match id {
                Id::Pod(uid) => new.pods.insert(uid.clone(), name.clone()),
                Id::Container(cid) => new.containers.insert(cid.clone(), name.clone()),
            };
            named.insert(id.clone());
            false
        });
        new
    }
}

fn lookup<'a>(names: &'a PodNames, id: &Id) -> Option<&'a String> {
    match id {
        Id::Pod(uid) => names.pods.get(uid),
        Id::Container(cid) => names.containers.get(cid),
    }
}

/// Every pod and container the log directories under `root` name; what
/// cannot be read or parsed is left out.
fn read(root: &Path) -> PodNames {
    PodNames {
        pods: entries(&root.join("pods"))
            .filter_map(|name| pod_dir(&name))
            .collect(),
        containers: entries(&root.join("containers"))
            .filter_map(|name| container_log(&name))
            .collect(),
    }
}

fn entries(dir: &Path) -> impl Iterator<Item = String> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .take(MAX_ENTRIES)
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
}

/// `<namespace>_<pod>_<uid>` -> (uid, `namespace/pod`). Neither a name nor
/// a uid holds `_`.
fn pod_dir(name: &str) -> Option<(String, String)> {
    let [namespace, pod, uid] = fields(name)?;
    let uid_chars = |c: char| c.is_ascii_hexdigit() || c == '-';
    uid.chars()
        .all(uid_chars)
        .then(|| (uid.to_string(), format!("{namespace}/{pod}")))
}

/// `<pod>_<namespace>_<container>-<id>.log` -> (id, container).
fn container_log(name: &str) -> Option<(String, String)> {
    let (names, id) = name.strip_suffix(".log")?.rsplit_once('-')?;
    let [_pod, _namespace, container] = fields(names)?;
    (id.len() == 64 && id.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| (id.to_string(), container.to_string()))
}

/// Exactly three non-empty `_`-separated fields.
fn fields(s: &str) -> Option<[&str; 3]> {
    let mut it = s.split('_');
    let fields = [it.next()?, it.next()?, it.next()?];
    (it.next().is_none() && fields.iter().all(|f| !f.is_empty())).then_some(fields)
}

#[cfg(test)]
mod tests;
