//! cgroup path -> short container identity (Kubernetes pod and container,
//! docker/containerd/cri-o/podman container, systemd unit). Pure string
//! work: no I/O, no knowledge of ids or hierarchies; Kubernetes names come
//! in as a `PodNames` table.

use std::collections::BTreeMap;

/// The names a node's kubelet gave its pods and containers (read by
/// src/kubelet.rs): pod uid, `-` separated -> `namespace/pod`; container
/// id (64 hex digits) -> container name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodNames {
    pub pods: BTreeMap<String, String>,
    pub containers: BTreeMap<String, String>,
}

/// The Kubernetes ids a cgroup path holds.
#[derive(Debug, PartialEq, Eq)]
pub struct PodIds {
    /// `-` separated, as the kubelet spells it (the systemd driver's slice
    /// names have `_`).
    pub uid: String,
    /// Set for a container's cgroup (or one below it).
    pub container: Option<String>,
}

/// Short identity of whatever owns the cgroup at `path` (relative to the
/// hierarchy root):
/// - `host` for the root;
/// - under a kubepods hierarchy (cgroupfs or systemd driver):
///   `namespace/pod/container` or `namespace/pod` with the names in
///   `names`, else `pod:<uid8>` for the pod and `<container12>` for the
///   container (`pod:<uid8>/<container12>`);
/// - `docker:<id12>`, `containerd:<id12>`, `crio:<id12>`, `podman:<id12>`,
///   or `container:<id12>` for a bare id whose runtime the path does not
///   tell; the innermost container wins when they nest;
/// - the innermost systemd unit (`nginx.service`, `session-3.scope`);
/// - otherwise the path itself.
pub fn container_of(path: &str, names: &PodNames) -> String {
    let parts = parts(path);
    if parts.is_empty() {
        return "host".to_string();
    }
    if let Some(pod) = kubernetes(&parts, names) {
        return pod;
    }
    if let Some(container) = (0..parts.len()).rev().find_map(|i| runtime(&parts, i)) {
        return container;
    }
    if let Some(unit) = parts.iter().rev().find(|p| is_systemd_unit(p)) {
        return unit.to_string();
    }
    path.to_string()
}

/// The pod uid and container id of a path through a kubepods hierarchy.
pub fn pod_ids(path: &str) -> Option<PodIds> {
    let cgroup = pod_cgroup(&parts(path))?;
    Some(PodIds {
        uid: cgroup.uid,
        container: cgroup
            .child
            .and_then(container_id)
            .map(|(_, id)| id.to_string()),
    })
}

fn parts(path: &str) -> Vec<&str> {
    path.split('/').filter(|p| !p.is_empty()).collect()
}

/// A cgroup at or below a pod's in a kubepods hierarchy.
struct PodCgroup<'a> {
    /// `-` separated.
    uid: String,
    /// The cgroup right below the pod's, if the path goes below it.
    child: Option<&'a str>,
}

/// Whichever the cgroup driver and wherever the kubelet's root sits (kind
/// nodes put it under `/docker/<node>/`).
fn pod_cgroup<'a>(parts: &[&'a str]) -> Option<PodCgroup<'a>> {
    let kubepods = parts.iter().position(|p| p.starts_with("kubepods"))?;
    let (offset, uid) = parts[kubepods..]
        .iter()
        .enumerate()
        .find_map(|(i, p)| pod_uid(p).map(|uid| (i, uid)))?;
    Some(PodCgroup {
        uid: uid.replace('_', "-"),
        child: parts.get(kubepods + offset + 1).copied(),
    })
}

/// The pod and container of a path through a kubepods hierarchy, by name
/// where `names` has them.
fn kubernetes(parts: &[&str], names: &PodNames) -> Option<String> {
    let cgroup = pod_cgroup(parts)?;
    let pod = match names.pods.get(&cgroup.uid) {
        Some(name) => name.clone(),
        None => format!("pod:{}", short(&cgroup.uid, 8)),
    };
    let container = |id: &str| match names.containers.get(id) {
        Some(name) => name.clone(),
        None => short(id, 12).to_string(),
    };
    match cgroup.child {
        None => Some(pod),
        Some(child) => match container_id(child) {
            // cri-o's monitor process has a cgroup of its own beside the
            // container's: same id, so say which one this is.
            Some(("conmon", id)) => Some(format!("{pod}/conmon-{}", container(id))),
            Some((_, id)) => Some(format!("{pod}/{}", container(id))),
            None => Some(format!("{pod}/{child}")),
        },
    }
}

