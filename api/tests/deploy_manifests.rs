//! Every manifest in deploy/ parses strictly as its Kubernetes type: each
//! document is read into the k8s-openapi type of its kind and written back,
//! and must come out the same (a misspelt or misplaced field would be
//! dropped on the way and show as a difference).

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn same<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    if &back == doc {
        Ok(())
    } else {
        Err(format!(
            "changed on a round trip through the type:\n  file: {doc}\n  type: {back}"
        ))
    }
}

fn check(doc: &Value) -> Result<&str, String> {
    let kind = doc["kind"].as_str().ok_or("no kind")?;
    match kind {
        "Namespace" => same::<Namespace>(doc),
        "ConfigMap" => same::<ConfigMap>(doc),
        "ServiceAccount" => same::<ServiceAccount>(doc),
        "ClusterRole" => same::<ClusterRole>(doc),
        "ClusterRoleBinding" => same::<ClusterRoleBinding>(doc),
        "Role" => same::<Role>(doc),
        "RoleBinding" => same::<RoleBinding>(doc),
        "DaemonSet" => same::<DaemonSet>(doc),
        "Deployment" => same::<Deployment>(doc),
        "Service" => same::<Service>(doc),
        "NetworkPolicy" => same::<NetworkPolicy>(doc),
        other => Err(format!("no check for kind {other}")),
    }
    .map(|()| kind)
}

fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap())
        .collect()
}

/// The workload manifests of deploy/ (the CRDs have their own test).
const MANIFESTS: [&str; 3] = [
    "tartan-node.yaml",
    "tartan-dns.yaml",
    "tartan-controllers.yaml",
];

fn deploy_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

#[test]
fn deploy_manifests_parse_strictly() {
    let mut kinds = Vec::new();
    for file in MANIFESTS {
        let text = std::fs::read_to_string(deploy_dir().join(file)).unwrap();
        for doc in documents(&text) {
            match check(&doc) {
                Ok(k) => kinds.push(k.to_string()),
                Err(e) => panic!("{file}: {}: {e}", doc["metadata"]["name"]),
            }
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ConfigMap",
            "DaemonSet",
            "Deployment",
            "Deployment",
            "Namespace",
            "NetworkPolicy",
            "Role",
            "Role",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ServiceAccount",
            "ServiceAccount",
            "ServiceAccount"
        ]
    );
}

/// Every `image:` in deploy/ and the kustomization's `newTag` name the
/// workspace version: an install never pulls an unpinned `latest`, and a
/// release changes the version in one place (the check says where not).
#[test]
fn images_are_pinned_to_the_workspace_version() {
    let version = env!("CARGO_PKG_VERSION");
    let want = format!("ghcr.io/tartan-net/tartan:{version}");
    let mut seen = 0;
    for file in MANIFESTS {
        let text = std::fs::read_to_string(deploy_dir().join(file)).unwrap();
        for line in text.lines() {
            if let Some(image) = line.trim().strip_prefix("image:") {
                assert_eq!(image.trim(), want, "{file}: {line}");
                seen += 1;
            }
        }
    }
    assert!(
        seen >= 5,
        "bgpd, felix, install-cni, tartan-dns and tartan-controllers name an image"
    );
    let kustomization = std::fs::read_to_string(deploy_dir().join("kustomization.yaml")).unwrap();
    let doc: Value = serde_saphyr::from_str(&kustomization).unwrap();
    assert_eq!(doc["images"][0]["name"], "ghcr.io/tartan-net/tartan");
    assert_eq!(doc["images"][0]["newTag"], version);
    let mut crd_files: Vec<String> = std::fs::read_dir(deploy_dir().join("crds"))
        .unwrap()
        .map(|e| format!("crds/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    crd_files.sort();
    for file in crd_files.iter().map(String::as_str).chain(MANIFESTS) {
        assert!(
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r == file),
            "kustomization.yaml lists {file}"
        );
    }
}

#[test]
fn a_misplaced_field_is_caught() {
    let doc: Value = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "x"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [], "hostNetwrok": true}}}
    });
    assert!(check(&doc).is_err());
}

