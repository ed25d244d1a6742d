//! Folding watch events into what felix keeps: each object read into the
//! part the calculation uses, what does not read reported as unreadable,
//! and whether anything felix keeps changed.

use std::collections::{BTreeMap, HashSet};

use compact_str::CompactString;

use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use tartan_api::resources::{GlobalNetworkSet, NetworkSet, WorkloadEndpoint};
use tartan_api::store::DynamicObject;
use tartan_api::store::typed::{Resource, from_dynamic};
use tartan_api::store::watch::WatchEvent;

use crate::calc::endpoints::Endpoints;
use crate::calc::labels;
use crate::calc::policy::Converted;
use crate::calc::state::{Labels, NodeInfo, WatchedNetSet, WatchedServiceAccount};
use crate::unreadable::Unreadable;
use ipnet::IpNet;
use tartan_policy::compile::NetSet;

fn key(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

/// What one event did to the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Folded {
    /// The watch has delivered everything that existed.
    pub(super) synced: bool,
    /// What felix keeps of the objects changed (a Node's heartbeat, say,
    /// changes nothing felix uses).
    pub(super) changed: bool,
}

/// Fold one event of a watch of `T` into `map` (keyed `namespace/name`,
/// holding what `spec` takes from each object). An object that does not
/// read is reported to `bad` and leaves `map` as it was.
pub(super) fn fold<T: Resource, S: PartialEq>(
    map: &mut BTreeMap<String, S>,
    ev: WatchEvent,
    bad: &mut Unreadable,
    spec: fn(T) -> S,
) -> Folded {
    fold_read(map, ev, bad, |t| Ok(spec(t)), None)
}

/// A Node's event into `nodes`: felix keeps only [`NodeInfo`] (address,
/// VXLAN MAC, UID), so a kubelet's heartbeat (status, resourceVersion)
/// folds to no change and causes no pass over the dataplane. Only the
/// annotations are read, from the metadata the watch has already parsed:
/// a heartbeat's status is not parsed at all (parsing whole Nodes at 500
/// heartbeats a second was most of an idle felix's CPU).
pub(super) fn fold_node(
    nodes: &mut BTreeMap<String, NodeInfo>,
    ev: WatchEvent,
    bad: &mut Unreadable,
) -> Folded {
    fold_set::<Node, _>(ev, bad, node_info, |k, n| keep(nodes, k, n))
}

/// The taint the cluster autoscaler puts on a node it is about to remove.
const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// Whether load balancers may still send this node traffic, as
/// kube-proxy's `/healthz` says (`nodeEligible`): not while the Node is
/// being deleted or carries the cluster autoscaler's deletion taint.
/// Read from the metadata and `spec.taints` alone.
pub(super) fn node_eligible(o: &DynamicObject) -> bool {
    if o.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let tainted = o
        .data
        .get("spec")
        .and_then(|s| s.get("taints"))
        .and_then(|t| t.as_array())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| t.get("key").and_then(|k| k.as_str()) == Some(TO_BE_DELETED_TAINT))
        });
    !tainted
}

/// What felix keeps of a Node, or why the object is not a readable Node:
/// a placeholder for a value that did not parse, another kind, or a spec
/// or status that is not an object. What is inside spec and status felix
/// does not read, and does not check.
fn node_info(o: DynamicObject) -> Result<NodeInfo, String> {
    tartan_api::resources::node::metadata_readable(&o)?;
    Ok(NodeInfo {
        uid: o.metadata.uid.clone(),
        ..NodeInfo::from_annotations(o.metadata.annotations.as_ref())
    })
}

/// The keys a consumer that keeps its watch's record held when a listing
/// began ([`WatchEvent::Relisting`]), crossed off as the listing tells of
/// them again: what is left at `Synced` is gone. Held only while a
/// listing runs.
#[derive(Debug, Default)]
pub(super) struct Sweep(Option<HashSet<CompactString>>);

impl Sweep {
    /// The event, with the sweep it opens or closes: at `Relisting` the
    /// sweep starts from `held` (what is kept and what is unreadable of
    /// `T`); at `Synced` what it has left comes out as deletions, each
    /// handed to `set` as gone.
    fn pass<T: Resource, S>(
        &mut self,
        ev: &WatchEvent,
        bad: &mut Unreadable,
        endpoints: &mut Endpoints,
        held: fn(&Endpoints) -> HashSet<CompactString>,
        set: impl Fn(&mut Endpoints, &str, Option<S>) -> bool,
    ) -> bool {
        match (ev, &mut self.0) {
            (WatchEvent::Relisting, _) => {
                let mut keys = held(endpoints);
                keys.extend(bad.keys(T::KIND).map(CompactString::from));
                self.0 = Some(keys);
                false
            }
            (WatchEvent::Added(o) | WatchEvent::Modified(o), Some(keys)) => {
                keys.remove(key(o).as_str());
                false
            }
            (WatchEvent::Synced { .. }, Some(_)) => {
                let mut changed = false;
                for k in self.0.take().into_iter().flatten() {
                    bad.note(T::KIND, &k, Ok(()));
                    changed |= set(endpoints, &k, None);
                }
                changed
            }
            _ => false,
        }
    }
}

/// One event of a kind whose watch keeps no record (felix holds every
/// object of it by key): `sweep` tells what a listing no longer has; each
/// object is read once by `read` and handed to `set`, as in [`fold_set`].
fn fold_swept<T: Resource, S>(
    endpoints: &mut Endpoints,
    ev: WatchEvent,
    bad: &mut Unreadable,
    sweep: &mut Sweep,
    held: fn(&Endpoints) -> HashSet<CompactString>,
    read: fn(DynamicObject) -> Result<S, String>,
    set: impl Fn(&mut Endpoints, &str, Option<S>) -> bool + Copy,
) -> Folded {
    let swept = sweep.pass::<T, S>(&ev, bad, endpoints, held, set);
    let f = fold_set::<T, S>(ev, bad, read, |k, s| set(endpoints, k, s));
    Folded {
        changed: f.changed || swept,
        ..f
    }
}

/// A WorkloadEndpoint's event into `endpoints`, the object read once.
pub(super) fn fold_endpoint(
    endpoints: &mut Endpoints,
    ev: WatchEvent,
    bad: &mut Unreadable,
    sweep: &mut Sweep,
) -> Folded {
    let f = fold_swept::<WorkloadEndpoint, _>(
        endpoints,
        ev,
        bad,
        sweep,
        |e| e.keys().map(CompactString::from).collect(),
        |o| from_dynamic::<WorkloadEndpoint>(o).map_err(|e| e.to_string()),
        |e, k, w| {
            e.set(
                k,
                w.map(|w| {
                    let own = w.metadata.labels.unwrap_or_default();
                    (w.spec, labels::endpoint(namespace_of(k), own, None))
                }),
            )
        },
    );
    if f.synced {
        endpoints.compact();
    }
    f
}

