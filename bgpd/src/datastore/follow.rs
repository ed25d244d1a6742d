//! Follow the datastore: watch every kind the configuration depends on,
//! rebuild after each burst of changes, and hand on a configuration only
//! when it differs from the last one.
//!
//! Nodes are kept as the part bgpd uses ([`super::nodes`]): a kubelet's
//! heartbeat changes none of it and causes no rebuild. Of blocks and
//! WorkloadEndpoints only this node's are kept ([`own_part`]), and their
//! watches pass on only what may be this node's ([`maybe_own`]): the rest
//! of the cluster's pods cost neither memory nor rebuilds.
//!
//! Services and EndpointSlices are many and change often; they are not
//! kept whole but reduced as they arrive ([`LocalServices`]), and a burst
//! of them causes a rebuild only when it changes what this node announces
//! (an endpoint moving on another node, or a Service without Local policy,
//! changes nothing here).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use prometheus_client::metrics::histogram::Histogram;
use tartan_api::Kind;
use tartan_api::resources::{
    BgpConfiguration, BgpFilter, BgpPeer, IpPool, IpamBlock, TARTAN_NAMESPACE, WorkloadEndpoint,
};
use tartan_api::store::readable::{self, UnreadableLog};
use tartan_api::store::typed::{Resource, from_dynamic};
use tartan_api::store::watch::burst::Burst;
use tartan_api::store::watch::{WatchEvent, watch};
use tartan_api::store::{Datastore, DynamicObject, WatchScope};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::build::{Inputs, build};
use super::nodes;
use super::services::LocalServices;
use crate::config::Config;

/// Every kind bgpd reads (deploy/tartan-node.yaml must grant get, list and
/// watch on each).
pub const WATCHED: [Kind; 10] = [
    Kind::Node,
    Kind::BgpConfiguration,
    Kind::BgpPeer,
    Kind::BgpFilter,
    Kind::IpPool,
    Kind::IpamBlock,
    Kind::WorkloadEndpoint,
    Kind::Secret,
    Kind::Service,
    Kind::EndpointSlice,
];

/// Kinds reduced as they arrive rather than kept whole.
fn reduced(kind: Kind) -> bool {
    matches!(kind, Kind::Service | Kind::EndpointSlice)
}

/// Kinds of which bgpd keeps only this node's objects: the blocks affine
/// to it and the WorkloadEndpoints on it (what it announces). Another
/// node's are many (every pod of the cluster) and change nothing here.
fn own_only(kind: Kind) -> bool {
    matches!(kind, Kind::IpamBlock | Kind::WorkloadEndpoint)
}

/// The node a block's host affinity or a WorkloadEndpoint's spec names,
/// when it names one bgpd can read.
fn named_node(kind: Kind, spec: &serde_json::Value) -> Option<&str> {
    match kind {
        Kind::IpamBlock => spec
            .get("affinity")?
            .as_str()?
            .strip_prefix(tartan_api::resources::ipam::HOST_AFFINITY_PREFIX),
        _ => spec.get("node")?.as_str(),
    }
}

/// What bgpd reads of a block or WorkloadEndpoint of its node, or None
/// when it belongs to another node: a change outside it (an allocation
/// in the block, a pod's labels) makes no rebuild. Of an endpoint that is
/// the addresses outside `mine`, the node's own blocks (only a borrowed
/// address is announced on its own): a pod wired with an address of its
/// node's block changes nothing bgpd announces (None, as for another
/// node's). A change of the blocks themselves rebuilds from every
/// endpoint.
fn own_part(
    kind: Kind,
    node: &str,
    o: &DynamicObject,
    mine: &[IpNet],
) -> Option<serde_json::Value> {
    let spec = o.data.get("spec")?;
    if named_node(kind, spec)? != node {
        return None;
    }
    match kind {
        Kind::IpamBlock => Some(serde_json::json!([
            spec.get("cidr"),
            spec.get("affinity"),
            spec.get("deleted")
        ])),
        _ => {
            let nets = spec.get("ipNetworks").and_then(|v| v.as_array());
            let borrowed: Vec<&serde_json::Value> = nets
                .into_iter()
                .flatten()
                .filter(|v| {
                    // Anything but an address inside a block of the node's
                    // counts, unreadable text included.
                    let host = v
                        .as_str()
                        .and_then(|t| t.parse::<IpNet>().ok())
                        .map(|n| n.addr());
                    !host.is_some_and(|a| mine.iter().any(|m| m.contains(&a)))
                })
                .collect();
            // Not a list at all: kept whole, so that a change shows.
            match nets {
                Some(_) if borrowed.is_empty() => None,
                Some(_) => Some(serde_json::json!(borrowed)),
                None => Some(serde_json::json!([spec.get("ipNetworks")])),
            }
        }
    }
}

