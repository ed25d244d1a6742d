//! Kubernetes NetworkPolicy truth tables, the upstream netpol e2e cases on
//! one lab cluster (namespaces x, y, z; pods a, b, c in each; servers on
//! 80 and 81 over TCP and UDP): the grid with no policy first, then each
//! case's policies and the grid upstream expects, one after another with
//! the cluster reset in between. Every pod reaches itself (its own
//! loopback; see `tartan_lab::netpol`), so the grids never say otherwise.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;
use tartan_lab::netpol::probe::probe;
use tartan_lab::netpol::{
    Case, NAMESPACE_NAME_LABEL, NetpolCluster, POOL_CIDR, Protocol, Reachability, Servers,
    enforce_timeout,
};
use tartan_tests::netpol::{all, apply_k8s, expect_on, grid};

use Protocol::{Sctp, Tcp, Udp};

/// `{"matchLabels": {"kubernetes.io/metadata.name": ns}}`.
fn ns_is(ns: &str) -> serde_json::Value {
    json!({"matchLabels": {NAMESPACE_NAME_LABEL: ns}})
}

/// A namespaceSelector for every namespace but `ns`.
fn ns_not(ns: &str) -> serde_json::Value {
    json!({"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": [ns]}]})
}

fn pod_is(name: &str) -> serde_json::Value {
    json!({"matchLabels": {"pod": name}})
}

/// The Kubernetes NetworkPolicy `x/name` with `spec`, applied.
fn apply_in_x(c: &NetpolCluster, name: &str, spec: serde_json::Value) -> Result<()> {
    apply_k8s(c, "x", name, spec)
}

/// Egress from x/a only to the pool without y/b's address.
fn pool_except_y_b(c: &NetpolCluster) -> Result<()> {
    let yb = c.ip("y/b")?;
    apply_in_x(
        c,
        "x-a-pool-except-y-b",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"],
               "egress": [{"to": [{"ipBlock": {"cidr": POOL_CIDR, "except": [format!("{yb}/32")]}}]}]}),
    )
}

/// Egress from x/a only to y/b's address (an ipBlock of its /32).
fn to_y_b_cidr(c: &NetpolCluster) -> Result<()> {
    let yb = c.ip("y/b")?;
    apply_in_x(
        c,
        "x-a-to-y-b-cidr",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"],
               "egress": [{"to": [{"ipBlock": {"cidr": format!("{yb}/32")}}]}]}),
    )
}

/// No pod of x reachable (the grid every deny of ingress to x expects).
fn x_closed() -> Reachability {
    grid(|w| w.expect_to_namespace("x", false))
}

/// The policy `x/name` selecting every pod of x for ingress and allowing
/// none.
fn deny_ingress_to_x(c: &NetpolCluster, name: &str) -> Result<()> {
    apply_in_x(
        c,
        name,
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    )
}

fn default_deny_ingress(c: &NetpolCluster) -> Result<()> {
    deny_ingress_to_x(c, "deny-ingress")?;
    expect_on(c, &[(80, Tcp), (81, Udp)], &x_closed())
}

fn default_deny_all(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "deny-all",
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    )?;
    let want = grid(|w| {
        w.expect_to_namespace("x", false)
            .expect_from_namespace("x", false)
    });
    expect_on(c, &[(80, Tcp), (80, Udp)], &want)
}

/// Only x/b reaches x/a.
fn pod_selector_within_namespace(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-a-from-x-b",
        json!({"podSelector": pod_is("a"), "ingress": [{"from": [{"podSelector": pod_is("b")}]}]}),
    )?;
    c.expect(
        80,
        Tcp,
        &grid(|w| w.expect_to("x/a", false).expect("x/b", "x/a", true)),
    )
}

/// Every pod of x accepts only namespace y.
fn namespace_selector_other_namespace(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-from-y",
        json!({"podSelector": {}, "ingress": [{"from": [{"namespaceSelector": ns_is("y")}]}]}),
    )?;
    let want = grid(|w| {
        w.expect_namespaces("x", "x", false)
            .expect_namespaces("z", "x", false)
    });
    c.expect(80, Tcp, &want)
}