/// A Pod's event: its labels, which win over an endpoint's copy, with
/// its ServiceAccount's (`sas`) when felix has read it.
pub(super) fn fold_pod(
    endpoints: &mut Endpoints,
    sas: &BTreeMap<String, WatchedServiceAccount>,
    ev: WatchEvent,
    bad: &mut Unreadable,
    sweep: &mut Sweep,
) -> Folded {
    fold_swept::<Pod, _>(
        endpoints,
        ev,
        bad,
        sweep,
        |e| e.pod_keys().map(CompactString::from).collect(),
        |o| from_dynamic::<Pod>(o).map_err(|e| e.to_string()),
        |e, k, p| e.set_pod(k, p.map(|p| pod_labels(k, p, sas))),
    )
}

/// A ServiceAccount's event into `sas`: its labels, or why it does not
/// read (kept, so that the policies selecting by service account labels
/// fail closed in its namespace; its pods carry no `pcsa.` labels
/// meanwhile). The pods running as it are labelled anew.
pub(super) fn fold_service_account(
    sas: &mut BTreeMap<String, WatchedServiceAccount>,
    endpoints: &mut Endpoints,
    ev: WatchEvent,
    bad: &mut Unreadable,
) -> Folded {
    let mut touched = None;
    let f = fold_set_or::<ServiceAccount, _>(
        ev,
        bad,
        |o| {
            from_dynamic::<ServiceAccount>(o)
                .map(|s| Ok(s.metadata.labels.unwrap_or_default()))
                .map_err(|e| e.to_string())
        },
        Some(Err),
        |k, s| {
            touched = Some(k.to_string());
            keep(sas, k, s)
        },
    );
    let mut changed = f.changed;
    if f.changed
        && let Some(k) = touched
    {
        changed |= relabel_pods_of(endpoints, sas, &k);
    }
    Folded { changed, ..f }
}

/// The pods running as ServiceAccount `key` (`namespace/name`) labelled
/// with what `sas` now holds of it; whether any endpoint's labels changed.
fn relabel_pods_of(
    endpoints: &mut Endpoints,
    sas: &BTreeMap<String, WatchedServiceAccount>,
    key: &str,
) -> bool {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    let prefix = format!("{ns}/");
    let pods: Vec<(String, Labels)> = endpoints
        .pod_keys()
        .filter(|k| k.starts_with(&prefix))
        .filter_map(|k| {
            let l = endpoints.pod_labels(k)?;
            (l.get(labels::SERVICE_ACCOUNT).map(String::as_str) == Some(name))
                .then(|| (k.to_string(), Labels::clone(l)))
        })
        .collect();
    let sa_labels = sas.get(key).and_then(|s| s.as_ref().ok());
    let mut changed = false;
    for (k, own) in pods {
        let now = labels::endpoint(ns, own, Some((name, sa_labels)));
        changed |= endpoints.set_pod(&k, Some(now));
    }
    changed
}

fn namespace_of(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

/// Pod `key`'s labels as selectors see them: its own and the automatic
/// ones, with its service account ([`labels`]).
fn pod_labels(key: &str, p: Pod, sas: &BTreeMap<String, WatchedServiceAccount>) -> Labels {
    let ns = namespace_of(key);
    let sa = p.spec.as_ref().and_then(|s| {
        s.service_account_name
            .as_deref()
            .or(s.service_account.as_deref())
    });
    let sa = sa.map(|sa| {
        let read = sas.get(&format!("{ns}/{sa}")).and_then(|s| s.as_ref().ok());
        (sa, read)
    });
    labels::endpoint(ns, p.metadata.labels.unwrap_or_default(), sa)
}

/// One event of a watch of `T`: each object read once by `read` (what
/// does not read is reported to `bad` and changes nothing) and handed to
/// `set` as (key, object or `None` when gone), which says whether what
/// felix keeps changed.
fn fold_set<T: Resource, S>(
    ev: WatchEvent,
    bad: &mut Unreadable,
    read: impl FnOnce(DynamicObject) -> Result<S, String>,
    set: impl FnOnce(&str, Option<S>) -> bool,
) -> Folded {
    fold_set_or::<T, S>(ev, bad, read, None, set)
}

/// [`fold_set`]; with `fallback`, what does not read is handed to `set`
/// as `fallback(why)` (still reported to `bad`).
fn fold_set_or<T: Resource, S>(
    ev: WatchEvent,
    bad: &mut Unreadable,
    read: impl FnOnce(DynamicObject) -> Result<S, String>,
    fallback: Option<fn(String) -> S>,
    set: impl FnOnce(&str, Option<S>) -> bool,
) -> Folded {
    let changed = match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            let k = key(&o);
            let got = read(o);
            bad.note(
                T::KIND,
                &k,
                got.as_ref().map(|_| ()).map_err(String::as_str),
            );
            match (got, fallback) {
                (Ok(s), _) => set(&k, Some(s)),
                (Err(why), Some(f)) => set(&k, Some(f(why))),
                (Err(_), None) => false,
            }
        }
        WatchEvent::Deleted(o) => {
            let k = key(&o);
            bad.note(T::KIND, &k, Ok(()));
            set(&k, None)
        }
        WatchEvent::Synced { .. } => {
            return Folded {
                synced: true,
                changed: true,
            };
        }
        // What a listing no longer has is the consumer's [`Sweep`].
        WatchEvent::Relisting => false,
    };
    Folded {
        synced: false,
        changed,
    }
}

/// [`fold`] for a policy: `convert` may fail too, and a policy that does
/// not decode or does not convert is kept as its error (enforced as an
/// isolation: fail closed).
pub(super) fn fold_policy<T: Resource>(
    map: &mut BTreeMap<String, Converted>,
    ev: WatchEvent,
    bad: &mut Unreadable,
    convert: impl FnOnce(T) -> Converted,
) -> Folded {
    fold_read(map, ev, bad, |t| convert(t).map(Ok), Some(Err))
}