#[test]
fn the_role_grants_writes_only_to_ipam_endpoints_node_updates_and_status_reports() {
    let text = std::fs::read_to_string(deploy_dir().join("tartan-node.yaml")).unwrap();
    let role = documents(&text)
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap();
    let role: ClusterRole = serde_json::from_value(role).unwrap();
    let mut written = Vec::new();
    for rule in role.rules.unwrap_or_default() {
        let writes: Vec<&String> = rule
            .verbs
            .iter()
            .filter(|v| matches!(v.as_str(), "create" | "update" | "patch" | "delete" | "*"))
            .collect();
        if writes.is_empty() {
            continue;
        }
        let mut res = rule.resources.unwrap_or_default();
        res.sort();
        if res == ["nodes"] {
            // felix's VTEP MAC annotation: update only, never create or delete.
            assert_eq!(writes, ["update"], "nodes");
        } else if res == ["nodes/status"] {
            // felix's NetworkUnavailable=False on its Node: update only.
            assert_eq!(writes, ["update"], "nodes/status");
        } else if res == ["bgpnodestatuses"] {
            // bgpd's status reports, and the sweep of those of nodes gone.
            assert_eq!(writes, ["create", "update", "delete"], "bgpnodestatuses");
        } else {
            // The CNI plugin's IPAM records and endpoints (which verbs on
            // which of them: tests/tests/rbac/ checks against use).
            let ipam = [
                "blockaffinities",
                "ipamblocks",
                "ipamhandles",
                "workloadendpoints",
            ];
            assert!(res.iter().all(|r| ipam.contains(&r.as_str())), "{res:?}");
        }
        written.extend(res);
    }
    assert!(written.contains(&"nodes".to_string()));
    assert!(written.contains(&"nodes/status".to_string()));
    assert!(written.contains(&"bgpnodestatuses".to_string()));
}

#[test]
fn secrets_are_readable_only_in_tartans_namespace() {
    let text = std::fs::read_to_string(deploy_dir().join("tartan-node.yaml")).unwrap();
    let docs = documents(&text);
    let cluster: ClusterRole = serde_json::from_value(
        docs.iter()
            .find(|d| d["kind"] == "ClusterRole")
            .unwrap()
            .clone(),
    )
    .unwrap();
    assert!(
        cluster.rules.unwrap_or_default().iter().all(|r| !r
            .resources
            .iter()
            .flatten()
            .any(|x| x == "secrets")),
        "no cluster-wide access to Secrets"
    );
    let role: Role = serde_json::from_value(
        docs.iter()
            .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == "tartan-node-secrets")
            .unwrap()
            .clone(),
    )
    .unwrap();
    assert_eq!(
        role.metadata.namespace.as_deref(),
        Some(tartan_api::resources::TARTAN_NAMESPACE)
    );
    let rules = role.rules.unwrap_or_default();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["secrets".to_string()][..])
    );
    // bgpd lists and watches them (tests/tests/rbac/ checks no get is
    // made).
    assert_eq!(rules[0].verbs, ["list", "watch"]);
}

/// The node agent may ask for a token of tartan-cni and of no other
/// account (felix renews the CNI plugins' kubeconfig), and nothing more.
#[test]
fn the_node_agent_mints_tokens_only_for_the_cni_plugins() {
    let text = std::fs::read_to_string(deploy_dir().join("tartan-node.yaml")).unwrap();
    let docs = documents(&text);
    let role: Role = serde_json::from_value(
        docs.iter()
            .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == "tartan-node-cni-token")
            .unwrap()
            .clone(),
    )
    .unwrap();
    let rules = role.rules.unwrap_or_default();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["serviceaccounts/token".to_string()][..])
    );
    assert_eq!(rules[0].verbs, ["create"]);
    assert_eq!(
        rules[0].resource_names.as_deref(),
        Some(&["tartan-cni".to_string()][..])
    );
}

