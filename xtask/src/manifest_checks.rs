//! Checks of the Kubernetes deployment (deploy/kubernetes/*.yaml) and its
//! image (deploy/Containerfile): what the DaemonSet may do on a node
//! (capabilities, host mounts) and that its parts agree (arguments, mount
//! paths, ports, labels). Tests only: reads those files, deploys nothing.

use std::fs;

use serde::Deserialize;
use serde_json::Value;

/// The capabilities the container adds, sorted; stalltop.yaml says why each.
const CAPABILITIES: [&str; 4] = ["BPF", "PERFMON", "SYSLOG", "SYS_RESOURCE"];
/// Host paths the container may only read.
const READ_ONLY_HOST_PATHS: [&str; 3] = ["/sys", "/proc", "/var/log"];
const FLIGHT_HOST_PATH: &str = "/var/lib/stalltop/flight";
const LISTEN: &str = "0.0.0.0:9750";

/// Every document of every deploy/kubernetes/*.yaml, files in name order.
fn manifests() -> Vec<Value> {
    let dir = crate::workspace::workspace_root().join("deploy/kubernetes");
    let mut paths: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .flat_map(|path| {
            let text = fs::read_to_string(path).unwrap();
            serde_yaml_ng::Deserializer::from_str(&text)
                .map(|doc| {
                    Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// deploy/prometheus/stalltop-rules.yaml, the rules the PrometheusRule carries.
pub fn rules_file() -> Value {
    let path = crate::workspace::workspace_root().join("deploy/prometheus/stalltop-rules.yaml");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the checks found wrong.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, ok: bool, problem: impl Into<String>) {
        if !ok {
            self.0.push(problem.into());
        }
    }
}

/// The strings of a YAML list (none if it is not one).
fn strings(list: &Value) -> Vec<&str> {
    list.as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn items(list: &Value) -> &[Value] {
    list.as_array().map_or(&[], Vec::as_slice)
}

/// True when `selector` is a non-empty label map that `labels` all match.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
}

/// True when `reference` (a port's name or number) names `port`.
fn names_port(reference: &Value, port: &Value) -> bool {
    reference == &port["name"] || reference == &port["containerPort"]
}

fn is_under(path: &str, root: &str) -> bool {
    path == root || path.starts_with(&format!("{root}/"))
}

/// Everything wrong with the documents of deploy/kubernetes/.
fn problems(docs: &[Value]) -> Vec<String> {
    let mut p = Problems::default();
    let mut kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    kinds.sort_unstable();
    let expected = [
        "DaemonSet",
        "Namespace",
        "PrometheusRule",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ];
    p.check(
        kinds == expected,
        format!("kinds {kinds:?}, not {expected:?}"),
    );
    let of_kind = |kind: &str| docs.iter().find(|d| d["kind"] == kind);
    let (Some(namespace), Some(account), Some(service), Some(ds), Some(monitor), Some(rules)) = (
        of_kind("Namespace"),
        of_kind("ServiceAccount"),
        of_kind("Service"),
        of_kind("DaemonSet"),
        of_kind("ServiceMonitor"),
        of_kind("PrometheusRule"),
    ) else {
        return p.0;
    };
    let ns = &namespace["metadata"]["name"];
    for doc in [account, service, ds, monitor, rules] {
        p.check(
            &doc["metadata"]["namespace"] == ns,
            format!("{} is not in namespace {ns}", doc["kind"]),
        );
    }

    let pod = &ds["spec"]["template"];
    let spec = &pod["spec"];
    let labels = &pod["metadata"]["labels"];
    p.check(
        selects(&ds["spec"]["selector"]["matchLabels"], labels),
        "the DaemonSet's selector does not match its pod labels",
    );
    p.check(spec["hostPID"] == true, "the pod needs hostPID: true");
    p.check(
        spec["hostNetwork"] != true,
        "the pod must not use hostNetwork",
    );
    p.check(
        account["automountServiceAccountToken"] == false
            && spec["automountServiceAccountToken"] == false
            && spec["serviceAccountName"] == account["metadata"]["name"],
        "the pod must run as the ServiceAccount, with no token mounted",
    );
    p.check(
        items(&spec["tolerations"])
            .iter()
            .any(|t| t["operator"] == "Exists" && t.get("key").is_none()),
        "no toleration of every taint (operator: Exists, no key)",
    );
    p.check(
        spec["terminationGracePeriodSeconds"]
            .as_u64()
            .is_some_and(|s| s >= 10),
        "terminationGracePeriodSeconds under 10 s leaves no time to detach",
    );
    let containers = items(&spec["containers"]);
    p.check(
        containers.len() == 1,
        format!("{} containers, not 1", containers.len()),
    );
    if let Some(container) = containers.first() {
        container_problems(&mut p, container, spec, pod);
    }

    // The Service finds the pods and the metrics port; the ServiceMonitor
    // finds the Service (by its labels) and names that port.
    p.check(
        service["spec"]["clusterIP"] == "None",
        "the Service is not headless (clusterIP: None)",
    );
    p.check(
        selects(&service["spec"]["selector"], labels),
        "the Service's selector does not match the DaemonSet's pod labels",
    );
    let listen_port = metrics_port(containers.first().unwrap_or(&Value::Null));
    let service_port = items(&service["spec"]["ports"])
        .iter()
        .find(|sp| names_port(&sp["targetPort"], listen_port));
    p.check(
        service_port.is_some(),
        "no Service port targets the container's metrics port",
    );
    let service_port_name = service_port.map_or(&Value::Null, |sp| &sp["name"]);
    p.check(
        selects(
            &monitor["spec"]["selector"]["matchLabels"],
            &service["metadata"]["labels"],
        ),
        "the ServiceMonitor's selector does not match the Service's labels",
    );
    p.check(
        items(&monitor["spec"]["namespaceSelector"]["matchNames"]).contains(ns),
        format!("the ServiceMonitor does not look in namespace {ns}"),
    );
    // The rules carry the `node` label the ServiceMonitor adds.
    p.check(
        items(&monitor["spec"]["endpoints"]).iter().all(|e| {
            items(&e["relabelings"]).iter().any(|r| {
                r["targetLabel"] == "node"
                    && strings(&r["sourceLabels"]) == ["__meta_kubernetes_pod_node_name"]
            })
        }),
        "the ServiceMonitor does not label each series with its node (the rules group by it)",
    );
    p.check(
        rules["spec"]["groups"] == rules_file()["groups"],
        "the PrometheusRule's spec.groups are not deploy/prometheus/stalltop-rules.yaml's groups: \
         copy them over",
    );
    let endpoints = items(&monitor["spec"]["endpoints"]);
    p.check(
        !endpoints.is_empty()
            && endpoints
                .iter()
                .all(|e| &e["port"] == service_port_name && e["path"] == "/metrics"),
        format!("the ServiceMonitor's endpoints are not /metrics on port {service_port_name}"),
    );
    p.0
}

/// The container's port that `--listen` serves (Null if none).
fn metrics_port(container: &Value) -> &Value {
    let number: Option<u64> = LISTEN.rsplit_once(':').and_then(|(_, n)| n.parse().ok());
    items(&container["ports"])
        .iter()
        .find(|port| port["containerPort"].as_u64() == number)
        .unwrap_or(&Value::Null)
}

/// The DaemonSet's container: privileges, arguments, mounts, resources,
/// port, probes and the pod's scrape annotations.
fn container_problems(p: &mut Problems, container: &Value, spec: &Value, pod: &Value) {
    let security = &container["securityContext"];
    p.check(
        security["privileged"] != true,
        "the container is privileged: true",
    );
    p.check(
        security["allowPrivilegeEscalation"] == false,
        "the container needs allowPrivilegeEscalation: false",
    );
    let mut added = strings(&security["capabilities"]["add"]);
    added.sort_unstable();
    p.check(
        added == CAPABILITIES,
        format!("capabilities add {added:?}, not exactly {CAPABILITIES:?}"),
    );
    let dropped = strings(&security["capabilities"]["drop"]);
    p.check(
        dropped == ["ALL"],
        format!("capabilities drop {dropped:?}, not [\"ALL\"]"),
    );
    p.check(
        security["seccompProfile"]["type"] == "RuntimeDefault",
        "the container's seccompProfile is not RuntimeDefault",
    );
    // Recordings and flight file names name the node, not the pod.
    let node_name = items(&container["env"]).iter().any(|e| {
        e["name"] == "NODE_NAME" && e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    });
    p.check(
        node_name,
        "the container gets no NODE_NAME from spec.nodeName",
    );

    let command = strings(&container["command"]);
    let args = strings(&container["args"]);
    p.check(
        command == ["/stalltop"] && args.first() == Some(&"serve"),
        format!("the container runs {command:?} {args:?}, not /stalltop serve"),
    );
    let flag = |name: &str| {
        let at = args.iter().position(|a| *a == name)?;
        args.get(at + 1).copied()
    };
    p.check(
        flag("--listen") == Some(LISTEN),
        format!("--listen is {:?}, not {LISTEN}", flag("--listen")),
    );

    let volumes = items(&spec["volumes"]);
    let mounts = items(&container["volumeMounts"]);
    for volume in volumes {
        p.check(
            mounts.iter().any(|m| m["name"] == volume["name"]),
            format!("volume {} is not mounted", volume["name"]),
        );
    }
    for mount in mounts {
        let Some(volume) = volumes.iter().find(|v| v["name"] == mount["name"]) else {
            p.0.push(format!("mount {} names no volume", mount["name"]));
            continue;
        };
        let Some(host_path) = volume["hostPath"]["path"].as_str() else {
            continue;
        };
        // stalltop reads fixed paths, and /var/log/containers holds
        // absolute links into /var/log/pods.
        p.check(
            mount["mountPath"] == host_path,
            format!(
                "{host_path} is mounted at {}, not at its own path",
                mount["mountPath"]
            ),
        );
        if READ_ONLY_HOST_PATHS
            .iter()
            .any(|root| is_under(host_path, root))
        {
            p.check(
                mount["readOnly"] == true,
                format!("{host_path} is mounted writable (readOnly: true missing)"),
            );
        }
    }
    let flight_dir = flag("--flight-dir");
    match mounts
        .iter()
        .find(|m| m["mountPath"].as_str() == flight_dir)
    {
        None => {
            p.0.push(format!("--flight-dir {flight_dir:?} is no mount path"))
        }
        Some(mount) => {
            p.check(
                mount["readOnly"] != true,
                "the flight dir is mounted readOnly",
            );
            let host_path = volumes
                .iter()
                .find(|v| v["name"] == mount["name"])
                .map_or(&Value::Null, |v| &v["hostPath"]);
            p.check(
                host_path["path"] == FLIGHT_HOST_PATH && host_path["type"] == "DirectoryOrCreate",
                format!(
                    "the flight dir is not hostPath {FLIGHT_HOST_PATH} (DirectoryOrCreate): {host_path}"
                ),
            );
        }
    }

    for bound in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            p.check(
                !container["resources"][bound][resource].is_null(),
                format!("resources.{bound}.{resource} is missing"),
            );
        }
    }

    let port = metrics_port(container);
    p.check(
        !port.is_null(),
        format!("no container port for --listen {LISTEN}"),
    );
    let annotations = &pod["metadata"]["annotations"];
    p.check(
        annotations["prometheus.io/scrape"] == "true"
            && annotations["prometheus.io/path"] == "/metrics",
        "the pod lacks prometheus.io/scrape: \"true\" and prometheus.io/path: /metrics",
    );
    let port_number = port["containerPort"].as_u64().map(|n| n.to_string());
    p.check(
        annotations["prometheus.io/port"].as_str() == port_number.as_deref(),
        format!(
            "prometheus.io/port is {}, not the container port {}",
            annotations["prometheus.io/port"], port["containerPort"]
        ),
    );
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        let get = &container[probe]["httpGet"];
        p.check(
            get["path"] == "/healthz" && names_port(&get["port"], port),
            format!("the {probe} is not GET /healthz on the metrics port: {get}"),
        );
    }
}

/// Everything wrong with deploy/Containerfile given the DaemonSet's
/// container: the image holds the static binary alone, and its entry point
/// is the container's command.
fn containerfile_problems(text: &str, container: &Value) -> Vec<String> {
    let mut p = Problems::default();
    let instructions: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    p.check(
        instructions.first() == Some(&"FROM scratch"),
        format!("the image is not FROM scratch: {:?}", instructions.first()),
    );
    p.check(
        instructions.contains(&"COPY target/static/stalltop /stalltop"),
        "the image does not COPY target/static/stalltop /stalltop",
    );
    let entrypoint: Option<Vec<String>> = instructions
        .iter()
        .find_map(|line| line.strip_prefix("ENTRYPOINT "))
        .and_then(|list| serde_json::from_str(list).ok());
    let mut run = strings(&container["command"]);
    run.extend(strings(&container["args"]));
    p.check(
        entrypoint.as_deref().is_some_and(|e| e == run),
        format!("the ENTRYPOINT {entrypoint:?} is not the DaemonSet's {run:?}"),
    );
    p.0
}

mod tests {
    use super::*;

    fn daemonset(docs: &mut [Value]) -> &mut Value {
        docs.iter_mut()
            .find(|d| d["kind"] == "DaemonSet")
            .expect("a DaemonSet")
    }

    fn container(docs: &mut [Value]) -> &mut Value {
        &mut daemonset(docs)["spec"]["template"]["spec"]["containers"][0]
    }

    fn of_kind<'a>(docs: &'a mut [Value], kind: &str) -> &'a mut Value {
        docs.iter_mut().find(|d| d["kind"] == kind).unwrap()
    }

    #[test]
    fn the_kubernetes_manifests_pass_every_check() {
        let docs = manifests();
        assert_eq!(problems(&docs), Vec::<String>::new());
    }

    #[test]
    fn the_image_is_the_static_binary_alone_running_the_daemonsets_command() {
        let text =
            fs::read_to_string(crate::workspace::workspace_root().join("deploy/Containerfile"))
                .unwrap();
        let mut docs = manifests();
        let container = container(&mut docs).clone();
        assert_eq!(
            containerfile_problems(&text, &container),
            Vec::<String>::new()
        );
        let on_debian = text.replace("FROM scratch", "FROM debian:12");
        assert_eq!(
            containerfile_problems(&on_debian, &container),
            ["the image is not FROM scratch: Some(\"FROM debian:12\")"]
        );
    }

    /// Each mutation breaks one rule; the checks must name it.
    #[test]
    fn each_check_fails_on_a_manifest_that_breaks_it() {
        type Mutation = fn(&mut [Value]);
        let cases: [(&str, Mutation, &str); 15] = [
            (
                "no node name",
                |docs| container(docs)["env"] = Value::Array(Vec::new()),
                "no NODE_NAME",
            ),
            (
                "privileged",
                |docs| container(docs)["securityContext"]["privileged"] = true.into(),
                "the container is privileged: true",
            ),
            (
                "SYS_ADMIN added",
                |docs| {
                    container(docs)["securityContext"]["capabilities"]["add"]
                        .as_array_mut()
                        .unwrap()
                        .push("SYS_ADMIN".into())
                },
                "capabilities add",
            ),
            (
                "nothing dropped",
                |docs| {
                    container(docs)["securityContext"]["capabilities"]["drop"] =
                        Value::Array(Vec::new())
                },
                "capabilities drop []",
            ),
            (
                "BTF writable",
                |docs| {
                    let mounts = container(docs)["volumeMounts"].as_array_mut().unwrap();
                    let btf = mounts.iter_mut().find(|m| m["name"] == "btf").unwrap();
                    btf["readOnly"] = false.into();
                },
                "/sys/kernel/btf is mounted writable",
            ),
            (
                "no hostPID",
                |docs| daemonset(docs)["spec"]["template"]["spec"]["hostPID"] = false.into(),
                "hostPID",
            ),
            (
                "flight dir elsewhere",
                |docs| {
                    let args = container(docs)["args"].as_array_mut().unwrap();
                    *args.last_mut().unwrap() = "/tmp/flight".into();
                },
                "--flight-dir Some(\"/tmp/flight\") is no mount path",
            ),
            (
                "no limits",
                |docs| {
                    container(docs)["resources"]
                        .as_object_mut()
                        .unwrap()
                        .remove("limits");
                },
                "resources.limits.cpu is missing",
            ),
            (
                "scrape port of another container port",
                |docs| {
                    daemonset(docs)["spec"]["template"]["metadata"]["annotations"]
                        ["prometheus.io/port"] = "9090".into()
                },
                "prometheus.io/port is \"9090\"",
            ),
            (
                "liveness on /metrics",
                |docs| container(docs)["livenessProbe"]["httpGet"]["path"] = "/metrics".into(),
                "the livenessProbe is not GET /healthz",
            ),
            (
                "Service selects other pods",
                |docs| {
                    of_kind(docs, "Service")["spec"]["selector"]["app.kubernetes.io/name"] =
                        "other".into()
                },
                "the Service's selector does not match",
            ),
            (
                "ServiceMonitor on another port",
                |docs| {
                    of_kind(docs, "ServiceMonitor")["spec"]["endpoints"][0]["port"] = "http".into()
                },
                "the ServiceMonitor's endpoints are not /metrics on port \"metrics\"",
            ),
            (
                "ServiceMonitor without the node label",
                |docs| {
                    of_kind(docs, "ServiceMonitor")["spec"]["endpoints"][0]["relabelings"] =
                        Value::Array(Vec::new())
                },
                "does not label each series with its node",
            ),
            (
                "PrometheusRule with an alert of its own",
                |docs| {
                    of_kind(docs, "PrometheusRule")["spec"]["groups"][1]["rules"][0]["for"] =
                        "1m".into()
                },
                "spec.groups are not deploy/prometheus/stalltop-rules.yaml's",
            ),
            (
                "PrometheusRule in another namespace",
                |docs| {
                    of_kind(docs, "PrometheusRule")["metadata"]["namespace"] = "monitoring".into()
                },
                "PrometheusRule\" is not in namespace",
            ),
        ];
        let good = manifests();
        for (name, mutate, expected) in cases {
            let mut docs = good.clone();
            mutate(&mut docs);
            let found = problems(&docs);
            assert!(
                found.iter().any(|problem| problem.contains(expected)),
                "{name}: no problem containing {expected:?} in {found:?}"
            );
        }
    }
}