/// `read` turns an object into what `map` keeps, or says why it cannot;
/// with `fallback`, what cannot be read is kept as `fallback(why)`.
fn fold_read<T: Resource, S: PartialEq>(
    map: &mut BTreeMap<String, S>,
    ev: WatchEvent,
    bad: &mut Unreadable,
    read: impl FnOnce(T) -> Result<S, String>,
    fallback: Option<fn(String) -> S>,
) -> Folded {
    fold_set_or::<T, S>(
        ev,
        bad,
        |o| {
            from_dynamic::<T>(o)
                .map_err(|e| e.to_string())
                .and_then(read)
        },
        fallback,
        |k, s| keep(map, k, s),
    )
}

/// `s` (or its absence) as what `map` keeps at `k`; whether that changed.
fn keep<S: PartialEq>(map: &mut BTreeMap<String, S>, k: &str, s: Option<S>) -> bool {
    match s {
        Some(s) if map.get(k) == Some(&s) => false,
        Some(s) => {
            map.insert(k.to_string(), s);
            true
        }
        None => map.remove(k).is_some(),
    }
}

/// A NetworkSet's (or GlobalNetworkSet's) event into `sets`: its labels
/// with the automatic one, and its networks. One that does not read is
/// kept as its reason, as a policy is (fail closed: the policies whose
/// rules could select it isolate).
pub(super) fn fold_net_set<T: Resource>(
    sets: &mut BTreeMap<String, WatchedNetSet>,
    ev: WatchEvent,
    bad: &mut Unreadable,
    read: fn(T) -> SetParts,
) -> Folded {
    fold_read(
        sets,
        ev,
        bad,
        |t| {
            // Read checked (`from_dynamic`): every network parses.
            let (namespace, own, nets) = read(t);
            Ok(Ok(NetSet {
                labels: labels::network_set(namespace.as_deref(), own).into(),
                namespace: namespace.map(Into::into),
                nets: nets.into(),
            }))
        },
        Some(Err),
    )
}

/// What [`fold_net_set`] reads of a set: its namespace (none for a
/// GlobalNetworkSet), own labels and `spec.nets`.
pub(super) type SetParts = (Option<String>, Labels, Vec<IpNet>);

/// What [`fold_net_set`] reads of a NetworkSet.
pub(super) fn namespaced_set(s: NetworkSet) -> SetParts {
    (
        s.metadata.namespace,
        s.metadata.labels.unwrap_or_default(),
        s.spec.networks(),
    )
}

/// What [`fold_net_set`] reads of a GlobalNetworkSet.
pub(super) fn global_set(s: GlobalNetworkSet) -> SetParts {
    (
        None,
        s.metadata.labels.unwrap_or_default(),
        s.spec.networks(),
    )
}

/// A policy that does not convert, as its reason (see [`fold_policy`]).
pub(super) fn converted(
    r: Result<tartan_policy::ir::Policy, tartan_policy::k8s::PolicyError>,
) -> Converted {
    r.map_err(|e| format!("does not convert: {e}"))
}

