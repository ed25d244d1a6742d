//! The agent's loop: follow the datastore, recompute, apply; and check the
//! kernel again every `resync` so that a route removed by hand comes back.
//! On shutdown the dataplane stays as it is: pods keep their traffic while
//! felix restarts.
//!
//! The parts: [`config`] (what felix is told at startup), [`host`] (the
//! host's switches), [`servers`] (the health and metrics endpoints),
//! the CNI plugins' token renewed beside the loop ([`crate::cnitoken`]),
//! [`watches`] (what is followed), [`fold`] (events into state),
//! [`pending`] (what the next pass is for) and [`apply`] (the pass that
//! writes the dataplane).

mod apply;
mod config;
mod fold;
mod fold_hosts;
mod host;
mod host_addrs;
mod network_up;
mod pending;
mod servers;
mod watches;

use std::future::Future;
use std::sync::Arc;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy as KubeNetworkPolicy;
use tartan_api::resources::{GlobalNetworkPolicy, IpPool, IpamBlock, NetworkPolicy};
use tartan_api::store::Datastore;
use tartan_api::store::watch::WatchEvent;
use tracing::info;

use crate::calc::state::{BlockInfo, State};
use crate::dataplane::events::{KernelEvents, take_check};
use crate::dataplane::routes::RouteDriver;
use crate::dataplane::tunnels::TunnelDriver;
use crate::health::Health;
use crate::services::{ServiceHalves, Slice};
use crate::unreadable::Unreadable;

pub use config::Config;

use apply::Dataplane;
use fold::{
    Folded, Sweep, converted, fold, fold_endpoint, fold_net_set, fold_node, fold_pod, fold_policy,
    fold_proxied, fold_service_account, global_set, namespaced_set, node_eligible,
};
use pending::Pending;
use watches::{Synced, Watches};

