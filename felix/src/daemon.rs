//! The agent's loop: follow the datastore, recompute, apply; and check the
//! kernel again every `resync` so that a route removed by hand comes back.
//! On shutdown the dataplane stays as it is: pods keep their traffic while
//! felix restarts.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy as KubeNetworkPolicy;
use tartan_api::Kind;
use tartan_api::resources::{
    GlobalNetworkPolicy, IpPool, IpamBlock, NetworkPolicy, WorkloadEndpoint,
};
use tartan_api::store::typed::{Resource, from_dynamic};
use tartan_api::store::watch::{WatchEvent, watch};
use tartan_api::store::{Datastore, DynamicObject, WatchScope};
use tracing::{debug, error, info, warn};

use crate::calc::encap;
use crate::calc::policy::Converted;
use crate::calc::routes::desired;
use crate::calc::state::{NodeInfo, State};
use crate::dataplane::events::KernelEvents;
use crate::dataplane::nft::Written;
use crate::dataplane::policy::PolicyDriver;
use crate::dataplane::routes::RouteDriver;
use crate::dataplane::services::ServiceProxy;
use crate::dataplane::tunnels::{IpipSupport, TunnelDriver};
use crate::health::Health;
use crate::services::{ServiceInfo, SliceInfo};
use crate::unreadable::Unreadable;
use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::node::{VXLAN_TUNNEL_MAC, format_mac};
use tartan_api::store::typed::TypedStore;

/// Aborts the task when dropped (the health server ends with the loop).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub node: String,
    /// How often the kernel is compared with the desired state even when
    /// nothing changed.
    pub resync: Duration,
    /// How long an unexpected route of ours is left alone (a pod being
    /// wired whose record has not arrived yet).
    pub grace: Duration,
    /// Where /livez, /readyz and /metrics are served; `None`: nowhere.
    pub health: Option<std::net::SocketAddr>,
    /// Where the Service proxy's /healthz and /livez are served (10256,
    /// as kube-proxy); `None`: nowhere.
    pub proxy_health: Option<std::net::SocketAddr>,
}

fn key(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

/// What one event did to the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Folded {
    /// The watch has delivered everything that existed.
    synced: bool,
    /// What felix keeps of the objects changed (a Node's heartbeat, say,
    /// changes nothing felix uses).
    changed: bool,
}

/// Fold one event of a watch of `T` into `map` (keyed `namespace/name`,
/// holding what `spec` takes from each object). An object that does not
/// read is reported to `bad` and leaves `map` as it was.
fn fold<T: Resource, S: PartialEq>(
    map: &mut BTreeMap<String, S>,
    ev: WatchEvent,
    bad: &mut Unreadable,
    spec: fn(T) -> S,
) -> Folded {
    fold_read(map, ev, bad, |t| Ok(spec(t)), None)
}

/// [`fold`] for a policy: `convert` may fail too, and a policy that does
/// not decode or does not convert is kept as its error (enforced as an
/// isolation: fail closed).
fn fold_policy<T: Resource>(
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
    let changed = match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            let k = key(&o);
            let got = from_dynamic::<T>(o)
                .map_err(|e| e.to_string())
                .and_then(read);
            bad.note(
                T::KIND,
                &k,
                got.as_ref().map(|_| ()).map_err(String::as_str),
            );
            let s = match (got, fallback) {
                (Ok(s), _) => s,
                (Err(why), Some(f)) => f(why),
                (Err(_), None) => return Folded::default(),
            };
            if map.get(&k) == Some(&s) {
                false
            } else {
                map.insert(k, s);
                true
            }
        }
        WatchEvent::Deleted(o) => {
            let k = key(&o);
            bad.note(T::KIND, &k, Ok(()));
            map.remove(&k).is_some()
        }
        WatchEvent::Synced { .. } => {
            return Folded {
                synced: true,
                changed: true,
            };
        }
    };
    Folded {
        synced: false,
        changed,
    }
}