/// One event of a Service or EndpointSlice watch, handed to `set` as
/// (key, what the proxy keeps or `None`): `read` gives what the proxy
/// keeps of a readable `T` (`None` for one it leaves alone). As for any
/// kind but a policy, an object that does not read is reported to `bad`
/// and keeps its last readable version: an unreadable update must not
/// take a working Service's rules away. One never readable is not
/// served; a deletion deletes.
pub(super) fn fold_proxied<T: Resource, S>(
    ev: WatchEvent,
    bad: &mut Unreadable,
    read: impl FnOnce(T) -> Result<Option<S>, String>,
    set: impl FnOnce(&str, Option<S>) -> bool,
) -> Folded {
    fold_set::<T, Option<S>>(
        ev,
        bad,
        |o| read(from_dynamic::<T>(o).map_err(|e| e.to_string())?),
        |k, s| set(k, s.flatten()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use k8s_openapi::api::networking::v1::NetworkPolicy as KubeNetworkPolicy;
    use tartan_api::Kind;
    use tartan_api::store::typed::to_dynamic;

    fn node(heartbeat: &str, mac: &str) -> WatchEvent {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.annotations = Some(
            [
                ("tartan.dev/vxlan-tunnel-mac".to_string(), mac.to_string()),
                ("heartbeat".to_string(), heartbeat.to_string()),
            ]
            .into(),
        );
        WatchEvent::Modified(to_dynamic(&n).unwrap())
    }

    #[test]
    fn only_changes_to_what_felix_keeps_count() {
        let mut m = BTreeMap::new();
        let spec = |n: Node| NodeInfo::from_node(&n);
        let mut bad = Unreadable::new(None);
        assert!(fold(&mut m, node("1", "02:00:00:00:00:01"), &mut bad, spec).changed);
        assert!(!fold(&mut m, node("2", "02:00:00:00:00:01"), &mut bad, spec).changed);
        assert!(fold(&mut m, node("3", "02:00:00:00:00:02"), &mut bad, spec).changed);
        let gone = match node("3", "x") {
            WatchEvent::Modified(o) => WatchEvent::Deleted(o),
            _ => unreachable!(),
        };
        assert!(fold(&mut m, gone, &mut bad, spec).changed);
        assert!(m.is_empty());
    }

    /// Node `n1` as its kubelet writes it at heartbeat `beat`.
    fn kubelet_node(beat: u32, ip: &str, mac: &str) -> WatchEvent {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.resource_version = Some(format!("{}", 1000 + beat));
        n.metadata.annotations = Some(
            [
                (
                    "tartan.dev/bgp-ipv4-address".to_string(),
                    format!("{ip}/24"),
                ),
                ("tartan.dev/vxlan-tunnel-mac".to_string(), mac.to_string()),
            ]
            .into(),
        );
        let at = serde_json::from_value(serde_json::json!(format!(
            "2026-01-01T00:{:02}:{:02}Z",
            beat * 10 / 60 % 60,
            beat * 10 % 60
        )))
        .unwrap();
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_heartbeat_time: Some(at),
                ..Default::default()
            }]),
            ..Default::default()
        });
        WatchEvent::Modified(to_dynamic(&n).unwrap())
    }

    #[test]
    fn kubelet_heartbeats_cause_no_pass_and_an_address_or_mac_change_does() {
        let mut m = BTreeMap::new();
        let mut bad = Unreadable::new(None);
        let mac = "02:00:00:00:00:01";
        assert!(fold_node(&mut m, kubelet_node(0, "10.0.0.1", mac), &mut bad).changed);
        let passes = (1..=30)
            .filter(|b| fold_node(&mut m, kubelet_node(*b, "10.0.0.1", mac), &mut bad).changed)
            .count();
        assert_eq!(passes, 0, "a heartbeat made felix recompute the dataplane");
        assert!(fold_node(&mut m, kubelet_node(31, "10.0.0.2", mac), &mut bad).changed);
        let other = "02:00:00:00:00:02";
        assert!(fold_node(&mut m, kubelet_node(32, "10.0.0.2", other), &mut bad).changed);
        assert_eq!(m["/n1"].vxlan_mac, Some([2, 0, 0, 0, 0, 2]));
    }

    fn knp(name: &str, role: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": "x"},
            "spec": {"podSelector": {"matchLabels": {"role": role}}, "policyTypes": ["Ingress", "Egress"]}
        }))
        .unwrap()
    }

    fn fold_knp(
        m: &mut BTreeMap<String, Converted>,
        bad: &mut Unreadable,
        ev: WatchEvent,
    ) -> Folded {
        fold_policy(m, ev, bad, |p: KubeNetworkPolicy| {
            converted(
                tartan_policy::k8s::from_network_policy(&p)
                    .map(|m| tartan_policy::ir::from_kubernetes(&m)),
            )
        })
    }

    #[test]
    fn an_unreadable_policy_is_kept_as_its_error_counted_once_and_replaced_when_readable() {
        let mut m = BTreeMap::new();
        let mut bad = Unreadable::new(None);
        let kind = Kind::KubeNetworkPolicy;
        let f = fold_knp(
            &mut m,
            &mut bad,
            WatchEvent::Added(knp("p", serde_json::json!(true))),
        );
        assert!(
            f.changed,
            "an unreadable policy changes the table (it isolates)"
        );
        let why = m["x/p"].clone().unwrap_err();
        assert!(why.contains("spec.podSelector.matchLabels[role]"), "{why}");
        assert_eq!(bad.count(kind), 1);
        // Delivered again (a relist): nothing new, still one.
        let f = fold_knp(
            &mut m,
            &mut bad,
            WatchEvent::Modified(knp("p", serde_json::json!(true))),
        );
        assert!(!f.changed);
        assert_eq!(bad.count(kind), 1);
        // A readable version replaces it.
        let f = fold_knp(
            &mut m,
            &mut bad,
            WatchEvent::Modified(knp("p", serde_json::json!("db"))),
        );
        assert!(f.changed);
        assert!(m["x/p"].is_ok());
        assert_eq!(bad.count(kind), 0);
        // Unreadable again, then deleted: no longer counted.
        fold_knp(
            &mut m,
            &mut bad,
            WatchEvent::Modified(knp("p", serde_json::json!(1))),
        );
        assert_eq!(bad.count(kind), 1);
        assert!(
            fold_knp(
                &mut m,
                &mut bad,
                WatchEvent::Deleted(knp("p", serde_json::json!(1)))
            )
            .changed
        );
        assert_eq!(bad.count(kind), 0);
        assert!(m.is_empty());
    }

    #[test]
    fn an_unreadable_object_of_another_kind_keeps_the_last_readable_version() {
        let mut m = BTreeMap::new();
        let mut bad = Unreadable::new(None);
        let spec = |n: Node| NodeInfo::from_node(&n);
        fold(&mut m, node("1", "02:00:00:00:00:01"), &mut bad, spec);
        let mut broken = match node("2", "x") {
            WatchEvent::Modified(o) => o,
            _ => unreachable!(),
        };
        broken.data["spec"] = serde_json::json!({"podCIDRs": "not a list"});
        assert!(!fold(&mut m, WatchEvent::Modified(broken), &mut bad, spec).changed);
        assert_eq!(bad.count(Kind::Node), 1);
        assert_eq!(m["/n1"].vxlan_mac, Some([2, 0, 0, 0, 0, 1]));
    }
}

#[cfg(test)]
mod sweep_tests {
    use super::*;
    use tartan_api::Kind;

    fn wep(name: &str, node: &str, ip: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "WorkloadEndpoint",
            "metadata": {"name": format!("{name}.eth0"), "namespace": "ns"},
            "spec": {"node": node, "pod": name, "containerID": "c", "endpoint": "eth0",
                     "interfaceName": format!("tar{name}"), "ipNetworks": ip}
        }))
        .unwrap()
    }

    fn pod(name: &str, app: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}},
            "spec": {"containers": []}
        }))
        .unwrap()
    }

    #[test]
    fn a_relisting_removes_what_it_no_longer_tells_of_readable_or_not() {
        let mut e = Endpoints::for_node("me");
        let mut bad = Unreadable::new(None);
        let mut sweep = Sweep::default();
        let mut ev =
            |e: &mut Endpoints, bad: &mut Unreadable, ev| fold_endpoint(e, ev, bad, &mut sweep);
        let ip = |a: &str| serde_json::json!([a]);
        // The first listing.
        assert!(!ev(&mut e, &mut bad, WatchEvent::Relisting).changed);
        for (n, node) in [("a", "me"), ("b", "other"), ("c", "other")] {
            ev(
                &mut e,
                &mut bad,
                WatchEvent::Modified(wep(n, node, ip("10.0.0.1/32"))),
            );
        }
        ev(
            &mut e,
            &mut bad,
            WatchEvent::Modified(wep("d", "other", serde_json::json!(7))),
        );
        assert!(
            ev(
                &mut e,
                &mut bad,
                WatchEvent::Synced {
                    revision: "1".into()
                }
            )
            .synced
        );
        assert_eq!(e.len(), 3);
        assert_eq!(bad.count(Kind::WorkloadEndpoint), 1);

        // A relist that tells of a and b again, unchanged: nothing changes
        // until its end, which removes c and forgets the unreadable d.
        ev(&mut e, &mut bad, WatchEvent::Relisting);
        for (n, node) in [("a", "me"), ("b", "other")] {
            let f = ev(
                &mut e,
                &mut bad,
                WatchEvent::Modified(wep(n, node, ip("10.0.0.1/32"))),
            );
            assert!(!f.changed, "{n} told again unchanged");
        }
        assert_eq!(e.len(), 3, "nothing is gone before the listing ends");
        let f = ev(
            &mut e,
            &mut bad,
            WatchEvent::Synced {
                revision: "2".into(),
            },
        );
        assert!(f.synced && f.changed);
        let mut keys: Vec<&str> = e.keys().collect();
        keys.sort();
        assert_eq!(keys, ["ns/a.eth0", "ns/b.eth0"]);
        assert_eq!(bad.count(Kind::WorkloadEndpoint), 0);

        // Without a listing under way, a Synced removes nothing.
        ev(
            &mut e,
            &mut bad,
            WatchEvent::Synced {
                revision: "3".into(),
            },
        );
        assert_eq!(e.len(), 2);
    }

    /// A Pod's event, no ServiceAccount read.
    fn pod_alone(
        e: &mut Endpoints,
        ev: WatchEvent,
        bad: &mut Unreadable,
        sweep: &mut Sweep,
    ) -> Folded {
        fold_pod(e, &BTreeMap::new(), ev, bad, sweep)
    }

    #[test]
    fn a_relisting_of_pods_gives_the_endpoints_of_a_vanished_pod_their_own_labels() {
        let mut e = Endpoints::for_node("me");
        let mut bad = Unreadable::new(None);
        let mut sweep = Sweep::default();
        let mut eps = Sweep::default();
        let mut w =
            serde_json::to_value(wep("a", "other", serde_json::json!(["10.0.0.9/32"]))).unwrap();
        w["metadata"]["labels"] = serde_json::json!({"app": "copy"});
        let w: DynamicObject = serde_json::from_value(w).unwrap();
        fold_endpoint(&mut e, WatchEvent::Modified(w), &mut bad, &mut eps);
        pod_alone(&mut e, WatchEvent::Relisting, &mut bad, &mut sweep);
        pod_alone(
            &mut e,
            WatchEvent::Modified(pod("a", "pod")),
            &mut bad,
            &mut sweep,
        );
        pod_alone(
            &mut e,
            WatchEvent::Synced {
                revision: "1".into(),
            },
            &mut bad,
            &mut sweep,
        );
        assert_eq!(e.labels_of("ns/a.eth0").unwrap()["app"], "pod");
        pod_alone(&mut e, WatchEvent::Relisting, &mut bad, &mut sweep);
        let f = pod_alone(
            &mut e,
            WatchEvent::Synced {
                revision: "2".into(),
            },
            &mut bad,
            &mut sweep,
        );
        assert!(f.changed);
        assert_eq!(e.pod_keys().count(), 0);
        assert_eq!(e.labels_of("ns/a.eth0").unwrap()["app"], "copy");
    }
}