/// The uid of a pod-level cgroup: `pod<uid>` (cgroupfs driver) or
/// `kubepods[-<qos>]-pod<uid with _ for ->.slice` (systemd driver).
fn pod_uid(part: &str) -> Option<&str> {
    let uid = match part.strip_suffix(".slice") {
        Some(unit) if unit.starts_with("kubepods") => &unit[unit.rfind("-pod")? + 4..],
        Some(_) => return None,
        None => part.strip_prefix("pod")?,
    };
    let uid_chars = |c: char| c.is_ascii_hexdigit() || c == '-' || c == '_';
    (uid.len() >= 8 && uid.chars().all(uid_chars)).then_some(uid)
}

/// A container cgroup at `parts[i]`, named by its runtime.
fn runtime(parts: &[&str], i: usize) -> Option<String> {
    let (runtime, id) = container_id(parts[i])?;
    let runtime = match runtime {
        // A bare id: the parent directory tells the runtime.
        "" => match i.checked_sub(1).map(|p| parts[p]) {
            Some("docker") => "docker",
            // containerd's own cgroupfs layout is /<namespace>/<id>.
            Some("k8s.io" | "default") => "containerd",
            _ => "container",
        },
        named => named,
    };
    Some(format!("{runtime}:{}", short(id, 12)))
}

/// Runtime prefixes of container cgroup names (`<prefix><id>` with the
/// cgroupfs driver, `<prefix><id>.scope` with systemd); a prefix comes
/// before any shorter one it extends (`crio-conmon-` before `crio-`).
const RUNTIMES: [(&str, &str); 6] = [
    ("cri-containerd-", "containerd"),
    ("crio-conmon-", "conmon"),
    ("crio-", "crio"),
    ("docker-", "docker"),
    ("libpod-conmon-", "conmon"),
    ("libpod-", "podman"),
];

/// `(runtime, id)` if `part` names one container: a runtime prefix and/or
/// a bare hex id of at least 12 digits ("" runtime for a bare id).
fn container_id(part: &str) -> Option<(&'static str, &str)> {
    let name = part.strip_suffix(".scope").unwrap_or(part);
    let (runtime, id) = RUNTIMES
        .iter()
        .find_map(|&(prefix, runtime)| name.strip_prefix(prefix).map(|id| (runtime, id)))
        .unwrap_or(("", name));
    // A bare id has no `.scope`; a `.scope` without a runtime prefix is some
    // other systemd unit even if its name looks like hex.
    if runtime.is_empty() && name.len() != part.len() {
        return None;
    }
    (id.len() >= 12 && id.chars().all(|c| c.is_ascii_hexdigit())).then_some((runtime, id))
}

fn is_systemd_unit(part: &str) -> bool {
    const SUFFIXES: [&str; 3] = [".service", ".scope", ".slice"];
    SUFFIXES
        .iter()
        .any(|s| part.len() > s.len() && part.ends_with(s))
}