/// Run until `shutdown` completes.
pub async fn run(
    cfg: Config,
    store: Arc<dyn Datastore>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    // Before anything is forwarded and long before the datastore is
    // read: a node just booted has no policy table, and its pods' traffic
    // would pass unchecked until the first write.
    match crate::dataplane::policy::close_pods_if_no_table() {
        Ok(true) => info!("no policy table: pod interfaces closed until the first write"),
        Ok(false) => {}
        // A kernel that refuses this table refuses the full one too: going
        // on would forward every pod's traffic unchecked. Nor can felix go
        // on not knowing whether a table is there. Stop, and say so; a
        // table an earlier felix wrote stays as it is.
        Err(e) => {
            return Err(anyhow::Error::new(e).context(
                "cannot check or write the policy table (pods on this node would run without policy)",
            ));
        }
    }
    let mut w = Watches::open(&store, cfg.services);
    host::enable_forwarding();
    let routes = RouteDriver::connect(cfg.grace).context("open netlink")?;
    let tunnels = TunnelDriver::connect().context("open netlink")?;
    let mut events = KernelEvents::subscribe().context("listen to netlink events")?;
    let health = Health::new(cfg.resync);
    let mut bad = Unreadable::new(Some(health.clone()));
    // Beside kube-proxy, its health port (10256) is kube-proxy's.
    let proxy_health = cfg.proxy_health.filter(|_| cfg.services);
    let _servers = servers::spawn(cfg.health, proxy_health, &health);
    let _cni_token = cfg.cni_token.clone().map(|c| {
        servers::AbortOnDrop(crate::serving::spawn(crate::cnitoken::refresh::run(
            c,
            health.clone(),
        )))
    });
    let mut state = State::for_node(&cfg.node);
    state.failsafe_in = cfg.failsafe_in.clone();
    state.failsafe_out = cfg.failsafe_out.clone();
    let mut synced = Synced::default();
    // Endpoints and Pods: what a relisting no longer has.
    let mut sweeps: [Sweep; 2] = Default::default();
    let mut dp = Dataplane::new(&cfg.node, routes, events.news.clone(), tunnels, &health);
    if !cfg.services {
        crate::dataplane::services::remove_left_table();
    }
    host::allow_logging_from_namespaces();
    let mut pending = Pending::default();
    let mut tick = tokio::time::interval(cfg.resync);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    info!(node = %cfg.node, services = cfg.services, "felix started");
    loop {
        tokio::select! {
            ev = w.endpoints.next() => {
                let f = fold_endpoint(&mut state.endpoints, ev, &mut bad, &mut sweeps[0]);
                synced.endpoints |= f.synced;
                pending.folded(f);
            }
            ev = w.pods.next() => {
                let f = fold_pod(&mut state.endpoints, &state.service_accounts, ev, &mut bad, &mut sweeps[1]);
                synced.policy[0] |= f.synced;
                pending.folded(f);
            }
            ev = w.service_accounts.next() => {
                let f = fold_service_account(&mut state.service_accounts, &mut state.endpoints, ev, &mut bad);
                synced.policy[7] |= f.synced;
                pending.folded(f);
            }
            ev = w.namespaces.next() => {
                let f = fold(&mut state.namespaces, ev, &mut bad, |n: Namespace| n.metadata.labels.unwrap_or_default());
                synced.policy[1] |= f.synced;
                pending.folded(f);
            }
            ev = w.kube_policies.next() => {
                let f = fold_policy(&mut state.kube_policies, ev, &mut bad, |p: KubeNetworkPolicy| {
                    converted(tartan_policy::k8s::from_network_policy(&p)
                        .map(|m| tartan_policy::ir::from_kubernetes(&m)))
                });
                synced.policy[2] |= f.synced;
                pending.folded(f);
            }
            ev = w.tartan_policies.next() => {
                let f = fold_policy(&mut state.tartan_policies, ev, &mut bad, |p: NetworkPolicy| {
                    converted(tartan_policy::tartan::from_network_policy(&p))
                });
                synced.policy[3] |= f.synced;
                pending.folded(f);
            }
            ev = watches::next_of(&mut w.services) => {
                let f = fold_proxied(ev, &mut bad, |s: Service| ServiceHalves::from_service(&s), |k, info| {
                    dp.proxy.index.set_service(k, info)
                });
                synced.services[0] |= f.synced;
                pending.proxy_changed(f);
            }
            ev = watches::next_of(&mut w.slices) => {
                let node = dp.proxy.index.node().to_string();
                let f = fold_proxied(ev, &mut bad, |s: EndpointSlice| Ok(Slice::from_slice(&s, &node)), |k, info| {
                    dp.proxy.index.set_slice(k, info)
                });
                synced.services[1] |= f.synced;
                pending.proxy_changed(f);
            }
            ev = w.global_policies.next() => {
                let f = fold_policy(&mut state.global_policies, ev, &mut bad, |p: GlobalNetworkPolicy| {
                    converted(tartan_policy::tartan::from_global_network_policy(&p))
                });
                synced.policy[4] |= f.synced;
                pending.folded(f);
            }
            ev = w.net_sets.next() => {
                let f = fold_net_set(&mut state.net_sets, ev, &mut bad, namespaced_set);
                synced.policy[5] |= f.synced;
                pending.folded(f);
            }
            ev = w.global_net_sets.next() => {
                let f = fold_net_set(&mut state.net_sets, ev, &mut bad, global_set);
                synced.policy[6] |= f.synced;
                pending.folded(f);
            }
            ev = w.host_endpoints.next() => {
                let f = fold_hosts::fold_host_endpoint(&mut state.host_endpoints, ev, &mut bad);
                synced.policy[8] |= f.synced;
                pending.folded(f);
                if f.changed && host_addrs::refresh(&cfg.node, &mut state).await {
                    pending.folded(Folded { synced: false, changed: true });
                }
            }
            ev = w.blocks.next() => {
                let f = fold(&mut state.blocks, ev, &mut bad, |b: IpamBlock| BlockInfo::from_spec(&b.spec));
                synced.blocks |= f.synced;
                pending.folded(f);
            }
            ev = w.pools.next() => {
                let f = fold(&mut state.pools, ev, &mut bad, |p: IpPool| p.spec);
                synced.pools |= f.synced;
                pending.folded(f);
            }
            ev = w.nodes.next() => {
                if let WatchEvent::Added(o) | WatchEvent::Modified(o) = &ev
                    && o.metadata.name.as_deref() == Some(cfg.node.as_str())
                {
                    health.proxy_health().set_node_eligible(node_eligible(o));
                    let zone = tartan_api::resources::node::zone(&o.metadata).unwrap_or("");
                    if dp.proxy.index.set_zone(zone) {
                        info!(zone, "this node's zone (topology.kubernetes.io/zone) is read; the Services are computed again for their topology hints");
                        pending.proxy_changed(Folded { synced: false, changed: true });
                    }
                }
                let f = fold_node(&mut state.nodes, ev, &mut bad);
                synced.nodes |= f.synced;
                pending.folded(f);
            }
            Some(()) = events.rx.recv() => {
                if take_check(&events.news) {
                    pending.kernel_event();
                } else {
                    pending.route_event();
                }
            }
            _ = tick.tick() => {
                health.pass();
                pending.tick();
                // An address that came (or went) since: a host endpoint
                // found by its addresses follows it.
                if host_addrs::refresh(&cfg.node, &mut state).await {
                    pending.folded(Folded { synced: false, changed: true });
                }
            }
            () = &mut shutdown => {
                info!("felix stopping; the dataplane stays as it is");
                return Ok(());
            }
            // A burst of events is applied once, when it has passed (see
            // `Pending`); nothing is applied before routing is synced.
            () = tokio::time::sleep_until(pending.deadline()), if pending.due() && synced.routing_ready() => {
                dp.apply(
                    &cfg.node,
                    &state,
                    store.as_ref(),
                    &health,
                    synced.policy_ready(),
                    synced.services_ready(),
                    pending.take(),
                )
                .await;
            }
        }
    }
}