/// The shipped ConfigMap checks out, says what docs/install.md says its
/// defaults are, and only tartan-controllers may read it (that one
/// object, `get` only).
#[test]
fn the_shipped_config_map_is_valid_and_read_narrowly() {
    use tartan_api::tartan_config::{CONFIG_MAP, KEYS, TartanConfig};
    let text = std::fs::read_to_string(deploy_dir().join("tartan-node.yaml")).unwrap();
    let doc = documents(&text)
        .into_iter()
        .find(|d| d["kind"] == "ConfigMap")
        .unwrap();
    let cm: ConfigMap = serde_json::from_value(doc).unwrap();
    assert_eq!(cm.metadata.name.as_deref(), Some(CONFIG_MAP));
    assert_eq!(
        cm.metadata.namespace.as_deref(),
        Some(tartan_api::resources::TARTAN_NAMESPACE)
    );
    let data = cm.data.unwrap();
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    let mut all = KEYS.to_vec();
    keys.sort();
    all.sort();
    assert_eq!(keys, all, "every key is shipped, with its default");
    // The shipped values are the defaults, but for the Service proxy: an
    // absent key means felix's own default (on), and the shipped file
    // turns it off beside the kube-proxy that clusters come with.
    assert_eq!(
        TartanConfig::parse(&data).unwrap(),
        TartanConfig {
            services: false,
            ..TartanConfig::default()
        },
        "the shipped values are the defaults"
    );
    let text = std::fs::read_to_string(deploy_dir().join("tartan-controllers.yaml")).unwrap();
    let rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule> = documents(&text)
        .into_iter()
        .filter_map(|d| match d["kind"].as_str() {
            Some("Role") => serde_json::from_value::<Role>(d).unwrap().rules,
            Some("ClusterRole") => serde_json::from_value::<ClusterRole>(d).unwrap().rules,
            _ => None,
        })
        .flatten()
        .filter(|r| r.resources.iter().flatten().any(|x| x == "configmaps"))
        .collect();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0].verbs, ["get"]);
    assert_eq!(
        rules[0].resource_names.as_deref(),
        Some(&[CONFIG_MAP.to_string()][..])
    );
}

/// The workloads of one file, by kind and name.
fn workload(file: &str, kind: &str, name: &str) -> Value {
    let text = std::fs::read_to_string(deploy_dir().join(file)).unwrap();
    documents(&text)
        .into_iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{file}: no {kind} {name}"))
}

/// On a new cluster no IPPool exists until tartan-controllers creates
/// one: a pod on the pod network would wait for an address for ever, so it
/// runs on the host network, and may run where the only node is the
/// control plane. tartan-dns may too, and binds port 53 as nobody through
/// the pod's own unprivileged-port floor (a capability added to a non-root
/// container is lost at exec).
#[test]
fn what_must_run_first_on_a_new_cluster_can() {
    let c = workload(
        "tartan-controllers.yaml",
        "Deployment",
        "tartan-controllers",
    );
    let spec = &c["spec"]["template"]["spec"];
    assert_eq!(spec["hostNetwork"], true, "tartan-controllers: {spec}");
    assert_eq!(spec["dnsPolicy"], "ClusterFirstWithHostNet");
    let d = workload("tartan-dns.yaml", "Deployment", "tartan-dns");
    let dspec = &d["spec"]["template"]["spec"];
    for s in [spec, dspec] {
        let tolerates = s["tolerations"].as_array().cloned().unwrap_or_default();
        assert!(
            tolerates
                .iter()
                .any(|t| t["key"] == "node-role.kubernetes.io/control-plane"),
            "{s}"
        );
    }
    let sysctls = dspec["securityContext"]["sysctls"].as_array().unwrap();
    assert!(
        sysctls
            .iter()
            .any(|s| s["name"] == "net.ipv4.ip_unprivileged_port_start" && s["value"] == "0")
    );
}

