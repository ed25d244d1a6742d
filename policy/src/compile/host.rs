//! Host endpoints: this node's own interfaces under GlobalNetworkPolicy,
//! as Calico's HostEndpoints. Pure.
//!
//! Traffic into the host's own network stack through a host endpoint's
//! interface (hook `input`) is the endpoint's ingress; traffic the host
//! sends out through it (hook `output`) its egress. Forwarded traffic is
//! not governed (Calico's `applyOnForward`, refused by Tartan). For each
//! endpoint and direction a chain `hi…`/`he…` holds, in order:
//!
//! 1. IPv6 neighbour discovery (ICMPv6 133 to 136) and multicast
//!    listener discovery (130 to 132, 143): accepted, since the link does
//!    not work without them;
//! 2. VXLAN (UDP to the tunnel port) and IPIP from (to) the cluster's
//!    other nodes (set `htun4`): Tartan's own encapsulation;
//! 3. the failsafe ports (protocol and destination port): accepted;
//! 4. the GlobalNetworkPolicies that select it, in order (a profile chain
//!    `qhi…`/`qhe…`, where a Pass with no policy after it drops: a host
//!    endpoint has no profile to go on to, as in Calico), or, when none
//!    governs that direction, `drop` (Calico's default for a host
//!    endpoint).
//!
//! Before that, in the base chains: `established,related` and loopback
//! are accepted.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use nftables::expr::{Expression, MetaKey};
use nftables::stmt::Statement;

use super::rules::nfproto;
use super::stmt::*;
use super::{Element, NamedPort, SetDef, SetKind, hash};
use crate::Selector;
use crate::ir::{Policy, Source};
use crate::model::Namespaces;

/// The interface a host endpoint governs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostInterface {
    Named(String),
    /// Every interface of the host but loopback and Tartan's own (`tar…`:
    /// pods' veths and the tunnel devices), unless a named host endpoint
    /// has it.
    All,
}

/// One of this node's host endpoints, its interface found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEndpoint {
    /// `name` of the object, or `unreadable:NAME` for one felix cannot
    /// read (see [`HostEndpoint::locked`]).
    pub name: String,
    pub labels: Arc<BTreeMap<String, String>>,
    pub ports: Arc<[NamedPort]>,
    pub interface: HostInterface,
    /// Governed with nothing allowed but the failsafe ports (and what
    /// the base chains accept), whatever the policies say: it stands for
    /// an endpoint that cannot be read.
    pub locked: bool,
}

/// A port accepted ahead of policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FailsafePort {
    /// IP protocol number: 6, 17 or 132.
    pub protocol: u8,
    pub port: u16,
}

/// Everything host endpoints need besides the policies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts {
    /// This node's host endpoints.
    pub endpoints: Vec<HostEndpoint>,
    /// Destination ports accepted into the host (ahead of policy).
    pub failsafe_in: Vec<FailsafePort>,
    /// Destination ports accepted out of the host (ahead of policy).
    pub failsafe_out: Vec<FailsafePort>,
    /// The other nodes' underlay addresses, whose VXLAN and IPIP packets
    /// are let in (and to which ours go out).
    pub tunnel_peers: BTreeSet<IpAddr>,
    /// The VXLAN UDP port.
    pub vxlan_port: u16,
}

/// The set of the tunnel peers' IPv4 addresses.
pub const TUNNEL_PEERS_SET: &str = "htun4";

/// Whether policy `p` applies to a host endpoint labelled `labels`: only
/// a GlobalNetworkPolicy (or what stands for an unreadable one) without a
/// `namespaceSelector` (an explicit one, even `all()`, narrows it to pods,
/// as in Calico: see `from_global_network_policy`), whose `selector`
/// matches.
pub fn selects_host(p: &Policy, labels: &BTreeMap<String, String>) -> bool {
    let global = match &p.source {
        Source::Global(_) => true,
        Source::Unreadable(what, _) => what == "GlobalNetworkPolicy",
        Source::Kubernetes(..) | Source::Namespaced(..) => false,
    };
    global
        && p.applies_to.namespaces == Namespaces::Selected(Selector::All)
        && p.applies_to.pods.matches(labels)
}