/// The networks of the blocks affine to `node` (not deleted) among the
/// blocks kept.
fn own_networks(node: &str, blocks: Option<&BTreeMap<String, DynamicObject>>) -> Vec<IpNet> {
    blocks
        .into_iter()
        .flat_map(|m| m.values())
        .filter_map(|o| {
            let spec = o.data.get("spec")?;
            if named_node(Kind::IpamBlock, spec)? != node
                || spec.get("deleted").and_then(|d| d.as_bool()) == Some(true)
            {
                return None;
            }
            // Read as the announcement reads a block's network: a CIDR with
            // host bits set is no network of the node's.
            tartan_api::resources::common::parse_network(spec.get("cidr")?.as_str()?).ok()
        })
        .collect()
}

/// Whether a block or WorkloadEndpoint may be this node's, which is what
/// bgpd's watch of them passes on: one whose spec names another node is
/// not, so that bgpd holds nothing per pod of the rest of the cluster
/// (150,000 records at 5,000 nodes). One that names no node it can read
/// is passed on, to be reported unreadable or dropped as `apply_own`
/// decides.
fn maybe_own(kind: Kind, node: &str, o: &DynamicObject) -> bool {
    o.data
        .get("spec")
        .and_then(|spec| named_node(kind, spec))
        .is_none_or(|n| n == node)
}

/// The watch bgpd follows `kind` with, for `node`.
fn watch_of(store: Arc<dyn Datastore>, kind: Kind, node: &str) -> tartan_api::store::watch::Watch {
    let w = watch(
        store,
        WatchScope {
            kind,
            namespace: namespace_of(kind),
            // Of a Node, bgpd reads the metadata only (`nodes::from_metadata`).
            metadata_only: kind == Kind::Node,
        },
    );
    if !own_only(kind) {
        return w;
    }
    let node = node.to_string();
    w.keeping(move |o| maybe_own(kind, &node, o))
}

/// Secrets are read in Tartan's namespace only; every other kind
/// cluster-wide.
fn namespace_of(kind: Kind) -> Option<String> {
    (kind == Kind::Secret).then(|| TARTAN_NAMESPACE.to_string())
}

/// A Secret's keys as text (`stringData` over `data`); keys whose value is
/// not UTF-8 are left out.
fn secret_values(s: &Secret) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in s.data.iter().flatten() {
        if let Ok(text) = String::from_utf8(v.0.clone()) {
            out.insert(k.clone(), text);
        }
    }
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// The objects seen, per kind, by `namespace/name`; Nodes reduced to
/// what bgpd uses of them, Services and EndpointSlices to what this node
/// announces for them.
struct Seen {
    /// This node's name.
    me: String,
    objects: BTreeMap<Kind, BTreeMap<String, DynamicObject>>,
    /// Readable Nodes, as [`nodes::from_metadata`] keeps them; shared with
    /// each rebuild's inputs.
    nodes: BTreeMap<String, Arc<nodes::NodeView>>,
    services: LocalServices,
    synced: BTreeMap<Kind, bool>,
    /// Objects that do not read, each logged once at ERROR when it
    /// arrives. An unreadable BGPPeer makes no session; a peer naming an
    /// unreadable BGPFilter is not run unfiltered but stopped, as for a
    /// missing one.
    bad: UnreadableLog,
}