/// A node routes between its pods and the network: IPv4 and IPv6
/// forwarding on (left on at shutdown, like everything else).
fn enable_forwarding() {
    for (path, what) in [
        ("/proc/sys/net/ipv4/ip_forward", "IPv4"),
        ("/proc/sys/net/ipv6/conf/all/forwarding", "IPv6"),
    ] {
        match std::fs::read_to_string(path) {
            Ok(v) if v.trim() == "1" => {}
            _ => match std::fs::write(path, "1") {
                Ok(()) => info!("{what} forwarding turned on"),
                Err(e) => warn!(error = %e, "cannot turn on {what} forwarding"),
            },
        }
    }
}

/// Log records of policy rules come from the nodes' and pods' network
/// namespaces, which the kernel logs only with this switch on. It exists
/// only in the first namespace; elsewhere the host must set it.
fn allow_logging_from_namespaces() {
    let path = "/proc/sys/net/netfilter/nf_log_all_netns";
    if std::fs::read_to_string(path).is_ok_and(|v| v.trim() == "1") {
        return;
    }
    if let Err(e) = std::fs::write(path, "1") {
        debug!(error = %e, "cannot turn on nf_log_all_netns; Log rules log only where the host allows it");
    }
}

/// A policy that does not convert, as its reason (see [`fold_policy`]).
fn converted(r: Result<tartan_policy::ir::Policy, tartan_policy::k8s::PolicyError>) -> Converted {
    r.map_err(|e| format!("does not convert: {e}"))
}

/// Compute the policy table and write what changed.
fn apply_policy(
    driver: &mut PolicyDriver,
    cache: &mut tartan_policy::compile::CompileCache,
    node: &str,
    state: &State,
    health: &Health,
    check: bool,
) {
    let want = crate::calc::policy::desired_cached(node, state, cache);
    match driver.apply(&want, check, &|_| false) {
        Ok(Written::Nothing) => {}
        Ok(Written::Difference(t)) => {
            health.policy_writes.inc();
            info!(
                chains = want.chains.len(),
                sets = want.sets.len(),
                took_ms = t.as_secs_f64() * 1e3,
                "policy table changed"
            );
        }
        Ok(Written::Full(t)) => {
            health.policy_writes.inc();
            info!(
                chains = want.chains.len(),
                sets = want.sets.len(),
                endpoints = want.to_endpoint.len(),
                took_ms = t.as_secs_f64() * 1e3,
                "policy table written"
            );
        }
        Err(e) => {
            health.policy_failures.inc();
            warn!(error = %e, "policy table not written; retrying at the next check");
        }
    }
}

/// Write what changed in the service table.
fn apply_services(proxy: &mut ServiceProxy, health: &Health, check: bool) {
    let written = proxy.sync(check);
    if written.is_ok() {
        health.proxy_synced();
    }
    match written {
        Ok(Written::Nothing) => {}
        Ok(Written::Difference(t)) => {
            health.service_writes.inc();
            let table = proxy.index.table();
            info!(
                frontends = table.frontends.len(),
                node_ports = table.node_ports.len(),
                took_ms = t.as_secs_f64() * 1e3,
                "service table changed"
            );
        }
        Ok(Written::Full(t)) => {
            health.service_writes.inc();
            let table = proxy.index.table();
            info!(
                frontends = table.frontends.len(),
                node_ports = table.node_ports.len(),
                endpoints = table.fe_slots.len(),
                took_ms = t.as_secs_f64() * 1e3,
                "service table written"
            );
        }
        Err(e) => {
            health.service_failures.inc();
            warn!(error = %e, "service table not written; retrying at the next check");
        }
    }
}

/// The typed object, or `None` (reported to `bad`) when it does not read:
/// an unreadable Service or EndpointSlice counts as absent.
fn read_noting<T: Resource>(bad: &mut Unreadable, key: &str, o: DynamicObject) -> Option<T> {
    let got = from_dynamic::<T>(o).map_err(|e| e.to_string());
    bad.note(
        T::KIND,
        key,
        got.as_ref().map(|_| ()).map_err(String::as_str),
    );
    got.ok()
}