/// Which endpoint governs each interface: a named interface by the
/// first readable endpoint naming it (by name); every other interface
/// by the first locked endpoint, else by the first `*` one.
pub(super) fn governing(hosts: &Hosts) -> (BTreeMap<&str, &HostEndpoint>, Option<&HostEndpoint>) {
    let mut sorted: Vec<&HostEndpoint> = hosts.endpoints.iter().collect();
    sorted.sort_by(|a, b| (!a.locked, &a.name).cmp(&(!b.locked, &b.name)));
    let mut named = BTreeMap::new();
    let mut all = None;
    for e in sorted {
        match &e.interface {
            // Pods' interfaces and Tartan's devices are never host
            // endpoints: traffic between a node and its pods is not
            // governed.
            HostInterface::Named(n) if n.starts_with(super::render::INTERFACE_PREFIX) => {}
            HostInterface::Named(n) => {
                named.entry(n.as_str()).or_insert(e);
            }
            HostInterface::All => {
                all.get_or_insert(e);
            }
        }
    }
    (named, all)
}

/// The statements accepting what a governed host interface always lets
/// through in a direction, before failsafe and policy.
fn always(ingress: bool, with_peers: bool, vxlan_port: u16) -> Vec<Stmts> {
    // IPv6 neighbour discovery (133-136) and multicast listener
    // discovery (130-132, and MLDv2 reports, 143).
    let icmpv6 = |types: Expression<'static>| {
        vec![
            nfproto(true),
            matches(meta(MetaKey::L4proto), Expression::Number(58), true),
            matches(payload("icmpv6", "type"), types, true),
            accept(),
        ]
    };
    let mut out = vec![
        icmpv6(port_range(133, 136)),
        icmpv6(port_range(130, 132)),
        icmpv6(Expression::Number(143)),
    ];
    if with_peers {
        let peer = matches(
            payload("ip", if ingress { "saddr" } else { "daddr" }),
            s(format!("@{TUNNEL_PEERS_SET}")),
            true,
        );
        out.push(vec![
            nfproto(false),
            peer.clone(),
            matches(meta(MetaKey::L4proto), Expression::Number(17), true),
            matches(
                payload("th", "dport"),
                Expression::Number(u32::from(vxlan_port)),
                true,
            ),
            accept(),
        ]);
        out.push(vec![
            nfproto(false),
            peer,
            matches(meta(MetaKey::L4proto), Expression::Number(4), true),
            accept(),
        ]);
    }
    out
}

fn failsafe(ports: &[FailsafePort]) -> Vec<Stmts> {
    let set: BTreeSet<FailsafePort> = ports.iter().copied().collect();
    set.into_iter()
        .map(|f| {
            vec![
                matches(
                    meta(MetaKey::L4proto),
                    Expression::Number(u32::from(f.protocol)),
                    true,
                ),
                matches(
                    payload("th", "dport"),
                    Expression::Number(u32::from(f.port)),
                    true,
                ),
                accept(),
            ]
        })
        .collect()
}

/// The chain of one host endpoint in one direction, ending in `tail`
/// (`goto` its profile, or `drop`), named after what it holds.
pub(super) fn endpoint_chain(
    hosts: &Hosts,
    ingress: bool,
    tail: Statement<'static>,
) -> (String, Vec<Stmts>) {
    let mut rules = always(ingress, !hosts.tunnel_peers.is_empty(), hosts.vxlan_port);
    rules.extend(failsafe(if ingress {
        &hosts.failsafe_in
    } else {
        &hosts.failsafe_out
    }));
    rules.push(vec![tail]);
    let name = format!(
        "h{}{}",
        if ingress { "i" } else { "e" },
        hash(&format!("{rules:?}"))
    );
    (name, rules)
}

/// The set of the tunnel peers' IPv4 addresses.
pub(super) fn peers_set(hosts: &Hosts) -> SetDef {
    SetDef {
        kind: SetKind::Addr {
            v6: false,
            ranges: false,
        },
        elements: hosts
            .tunnel_peers
            .iter()
            .filter(|a| a.is_ipv4())
            .map(|a| Element::Range(*a, *a))
            .collect(),
    }
}