/// Two peers (OR): other namespaces, or pod b of x.
fn pod_or_namespace_selector(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-a-ns-or-pod",
        json!({"podSelector": pod_is("a"), "ingress": [{"from": [
            {"namespaceSelector": ns_not("x")},
            {"podSelector": pod_is("b")},
        ]}]}),
    )?;
    c.expect(80, Tcp, &grid(|w| w.expect("x/c", "x/a", false)))
}

/// One peer with both (AND): pod b of another namespace.
fn pod_and_namespace_selector(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-a-ns-and-pod",
        json!({"podSelector": pod_is("a"), "ingress": [{"from": [
            {"namespaceSelector": ns_not("x"), "podSelector": pod_is("b")},
        ]}]}),
    )?;
    let want = grid(|w| {
        w.expect_to("x/a", false)
            .expect("y/b", "x/a", true)
            .expect("z/b", "x/a", true)
    });
    c.expect(80, Tcp, &want)
}

/// x/a accepts namespace y on port 81 only.
fn by_ports(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-a-from-y-on-81",
        json!({"podSelector": pod_is("a"), "ingress": [{
            "from": [{"namespaceSelector": ns_is("y")}],
            "ports": [{"port": 81, "protocol": "TCP"}],
        }]}),
    )?;
    let on81 = grid(|w| {
        w.expect_to("x/a", false)
            .expect_namespace_to("y", "x/a", true)
    });
    c.expect(81, Tcp, &on81)?;
    c.expect(80, Tcp, &grid(|w| w.expect_to("x/a", false)))
}

/// A second policy selecting the same pod adds port 80: policies add up.
fn stacked_policies(c: &NetpolCluster) -> Result<()> {
    let from_y_on = |port: u16| {
        json!({"podSelector": pod_is("a"), "ingress": [{
            "from": [{"namespaceSelector": ns_is("y")}],
            "ports": [{"port": port, "protocol": "TCP"}],
        }]})
    };
    apply_in_x(c, "x-a-from-y-on-81", from_y_on(81))?;
    let y_only = grid(|w| {
        w.expect_to("x/a", false)
            .expect_namespace_to("y", "x/a", true)
    });
    let none = grid(|w| w.expect_to("x/a", false));
    c.expect(81, Tcp, &y_only)?;
    c.expect(80, Tcp, &none)?;
    apply_in_x(c, "x-a-from-y-on-80", from_y_on(80))?;
    c.expect(81, Tcp, &y_only)?;
    c.expect(80, Tcp, &y_only)
}

/// Ingress to x on the named port serve-80-tcp only: TCP 80 open, TCP 81
/// and UDP 80 (the name is TCP's) closed.
fn ingress_named_port(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-serve-80-tcp",
        json!({"podSelector": {}, "ingress": [{"ports": [{"port": "serve-80-tcp"}]}]}),
    )?;
    c.expect(80, Tcp, &all())?;
    expect_on(c, &[(81, Tcp), (80, Udp)], &x_closed())
}

/// Egress from x on the named port serve-80-tcp only (resolved at each
/// destination pod).
fn egress_named_port(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-out-serve-80-tcp",
        json!({"podSelector": {}, "policyTypes": ["Egress"],
               "egress": [{"ports": [{"port": "serve-80-tcp"}]}]}),
    )?;
    c.expect(80, Tcp, &all())?;
    c.expect(81, Tcp, &grid(|w| w.expect_from_namespace("x", false)))
}

/// A policy updated in place: allow-all ingress becomes deny-all.
fn updated_policy(c: &NetpolCluster) -> Result<()> {
    apply_in_x(c, "mutate", json!({"podSelector": {}, "ingress": [{}]}))?;
    c.expect(81, Tcp, &all())?;
    deny_ingress_to_x(c, "mutate")?;
    c.expect(81, Tcp, &x_closed())
}

/// x/a accepts namespaces labelled ns2=updated; y gets the label.
fn ingress_from_updated_namespace(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-a-from-updated-ns",
        json!({"podSelector": pod_is("a"), "ingress": [{"from": [
            {"namespaceSelector": {"matchLabels": {"ns2": "updated"}}},
        ]}]}),
    )?;
    let closed = grid(|w| w.expect_to("x/a", false));
    c.expect(80, Tcp, &closed)?;
    c.label_namespace("y", &[("ns2", Some("updated"))])?;
    let mut open_y = closed.clone();
    open_y.expect_namespace_to("y", "x/a", true);
    c.expect(80, Tcp, &open_y)
}