#[cfg(test)]
mod node_tests {
    use super::*;
    use tartan_api::Kind;

    fn node(extra: serde_json::Value) -> DynamicObject {
        let mut v = serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "annotations": {
                "tartan.dev/bgp-ipv4-address": "192.168.1.2/24",
                "tartan.dev/vxlan-tunnel-mac": "02:00:00:00:00:01"}},
            "spec": {}, "status": {"conditions": []}
        });
        for (k, x) in extra.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    fn fold_one(
        m: &mut BTreeMap<String, NodeInfo>,
        bad: &mut Unreadable,
        o: DynamicObject,
    ) -> bool {
        fold_node(m, WatchEvent::Modified(o), bad).changed
    }

    #[test]
    fn a_node_being_deleted_or_tainted_for_removal_is_not_eligible() {
        assert!(node_eligible(&node(serde_json::json!({}))));
        let mut gone = node(serde_json::json!({}));
        gone.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!node_eligible(&gone));
        let tainted = |key: &str| {
            node(serde_json::json!({"spec": {"taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": key, "value": "1700000000", "effect": "NoSchedule"}]}}))
        };
        assert!(!node_eligible(&tainted(TO_BE_DELETED_TAINT)));
        assert!(node_eligible(&tainted(
            "DeletionCandidateOfClusterAutoscaler"
        )));
        // A spec that is not what a Node's is: no taint read, eligible.
        assert!(node_eligible(&node(
            serde_json::json!({"spec": {"taints": "x"}})
        )));
    }

    #[test]
    fn a_node_is_read_from_its_annotations_and_what_is_not_a_node_is_unreadable() {
        let mut m = BTreeMap::new();
        let mut bad = Unreadable::new(None);
        assert!(fold_one(&mut m, &mut bad, node(serde_json::json!({}))));
        assert_eq!(m["/n1"].vxlan_mac, Some([2, 0, 0, 0, 0, 1]));
        assert_eq!(bad.count(Kind::Node), 0);
        // Not a Node, a spec or status of the wrong shape, a placeholder
        // for a value that did not parse: reported, the last Node kept.
        let mut placeholder = node(serde_json::json!({}));
        placeholder.metadata.annotations = Some(
            [(
                tartan_api::store::placeholder::UNREADABLE_ANNOTATION.to_string(),
                "garbage".to_string(),
            )]
            .into(),
        );
        let wrong = [
            node(serde_json::json!({"kind": "Pod"})),
            node(serde_json::json!({"apiVersion": "v2"})),
            node(serde_json::json!({"spec": "not an object"})),
            node(serde_json::json!({"status": [1]})),
            placeholder,
        ];
        for (i, w) in wrong.into_iter().enumerate() {
            assert!(!fold_one(&mut m, &mut bad, w), "{i}");
            assert_eq!(bad.count(Kind::Node), 1, "{i}");
            assert_eq!(m["/n1"].vxlan_mac, Some([2, 0, 0, 0, 0, 1]), "{i}");
        }
        // Readable again.
        assert!(!fold_one(&mut m, &mut bad, node(serde_json::json!({}))));
        assert_eq!(bad.count(Kind::Node), 0);
        // An annotation that does not parse reads as absent.
        let o = node(
            serde_json::json!({"metadata": {"name": "n1", "annotations": {
            "tartan.dev/vxlan-tunnel-mac": "not a mac"}}}),
        );
        assert!(fold_one(&mut m, &mut bad, o));
        assert_eq!(m["/n1"], NodeInfo::default());
        assert_eq!(bad.count(Kind::Node), 0);
    }
}

#[cfg(test)]
mod proxy_tests {
    use super::*;
    use crate::services::index::ServiceIndex;
    use crate::services::{SERVICE_NAME_LABEL, ServiceHalves, Slice, TCP};
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use std::net::Ipv4Addr;
    use tartan_api::Kind;

