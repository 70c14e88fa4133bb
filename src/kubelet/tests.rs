//! `PodNamer` on fixture log directories laid out as a kubelet lays them
//! out, with the cgroup paths of both cgroup drivers.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;

use super::*;
use crate::cgroup::container_of;

const WEB: &str = "6b1f3c2e-8d4a-4e5b-9c7d-2a1b0c9d8e7f";
const DB: &str = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9";
/// A pod whose log directory is gone (or never came).
const GONE: &str = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";

/// A 64-digit container id.
fn id(digit: char) -> String {
    digit.to_string().repeat(64)
}

/// A node's `/var/log`, in a temporary directory.
struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        let node = Node {
            dir: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(node.root().join("pods")).unwrap();
        fs::create_dir_all(node.root().join("containers")).unwrap();
        node
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn pod(&self, namespace: &str, pod: &str, uid: &str) -> PathBuf {
        let dir = self.root().join(format!("pods/{namespace}_{pod}_{uid}"));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Run `restart` of `container`: its log file in the pod's directory
    /// and the symlink to it that names its id.
    fn container(
        &self,
        (namespace, pod, uid): (&str, &str, &str),
        container: &str,
        restart: u32,
        id: &str,
    ) {
        let logs = self.pod(namespace, pod, uid).join(container);
        fs::create_dir_all(&logs).unwrap();
        let log = logs.join(format!("{restart}.log"));
        fs::write(&log, "").unwrap();
        let link = format!("containers/{pod}_{namespace}_{container}-{id}.log");
        symlink(&log, self.root().join(link)).unwrap();
    }
}

fn systemd_pod(uid: &str) -> String {
    format!(
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
        uid.replace('-', "_")
    )
}

fn systemd_container(uid: &str, id: &str) -> String {
    format!("{}/cri-containerd-{id}.scope", systemd_pod(uid))
}

fn cgroupfs_pod(uid: &str) -> String {
    format!("/kubepods/burstable/pod{uid}")
}

fn cgroupfs_container(uid: &str, id: &str) -> String {
    format!("{}/{id}", cgroupfs_pod(uid))
}

fn names<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn names_pods_and_containers_under_both_cgroup_drivers() {
    let node = Node::new();
    let web = ("shop", "web-5d8f7c9b4-x2lqp", WEB);
    node.container(web, "nginx", 0, &id('a'));
    node.container(web, "log-shipper", 0, &id('b'));
    // Restarted once: two runs, two ids, one name.
    let db = ("data", "postgres-0", DB);
    node.container(db, "postgres", 0, &id('c'));
    node.container(db, "postgres", 1, &id('d'));

    let paths = [
        systemd_pod(WEB),
        systemd_container(WEB, &id('a')),
        systemd_container(WEB, &id('b')),
        cgroupfs_pod(DB),
        cgroupfs_container(DB, &id('c')),
        cgroupfs_container(DB, &id('d')),
        cgroupfs_pod(GONE),
        cgroupfs_container(GONE, &id('e')),
    ];
    let mut namer = PodNamer::new(node.root());
    let named = namer.name_at(paths.iter().map(String::as_str), Instant::now());
    assert_eq!(
        named,
        PodNames {
            pods: names([(WEB, "shop/web-5d8f7c9b4-x2lqp"), (DB, "data/postgres-0")]),
            containers: names([
                (&id('a'), "nginx"),
                (&id('b'), "log-shipper"),
                (&id('c'), "postgres"),
                (&id('d'), "postgres"),
            ]),
        }
    );

    let labels: Vec<String> = paths.iter().map(|p| container_of(p, &named)).collect();
    assert_eq!(
        labels,
        [
            "shop/web-5d8f7c9b4-x2lqp",
            "shop/web-5d8f7c9b4-x2lqp/nginx",
            "shop/web-5d8f7c9b4-x2lqp/log-shipper",
            "data/postgres-0",
            "data/postgres-0/postgres",
            "data/postgres-0/postgres",
            "pod:9a8b7c6d",
            "pod:9a8b7c6d/eeeeeeeeeeee",
        ]
    );
}

#[test]
fn names_are_handed_out_once_and_named_ids_read_nothing() {
    let node = Node::new();
    node.container(("shop", "web", WEB), "nginx", 0, &id('a'));
    let mut namer = PodNamer::new(node.root());
    let t0 = Instant::now();
    let path = systemd_container(WEB, &id('a'));
    assert_eq!(namer.name_at([path.as_str()], t0).containers.len(), 1);
    assert_eq!(namer.last_read, Some(t0));

    // Another cgroup of the same pod and container (cri-o's nested one).
    let nested = format!("{path}/container");
    let t1 = t0 + Duration::from_secs(5);
    assert_eq!(namer.name_at([nested.as_str()], t1), PodNames::default());
    assert_eq!(namer.last_read, Some(t0), "nothing unknown: no read");
}

#[test]
fn unknown_ids_reread_at_most_once_per_second() {
    let node = Node::new();
    let mut namer = PodNamer::new(node.root());
    let t0 = Instant::now();
    let path = cgroupfs_container(WEB, &id('a'));
    assert_eq!(namer.name_at([path.as_str()], t0), PodNames::default());
    assert_eq!(namer.last_read, Some(t0));

    // The kubelet writes the pod's logs after the first read.
    node.container(("shop", "web", WEB), "nginx", 0, &id('a'));
    let t1 = t0 + Duration::from_millis(999);
    assert_eq!(namer.name_at([], t1), PodNames::default());
    assert_eq!(namer.last_read, Some(t0));

    let t2 = t0 + REREAD_INTERVAL;
    assert_eq!(
        namer.name_at([], t2),
        PodNames {
            pods: names([(WEB, "shop/web")]),
            containers: names([(&id('a'), "nginx")]),
        }
    );
    assert_eq!(namer.last_read, Some(t2));
}

#[test]
fn ids_that_stay_unknown_stop_asking_until_a_new_cgroup_names_them() {
    let node = Node::new();
    let mut namer = PodNamer::new(node.root());
    let t0 = Instant::now();
    let pod = cgroupfs_pod(GONE);
    namer.name_at([pod.as_str()], t0);
    let t1 = t0 + GIVE_UP_AFTER;
    assert_eq!(namer.name_at([], t1), PodNames::default());
    assert_eq!(namer.last_read, Some(t0), "given up: no read");

    node.pod("late", "batch", GONE);
    let t2 = t1 + Duration::from_secs(2);
    assert_eq!(namer.name_at([], t2), PodNames::default());
    assert_eq!(namer.last_read, Some(t0));

    let container = cgroupfs_container(GONE, &id('f'));
    let named = namer.name_at([container.as_str()], t2);
    assert_eq!(named.pods, names([(GONE, "late/batch")]));
    assert_eq!(namer.last_read, Some(t2));
}

#[test]
fn cgroups_outside_kubernetes_read_nothing() {
    let node = Node::new();
    node.container(("shop", "web", WEB), "nginx", 0, &id('a'));
    let mut namer = PodNamer::new(node.root());
    let docker = format!("/docker/{}", id('a'));
    let named = namer.name_at(
        ["/", "/system.slice/nginx.service", &docker],
        Instant::now(),
    );
    assert_eq!(named, PodNames::default());
    assert_eq!(namer.last_read, None);
}

#[test]
fn a_node_without_kubelet_logs_names_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut namer = PodNamer::new(&dir.path().join("absent"));
    let path = systemd_container(WEB, &id('a'));
    assert_eq!(
        namer.name_at([path.as_str()], Instant::now()),
        PodNames::default()
    );
    assert!(namer.last_read.is_some());
}