fn key(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

impl Seen {
    fn new(node: &str) -> Seen {
        Seen {
            me: node.to_string(),
            objects: BTreeMap::new(),
            nodes: BTreeMap::new(),
            services: LocalServices::new(node),
            synced: BTreeMap::new(),
            bad: UnreadableLog::default(),
        }
    }

    /// Takes in one event; returns whether the configuration may have
    /// changed (and a rebuild is due).
    fn apply(&mut self, kind: Kind, ev: WatchEvent) -> bool {
        let was_synced = self.all_synced();
        let changed = if reduced(kind) {
            self.apply_reduced(kind, ev)
        } else if kind == Kind::Node {
            self.apply_node(ev)
        } else if own_only(kind) {
            self.apply_own(kind, ev)
        } else {
            self.apply_whole(kind, ev);
            true
        };
        changed || (!was_synced && self.all_synced())
    }

    /// A Service or EndpointSlice; whether what this node announces
    /// changed.
    fn apply_reduced(&mut self, kind: Kind, ev: WatchEvent) -> bool {
        let (k, o) = match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (key(&o), Some(o)),
            WatchEvent::Deleted(o) => (key(&o), None),
            WatchEvent::Synced { .. } => {
                self.synced.insert(kind, true);
                return false;
            }
            // Only from a watch whose consumer keeps the record; bgpd's
            // watches keep theirs.
            WatchEvent::Relisting => return false,
        };
        // An object that does not parse counts as absent.
        fn typed<T: Resource>(
            bad: &mut UnreadableLog,
            k: &str,
            o: Option<DynamicObject>,
        ) -> Option<T> {
            let Some(o) = o else {
                bad.readable(T::KIND, k);
                return None;
            };
            match from_dynamic::<T>(o) {
                Ok(t) => {
                    bad.readable(T::KIND, k);
                    Some(t)
                }
                Err(e) => {
                    bad.unreadable(T::KIND, k, &e.to_string());
                    None
                }
            }
        }
        match kind {
            Kind::Service => {
                let s = typed::<Service>(&mut self.bad, &k, o);
                self.services.service(&k, s.as_ref())
            }
            _ => {
                let s = typed::<EndpointSlice>(&mut self.bad, &k, o);
                self.services.slice(&k, s.as_ref())
            }
        }
    }

    /// A Node; whether what bgpd uses of the Nodes changed. An unreadable
    /// Node counts as absent.
    fn apply_node(&mut self, ev: WatchEvent) -> bool {
        let (k, view) = match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let k = key(&o);
                match tartan_api::resources::node::metadata_readable(&o) {
                    Ok(()) => {
                        self.bad.readable(Kind::Node, &k);
                        (k, Some(nodes::from_metadata(o.metadata)))
                    }
                    Err(why) => {
                        self.bad.unreadable(Kind::Node, &k, &why);
                        (k, None)
                    }
                }
            }
            WatchEvent::Deleted(o) => {
                let k = key(&o);
                self.bad.readable(Kind::Node, &k);
                (k, None)
            }
            WatchEvent::Synced { .. } => {
                self.synced.insert(Kind::Node, true);
                return false;
            }
            // Only from a watch whose consumer keeps the record; bgpd's
            // watches keep theirs.
            WatchEvent::Relisting => return false,
        };
        match view {
            Some(n) if self.nodes.get(&k).is_some_and(|old| **old == n) => false,
            Some(n) => {
                self.nodes.insert(k, Arc::new(n));
                true
            }
            None => self.nodes.remove(&k).is_some(),
        }
    }

    /// A block or WorkloadEndpoint: kept when it is this node's, dropped
    /// otherwise; whether what bgpd reads of this node's changed. An
    /// unreadable one is logged and counts as absent (as in a rebuild).
    fn apply_own(&mut self, kind: Kind, ev: WatchEvent) -> bool {
        let (k, keep) = match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let k = key(&o);
                match readable::check(kind, &o) {
                    Ok(()) => {
                        self.bad.readable(kind, &k);
                        let own = o.data.get("spec").and_then(|s| named_node(kind, s))
                            == Some(self.me.as_str());
                        (k, own.then_some(o))
                    }
                    Err(why) => {
                        self.bad.unreadable(kind, &k, &why);
                        (k, None)
                    }
                }
            }
            WatchEvent::Deleted(o) => {
                let k = key(&o);
                self.bad.readable(kind, &k);
                (k, None)
            }
            WatchEvent::Synced { .. } => {
                self.synced.insert(kind, true);
                return false;
            }
            // Only from a watch whose consumer keeps the record; bgpd's
            // watches keep theirs.
            WatchEvent::Relisting => return false,
        };
        let mine = match kind {
            Kind::WorkloadEndpoint => own_networks(&self.me, self.objects.get(&Kind::IpamBlock)),
            _ => Vec::new(),
        };
        let new_part = keep
            .as_ref()
            .and_then(|o| own_part(kind, &self.me, o, &mine));
        let m = self.objects.entry(kind).or_default();
        let old = match keep {
            Some(o) => m.insert(k, o),
            None => m.remove(&k),
        };
        old.and_then(|o| own_part(kind, &self.me, &o, &mine)) != new_part
    }

    fn apply_whole(&mut self, kind: Kind, ev: WatchEvent) {
        let m = self.objects.entry(kind).or_default();
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                let k = key(&o);
                match readable::check(kind, &o) {
                    Ok(()) => self.bad.readable(kind, &k),
                    Err(why) => self.bad.unreadable(kind, &k, &why),
                };
                m.insert(k, o);
            }
            WatchEvent::Deleted(o) => {
                let k = key(&o);
                self.bad.readable(kind, &k);
                m.remove(&k);
            }
            WatchEvent::Synced { .. } => {
                self.synced.insert(kind, true);
            }
            WatchEvent::Relisting => {}
        }
    }

    fn all_synced(&self) -> bool {
        WATCHED.iter().all(|k| self.synced.get(k) == Some(&true))
    }

    fn typed<T: Resource>(&self) -> Vec<(String, T)> {
        self.objects
            .get(&T::KIND)
            .into_iter()
            .flatten()
            .filter_map(|(k, o)| match from_dynamic::<T>(o.clone()) {
                Ok(t) => Some((k.clone(), t)),
                Err(e) => {
                    // Logged at ERROR once, when it arrived.
                    debug!(object = %k, error = %e, "unreadable object left out");
                    None
                }
            })
            .collect()
    }

    fn inputs(&self, node: &str) -> Inputs {
        let name = |k: &str| k.rsplit('/').next().unwrap_or("").to_string();
        Inputs {
            node: node.to_string(),
            nodes: self.nodes.values().cloned().collect(),
            configs: self
                .typed::<BgpConfiguration>()
                .into_iter()
                .map(|(k, c)| (name(&k), c.spec))
                .collect(),
            peers: self
                .typed::<BgpPeer>()
                .into_iter()
                .map(|(k, p)| (name(&k), p.spec))
                .collect(),
            filters: self
                .typed::<BgpFilter>()
                .into_iter()
                .map(|(k, f)| (name(&k), f.spec))
                .collect(),
            pools: self
                .typed::<IpPool>()
                .into_iter()
                .map(|(_, p)| p.spec)
                .collect(),
            blocks: self
                .typed::<IpamBlock>()
                .into_iter()
                .map(|(_, b)| b.spec)
                .collect(),
            endpoints: self
                .typed::<WorkloadEndpoint>()
                .into_iter()
                .map(|(_, w)| w.spec)
                .collect(),
            secrets: self
                .typed::<Secret>()
                .into_iter()
                .map(|(k, s)| (name(&k), secret_values(&s)))
                .collect(),
            services: self.services.announced_all(),
        }
    }
}