/// A deny-ingress policy for pods labelled target=isolated; x/a gets the
/// label.
fn ingress_denied_to_updated_pod(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "isolate-target",
        json!({"podSelector": {"matchLabels": {"target": "isolated"}},
               "policyTypes": ["Ingress"]}),
    )?;
    c.expect(80, Tcp, &all())?;
    c.label_pod("x/a", &[("target", Some("isolated"))])?;
    c.expect(80, Tcp, &grid(|w| w.expect_to("x/a", false)))
}

/// y accepts only x/a, and x/a may send nothing: the client side's
/// egress policy blocks what the server side allows.
fn egress_denied_client_side(c: &NetpolCluster) -> Result<()> {
    apply_in_x(
        c,
        "x-a-no-egress",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"]}),
    )?;
    apply_k8s(
        c,
        "y",
        "y-from-x-a",
        json!({"podSelector": {}, "ingress": [{"from": [
            {"namespaceSelector": ns_is("x"), "podSelector": pod_is("a")},
        ]}]}),
    )?;
    let want = grid(|w| w.expect_from("x/a", false).expect_to_namespace("y", false));
    expect_on(c, &[(80, Tcp), (80, Udp)], &want)
}

/// x/a may send only to y/b's address (an ipBlock of its /32).
fn egress_to_cidr(c: &NetpolCluster) -> Result<()> {
    to_y_b_cidr(c)?;
    c.expect(
        80,
        Tcp,
        &grid(|w| w.expect_from("x/a", false).expect("x/a", "y/b", true)),
    )
}

/// x/a may send to the whole pool except y/b's address.
fn egress_cidr_except(c: &NetpolCluster) -> Result<()> {
    pool_except_y_b(c)?;
    c.expect(80, Tcp, &grid(|w| w.expect("x/a", "y/b", false)))
}

/// y/b's address is in one policy's except and in another's cidr: the
/// policies add up, so x/a reaches y/b again.
fn cidr_and_except_overlap(c: &NetpolCluster) -> Result<()> {
    egress_cidr_except(c)?;
    to_y_b_cidr(c)?;
    c.expect(80, Tcp, &all())
}

/// A policy `name` allowing only `allowed` on `port` into x/a: `other` on
/// that port is not let in, `allowed` is.
fn only_protocol_into_x_a(
    c: &NetpolCluster,
    name: &str,
    port: u16,
    allowed: Protocol,
    other: Protocol,
) -> Result<()> {
    let only = json!({"port": port, "protocol": allowed.k8s_name()});
    apply_in_x(
        c,
        name,
        json!({"podSelector": pod_is("a"), "ingress": [{"ports": [only]}]}),
    )?;
    c.expect(port, other, &grid(|w| w.expect_to("x/a", false)))?;
    c.expect(port, allowed, &all())
}

/// A policy allowing only SCTP 80 into x/a: TCP 80 is not let in. (SCTP
/// is skipped, with the reason printed, where the kernel has no SCTP.)
fn sctp_is_not_tcp(c: &NetpolCluster) -> Result<()> {
    only_protocol_into_x_a(c, "x-a-sctp-80", 80, Sctp, Tcp)
}

/// A policy allowing only UDP 81 into x/a: TCP 81 is not let in.
fn tcp_not_allowed_by_udp(c: &NetpolCluster) -> Result<()> {
    only_protocol_into_x_a(c, "x-a-udp-81", 81, Udp, Tcp)
}

/// A deny-ingress policy enforced, then deleted: back to all reachable.
fn stops_after_deletion(c: &NetpolCluster) -> Result<()> {
    deny_ingress_to_x(c, "deny-ingress")?;
    c.expect(80, Tcp, &x_closed())?;
    c.delete_k8s_policy("x", "deny-ingress")?;
    c.expect(80, Tcp, &all())
}

/// A port the nodes' own servers listen on in the case below.
const NODE_PORT: u16 = 9180;

