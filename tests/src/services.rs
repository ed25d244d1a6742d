//! What the Service tests share: a lab driven through `tartan-lab`,
//! Service manifests written and applied with `ctl apply`, name servers in
//! pods, tallies of who answered.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use serde_json::Value;
use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::svcprobe::{NameServers, Outcome, Proto, ask, poll};
use tartan_lab::cluster::{LabState, state};

/// The port every server pod listens on (TCP), named `http` in its Pod.
pub const HTTP: u16 = 8080;
/// The UDP port every server pod listens on.
pub const DNS: u16 = 8053;
/// How long one request (`svcprobe::ask`) waits for its answer.
pub const ASK_WAIT: Duration = Duration::from_secs(2);

#[track_caller]
pub fn up(prefix: &str, nodes: usize) -> LabCli {
    up_on(prefix, nodes, crate::lab::Datastore::Etcd)
}

/// [`up`] on `datastore`.
#[track_caller]
pub fn up_on(prefix: &str, nodes: usize, datastore: crate::lab::Datastore) -> LabCli {
    crate::lab::lab_up_on(prefix, datastore, &["--nodes", &nodes.to_string()]).0
}

pub fn lab_state(lab: &LabCli) -> LabState {
    LabState::load(&lab.name).expect("the lab's state")
}

/// The manifest of the Service `default/NAME` (one YAML document, `---`
/// first, so that several concatenate into one file) with `spec`, a YAML
/// flow mapping: `{selector: {app: web}, ports: [{port: 80}]}`.
pub fn service_yaml(name: &str, spec: &str) -> String {
    service_document(&format!("{{name: {name}}}"), spec)
}

/// `service_yaml` with `labels` (a YAML flow mapping) on the Service.
pub fn labelled_service_yaml(name: &str, labels: &str, spec: &str) -> String {
    service_document(&format!("{{name: {name}, labels: {labels}}}"), spec)
}

fn service_document(metadata: &str, spec: &str) -> String {
    format!("---\napiVersion: v1\nkind: Service\nmetadata: {metadata}\nspec: {spec}\n")
}