    fn svc(ports: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "x"},
            "spec": {"clusterIP": "10.96.5.5", "ports": ports}
        }))
        .unwrap()
    }

    fn slice(endpoints: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-1", "namespace": "x",
                         "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints
        }))
        .unwrap()
    }

    fn fold_svc(ix: &mut ServiceIndex, bad: &mut Unreadable, ev: WatchEvent) -> Folded {
        fold_proxied(
            ev,
            bad,
            |s: Service| ServiceHalves::from_service(&s),
            |k, i| ix.set_service(k, i),
        )
    }

    fn fold_slice(ix: &mut ServiceIndex, bad: &mut Unreadable, ev: WatchEvent) -> Folded {
        fold_proxied(
            ev,
            bad,
            |s: EndpointSlice| Ok(Slice::from_slice(&s, "n1")),
            |k, i| ix.set_slice(k, i),
        )
    }

    const FE: (Ipv4Addr, u8, u16) = (Ipv4Addr::new(10, 96, 5, 5), TCP, 80);

    /// Whether the ClusterIP's port 80 goes to endpoints, is refused, or
    /// is not in the table.
    fn served(ix: &mut ServiceIndex) -> &'static str {
        let t = ix.update();
        if t.frontends.contains_key(&FE) {
            "endpoints"
        } else if t.reject_fe.contains(&FE) {
            "reject"
        } else {
            "absent"
        }
    }

    #[test]
    fn an_unreadable_service_update_keeps_the_last_readable_version() {
        let mut ix = ServiceIndex::new("n1");
        let mut bad = Unreadable::new(None);
        let good = || svc(serde_json::json!([{"port": 80, "targetPort": 8080}]));
        let broken = || svc(serde_json::json!("not a list"));
        // Never readable: not served.
        assert!(!fold_svc(&mut ix, &mut bad, WatchEvent::Added(broken())).changed);
        assert_eq!(bad.count(Kind::Service), 1);
        assert_eq!(served(&mut ix), "absent");
        assert!(fold_svc(&mut ix, &mut bad, WatchEvent::Modified(good())).changed);
        assert_eq!(bad.count(Kind::Service), 0);
        assert_eq!(served(&mut ix), "reject");
        // Unreadable update: counted, and the rules stay.
        assert!(!fold_svc(&mut ix, &mut bad, WatchEvent::Modified(broken())).changed);
        assert_eq!(bad.count(Kind::Service), 1);
        assert_eq!(bad.keys(Kind::Service).collect::<Vec<_>>(), ["x/web"]);
        assert_eq!(served(&mut ix), "reject");
        // A deletion still deletes, and is no longer counted.
        assert!(fold_svc(&mut ix, &mut bad, WatchEvent::Deleted(broken())).changed);
        assert_eq!(bad.count(Kind::Service), 0);
        assert_eq!(served(&mut ix), "absent");
    }

    fn load_balancer(ranges: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "lb", "namespace": "x"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.5.6",
                     "ports": [{"port": 80}], "loadBalancerSourceRanges": ranges},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
        }))
        .unwrap()
    }

    /// The clients the LoadBalancer IP's port 80 admits: `None` for
    /// every client, or the networks.
    fn lb_clients(ix: &mut ServiceIndex) -> Option<Vec<String>> {
        let fe = (Ipv4Addr::new(192, 0, 2, 10), TCP, 80);
        let t = ix.update();
        t.lb_limited.contains(&fe).then(|| {
            t.lb_allowed
                .iter()
                .filter(|(f, _)| *f == fe)
                .map(|(_, n)| n.to_string())
                .collect()
        })
    }

    #[test]
    fn a_load_balancer_with_unreadable_source_ranges_is_never_served_open() {
        let mut ix = ServiceIndex::new("n1");
        let mut bad = Unreadable::new(None);
        let lb_fe = (Ipv4Addr::new(192, 0, 2, 10), TCP, 80);
        // Never readable: not served at all (it was served open).
        let broken = || load_balancer(serde_json::json!(["10.0.0.0/33"]));
        assert!(!fold_svc(&mut ix, &mut bad, WatchEvent::Added(broken())).changed);
        assert_eq!(bad.keys(Kind::Service).collect::<Vec<_>>(), ["x/lb"]);
        assert!(!ix.update().reject_fe.contains(&lb_fe));
        assert_eq!(lb_clients(&mut ix), None);
        // Readable: limited.
        let good = load_balancer(serde_json::json!(["10.0.0.0/8"]));
        assert!(fold_svc(&mut ix, &mut bad, WatchEvent::Modified(good)).changed);
        assert_eq!(bad.count(Kind::Service), 0);
        assert!(ix.update().reject_fe.contains(&lb_fe));
        assert_eq!(lb_clients(&mut ix), Some(vec!["10.0.0.0/8".into()]));
        // An update with one range that does not parse keeps the limit.
        let worse = load_balancer(serde_json::json!(["172.16.0.0/12", "everyone"]));
        assert!(!fold_svc(&mut ix, &mut bad, WatchEvent::Modified(worse)).changed);
        assert_eq!(bad.count(Kind::Service), 1);
        assert_eq!(lb_clients(&mut ix), Some(vec!["10.0.0.0/8".into()]));
    }

    #[test]
    fn an_unreadable_slice_update_keeps_the_last_readable_version() {
        let mut ix = ServiceIndex::new("n1");
        let mut bad = Unreadable::new(None);
        let s = svc(serde_json::json!([{"port": 80, "targetPort": 8080}]));
        fold_svc(&mut ix, &mut bad, WatchEvent::Added(s));
        let good = || slice(serde_json::json!([{"addresses": ["10.244.0.5"]}]));
        let broken = || slice(serde_json::json!({"not": "a list"}));
        assert!(!fold_slice(&mut ix, &mut bad, WatchEvent::Added(broken())).changed);
        assert_eq!(bad.count(Kind::EndpointSlice), 1);
        assert_eq!(served(&mut ix), "reject");
        assert!(fold_slice(&mut ix, &mut bad, WatchEvent::Modified(good())).changed);
        assert_eq!(served(&mut ix), "endpoints");
        assert!(!fold_slice(&mut ix, &mut bad, WatchEvent::Modified(broken())).changed);
        assert_eq!(bad.count(Kind::EndpointSlice), 1);
        assert_eq!(served(&mut ix), "endpoints");
        assert!(fold_slice(&mut ix, &mut bad, WatchEvent::Deleted(broken())).changed);
        assert_eq!(bad.count(Kind::EndpointSlice), 0);
        assert_eq!(served(&mut ix), "reject");
    }
}

#[cfg(test)]
mod label_tests {
    use super::*;
    use crate::calc::policy::desired;
    use crate::calc::state::State;
    use tartan_api::Kind;
    use tartan_api::resources::GlobalNetworkPolicy;
    use tartan_policy::compile::OPEN_CHAIN;