#[test]
fn log_names_that_do_not_parse_are_left_out() {
    assert_eq!(
        pod_dir(&format!("kube-system_coredns-76f75df574-9xk2v_{WEB}")),
        Some((
            WEB.to_string(),
            "kube-system/coredns-76f75df574-9xk2v".into()
        ))
    );
    // A static pod's uid is a hash of its manifest.
    assert_eq!(
        pod_dir("kube-system_etcd-node1_3a2f9c1d8e7b6a5f4e3d2c1b0a9f8e7d"),
        Some((
            "3a2f9c1d8e7b6a5f4e3d2c1b0a9f8e7d".into(),
            "kube-system/etcd-node1".into()
        ))
    );
    for name in [
        "kube-system_coredns",
        &format!("a_b_c_{WEB}"),
        "ns_pod_not-a-uid",
        &format!("_pod_{WEB}"),
    ] {
        assert_eq!(pod_dir(name), None, "{name}");
    }

    let a = id('a');
    assert_eq!(
        container_log(&format!("web-0_shop_log-shipper-{a}.log")),
        Some((a.clone(), "log-shipper".into()))
    );
    for name in [
        format!("web-0_shop_nginx-{a}"),
        format!("web-0_shop_nginx-{}.log", &a[..63]),
        format!("web-0_nginx-{a}.log"),
        format!("web-0_shop_nginx_{a}.log"),
        "web-0_shop_nginx-zzzz.log".to_string(),
    ] {
        assert_eq!(container_log(&name), None, "{name}");
    }
}