/// Probes from `netns` to `to` until every protocol's outcome is `want`,
/// for at most [`enforce_timeout`].
fn reach_until(netns: &str, to: Ipv4Addr, want: bool, what: &str) -> Result<()> {
    let start = Instant::now();
    loop {
        let seen: Vec<bool> = [Tcp, Udp]
            .iter()
            .map(|&p| probe(netns, to, NODE_PORT, p))
            .collect::<Result<_>>()?;
        if seen.iter().all(|&s| s == want) {
            return Ok(());
        }
        if start.elapsed() > enforce_timeout() {
            bail!("{what}: TCP and UDP to {to}:{NODE_PORT} reachable {seen:?}, want {want}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Traffic to and from the node where a pod runs is always allowed,
/// whatever the pod's policies say (the Kubernetes definition of
/// NetworkPolicy): x/a, isolated both ways with no rule, still reaches a
/// server on its node's address and the node still reaches x/a, while
/// x/a and every other pod no longer reach each other.
fn pod_and_own_node(c: &NetpolCluster) -> Result<()> {
    let xa = c.pod("x/a").context("no x/a")?;
    let node = c.lab.underlay.node(xa.node);
    let _servers = Servers::start(node.netns.name(), &[NODE_PORT], &[Tcp, Udp])?;
    reach_until(xa.netns(), node.address, true, "x/a to its node, no policy")?;
    apply_in_x(
        c,
        "isolate-a",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress", "Egress"]}),
    )?;
    c.expect(
        80,
        Tcp,
        &grid(|w| w.expect_from("x/a", false).expect_to("x/a", false)),
    )?;
    reach_until(xa.netns(), node.address, true, "x/a isolated to its node")?;
    for proto in [Tcp, Udp] {
        if !probe(node.netns.name(), xa.ip, 80, proto)? {
            bail!("the node no longer reaches its isolated pod x/a on {proto} 80");
        }
    }
    Ok(())
}

const CASES: &[Case] = &[
    ("default-deny-ingress", default_deny_ingress),
    ("default-deny-all", default_deny_all),
    (
        "allow from pods in the server namespace by podSelector",
        pod_selector_within_namespace,
    ),
    (
        "allow only from another namespace by namespaceSelector",
        namespace_selector_other_namespace,
    ),
    (
        "podSelector or namespaceSelector",
        pod_or_namespace_selector,
    ),
    (
        "podSelector and namespaceSelector",
        pod_and_namespace_selector,
    ),
    ("by ports", by_ports),
    (
        "stacked policies with overlapping podSelectors",
        stacked_policies,
    ),
    ("ingress on one named port", ingress_named_port),
    ("egress on one named port", egress_named_port),
    ("updated policy", updated_policy),
    (
        "ingress from an updated namespace",
        ingress_from_updated_namespace,
    ),
    (
        "ingress denied to an updated pod",
        ingress_denied_to_updated_pod,
    ),
    (
        "egress denied on the client side",
        egress_denied_client_side,
    ),
    ("egress to a server in a CIDR block", egress_to_cidr),
    ("except clause of a CIDR block", egress_cidr_except),
    ("an IP in both cidr and except", cidr_and_except_overlap),
    ("SCTP is not TCP", sctp_is_not_tcp),
    (
        "TCP not allowed by a UDP-only policy",
        tcp_not_allowed_by_udp,
    ),
    (
        "policies stop enforcing after deletion",
        stops_after_deletion,
    ),
    (
        "a pod and its own node always reach each other",
        pod_and_own_node,
    ),
];

#[test]
fn kubernetes_network_policy_truth_tables() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t0 = std::time::Instant::now();
    let c = NetpolCluster::start().unwrap();
    // With no policy every pod reaches every pod on both ports over TCP
    // and UDP (SCTP where the kernel has it).
    for port in [80, 81] {
        for proto in [Tcp, Udp, Sctp] {
            c.expect(port, proto, &all())
                .unwrap_or_else(|e| panic!("baseline: {e:#}"));
        }
    }
    eprintln!("baseline done after {:?}", t0.elapsed());
    if let Err(report) = c.run_cases(CASES) {
        panic!("{report}");
    }
}
