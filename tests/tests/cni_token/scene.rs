//! What the CNI token tests share: the stand-in with short-lived tokens
//! and deploy/'s RBAC, the cluster the plugin and felix find in it, the
//! conflist, a pod's CNI call, and what is read back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use tartan_api::kind::Kind;
use tartan_apiserver::{ApiServer, Policy};
use tartan_lab::cni::{Call, Runtime};
use tartan_lab::netns::Netns;
use tartan_tests::PluginFiles;
use tartan_tests::standin::StandIn;

/// Whether the machine can run these tests, or why not.
pub fn unable() -> Option<&'static str> {
    let root =
        std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    (!root).then_some("network namespaces need root")
}

/// The stand-in judging by deploy/'s RBAC and refusing what it does not
/// allow, every token living `lifetime` (TokenRequests cut to it).
pub fn standin(prefix: &str, lifetime: Duration) -> StandIn {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let policy = Policy::from_dir(&deploy).unwrap();
    let server = ApiServer::new()
        .with_policy(policy, true)
        .with_token_lifetime(lifetime);
    StandIn::with_server(prefix, server).unwrap()
}

/// Namespaces, node-1 and a pool of one /26 block.
pub fn seed(api: &StandIn) {
    for ns in ["default", "tartan-system"] {
        api.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
    }
    api.create(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-1", "labels": {"kubernetes.io/os": "linux"}},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.78.0.1"}]}}))
        .unwrap();
    api.create(
        json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool", "metadata": {"name": "pool"},
        "spec": {"cidr": "10.248.0.0/26", "blockSize": 26}}),
    )
    .unwrap();
}

/// A Pod object named `name` in `ns`; its UID.
pub fn pod_object(api: &StandIn, ns: &str, name: &str) -> String {
    let o = api
        .create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "example"}]}}))
        .unwrap();
    o.metadata.uid.unwrap()
}

/// The container runtime of node-1, its plugins reading `kubeconfig`;
/// and the files its plugins keep on the host, removed when dropped (bind
/// it for the whole test).
pub fn runtime(api: &StandIn, kubeconfig: &Path) -> (Runtime, PluginFiles) {
    let conflist = json!({"cniVersion": "1.1.0", "name": "cnitoken", "plugins": [{
        "type": "tartan", "datastore": "kubernetes",
        "kubeconfig": kubeconfig.display().to_string(), "nodename": "node-1",
        "logFile": api.dir.join("cni.log").display().to_string(), "logLevel": "debug",
        "ipam": {"type": "tartan-ipam", "releaseCooldownSeconds": 0, "ipv4Pools": ["pool"]}
    }]});
    let rt = Runtime::new(conflist).in_netns(api.netns.name());
    let files = PluginFiles::of(&rt);
    (rt, files)
}

/// A pod's sandbox namespace and the CNI call that wires it (its Pod
/// object made in `default`).
pub fn pod(api: &StandIn, name: &str) -> (Netns, Call) {
    pod_object(api, "default", name);
    let ns = Netns::new("ctp").unwrap();
    let id = format!("c{}", ns.name().replace('x', "0"));
    let call = Call::for_pod(&id, ns.name(), "default", name);
    (ns, call)
}

/// WorkloadEndpoints of pods named `pod`.
pub fn endpoints_of(api: &StandIn, pod: &str) -> usize {
    api.list(Kind::WorkloadEndpoint)
        .iter()
        .filter(|o| {
            serde_json::to_value(o)
                .ok()
                .and_then(|v| v.pointer("/spec/pod").cloned())
                .is_some_and(|p| p == pod)
        })
        .count()
}

/// The plugin's log, for failures.
pub fn cni_log(api: &StandIn) -> String {
    std::fs::read_to_string(api.dir.join("cni.log")).unwrap_or_default()
}

/// Where the plugins' kubeconfig goes.
pub fn cni_kubeconfig(api: &StandIn) -> PathBuf {
    api.dir.join("net.d").join("tartan-kubeconfig")
}
