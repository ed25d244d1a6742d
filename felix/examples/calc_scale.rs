//! How felix's pure calculation scales with the cluster: the bytes the
//! folded state holds for 150,000 endpoints on other nodes, and the time
//! of one pass (the desired state computed from it). A measurement run by
//! hand, not a test:
//! `cargo run --example calc_scale -p tartan-felix` (build it optimised
//! for meaningful times).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use tartan_api::resources::{EndpointPort, WorkloadEndpointSpec};
use tartan_felix::calc::state::{Labels, State};

/// Counts the bytes live on the heap.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

const NODE: &str = "n0";
const GROUPS: usize = 5_000;
const PER_GROUP: usize = 30;
const LOCAL: usize = 500;
const POLICIES: usize = 2_000;

fn labels(g: usize) -> Labels {
    [
        ("app".to_string(), format!("app-{g}")),
        ("tier".to_string(), format!("t-{}", g % 7)),
        ("team".to_string(), format!("team-{}", g % 13)),
    ]
    .into()
}

fn spec(node: &str, pod: &str, iface: String, addr: u32) -> WorkloadEndpointSpec {
    WorkloadEndpointSpec {
        node: node.into(),
        pod: pod.into(),
        container_id: format!("c{addr:08x}"),
        endpoint: "eth0".into(),
        interface_name: iface,
        mac: None,
        ip_networks: vec![format!("{}/32", std::net::Ipv4Addr::from(addr))],
        ports: vec![EndpointPort {
            name: "http".into(),
            protocol: "TCP".into(),
            port: 8080,
        }],
    }
}

/// The endpoints of other nodes: `GROUPS` workloads (node `sim-<g>`,
/// namespace `ns-<g % 100>`) of `PER_GROUP` pods sharing one label set.
fn remote(s: &mut State) {
    for g in 0..GROUPS {
        let node = format!("sim-{g}");
        for j in 0..PER_GROUP {
            let pod = format!("p{g}-{j}");
            let key = format!("ns-{}/{pod}.eth0", g % 100);
            let addr = 0x0a00_0000 + (g as u32) * 64 + 1 + j as u32;
            let iface = format!("tar{g:07x}{j:04x}");
            tartan_felix_scale::insert(s, &key, spec(&node, &pod, iface, addr), labels(g));
        }
    }
}

fn local(s: &mut State) {
    for i in 0..LOCAL {
        let pod = format!("local-{i}");
        let key = format!("ns-{}/{pod}.eth0", i % 100);
        let addr = 0x0b00_0000 + 1 + i as u32;
        tartan_felix_scale::insert(
            s,
            &key,
            spec(NODE, &pod, format!("tarl{i:07x}"), addr),
            labels(i),
        );
    }
}

fn policies(s: &mut State) {
    for i in 0..POLICIES {
        let port = if i % 4 == 0 {
            serde_json::json!({"port": "http", "protocol": "TCP"})
        } else {
            serde_json::json!({"port": 8080, "protocol": "TCP"})
        };
        let p: k8s_openapi::api::networking::v1::NetworkPolicy =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("p{i}"), "namespace": format!("ns-{}", i % 100)},
                "spec": {"podSelector": {"matchLabels": {"app": format!("app-{}", i % LOCAL)}},
                         "policyTypes": ["Ingress", "Egress"],
                         "ingress": [{"from": [{"podSelector": {"matchLabels": {"tier": format!("t-{}", i % 7)}}}],
                                      "ports": [port]}],
                         "egress": [{"to": [{"podSelector": {"matchLabels": {"team": format!("team-{}", i % 13)}}}]}]}
            }))
            .expect("a policy");
        let ir = tartan_policy::ir::from_kubernetes(
            &tartan_policy::k8s::from_network_policy(&p).expect("converts"),
        );
        s.kube_policies
            .insert(format!("ns-{}/p{i}", i % 100), Ok(ir));
    }
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn timed(what: &str, runs: usize, mut f: impl FnMut()) {
    let t = Instant::now();
    for _ in 0..runs {
        f();
    }
    println!(
        "{what}: {:.1} ms per pass",
        t.elapsed().as_secs_f64() * 1e3 / runs as f64
    );
}