/// Hand one watch event to `set` as (key, object or `None` when gone).
fn fold_into(ev: WatchEvent, mut set: impl FnMut(&str, Option<DynamicObject>) -> bool) -> Folded {
    match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            let k = key(&o);
            Folded {
                synced: false,
                changed: set(&k, Some(o)),
            }
        }
        WatchEvent::Deleted(o) => Folded {
            synced: false,
            changed: set(&key(&o), None),
        },
        WatchEvent::Synced { .. } => Folded {
            synced: true,
            changed: true,
        },
    }
}

/// Write this node's VTEP MAC into its Node's annotations.
async fn publish_vtep(
    store: &dyn Datastore,
    node: &str,
    mac: [u8; 6],
) -> Result<(), tartan_api::store::StoreError> {
    let mut n: Node = store.get_typed(None, node).await?;
    n.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(VXLAN_TUNNEL_MAC.to_string(), format_mac(&mac));
    store.update_typed(&n).await?;
    Ok(())
}

/// Run until `shutdown` completes.
pub async fn run(
    cfg: Config,
    store: Arc<dyn Datastore>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let mut endpoints = watch(
        store.clone(),
        WatchScope {
            kind: Kind::WorkloadEndpoint,
            namespace: None,
        },
    );
    let mut pools = watch(
        store.clone(),
        WatchScope {
            kind: Kind::IpPool,
            namespace: None,
        },
    );
    let mut blocks = watch(
        store.clone(),
        WatchScope {
            kind: Kind::IpamBlock,
            namespace: None,
        },
    );
    let mut nodes = watch(
        store.clone(),
        WatchScope {
            kind: Kind::Node,
            namespace: None,
        },
    );
    let all = |kind| {
        watch(
            store.clone(),
            WatchScope {
                kind,
                namespace: None,
            },
        )
    };
    let mut pods = all(Kind::Pod);
    let mut namespaces = all(Kind::Namespace);
    let mut kube_policies = all(Kind::KubeNetworkPolicy);
    let mut tartan_policies = all(Kind::NetworkPolicy);
    let mut global_policies = all(Kind::GlobalNetworkPolicy);
    let mut services = all(Kind::Service);
    let mut slices = all(Kind::EndpointSlice);
    enable_forwarding();
    let mut routes = RouteDriver::connect(cfg.grace).context("open netlink")?;
    let mut tunnels = TunnelDriver::connect().context("open netlink")?;
    let mut events = KernelEvents::subscribe().context("listen to netlink events")?;
    let health = Health::new(cfg.resync);
    let mut bad = Unreadable::new(Some(health.clone()));
    let _server = cfg.health.map(|addr| {
        let h = health.clone();
        AbortOnDrop(tokio::spawn(async move {
            if let Err(e) = crate::health::serve(addr, h).await {
                warn!(%addr, error = %e, "health endpoint failed");
            }
        }))
    });
    let _proxy_server = cfg.proxy_health.map(|addr| {
        let h = health.clone();
        AbortOnDrop(tokio::spawn(async move {
            if let Err(e) = crate::health::serve_proxy(addr, h).await {
                error!(%addr, error = %e, "service proxy health endpoint failed; load balancers cannot probe this node");
            }
        }))
    });
    let mut state = State::default();
    let (mut endpoints_synced, mut blocks_synced, mut pools_synced, mut nodes_synced) =
        (false, false, false, false);
    // Pods, namespaces and the three policy kinds.
    let mut policy_synced = [false; 5];
    let mut policy = PolicyDriver::default();
    let mut policy_cache = tartan_policy::compile::CompileCache::default();
    // Services and EndpointSlices.
    let mut services_synced = [false; 2];
    let mut proxy = ServiceProxy::new(&cfg.node);
    proxy.conntrack_deleted = health.conntrack_deleted.clone();
    let mut health_checks = crate::services::healthcheck::HealthChecks::default();
    allow_logging_from_namespaces();
    let mut nat_applied: Option<crate::calc::nat::Nat> = None;
    let mut recheck = false;
    // The MAC last written to our Node; written again if the Node still
    // lacks it at a periodic check (a lost update, a Node re-created).
    let mut published: Option<[u8; 6]> = None;
    let mut recheck_published = false;
    // The tunnels as last applied: read back from the kernel only when
    // they change, at the periodic check, or after a kernel event.
    let mut tunnels_applied: Option<encap::Tunnels> = None;
    let mut kernel_check = false;
    let mut dirty = false;
    let mut tick = tokio::time::interval(cfg.resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    info!(node = %cfg.node, "felix started");
    loop {
        tokio::select! {
            ev = endpoints.next() => {
                let l = fold(&mut state.endpoint_labels, ev.clone(), &mut bad, |w: WorkloadEndpoint| {
                    w.metadata.labels.unwrap_or_default()
                });
                let f = fold(&mut state.endpoints, ev, &mut bad, |w: WorkloadEndpoint| w.spec);
                endpoints_synced |= f.synced;
                dirty |= f.changed || l.changed;
            }
            ev = pods.next() => {
                let f = fold(&mut state.pod_labels, ev, &mut bad, |p: Pod| p.metadata.labels.unwrap_or_default());
                policy_synced[0] |= f.synced;
                dirty |= f.changed;
            }
            ev = namespaces.next() => {
                let f = fold(&mut state.namespaces, ev, &mut bad, |n: Namespace| n.metadata.labels.unwrap_or_default());
                policy_synced[1] |= f.synced;
                dirty |= f.changed;
            }
            ev = kube_policies.next() => {
                let f = fold_policy(&mut state.kube_policies, ev, &mut bad, |p: KubeNetworkPolicy| {
                    converted(tartan_policy::k8s::from_network_policy(&p)
                        .map(|m| tartan_policy::ir::from_kubernetes(&m)))
                });
                policy_synced[2] |= f.synced;
                dirty |= f.changed;
            }
            ev = tartan_policies.next() => {
                let f = fold_policy(&mut state.tartan_policies, ev, &mut bad, |p: NetworkPolicy| {
                    converted(tartan_policy::tartan::from_network_policy(&p))
                });
                policy_synced[3] |= f.synced;
                dirty |= f.changed;
            }
            ev = services.next() => {
                let f = fold_into(ev, |k, o| {
                    let info = o.and_then(|o| read_noting::<Service>(&mut bad, k, o)).and_then(|s| ServiceInfo::from_service(&s));
                    proxy.index.set_service(k, info)
                });
                services_synced[0] |= f.synced;
                dirty |= f.changed;
            }
            ev = slices.next() => {
                let f = fold_into(ev, |k, o| {
                    let info = o.and_then(|o| read_noting::<EndpointSlice>(&mut bad, k, o)).and_then(|s| SliceInfo::from_slice(&s));
                    proxy.index.set_slice(k, info)
                });
                services_synced[1] |= f.synced;
                dirty |= f.changed;
            }
            ev = global_policies.next() => {
                let f = fold_policy(&mut state.global_policies, ev, &mut bad, |p: GlobalNetworkPolicy| {
                    converted(tartan_policy::tartan::from_global_network_policy(&p))
                });
                policy_synced[4] |= f.synced;
                dirty |= f.changed;
            }
            ev = blocks.next() => {
                let f = fold(&mut state.blocks, ev, &mut bad, |b: IpamBlock| b.spec);
                blocks_synced |= f.synced;
                dirty |= f.changed;
            }
            ev = pools.next() => {
                let f = fold(&mut state.pools, ev, &mut bad, |p: IpPool| p.spec);
                pools_synced |= f.synced;
                dirty |= f.changed;
            }
            ev = nodes.next() => {
                let f = fold(&mut state.nodes, ev, &mut bad, |n: Node| NodeInfo::from_node(&n));
                nodes_synced |= f.synced;
                dirty |= f.changed;
            }
            Some(()) = events.rx.recv() => {
                // Something of ours changed in the kernel: compare now.
                dirty = true;
                kernel_check = true;
            }
            _ = tick.tick() => {
                health.pass();
                dirty = true;
                recheck = true;
                recheck_published = true;
                kernel_check = true;
            }
            () = &mut shutdown => {
                info!("felix stopping; the dataplane stays as it is");
                return Ok(());
            }
            // A burst of events is applied once, when it has passed.
            () = tokio::time::sleep(Duration::from_millis(5)), if dirty => {
                if !(endpoints_synced && blocks_synced && pools_synced && nodes_synced) {
                    continue;
                }
                dirty = false;
                let recheck_published = std::mem::take(&mut recheck_published);
                // NAT: replaced when it changes or has gone missing.
                let nat = crate::calc::nat::desired(&state);
                // Whether the table was removed by hand is asked of nft only at
                // the periodic check, not on every datastore event.
                let gone = std::mem::take(&mut recheck) && !crate::dataplane::nat::present();
                if nat_applied.as_ref() != Some(&nat) || gone {
                    match crate::dataplane::nat::apply(&nat) {
                        Ok(()) => {
                            info!(masquerading = ?nat.from, "NAT table written");
                            nat_applied = Some(nat);
                        }
                        Err(e) => {
                            health.apply_failures.inc();
                            warn!(error = %e, "NAT table not written; retrying at the next check");
                        }
                    }
                }
                if policy_synced.iter().all(|s| *s) {
                    apply_policy(
                        &mut policy,
                        &mut policy_cache,
                        &cfg.node,
                        &state,
                        &health,
                        kernel_check,
                    );
                }
                if services_synced.iter().all(|s| *s) {
                    proxy.index.set_local_pods(crate::calc::services::local_pods(&cfg.node, &state));
                    apply_services(&mut proxy, &health, kernel_check);
                    health_checks.sync(proxy.index.health_targets());
                }
                let mut want = desired(&cfg.node, &state);
                let ipip_before = tunnels.ipip.clone();
                let (mut remote, mut wanted) = encap::remote(&cfg.node, &state, tunnels.ipip == IpipSupport::Yes);
                if std::mem::take(&mut kernel_check) || tunnels_applied.as_ref() != Some(&wanted) {
                    match tunnels.apply(&wanted).await {
                        Ok(t) => {
                            if t.created + t.entries > 0 {
                                info!(devices_created = t.created, entries_changed = t.entries, "tunnels updated");
                            }
                            tunnels_applied = Some(wanted.clone());
                        }
                        Err(e) => {
                            tunnels_applied = None;
                            health.apply_failures.inc();
                            warn!(error = %e, "tunnel update failed; retrying at the next check");
                        }
                    }
                }
                if tunnels.ipip != ipip_before {
                    (remote, wanted) = encap::remote(&cfg.node, &state, tunnels.ipip == IpipSupport::Yes);
                }
                health.ipip_supported.set(match tunnels.ipip {
                    IpipSupport::Untried => -1,
                    IpipSupport::Yes => 1,
                    IpipSupport::No(_) => 0,
                });
                health.vxlan_peers.set(wanted.vxlan.as_ref().map_or(0, |v| v.peers.len() as i64));
                if let Some(v) = &wanted.vxlan
                    && state.node(&cfg.node).and_then(|n| n.vxlan_mac) != Some(v.mac)
                    && published != Some(v.mac)
                {
                    match publish_vtep(store.as_ref(), &cfg.node, v.mac).await {
                        Ok(()) => {
                            info!(mac = %format_mac(&v.mac), "VTEP MAC published on the Node");
                            published = Some(v.mac);
                        }
                        Err(e) => warn!(error = %e, "cannot publish the VTEP MAC; retrying at the next check"),
                    }
                }
                if recheck_published {
                    published = None;
                }
                // Local pod routes win over a stale record of the address
                // elsewhere.
                for (dst, t) in remote {
                    want.entry(dst).or_insert(t);
                }
                health.applies.inc();
                health.routes_desired.set(want.len() as i64);
                match routes.apply(&want).await {
                    Ok(a) => {
                        health.routes_installed.inc_by(a.installed as u64);
                        health.routes_removed.inc_by(a.removed as u64);
                        health.routes_waiting.set(a.waiting as i64);
                        health.set_ready(true);
                        if a.installed + a.removed > 0 {
                            info!(installed = a.installed, removed = a.removed, waiting = a.waiting, "routes updated");
                        }
                    }
                    Err(e) => {
                        health.apply_failures.inc();
                        health.set_ready(false);
                        warn!(error = %e, "route update failed; retrying at the next check");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
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