/// `tartan-lab ctl apply -f` of `yaml`: exit code, stdout, stderr.
pub fn apply(lab: &LabCli, yaml: &str) -> (i32, String, String) {
    let path = state::dir(&lab.name).join(format!("test-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).unwrap();
    let r = lab.run(&["ctl", "apply", "-f", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    r
}

#[track_caller]
pub fn apply_ok(lab: &LabCli, yaml: &str) -> String {
    let (code, out, err) = apply(lab, yaml);
    assert_eq!(code, 0, "ctl apply:\n{yaml}\n{out}{err}");
    out
}

/// The stored Service `default/name`.
pub fn service(lab: &LabCli, name: &str) -> Value {
    serde_json::from_str(&lab.ok(&["ctl", "get", "service", name, "-o", "json"])).unwrap()
}

pub fn cluster_ip(lab: &LabCli, name: &str) -> Ipv4Addr {
    let s = service(lab, name);
    s["spec"]["clusterIP"]
        .as_str()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("Service {name} has no ClusterIP: {s}"))
}

/// The first ingress IP of the LoadBalancer Service `default/name`,
/// once tartan-controllers have given it one (they pass every 500 ms in
/// the lab; 20 s is a bound for a slow machine).
#[track_caller]
pub fn lb_ip(lab: &LabCli, name: &str) -> Ipv4Addr {
    let ip = |s: &serde_json::Value| {
        s["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .and_then(|a| a.parse().ok())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let s = service(lab, name);
        if let Some(a) = ip(&s) {
            return a;
        }
        if std::time::Instant::now() > deadline {
            panic!("{name} has no ingress IP: {s}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

pub fn pod_netns(lab: &LabCli, pod: &str) -> String {
    let (ns, name) = pod.split_once('/').unwrap();
    state::pod_netns(&lab.name, ns, name)
}

pub fn pod_ip(lab: &LabCli, pod: &str) -> String {
    lab.ok(&["pod", "ip", pod]).trim().to_string()
}

/// The pod's IPv6 address (`tartan-lab pod ip -6`).
pub fn pod_ip6(lab: &LabCli, pod: &str) -> String {
    lab.ok(&["pod", "ip", "-6", pod]).trim().to_string()
}

/// The stored EndpointSlices of the Service `default/service`.
pub fn slices_of(lab: &LabCli, service: &str) -> Vec<Value> {
    let v: Value =
        serde_json::from_str(&lab.ok(&["ctl", "get", "endpointslices", "-o", "json"])).unwrap();
    v["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == service)
        .collect()
}

/// `tartan-lab pod add POD --node NODE --labels LABELS --ports PORTS`.
pub fn pod_with_ports(lab: &LabCli, pod: &str, node: &str, labels: &str, ports: &str) {
    lab.ok(&[
        "pod", "add", pod, "--node", node, "--labels", labels, "--ports", ports,
    ]);
}

/// A server pod `default/NAME` on `node` with `labels`, its container
/// port 8080 named `http`, answering on TCP 8080 and UDP 8053.
pub fn server_pod(lab: &LabCli, name: &str, node: &str, labels: &str) -> NameServers {
    let p = format!("default/{name}");
    pod_with_ports(lab, &p, node, labels, "http=8080/TCP,dns=8053/UDP");
    NameServers::start(&pod_netns(lab, &p), name, &[HTTP], &[DNS]).unwrap()
}

/// A pod `POD` (`ns/name`) on `node` with no labels and no server, to
/// send requests from; its network namespace.
#[track_caller]
pub fn client_pod(lab: &LabCli, pod: &str, node: &str) -> String {
    lab.ok(&["pod", "add", pod, "--node", node]);
    pod_netns(lab, pod)
}

/// The external-traffic tests' servers: `e-1` on node-1 and `e-2` on
/// node-2 labelled `app=ext`, `l-1` on node-1 labelled `app=loc`.
pub fn ext_and_local_servers(lab: &LabCli) -> [NameServers; 3] {
    [
        server_pod(lab, "e-1", "node-1", "app=ext"),
        server_pod(lab, "e-2", "node-2", "app=ext"),
        server_pod(lab, "l-1", "node-1", "app=loc"),
    ]
}

/// How many answers each server gave; failures under `!<outcome>`.
pub fn tally(outcomes: &[Outcome]) -> BTreeMap<String, usize> {
    let mut t = BTreeMap::new();
    for o in outcomes {
        let k = match o {
            Outcome::Answer { server, .. } => server.clone(),
            other => format!("!{other:?}"),
        };
        *t.entry(k).or_insert(0) += 1;
    }
    t
}

pub fn servers_of(outcomes: &[Outcome]) -> BTreeSet<String> {
    outcomes
        .iter()
        .filter_map(|o| o.server().map(String::from))
        .collect()
}

/// Waits until a request from `netns` to `to:port` (IPv4 or IPv6) is
/// answered (felix has the Service), or panics with the nodes' tables of
/// the family.
#[track_caller]
pub fn wait_served(lab: &LabCli, netns: &str, to: impl Into<IpAddr>, port: u16, proto: Proto) {
    let to: IpAddr = to.into();
    let ok = poll(Duration::from_secs(20), || {
        matches!(
            ask(netns, to, port, proto, Duration::from_millis(500)).0,
            Outcome::Answer { .. }
        )
        .then_some(())
    });
    if ok.is_none() {
        panic!(
            "{to}:{port} {proto:?} not served from {netns} after 20 s\n{}",
            if to.is_ipv6() { dump6(lab) } else { dump(lab) }
        );
    }
}

/// Every node's service table, for failure messages.
pub fn dump(lab: &LabCli) -> String {
    tables(lab, "ip")
}

/// Every node's IPv6 service table (`ip6 tartan-svc`).
pub fn dump6(lab: &LabCli) -> String {
    tables(lab, "ip6")
}

fn tables(lab: &LabCli, family: &str) -> String {
    let st = lab_state(lab);
    st.nodes
        .iter()
        .map(|n| {
            format!(
                "---- {} ----\n{}",
                n.name,
                tartan_lab::cluster::svcprobe::svc_table_of(&st, &n.name, family)
                    .unwrap_or_else(|e| e.to_string())
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