/// A rebuild waits this long after the last change of a burst…
const BURST_QUIET: Duration = Duration::from_millis(2);
/// …and at most this long after the first.
const BURST_LIMIT: Duration = Duration::from_millis(100);

/// Follow the store for `node`, sending each new configuration. Runs until
/// the receiver is dropped.
pub async fn follow(store: Arc<dyn Datastore>, node: String, out: mpsc::Sender<Config>) {
    follow_recording(store, node, out, None).await
}

/// As [`follow`], recording the time of every rebuild in `build_seconds`.
pub async fn follow_recording(
    store: Arc<dyn Datastore>,
    node: String,
    out: mpsc::Sender<Config>,
    build_seconds: Option<Histogram>,
) {
    // Every watch polled by this one task: an event reaches the rebuild
    // without a hand-over between tasks (at 500 heartbeats a second, a
    // thread wakeup each).
    let mut events = stream::select_all(WATCHED.iter().map(|&kind| {
        let w = watch_of(store.clone(), kind, &node);
        stream::unfold(w, move |mut w| async move {
            let ev = w.next().await;
            Some(((kind, ev), w))
        })
        .boxed()
    }));
    let mut seen = Seen::new(&node);
    let mut last: Option<Config> = None;
    let mut last_error: Option<String> = None;
    while let Some((kind, ev)) = events.next().await {
        if !seen.apply(kind, ev) {
            // A kubelet's heartbeat, say: no rebuild, and no timer to wait
            // for the rest of a burst (at 500 of them a second, one per
            // event was most of their cost).
            continue;
        }
        // Take the rest of a burst before rebuilding: until 2 ms pass with
        // no change, at most 100 ms; heartbeats in between put nothing off.
        let mut burst = Burst::new(BURST_QUIET, BURST_LIMIT);
        let now = tokio::time::Instant::now;
        burst.mark(now());
        while let Some(at) = burst.deadline() {
            // A backlog of events that are always ready would otherwise
            // keep the wait below from ever timing out.
            if now() >= at {
                break;
            }
            match tokio::time::timeout_at(at, events.next()).await {
                Ok(Some((k, e))) => {
                    if seen.apply(k, e) {
                        burst.mark(now());
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        // Not synced yet: the event that completes the sync is dirty.
        if !seen.all_synced() {
            continue;
        }
        let started = std::time::Instant::now();
        let built = build(&seen.inputs(&node));
        if let Some(h) = &build_seconds {
            h.observe(started.elapsed().as_secs_f64());
        }
        match built {
            Ok(cfg) => {
                last_error = None;
                if last.as_ref() != Some(&cfg) {
                    crate::log_level::follow(cfg.log_level);
                    info!(
                        neighbors = cfg.neighbors.len(),
                        announce = cfg.announce.len(),
                        "configuration from the datastore"
                    );
                    last = Some(cfg.clone());
                    if out.send(cfg).await.is_err() {
                        break;
                    }
                }
            }
            Err(e) => {
                let text = e.to_string();
                if last_error.as_deref() != Some(text.as_str()) {
                    warn!(error = %text, "no configuration yet; waiting for the datastore to change");
                    last_error = Some(text);
                }
            }
        }
    }
}

#[cfg(test)]
mod unreadable_tests {
    use super::*;

    fn peer(asn: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "BGPPeer",
            "metadata": {"name": "tor"},
            "spec": {"peerIP": "10.0.0.254", "asNumber": asn},
        }))
        .unwrap()
    }

    #[test]
    fn an_unreadable_peer_is_noted_once_makes_no_session_and_a_readable_one_replaces_it() {
        let mut seen = Seen::new("node-1");
        seen.apply(
            Kind::BgpPeer,
            WatchEvent::Added(peer(serde_json::json!("many"))),
        );
        seen.apply(
            Kind::BgpPeer,
            WatchEvent::Modified(peer(serde_json::json!("many"))),
        );
        assert_eq!(seen.bad.count(Kind::BgpPeer), 1);
        let why: Vec<_> = seen.bad.all().map(|(_, _, r)| r.to_string()).collect();
        assert!(why[0].contains("spec.asNumber"), "{why:?}");
        assert!(seen.inputs("node-1").peers.is_empty());
        seen.apply(
            Kind::BgpPeer,
            WatchEvent::Modified(peer(serde_json::json!(65001))),
        );
        assert_eq!(seen.bad.count(Kind::BgpPeer), 0);
        assert_eq!(seen.inputs("node-1").peers.len(), 1);
        seen.apply(
            Kind::BgpPeer,
            WatchEvent::Modified(peer(serde_json::json!(true))),
        );
        assert_eq!(seen.bad.count(Kind::BgpPeer), 1);
        seen.apply(
            Kind::BgpPeer,
            WatchEvent::Deleted(peer(serde_json::json!(true))),
        );
        assert_eq!(seen.bad.count(Kind::BgpPeer), 0);
    }
}

#[cfg(test)]
mod heartbeat_tests;