    /// Endpoint `pod.eth0` of namespace `ns` on node n1, with `labels`
    /// as the CNI plugin copied them.
    fn wep(ns: &str, pod: &str, labels: serde_json::Value) -> WatchEvent {
        WatchEvent::Modified(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "tartan.dev/v1", "kind": "WorkloadEndpoint",
                "metadata": {"name": format!("{pod}.eth0"), "namespace": ns, "labels": labels},
                "spec": {"node": "n1", "pod": pod, "containerID": "c", "endpoint": "eth0",
                         "interfaceName": format!("tar{pod}"), "ipNetworks": ["10.0.0.1/32"]}
            }))
            .unwrap(),
        )
    }

    fn pod(ns: &str, name: &str, sa: &str, labels: serde_json::Value) -> WatchEvent {
        WatchEvent::Modified(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"containers": [], "serviceAccountName": sa}
            }))
            .unwrap(),
        )
    }

    /// A Pod's event into `s`, with the ServiceAccounts it has read.
    fn pod_in(s: &mut State, ev: WatchEvent, bad: &mut Unreadable, sweep: &mut Sweep) {
        fold_pod(&mut s.endpoints, &s.service_accounts, ev, bad, sweep);
    }

    /// The interfaces a policy selecting `spec` isolates (for ingress).
    fn selected(s: &State, spec: serde_json::Value) -> Vec<String> {
        let mut spec = spec;
        spec["types"] = serde_json::json!(["Ingress"]);
        let p: GlobalNetworkPolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
            "metadata": {"name": "g"}, "spec": spec
        }))
        .unwrap();
        let mut s = s.clone();
        s.global_policies.insert(
            "/g".into(),
            converted(tartan_policy::tartan::from_global_network_policy(&p)),
        );
        assert!(s.global_policies["/g"].is_ok(), "{:?}", s.global_policies);
        desired("n1", &s)
            .to_endpoint
            .into_iter()
            .filter(|(_, chain)| chain != OPEN_CHAIN)
            .map(|(i, _)| i)
            .collect()
    }

    #[test]
    fn selectors_on_calicos_automatic_labels_match_and_cannot_be_forged() {
        let mut s = State::for_node("n1");
        let mut bad = Unreadable::new(None);
        let (mut eps, mut pods) = (Sweep::default(), Sweep::default());
        // Each label the other pod or namespace would have, claimed.
        let forged = serde_json::json!({
            labels::NAMESPACE: "x", labels::ORCHESTRATOR: "none",
            labels::SERVICE_ACCOUNT: "sa1", "app": "b"
        });
        for ev in [
            wep("x", "a", serde_json::json!({"app": "a"})),
            wep("y", "b", forged.clone()),
        ] {
            fold_endpoint(&mut s.endpoints, ev, &mut bad, &mut eps);
        }
        s.namespaces.insert("/x".into(), Labels::new());
        s.namespaces
            .insert("/y".into(), [(labels::NAME.to_string(), "x".into())].into());
        let by_ns = serde_json::json!({"selector": "projectcalico.org/namespace == 'x'"});
        let by_sa = serde_json::json!({"selector": "projectcalico.org/serviceaccount == 'sa1'"});
        let by_orch = serde_json::json!({"selector": "projectcalico.org/orchestrator == 'k8s'"});
        let by_ns_name = serde_json::json!({"namespaceSelector": "projectcalico.org/name == 'x'"});
        assert_eq!(selected(&s, by_ns.clone()), ["tara"]);
        assert_eq!(selected(&s, by_orch.clone()), ["tara", "tarb"]);
        assert_eq!(selected(&s, by_ns_name.clone()), ["tara"]);
        // Before its Pod is seen, an endpoint has no service account: the
        // copy's label is the Pod's own, not the service account.
        assert!(selected(&s, by_sa.clone()).is_empty());
        for ev in [
            pod("x", "a", "sa1", serde_json::json!({"app": "a"})),
            pod("y", "b", "sa2", forged),
        ] {
            pod_in(&mut s, ev, &mut bad, &mut pods);
        }
        assert_eq!(bad.count(Kind::Pod), 0);
        assert_eq!(selected(&s, by_sa), ["tara"]);
        assert_eq!(selected(&s, by_ns), ["tara"]);
        assert_eq!(selected(&s, by_orch), ["tara", "tarb"]);
        assert_eq!(selected(&s, by_ns_name), ["tara"]);
        let b = s.endpoints.labels_of("y/b.eth0").unwrap();
        assert_eq!(b[labels::NAMESPACE], "y");
        assert_eq!(b[labels::ORCHESTRATOR], "k8s");
        assert_eq!(b[labels::SERVICE_ACCOUNT], "sa2");
        assert_eq!(b["app"], "b");
    }

    fn service_account(ns: &str, name: &str, extra: serde_json::Value) -> WatchEvent {
        let mut o = serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns}
        });
        if let (Some(o), Some(extra)) = (o.as_object_mut(), extra.as_object()) {
            o.extend(extra.clone());
        }
        WatchEvent::Modified(serde_json::from_value(o).unwrap())
    }

    /// ServiceAccount `name` of namespace x, labelled `team`.
    fn labelled_sa(name: &str, team: &str) -> WatchEvent {
        let meta = serde_json::json!({"metadata": {"name": name, "namespace": "x", "labels": {"team": team}}});
        service_account("x", name, meta)
    }

    /// A ServiceAccount's event into `s`.
    fn sa_in(s: &mut State, bad: &mut Unreadable, ev: WatchEvent) -> Folded {
        fold_service_account(&mut s.service_accounts, &mut s.endpoints, ev, bad)
    }

    /// Endpoints x/a (service account `front`) and x/b (`back`, its Pod
    /// claiming `pcsa.` labels of its own), their Pods seen.
    fn two_accounts() -> (State, Unreadable) {
        let mut s = State::for_node("n1");
        let mut bad = Unreadable::new(None);
        let (mut eps, mut pods) = (Sweep::default(), Sweep::default());
        for ev in [
            wep("x", "a", serde_json::json!({"app": "a"})),
            wep("x", "b", serde_json::json!({"pcsa.team": "db"})),
        ] {
            fold_endpoint(&mut s.endpoints, ev, &mut bad, &mut eps);
        }
        s.namespaces.insert("/x".into(), Labels::new());
        for ev in [
            pod("x", "a", "front", serde_json::json!({"app": "a"})),
            pod(
                "x",
                "b",
                "back",
                serde_json::json!({"pcsa.team": "db", "pcsa.projectcalico.org/name": "front"}),
            ),
        ] {
            pod_in(&mut s, ev, &mut bad, &mut pods);
        }
        (s, bad)
    }

    #[test]
    fn service_account_labels_are_forced_onto_its_pods_and_follow_its_changes() {
        let (mut s, mut bad) = two_accounts();
        let by_team = serde_json::json!({"serviceAccountSelector": "team == 'db'"});
        let by_name =
            serde_json::json!({"serviceAccountSelector": "projectcalico.org/name == 'front'"});
        // No ServiceAccount seen: no pcsa labels, the Pod's own dropped.
        assert!(selected(&s, by_team.clone()).is_empty());
        assert!(selected(&s, by_name.clone()).is_empty());
        let b = s.endpoints.labels_of("x/b.eth0").unwrap();
        assert!(!b.keys().any(|k| k.starts_with("pcsa.")), "{b:?}");
        let f = sa_in(&mut s, &mut bad, labelled_sa("front", "db"));
        assert!(f.changed);
        assert_eq!(selected(&s, by_team.clone()), ["tara"]);
        assert_eq!(selected(&s, by_name.clone()), ["tara"]);
        let a = s.endpoints.labels_of("x/a.eth0").unwrap();
        assert_eq!(a["pcsa.team"], "db");
        assert_eq!(a["app"], "a");
        assert_eq!(a[labels::SERVICE_ACCOUNT], "front");
        // The account relabelled: its pods follow.
        sa_in(&mut s, &mut bad, labelled_sa("front", "web"));
        assert!(selected(&s, by_team.clone()).is_empty());
        assert_eq!(selected(&s, by_name.clone()), ["tara"]);
        // A Pod seen after its account takes its labels at once.
        sa_in(&mut s, &mut bad, labelled_sa("back", "db"));
        assert_eq!(selected(&s, by_team.clone()), ["tarb"]);
        // Deleted: the labels go.
        let gone: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "back", "namespace": "x"}
        }))
        .unwrap();
        sa_in(&mut s, &mut bad, WatchEvent::Deleted(gone));
        assert!(selected(&s, by_team).is_empty());
        assert_eq!(bad.count(Kind::ServiceAccount), 0);
    }

    #[test]
    fn an_unreadable_service_account_fails_closed_for_policies_that_select_by_its_labels() {
        let (mut s, mut bad) = two_accounts();
        let unreadable = serde_json::json!({"automountServiceAccountToken": "yes"});
        sa_in(&mut s, &mut bad, service_account("x", "front", unreadable));
        assert_eq!(bad.count(Kind::ServiceAccount), 1);
        assert!(s.service_accounts["x/front"].is_err());
        // Its pods cannot be told apart: isolated, where a policy selects by
        // service account labels; by name alone nothing is unknown.
        let by_team = serde_json::json!({"serviceAccountSelector": "team == 'web'"});
        assert_eq!(selected(&s, by_team), ["tara"]);
        let by_names = serde_json::json!({"ingress": [{"action": "Allow",
            "source": {"serviceAccounts": {"names": ["back"]}}}]});
        let by_names: Vec<String> = selected(&s, by_names);
        assert_eq!(by_names, ["tara", "tarb"]);
        let open = serde_json::json!({"selector": "app == 'zzz'"});
        assert!(selected(&s, open).is_empty());
    }
}