/// A Node as a kubelet posts it at a heartbeat.
fn kubelet_node(beat: usize) -> tartan_api::store::DynamicObject {
    let conditions: Vec<_> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| serde_json::json!({
            "type": t, "status": "False", "reason": "KubeletHasSufficient", "message": "kubelet is posting ready status",
            "lastHeartbeatTime": format!("2026-01-01T00:00:{:02}Z", beat % 60), "lastTransitionTime": "2026-01-01T00:00:00Z"}))
        .collect();
    let images: Vec<_> = (0..20)
        .map(|i| serde_json::json!({"names": [format!("registry.example/img-{i}@sha256:{:064x}", i), format!("registry.example/img-{i}:v1")], "sizeBytes": 1_000_000 + i}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "sim-1", "resourceVersion": beat.to_string(),
                     "labels": {"kubernetes.io/hostname": "sim-1", "kubernetes.io/os": "linux"},
                     "annotations": {"tartan.dev/bgp-ipv4-address": "192.168.1.2/24",
                                     "tartan.dev/vxlan-tunnel-mac": "02:00:00:00:00:01"}},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}, {"type": "Hostname", "address": "sim-1"}],
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1", "osImage": "Linux",
                         "containerRuntimeVersion": "containerd://1.7", "kubeletVersion": "v1.35.0", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "images": images
        }
    }))
    .expect("a Node")
}

/// What reading one heartbeat costs once the watch has parsed it: the
/// whole Node typed (as felix did), or its annotations taken from the
/// metadata (as it does); each with dropping the event.
fn heartbeats() {
    use k8s_openapi::api::core::v1::Node;
    use tartan_felix::calc::state::NodeInfo;
    let events: Vec<_> = (0..2_000).map(kubelet_node).collect();
    let batch = events.clone();
    let t = Instant::now();
    for o in batch {
        let n = tartan_api::store::typed::from_dynamic::<Node>(o).expect("a Node");
        std::hint::black_box(NodeInfo::from_node(&n));
    }
    let typed = t.elapsed().as_secs_f64() / events.len() as f64;
    let batch = events.clone();
    let t = Instant::now();
    for o in batch {
        std::hint::black_box(NodeInfo::from_annotations(o.metadata.annotations.as_ref()));
    }
    let cheap = t.elapsed().as_secs_f64() / events.len() as f64;
    println!(
        "a Node heartbeat read: typed {:.1} µs, annotations only {:.1} µs",
        typed * 1e6,
        cheap * 1e6
    );
}

fn main() {
    heartbeats();
    let before = live();
    let mut s = tartan_felix_scale::new_state(NODE);
    remote(&mut s);
    let bytes = live() - before;
    println!(
        "state with {} remote endpoints: {:.1} MiB ({} bytes per endpoint)",
        GROUPS * PER_GROUP,
        bytes as f64 / (1 << 20) as f64,
        bytes / (GROUPS * PER_GROUP) as isize
    );
    let mut calc = tartan_felix_scale::Calc::default();
    let runs = [
        ("first", 1, true),
        ("after a change", 5, true),
        ("periodic check", 5, false),
    ];
    for (what, n, changed) in runs {
        timed(
            &format!("pass, 150,000 remote endpoints, 0 policies, {what}"),
            n,
            || calc.pass(NODE, &s, changed),
        );
    }
    local(&mut s);
    policies(&mut s);
    let mut calc = tartan_felix_scale::Calc::default();
    for (what, n, changed) in runs {
        timed(
            &format!("pass, + 500 local endpoints, 2,000 policies, {what}"),
            n,
            || calc.pass(NODE, &s, changed),
        );
    }
}

/// The calculation as felix's loop drives it.
mod tartan_felix_scale {
    use super::*;
    use tartan_felix::calc::desired;

    pub fn new_state(node: &str) -> State {
        State::for_node(node)
    }

    pub fn insert(s: &mut State, key: &str, w: WorkloadEndpointSpec, l: Labels) {
        s.endpoints.set(key, Some((w, l)));
    }

    #[derive(Default)]
    pub struct Calc(desired::Calc);

    impl Calc {
        /// A pass after a watch event changed the state (`changed`), or a
        /// periodic check.
        pub fn pass(&mut self, node: &str, s: &State, changed: bool) {
            std::hint::black_box(self.0.desired(node, s, changed, true, true));
        }
    }
}
