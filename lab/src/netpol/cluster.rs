//! The netpol cluster: three nodes (etcd, tartan-bgpd and tartan-felix on
//! each), namespaces x, y and z, pods a, b and c in each with servers on
//! ports 80 and 81, and probing of the whole grid until it matches.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::{Value, json};
use tartan_api::store::typed::TypedStore;

use super::grid::Reachability;
use super::probe::{Protocol, probe_all, sctp_support};
use super::servers::Servers;
use super::{NAMESPACES, POD_NAMES, PORTS};
use crate::cni::Call;
use crate::cnilab::CniLab;
use crate::netns::Netns;
use crate::process::Daemon;
use crate::tempdir::TempDir;

/// The pool the pods' addresses come from.
pub const POOL_CIDR: &str = "10.90.0.0/16";

/// How long `expect` waits for felix to make the grid match; override with
/// `TARTAN_NETPOL_TIMEOUT` (seconds).
pub fn enforce_timeout() -> Duration {
    std::env::var("TARTAN_NETPOL_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(15))
}

/// One pod of the cluster.
#[derive(Debug)]
pub struct NetpolPod {
    pub namespace: String,
    pub name: String,
    /// Index of the node it runs on (0 is `node-1`).
    pub node: usize,
    pub ip: Ipv4Addr,
    /// The labels it was created with (`pod: <name>`).
    pub labels: BTreeMap<String, String>,
    netns: Netns,
    call: Call,
}

impl NetpolPod {
    /// `namespace/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The name of its network namespace.
    pub fn netns(&self) -> &str {
        self.netns.name()
    }

    /// The CNI call that wired it.
    pub fn call(&self) -> &Call {
        &self.call
    }
}

/// The cluster and its pods; dropping it stops the servers, removes the
/// pods' namespaces, stops the daemons and takes the lab down, in that
/// order (fields drop in declaration order).
pub struct NetpolCluster {
    servers: Vec<Servers>,
    pods: Vec<NetpolPod>,
    daemons: Vec<(Daemon, Daemon)>,
    _sockets: TempDir,
    sctp: std::result::Result<(), String>,
    pub lab: CniLab,
}

/// The containers of every pod: one per port and protocol, with the port
/// named as upstream names them (`serve-80-tcp`).
pub fn pod_containers() -> Value {
    let mut containers = vec![];
    for port in PORTS {
        for proto in [Protocol::Tcp, Protocol::Udp, Protocol::Sctp] {
            containers.push(json!({
                "name": format!("cont-{port}-{}", proto.lower()),
                "image": "none",
                "ports": [{
                    "name": format!("serve-{port}-{}", proto.lower()),
                    "containerPort": port,
                    "protocol": proto.k8s_name(),
                }],
            }));
        }
    }
    Value::Array(containers)
}

/// The service account pod `name` runs as, in any namespace: `sa-<name>`
/// (the ServiceAccounts themselves exist only where a case writes them).
pub fn service_account_of(name: &str) -> String {
    format!("sa-{name}")
}

impl NetpolCluster {
    /// Brings the cluster up and waits until every pod reaches every other
    /// over TCP and UDP on port 80 (routes learned, servers listening).
    pub fn start() -> Result<Self> {
        let t0 = Instant::now();
        let lab = CniLab::new(3)?;
        lab.add_pool("netpol", POOL_CIDR, None)?;
        for i in 0..3 {
            lab.add_node_object(i)?;
        }
        let sockets = TempDir::new("netpol")?;
        let mut daemons = vec![];
        for i in 0..3 {
            daemons.push(lab.start_node_daemons(i, &sockets)?);
        }
        let sctp = sctp_support();
        let mut c = NetpolCluster {
            servers: vec![],
            pods: vec![],
            daemons,
            _sockets: sockets,
            sctp,
            lab,
        };
        for ns in NAMESPACES {
            let namespace: Namespace = serde_json::from_value(json!({
                "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}
            }))?;
            c.block_on(c.lab.store.create_typed(&namespace))
                .with_context(|| format!("create Namespace {ns}"))?;
        }
        for (ni, ns) in NAMESPACES.iter().enumerate() {
            for (pi, name) in POD_NAMES.iter().enumerate() {
                let node = (ni + pi) % 3;
                let pod = c.add_pod(ns, name, node)?;
                c.pods.push(pod);
            }
        }
        let mut protos = vec![Protocol::Tcp, Protocol::Udp];
        if c.sctp.is_ok() {
            protos.push(Protocol::Sctp);
        }
        for p in &c.pods {
            let s = Servers::start(p.netns(), &PORTS, &protos)?;
            c.servers.push(s);
        }
        let all = Reachability::all(true);
        c.probe_until(80, Protocol::Tcp, &all, Duration::from_secs(60))
            .context("the cluster did not come up")?;
        c.probe_until(80, Protocol::Udp, &all, Duration::from_secs(10))
            .context("the cluster did not come up")?;
        eprintln!("netpol cluster up in {:?}", t0.elapsed());
        Ok(c)
    }

    fn add_pod(&self, ns: &str, name: &str, node: usize) -> Result<NetpolPod> {
        let labels: BTreeMap<String, String> = [("pod".to_string(), name.to_string())].into();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "nodeName": CniLab::node_name(node),
                "containers": pod_containers(),
                "serviceAccountName": service_account_of(name),
            },
        }))?;
        self.block_on(self.lab.store.create_typed(&pod))
            .with_context(|| format!("create Pod {ns}/{name}"))?;
        let (netns, call) = self.lab.pod(ns, name)?;
        let r = self
            .lab
            .plain(node)
            .add(&call)
            .with_context(|| format!("CNI ADD of {ns}/{name}"))?;
        let ip = r["ips"][0]["address"]
            .as_str()
            .and_then(|a| a.split('/').next())
            .and_then(|a| a.parse().ok())
            .with_context(|| format!("no IPv4 address in the result for {ns}/{name}: {r}"))?;
        Ok(NetpolPod {
            namespace: ns.to_string(),
            name: name.to_string(),
            node,
            ip,
            labels,
            netns,
            call,
        })
    }

    /// Runs a future on the lab's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.lab.rt.block_on(f)
    }

    pub fn pods(&self) -> &[NetpolPod] {
        &self.pods
    }

    /// The pod `ns/name`.
    pub fn pod(&self, id: &str) -> Option<&NetpolPod> {
        self.pods.iter().find(|p| p.id() == id)
    }

    /// The address of pod `ns/name`.
    pub fn ip(&self, id: &str) -> Result<Ipv4Addr> {
        self.pod(id)
            .map(|p| p.ip)
            .with_context(|| format!("no pod {id} in the netpol cluster"))
    }

    /// Whether SCTP can be probed here; why not when it cannot.
    pub fn sctp(&self) -> std::result::Result<(), &str> {
        self.sctp.as_ref().map(|_| ()).map_err(String::as_str)
    }

    /// The felix daemons' logs, the last `lines` lines of each.
    pub fn felix_logs(&self, lines: usize) -> String {
        let mut s = String::new();
        for (i, (_, felix)) in self.daemons.iter().enumerate() {
            s += &format!(
                "---- felix on node-{} (last {lines} lines) ----\n{}\n",
                i + 1,
                strip_ansi(&felix.log_tail(lines))
            );
        }
        s
    }

    /// The daemons of node `i`: (tartan-bgpd, tartan-felix).
    pub fn daemons(&self, i: usize) -> Option<&(Daemon, Daemon)> {
        self.daemons.get(i)
    }

    /// One probe of every pair at once. A fault of the harness (no
    /// socket, no namespace) is an error, not a blocked cell.
    pub fn probe_grid(&self, port: u16, proto: Protocol) -> Result<Reachability> {
        let pairs: Vec<(String, Ipv4Addr)> = self
            .pods
            .iter()
            .flat_map(|from| self.pods.iter().map(|to| (from.netns().to_string(), to.ip)))
            .collect();
        let ids: Vec<String> = self.pods.iter().map(NetpolPod::id).collect();
        let mut grid = Reachability::new(&ids, false);
        let n = self.pods.len();
        for (k, r) in probe_all(&pairs, port, proto).into_iter().enumerate() {
            let ok = r.with_context(|| {
                format!("probe {} -> {} {proto}/{port}", ids[k / n], ids[k % n])
            })?;
            grid.set_index(k / n, k % n, ok);
        }
        Ok(grid)
    }

    /// Probes until the observed grid equals `expected` (every pod
    /// reaching itself added to it, see [`Reachability::allow_loopback`])
    /// or `timeout` passes; then fails with both grids, the differences
    /// and the end of each felix log. SCTP on a kernel without it is
    /// skipped with the reason printed.
    pub fn probe_until(
        &self,
        port: u16,
        proto: Protocol,
        expected: &Reachability,
        timeout: Duration,
    ) -> Result<()> {
        if let (Protocol::Sctp, Err(why)) = (proto, &self.sctp) {
            // Written to stderr directly: the test harness hides eprintln!
            // of passing tests, and this skip should show in CI's output.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "netpol: skipping the SCTP/{port} probes: {why}"
            );
            return Ok(());
        }
        if !expected.unknown().is_empty() {
            bail!(
                "the expectation names pods or namespaces the cluster does not have: {:?}",
                expected.unknown()
            );
        }
        let mut want = expected.clone();
        want.allow_loopback();
        let start = Instant::now();
        let mut rounds = 0;
        loop {
            let seen = self.probe_grid(port, proto)?;
            rounds += 1;
            if seen == want {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                bail!(
                    "{}\n{}",
                    Reachability::report(
                        &want,
                        &seen,
                        &format!(
                            "{proto}/{port} not as expected after {:?} ({rounds} rounds)",
                            start.elapsed()
                        )
                    ),
                    self.felix_logs(15)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// [`probe_until`](Self::probe_until) with [`enforce_timeout`].
    pub fn expect(&self, port: u16, proto: Protocol, expected: &Reachability) -> Result<()> {
        self.probe_until(port, proto, expected, enforce_timeout())
    }

    /// Back to the start between cases: every policy deleted, every label
    /// as created, and the grid all reachable again (TCP 80 and 81, UDP
    /// 80 and 81), so that one case cannot leak into the next.
    pub fn reset(&self) -> Result<()> {
        self.delete_all_policies()?;
        self.restore_labels()?;
        let all = Reachability::all(true);
        for (port, proto) in [
            (80, Protocol::Tcp),
            (81, Protocol::Tcp),
            (80, Protocol::Udp),
            (81, Protocol::Udp),
        ] {
            self.expect(port, proto, &all)
                .context("the grid did not return to all reachable after the reset")?;
        }
        Ok(())
    }
}

/// `text` without ANSI escape sequences (the daemons colour their logs).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            // CSI: ESC [ parameters… final byte in @..~
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn strips_colours() {
        assert_eq!(
            super::strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m x"),
            "2026  INFO x"
        );
    }
}