/// A pod on the host network that declares ports holds them on its node,
/// so two such pods of one workload never share a node: a Deployment of
/// them must not ask for more replicas than a one-node cluster holds, nor
/// surge a new pod beside the old one in a rollout; a DaemonSet must not
/// surge either. Otherwise a pod stays Pending and the rollout never ends.
#[test]
fn host_network_workloads_roll_out_on_a_one_node_cluster() {
    let mut seen = 0;
    for entry in std::fs::read_dir(deploy_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for d in documents(&text) {
            let spec = &d["spec"]["template"]["spec"];
            let ports = spec["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["ports"].as_array().is_some_and(|p| !p.is_empty()));
            if spec["hostNetwork"] != true || !ports {
                continue;
            }
            let name = format!("{} {}", d["kind"], d["metadata"]["name"]);
            seen += 1;
            let surge = match d["kind"].as_str() {
                Some("Deployment") => {
                    let replicas = d["spec"]["replicas"].as_u64().unwrap_or(1);
                    assert_eq!(replicas, 1, "{name}: replicas");
                    let s = &d["spec"]["strategy"];
                    assert_eq!(s["type"], "RollingUpdate", "{name}: strategy");
                    s["rollingUpdate"]["maxSurge"].clone()
                }
                Some("DaemonSet") => {
                    d["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"].clone()
                }
                other => panic!("{name}: a host-network {other:?} is not checked here"),
            };
            // Kubernetes' defaults: 25% for a Deployment, 0 for a DaemonSet.
            let none = surge == 0
                || surge == "0"
                || surge == "0%"
                || (surge.is_null() && d["kind"] == "DaemonSet");
            assert!(none, "{name}: maxSurge {surge}");
        }
    }
    assert!(
        seen >= 2,
        "the node DaemonSet and tartan-controllers: {seen}"
    );
}

/// The manifests' default works on a cluster as installed: kubeadm, kind
/// and k3s run kube-proxy, so felix's Service proxy is off unless the
/// operator turns it on; the API server's real address can be given to
/// the agents for clusters without kube-proxy.
#[test]
fn the_shipped_service_proxy_setting_leaves_kube_proxy_alone() {
    let cm = workload("tartan-node.yaml", "ConfigMap", "tartan-config");
    assert_eq!(cm["data"]["services"], "off");
    let ds = workload("tartan-node.yaml", "DaemonSet", "tartan-node");
    for c in ds["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
    {
        let from = c["envFrom"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", c["name"]));
        assert!(from.iter().any(
            |f| f["configMapRef"]["name"] == "kubernetes-services-endpoint"
                && f["configMapRef"]["optional"] == true
        ));
    }
}

/// The runtime calls a node's network ready, and pods come, as soon as a
/// conflist is in its directory: the init container leaves Tartan's as
/// `<conflist>.pending` (an extension the runtime does not read) and
/// felix, which writes the plugins' kubeconfig, moves it into place once
/// that has a token. The two must name the same file, and the conflist
/// the kubeconfig felix writes.
#[test]
fn the_conflist_appears_only_after_the_plugins_credentials() {
    let script = std::fs::read_to_string(deploy_dir().join("install-cni.sh")).unwrap();
    let net = script
        .lines()
        .find_map(|l| l.strip_prefix("NET="))
        .expect("install-cni.sh sets NET")
        .replace("${TARTAN_HOST_ROOT:-/host}", "/host");
    let out = script
        .split("--out ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("install-cni.sh renders the conflist with --out")
        .trim_matches('"')
        .replace("$NET", &net);
    assert!(out.ends_with(".conflist.pending"), "{out}");
    let kubeconfig = script
        .split("--kubeconfig ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the conflist names a kubeconfig")
        .to_string();
    let ds = workload("tartan-node.yaml", "DaemonSet", "tartan-node");
    let felix = ds["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "felix")
        .expect("a felix container")
        .clone();
    let args: Vec<String> = felix["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let arg = |flag: &str| {
        let i = args.iter().position(|a| a == flag);
        i.and_then(|i| args.get(i + 1))
            .unwrap_or_else(|| panic!("felix has no {flag}: {args:?}"))
            .clone()
    };
    // Both containers see the host's /etc/cni/net.d under /host.
    assert_eq!(format!("{}.pending", arg("--cni-conflist")), out);
    assert_eq!(arg("--cni-kubeconfig"), format!("/host{kubeconfig}"));
}
