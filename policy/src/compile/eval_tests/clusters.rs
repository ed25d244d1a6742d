//! Generated clusters for the property test, and the changes made to
//! them between compiles.

use std::collections::BTreeMap;
use std::net::IpAddr;

use proptest::prelude::*;

use crate::compile::{Endpoint, NAMESPACE_NAME_LABEL, NamedPort, NetSet};

use super::interp::Cluster;

// ---------------------------------------------------------------------
// Generated clusters

#[derive(Debug, Clone)]
pub(super) struct EpGen {
    /// Names its addresses and interface, so they stay put while other
    /// endpoints come and go.
    id: usize,
    ns: usize,
    app: &'static str,
    tier: Option<&'static str>,
    http: Option<u16>,
    /// (protocol, port).
    dns: Option<(u8, u16)>,
    metrics: bool,
    /// An IPv6 address besides the IPv4 one.
    v6: bool,
    /// On this node (with an interface).
    local: bool,
}

#[derive(Debug, Clone)]
pub(super) struct NsGen {
    /// The `env` label.
    env: Option<&'static str>,
    /// Whether its object has been seen (else it has no labels entry).
    known: bool,
}

/// A NetworkSet or a GlobalNetworkSet.
#[derive(Debug, Clone)]
pub(super) struct SetGen {
    /// Its namespace (modulo the number of namespaces); `None`: global.
    ns: Option<usize>,
    /// The `app` label (as pods have), and whether it has `net: 'yes'`.
    app: Option<&'static str>,
    net_label: bool,
    /// Indices into [`SET_NETS`].
    nets: Vec<usize>,
}

#[derive(Debug, Clone)]
pub(super) struct ClusterGen {
    /// Their number never changes (the policies' namespaces are taken
    /// modulo it).
    pub(super) namespaces: Vec<NsGen>,
    eps: Vec<EpGen>,
    sets: Vec<SetGen>,
}

pub(super) fn pick<T: Clone + std::fmt::Debug + 'static>(
    items: Vec<T>,
) -> impl Strategy<Value = T> {
    prop::sample::select(items)
}

const APPS: [&str; 3] = ["a", "b", "c"];
const TIERS: [&str; 2] = ["web", "db"];
const DNS: [(u8, u16); 3] = [(17, 53), (17, 5353), (6, 53)];

/// Networks of the network sets: outside addresses the packets use
/// (192.0.2.3 and .9, 203.0.113.7, 198.51.100.5, 10.2.0.1, fd00::99,
/// 2001:db8::1), networks overlapping one another, and networks and
/// addresses of pods (10.0.0.1-2, 10.0.1.1, fd00::1-…).
const SET_NETS: [&str; 14] = [
    "192.0.2.0/28",
    "192.0.2.9",
    "192.0.2.8/29",
    "203.0.113.0/24",
    "203.0.113.7/32",
    "198.51.100.0/24",
    "10.0.0.0/30",
    "10.0.1.1",
    "10.2.0.0/16",
    "10.0.0.0/8",
    "fd00::/120",
    "fd00::2",
    "2001:db8::/64",
    "2001:db8::1/128",
];

fn set_gen() -> impl Strategy<Value = SetGen> {
    (
        prop::option::weighted(0.6, 0..3usize),
        prop::option::weighted(0.7, pick(APPS.to_vec())),
        prop::bool::weighted(0.4),
        prop::collection::vec(0..SET_NETS.len(), 0..=3),
    )
        .prop_map(|(ns, app, net_label, nets)| SetGen {
            ns,
            app,
            net_label,
            nets,
        })
}

/// An endpoint's features, its `id` and `local` left for the caller.
fn ep_gen() -> impl Strategy<Value = EpGen> {
    (
        0..3usize,
        pick(APPS.to_vec()),
        prop::option::of(pick(TIERS.to_vec())),
        prop::option::of(pick(vec![80u16, 8080])),
        prop::option::of(pick(DNS.to_vec())),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(ns, app, tier, http, dns, metrics, v6)| EpGen {
            id: 0,
            ns,
            app,
            tier,
            http,
            dns,
            metrics,
            v6,
            local: false,
        })
}