/// The first `n` characters (all of them if fewer).
fn short(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "3f4a1b2c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a";
    const UID: &str = "6b1f3c2e-8d4a-4e5b-9c7d-2a1b0c9d8e7f";
    const UID_SYSTEMD: &str = "6b1f3c2e_8d4a_4e5b_9c7d_2a1b0c9d8e7f";

    fn check(path: &str, expected: &str) {
        assert_eq!(
            container_of(path, &PodNames::default()),
            expected,
            "path {path}"
        );
    }

    #[test]
    fn root_is_the_host() {
        check("/", "host");
        check("", "host");
        check("//", "host");
    }

    #[test]
    fn kubernetes_cgroupfs_driver() {
        check(
            &format!("/kubepods/burstable/pod{UID}/{CID}"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
        check(
            &format!("/kubepods/pod{UID}/{CID}"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
        check(
            &format!("/kubepods/besteffort/pod{UID}/{CID}"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
        check(&format!("/kubepods/burstable/pod{UID}"), "pod:6b1f3c2e");
        check(&format!("/kubepods/pod{UID}/"), "pod:6b1f3c2e");
    }

    #[test]
    fn kubernetes_systemd_driver() {
        let base = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice"
        );
        check(
            &format!("{base}/cri-containerd-{CID}.scope"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
        check(
            &format!("{base}/docker-{CID}.scope"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
        check(
            &format!("{base}/crio-{CID}.scope"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
        check(&base, "pod:6b1f3c2e");
        check(
            &format!("/kubepods.slice/kubepods-pod{UID_SYSTEMD}.slice/cri-containerd-{CID}.scope"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
        check(
            &format!(
                "/kubepods.slice/kubepods-besteffort.slice/\
                 kubepods-besteffort-pod{UID_SYSTEMD}.slice/crio-{CID}.scope"
            ),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
    }

    #[test]
    fn kubernetes_processes_below_the_container_cgroup_belong_to_it() {
        // cri-o with systemd on cgroup v2 nests a `container` cgroup.
        let base = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice"
        );
        check(
            &format!("{base}/crio-{CID}.scope/container"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
    }

    #[test]
    fn kubernetes_conmon_and_unknown_children_are_named_as_found() {
        let base = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice"
        );
        check(
            &format!("{base}/crio-conmon-{CID}.scope"),
            "pod:6b1f3c2e/conmon-3f4a1b2c9d8e",
        );
        check(
            &format!("/kubepods/pod{UID}/sidecar"),
            "pod:6b1f3c2e/sidecar",
        );
    }

    #[test]
    fn kubernetes_inside_a_kind_node() {
        check(
            &format!("/docker/{CID}/kubepods/besteffort/pod{UID}/{CID}"),
            "pod:6b1f3c2e/3f4a1b2c9d8e",
        );
    }

    #[test]
    fn kubepods_levels_without_a_pod() {
        check("/kubepods/burstable", "/kubepods/burstable");
        check("/kubepods", "/kubepods");
        check(
            "/kubepods.slice/kubepods-burstable.slice",
            "kubepods-burstable.slice",
        );
    }

    #[test]
    fn plain_docker() {
        check(&format!("/docker/{CID}"), "docker:3f4a1b2c9d8e");
        check(
            &format!("/system.slice/docker-{CID}.scope"),
            "docker:3f4a1b2c9d8e",
        );
        // systemd running inside a container: the container is what matters.
        check(
            &format!("/docker/{CID}/system.slice/nginx.service"),
            "docker:3f4a1b2c9d8e",
        );
        check("/system.slice/docker.service", "docker.service");
    }

    #[test]
    fn docker_in_docker_names_the_inner_container() {
        let inner = "aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999";
        check(
            &format!("/docker/{CID}/docker/{inner}"),
            "docker:aaaabbbbcccc",
        );
    }

    #[test]
    fn containerd_cri_o_and_podman_outside_kubernetes() {
        check(&format!("/k8s.io/{CID}"), "containerd:3f4a1b2c9d8e");
        check(&format!("/default/{CID}"), "containerd:3f4a1b2c9d8e");
        check(
            &format!("/system.slice/cri-containerd-{CID}.scope"),
            "containerd:3f4a1b2c9d8e",
        );
        check(
            &format!("/system.slice/crio-{CID}.scope"),
            "crio:3f4a1b2c9d8e",
        );
        check(
            &format!("/machine.slice/libpod-{CID}.scope"),
            "podman:3f4a1b2c9d8e",
        );
        check(
            &format!("/machine.slice/libpod-{CID}.scope/container"),
            "podman:3f4a1b2c9d8e",
        );
        check(
            &format!("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{CID}.scope"),
            "podman:3f4a1b2c9d8e",
        );
        check(
            &format!("/libpod_parent/libpod-{CID}"),
            "podman:3f4a1b2c9d8e",
        );
        check(&format!("/custom-parent/{CID}"), "container:3f4a1b2c9d8e");
    }

    #[test]
    fn systemd_units() {
        check("/system.slice/nginx.service", "nginx.service");
        check(
            "/user.slice/user-1000.slice/session-3.scope",
            "session-3.scope",
        );
        check("/init.scope", "init.scope");
        check("/system.slice", "system.slice");
        check(
            "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-4242.scope",
            "app-gnome-firefox-4242.scope",
        );
        check("/system.slice/containerd.service/sub", "containerd.service");
    }

    #[test]
    fn unit_names_that_merely_resemble_containers_are_units() {
        check(
            "/system.slice/deadbeefdeadbeef.scope",
            "deadbeefdeadbeef.scope",
        );
        check(
            "/system.slice/docker-compose@app.service",
            "docker-compose@app.service",
        );
        check("/system.slice/docker-compose", "system.slice");
    }

    #[test]
    fn conmon_outside_kubernetes() {
        check(
            &format!("/machine.slice/libpod-conmon-{CID}.scope"),
            "conmon:3f4a1b2c9d8e",
        );
    }

    #[test]
    fn anything_else_is_the_path() {
        check("/repro_victim", "/repro_victim");
        check("/a/b", "/a/b");
        check("/docker", "/docker");
        check("/docker/not-an-id", "/docker/not-an-id");
        check("/docker/buildkit", "/docker/buildkit");
        check("/.slice", "/.slice");
    }

    #[test]
    fn odd_input_does_not_panic() {
        for path in [
            "/kubepods/pod",
            "/kubepods/pod-",
            "/kubepods.slice/kubepods-pod.slice",
            "/kubepods.slice/kubepods-pod\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}.slice",
            "/docker/\u{e9}\u{e9}\u{e9}",
            "/kubepods/pod12345678/docker-.scope",
            "\u{0}",
        ] {
            let _ = container_of(path, &PodNames::default());
            let _ = pod_ids(path);
        }
        check(
            "/kubepods/pod12345678/docker-.scope",
            "pod:12345678/docker-.scope",
        );
        check("/kubepods/podabcd", "/kubepods/podabcd");
    }

    fn names() -> PodNames {
        PodNames {
            pods: BTreeMap::from([(UID.to_string(), "shop/cart-7d9f".to_string())]),
            containers: BTreeMap::from([(CID.to_string(), "redis".to_string())]),
        }
    }

    #[test]
    fn kubernetes_names_replace_the_ids_under_both_drivers() {
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice"
        );
        let cgroupfs = format!("/kubepods/burstable/pod{UID}");
        for pod in [systemd.clone(), cgroupfs.clone()] {
            assert_eq!(container_of(&pod, &names()), "shop/cart-7d9f", "{pod}");
        }
        for container in [
            format!("{systemd}/cri-containerd-{CID}.scope"),
            format!("{systemd}/crio-{CID}.scope/container"),
            format!("{cgroupfs}/{CID}"),
        ] {
            assert_eq!(
                container_of(&container, &names()),
                "shop/cart-7d9f/redis",
                "{container}"
            );
        }
        assert_eq!(
            container_of(&format!("{systemd}/crio-conmon-{CID}.scope"), &names()),
            "shop/cart-7d9f/conmon-redis"
        );
    }

    #[test]
    fn kubernetes_names_that_are_missing_keep_the_short_ids() {
        let sandbox = "aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999";
        let base = format!("/kubepods/burstable/pod{UID}");
        // A pod's sandbox (pause) container writes no log: no name.
        assert_eq!(
            container_of(&format!("{base}/{sandbox}"), &names()),
            "shop/cart-7d9f/aaaabbbbcccc"
        );
        let container_only = PodNames {
            pods: BTreeMap::new(),
            ..names()
        };
        assert_eq!(
            container_of(&format!("{base}/{CID}"), &container_only),
            "pod:6b1f3c2e/redis"
        );
        let other_pod = "0f1e2d3c-0000-4000-8000-000000000000";
        assert_eq!(
            container_of(&format!("/kubepods/pod{other_pod}/{sandbox}"), &names()),
            "pod:0f1e2d3c/aaaabbbbcccc"
        );
        // Names apply to pods only.
        assert_eq!(
            container_of(&format!("/docker/{CID}"), &names()),
            "docker:3f4a1b2c9d8e"
        );
    }

    #[test]
    fn pod_ids_of_both_drivers() {
        let expected = |container: Option<&str>| {
            Some(PodIds {
                uid: UID.to_string(),
                container: container.map(str::to_string),
            })
        };
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_SYSTEMD}.slice"
        );
        assert_eq!(pod_ids(&systemd), expected(None));
        assert_eq!(
            pod_ids(&format!("{systemd}/cri-containerd-{CID}.scope")),
            expected(Some(CID))
        );
        assert_eq!(
            pod_ids(&format!("/kubepods/burstable/pod{UID}")),
            expected(None)
        );
        assert_eq!(
            pod_ids(&format!("/kubepods/burstable/pod{UID}/{CID}")),
            expected(Some(CID))
        );
        assert_eq!(
            pod_ids(&format!("/kubepods/pod{UID}/sidecar")),
            expected(None)
        );
        assert_eq!(pod_ids(&format!("/docker/{CID}")), None);
        assert_eq!(pod_ids("/kubepods/burstable"), None);
    }
}