#[cfg(test)]
mod net_set_tests {
    use super::*;
    use tartan_api::Kind;

    fn set(
        kind: &str,
        ns: Option<&str>,
        labels: serde_json::Value,
        nets: serde_json::Value,
    ) -> DynamicObject {
        let mut meta = serde_json::json!({"name": "s", "labels": labels});
        if let Some(ns) = ns {
            meta["namespace"] = ns.into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": kind, "metadata": meta,
            "spec": {"nets": nets}
        }))
        .unwrap()
    }

    #[test]
    fn network_sets_are_read_with_their_namespace_label_and_unreadable_ones_kept_as_errors() {
        let mut sets = BTreeMap::new();
        let mut bad = Unreadable::new(None);
        let forged = serde_json::json!({"role": "db", labels::NAMESPACE: "kube-system"});
        let ns = set(
            "NetworkSet",
            Some("x"),
            forged.clone(),
            serde_json::json!(["198.51.100.0/28", "203.0.113.7"]),
        );
        let f = fold_net_set(
            &mut sets,
            WatchEvent::Added(ns.clone()),
            &mut bad,
            namespaced_set,
        );
        assert!(f.changed);
        let got = sets["x/s"].as_ref().unwrap();
        assert_eq!(got.labels["role"], "db");
        assert_eq!(
            got.labels[labels::NAMESPACE],
            "x",
            "a set cannot claim another namespace"
        );
        assert_eq!(
            got.nets.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            ["198.51.100.0/28", "203.0.113.7/32"]
        );
        // The same again changes nothing.
        assert!(
            !fold_net_set(
                &mut sets,
                WatchEvent::Modified(ns),
                &mut bad,
                namespaced_set
            )
            .changed
        );
        // A global one has no namespace label, whatever it claims.
        let g = set(
            "GlobalNetworkSet",
            None,
            forged,
            serde_json::json!(["10.0.0.0/8"]),
        );
        assert!(
            fold_net_set(
                &mut sets,
                WatchEvent::Added(g.clone()),
                &mut bad,
                global_set
            )
            .changed
        );
        assert!(
            !sets["/s"]
                .as_ref()
                .unwrap()
                .labels
                .contains_key(labels::NAMESPACE)
        );
        // Unreadable: kept as its reason, reported; readable again: gone
        // from the report.
        let broken = set(
            "GlobalNetworkSet",
            None,
            serde_json::json!({}),
            serde_json::json!(["10.0.0.1/8"]),
        );
        assert!(
            fold_net_set(
                &mut sets,
                WatchEvent::Modified(broken),
                &mut bad,
                global_set
            )
            .changed
        );
        let why = sets["/s"].as_ref().unwrap_err();
        assert!(why.contains("spec.nets[0]"), "{why}");
        assert_eq!(bad.count(Kind::GlobalNetworkSet), 1);
        assert!(
            fold_net_set(
                &mut sets,
                WatchEvent::Modified(g.clone()),
                &mut bad,
                global_set
            )
            .changed
        );
        assert_eq!(bad.count(Kind::GlobalNetworkSet), 0);
        assert!(fold_net_set(&mut sets, WatchEvent::Deleted(g), &mut bad, global_set).changed);
        assert!(!sets.contains_key("/s"));
        assert!(sets.contains_key("x/s"));
    }
}