pub(super) fn cluster_gen() -> impl Strategy<Value = ClusterGen> {
    (
        prop::collection::vec(pick(vec!["prod", "dev"]), 2..=3),
        prop::collection::vec(ep_gen(), 4..=8),
        2..=3usize,
        prop::bool::weighted(0.3),
        prop::collection::vec(set_gen(), 0..=3),
    )
        .prop_map(|(envs, eps, locals, v6, sets)| ClusterGen {
            sets,
            namespaces: envs
                .into_iter()
                .map(|env| NsGen {
                    env: Some(env),
                    known: true,
                })
                .collect(),
            eps: eps
                .into_iter()
                .enumerate()
                .map(|(i, g)| EpGen {
                    id: i,
                    local: i < locals,
                    v6: v6 && g.v6,
                    ..g
                })
                .collect(),
        })
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl ClusterGen {
    pub(super) fn build(&self) -> Cluster {
        let namespaces = self
            .namespaces
            .iter()
            .enumerate()
            .filter(|(_, n)| n.known)
            .map(|(i, n)| {
                let name = format!("ns{i}");
                let mut l = labels(&[(NAMESPACE_NAME_LABEL, &name)]);
                if let Some(env) = n.env {
                    l.insert("env".into(), env.into());
                }
                (name, l)
            })
            .collect();
        let endpoints = self
            .eps
            .iter()
            .map(|g| {
                let i = g.id;
                let mut l = labels(&[("app", g.app)]);
                if let Some(t) = g.tier {
                    l.insert("tier".into(), t.into());
                }
                // Its service account as felix labels it: named after
                // `app`, its `team` label from `tier`; every fifth
                // account not read (no `pcsa.` labels).
                let sa = format!("sa-{}", g.app);
                l.insert(crate::tartan::SERVICE_ACCOUNT_LABEL.into(), sa.clone());
                if i % 5 != 4 {
                    if let Some(t) = g.tier {
                        l.insert("pcsa.team".into(), t.into());
                    }
                    l.insert(crate::tartan::SA_NAME_LABEL.into(), sa);
                }
                // Neighbours in two /24s, so address sets have ranges.
                let mut addrs: Vec<IpAddr> =
                    vec![format!("10.0.{}.{}", i % 2, i / 2 + 1).parse().unwrap()];
                if g.v6 {
                    addrs.push(format!("fd00::{}", i + 1).parse().unwrap());
                }
                let mut ports = Vec::new();
                let mut named = |name: &str, protocol, port| {
                    ports.push(NamedPort {
                        name: name.into(),
                        protocol,
                        port,
                    })
                };
                if let Some(port) = g.http {
                    named("http", 6, port);
                }
                if let Some((proto, port)) = g.dns {
                    named("dns", proto, port);
                }
                if g.metrics {
                    named("metrics", 6, 9090);
                }
                Endpoint {
                    namespace: format!("ns{}", g.ns % self.namespaces.len()).into(),
                    labels: l.into(),
                    addrs,
                    ports: ports.into(),
                    interface: g.local.then(|| format!("tar{i}")),
                }
            })
            .collect();
        let net_sets = self
            .sets
            .iter()
            .map(|g| {
                let mut l = BTreeMap::new();
                if let Some(app) = g.app {
                    l.insert("app".to_string(), app.to_string());
                }
                if g.net_label {
                    l.insert("net".to_string(), "yes".to_string());
                }
                NetSet {
                    namespace: g
                        .ns
                        .map(|n| format!("ns{}", n % self.namespaces.len()).into()),
                    labels: l.into(),
                    nets: g
                        .nets
                        .iter()
                        .map(|&i| {
                            tartan_api::resources::common::parse_network_or_address(SET_NETS[i])
                                .unwrap()
                        })
                        .collect(),
                }
            })
            .collect();
        Cluster {
            namespaces,
            endpoints,
            net_sets,
        }
    }

    /// The network set `i` picks among the current ones, if any.
    fn set_at(&mut self, i: &prop::sample::Index) -> Option<&mut SetGen> {
        if self.sets.is_empty() {
            return None;
        }
        let n = i.index(self.sets.len());
        Some(&mut self.sets[n])
    }

    /// The endpoint `i` picks among the current ones.
    fn at(&mut self, i: &prop::sample::Index) -> &mut EpGen {
        let n = i.index(self.eps.len());
        &mut self.eps[n]
    }

    /// The cluster after `c`.
    pub(super) fn apply(&mut self, c: &Change) {
        match c {
            Change::Relabel(i, app, tier) => {
                let e = self.at(i);
                e.app = app;
                e.tier = *tier;
            }
            Change::Http(i, port) => self.at(i).http = *port,
            Change::Dns(i, dns) => self.at(i).dns = *dns,
            Change::Metrics(i, on) => self.at(i).metrics = *on,
            Change::Move(i, ns) => self.at(i).ns = *ns,
            Change::V6(i, on) => self.at(i).v6 = *on,
            Change::Remove(i) => {
                // Keep one endpoint, so packets have a local end.
                if self.eps.len() > 1 {
                    let n = i.index(self.eps.len());
                    self.eps.remove(n);
                }
            }
            Change::Add(g) => {
                // Not too many, for the number of packets.
                if self.eps.len() < 9 {
                    let id = self.eps.iter().map(|e| e.id + 1).max().unwrap_or(0);
                    self.eps.push(EpGen { id, ..g.clone() });
                }
            }
            Change::Namespace(ns, n) => {
                let len = self.namespaces.len();
                self.namespaces[ns % len] = n.clone();
            }
            Change::SetNets(i, nets) => {
                if let Some(s) = self.set_at(i) {
                    s.nets = nets.clone();
                }
            }
            Change::SetLabels(i, app, net_label) => {
                if let Some(s) = self.set_at(i) {
                    s.app = *app;
                    s.net_label = *net_label;
                }
            }
            Change::SetMove(i, ns) => {
                if let Some(s) = self.set_at(i) {
                    s.ns = *ns;
                }
            }
            Change::SetRemove(i) => {
                if !self.sets.is_empty() {
                    let n = i.index(self.sets.len());
                    self.sets.remove(n);
                }
            }
            Change::SetAdd(g) => {
                if self.sets.len() < 4 {
                    self.sets.push(g.clone());
                }
            }
        }
    }
}

/// A change to a cluster between two compiles. Endpoints are picked by
/// an index among the current ones.
#[derive(Debug, Clone)]
pub(super) enum Change {
    /// New `app` and `tier` labels.
    Relabel(prop::sample::Index, &'static str, Option<&'static str>),
    /// The `http` port renumbered, added or removed.
    Http(prop::sample::Index, Option<u16>),
    Dns(prop::sample::Index, Option<(u8, u16)>),
    Metrics(prop::sample::Index, bool),
    /// To another namespace (or the same).
    Move(prop::sample::Index, usize),
    /// An IPv6 address added or removed.
    V6(prop::sample::Index, bool),
    Remove(prop::sample::Index),
    /// A new endpoint (its `id` is given when it is added).
    Add(EpGen),
    /// A namespace's labels changed, or its object gone or back.
    Namespace(usize, NsGen),
    /// A network set's networks changed (indices into [`SET_NETS`]).
    SetNets(prop::sample::Index, Vec<usize>),
    /// A network set relabelled (`app`, `net: 'yes'`).
    SetLabels(prop::sample::Index, Option<&'static str>, bool),
    /// A network set to another namespace, or made global (`None`).
    SetMove(prop::sample::Index, Option<usize>),
    SetRemove(prop::sample::Index),
    SetAdd(SetGen),
}

pub(super) fn change() -> impl Strategy<Value = Change> {
    let ep = || any::<prop::sample::Index>();
    prop_oneof![
        3 => (ep(), pick(APPS.to_vec()), prop::option::of(pick(TIERS.to_vec())))
            .prop_map(|(i, app, tier)| Change::Relabel(i, app, tier)),
        3 => (ep(), pick(vec![None, Some(80u16), Some(8080), Some(85)]))
            .prop_map(|(i, p)| Change::Http(i, p)),
        1 => (ep(), prop::option::of(pick(DNS.to_vec()))).prop_map(|(i, d)| Change::Dns(i, d)),
        1 => (ep(), any::<bool>()).prop_map(|(i, m)| Change::Metrics(i, m)),
        2 => (ep(), 0..3usize).prop_map(|(i, ns)| Change::Move(i, ns)),
        2 => (ep(), prop::bool::weighted(0.7)).prop_map(|(i, v6)| Change::V6(i, v6)),
        2 => ep().prop_map(Change::Remove),
        2 => (ep_gen(), any::<bool>()).prop_map(|(g, local)| Change::Add(EpGen { local, ..g })),
        2 => (
            0..3usize,
            pick(vec![
                Some("prod"),
                Some("dev"),
                Some("prod"),
                Some("dev"),
                Some("test"),
                None,
            ]),
            prop::bool::weighted(0.85),
        )
            .prop_map(|(n, env, known)| Change::Namespace(n, NsGen { env, known })),
        4 => set_change(),
    ]
}

/// A change to the network sets.
fn set_change() -> impl Strategy<Value = Change> {
    let set = || any::<prop::sample::Index>();
    prop_oneof![
        3 => (set(), prop::collection::vec(0..SET_NETS.len(), 0..=3))
            .prop_map(|(i, nets)| Change::SetNets(i, nets)),
        2 => (set(), prop::option::of(pick(APPS.to_vec())), any::<bool>())
            .prop_map(|(i, app, net)| Change::SetLabels(i, app, net)),
        1 => (set(), prop::option::of(0..3usize)).prop_map(|(i, ns)| Change::SetMove(i, ns)),
        1 => set().prop_map(Change::SetRemove),
        2 => set_gen().prop_map(Change::SetAdd),
    ]
}
