//! The apply pass: from the state folded so far, write the NAT table, the
//! policy table, the service table, the tunnels and the routes, each only
//! where it differs from what was last written (or from the kernel, at a
//! check), and publish this node's VTEP MAC.

use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::node::{VXLAN_TUNNEL_MAC, format_mac};
use tartan_api::store::Datastore;
use tartan_api::store::typed::TypedStore;
use tartan_policy::compile::Ruleset;
use tracing::{debug, info, warn};

use crate::calc::desired::Calc;
use crate::calc::encap;
use crate::calc::nat::Nat;
use crate::calc::state::{NodeInfo, State};
use crate::dataplane::events::{SharedNews, take_routes};
use crate::dataplane::nft::Written;
use crate::dataplane::policy::PolicyDriver;
use crate::dataplane::routes::RouteDriver;
use crate::dataplane::services::ServiceProxy;
use crate::dataplane::tunnels::{IpipSupport, TunnelDriver};
use crate::health::Health;
use crate::services::healthcheck::HealthChecks;

/// What one pass is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Pass {
    /// A watch event changed what felix keeps: compute the desired state
    /// again (otherwise the last one is compared with the kernel).
    pub(super) changed: bool,
    pub(super) checks: Checks,
}

/// What one pass must check beyond the difference from the last pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Checks {
    /// Ask nft whether the NAT table was removed by hand (the periodic
    /// check only, not every datastore event).
    pub(super) nat_present: bool,
    /// Forget the MAC last published, so that a Node still lacking it
    /// gets it again.
    pub(super) republish: bool,
    /// Read the policy and service tables, the tunnels and the routes back
    /// from the kernel.
    pub(super) kernel: bool,
}

/// The drivers and what each last wrote, kept from one pass to the next.
pub(super) struct Dataplane {
    routes: RouteDriver,
    /// What the kernel's events say happened to the routes.
    news: SharedNews,
    tunnels: TunnelDriver,
    policy: PolicyDriver,
    /// The desired state, computed again only when the state changed.
    calc: Calc,
    /// The Service proxy; its index is fed by the Service and
    /// EndpointSlice watches.
    pub(super) proxy: ServiceProxy,
    health_checks: HealthChecks,
    nat_applied: Option<Nat>,
    /// The MAC last written to our Node; written again if the Node still
    /// lacks it at a periodic check (a lost update, a Node re-created).
    published: Option<[u8; 6]>,
    /// The tunnels as last applied: read back from the kernel only when
    /// they change, at the periodic check, or after a kernel event.
    tunnels_applied: Option<encap::Tunnels>,
    /// Whether the Node says its network is available (set once per
    /// run, after the first pass that wrote the routes and the policy).
    network_up: NetworkUp,
}

/// The Node's NetworkUnavailable condition as felix last left it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NetworkUp {
    Untried,
    /// The write failed: tried again only at the periodic check, not on
    /// every datastore event.
    Failed,
    /// Written on (or found on) the Node of this UID. A Node registered
    /// anew while felix runs (another UID) comes without it and is marked
    /// again; the condition as another writer sets it later on the same
    /// Node (a cloud's route controller) is left to that writer.
    Marked(Option<String>),
}

impl NetworkUp {
    /// Whether to write (or check) the condition in this pass; `check`:
    /// the periodic check; `watched`: the Node as the watch has it.
    fn due(&self, check: bool, watched: Option<&NodeInfo>) -> bool {
        match self {
            NetworkUp::Untried => true,
            NetworkUp::Failed => check,
            // At the periodic check, and only once the watch has the Node
            // registered anew: a watch behind the write costs no read.
            NetworkUp::Marked(uid) => check && watched.is_some_and(|n| n.uid != *uid),
        }
    }
}

impl Dataplane {
    /// Nothing written yet; the Service proxy counts its conntrack
    /// deletions in `health`.
    pub(super) fn new(
        node: &str,
        routes: RouteDriver,
        news: SharedNews,
        tunnels: TunnelDriver,
        health: &Health,
    ) -> Dataplane {
        let mut proxy = ServiceProxy::new(node);
        proxy.conntrack_deleted = health.conntrack_deleted.clone();
        Dataplane {
            routes,
            news,
            tunnels,
            policy: PolicyDriver::default(),
            calc: Calc::default(),
            proxy,
            health_checks: HealthChecks::new(health.proxy_health()),
            nat_applied: None,
            published: None,
            tunnels_applied: None,
            network_up: NetworkUp::Untried,
        }
    }

    /// One pass: the desired state computed again only when `pass` says
    /// the datastore view changed, then written where it differs from
    /// what was last written (or, at a check, from the kernel). The
    /// policy table is written only once `policy_synced`, the service
    /// table once `services_synced`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn apply(
        &mut self,
        node: &str,
        state: &State,
        store: &dyn Datastore,
        health: &Health,
        policy_synced: bool,
        services_synced: bool,
        pass: Pass,
    ) {
        let checks = pass.checks;
        let ipip = |t: &TunnelDriver| t.ipip == IpipSupport::Yes;
        let mut d = self.calc.desired(
            node,
            state,
            pass.changed,
            policy_synced,
            ipip(&self.tunnels),
        );
        // NAT: replaced when it changes or has gone missing.
        // Whether the table was removed by hand is asked of nft only at
        // the periodic check, not on every datastore event.
        let gone = checks.nat_present && !crate::dataplane::nat::present();
        if self.nat_applied.as_ref() != Some(&d.nat) || gone {
            match crate::dataplane::nat::apply(&d.nat) {
                Ok(()) => {
                    info!(masquerading = ?d.nat.from, "NAT table written");
                    self.nat_applied = Some(d.nat.clone());
                }
                Err(e) => {
                    health.apply_failures.inc();
                    warn!(error = %e, "NAT table not written; retrying at the next check");
                }
            }
        }
        if let Some(want) = d.policy.as_ref().filter(|_| policy_synced) {
            apply_policy(&mut self.policy, want, health, checks.kernel);
        }
        if services_synced {
            self.proxy.index.set_local_pods(d.local_pods.clone());
            apply_services(&mut self.proxy, health, checks.kernel);
            self.health_checks.sync(self.proxy.index.health_targets());
        }
        let tunnels = &mut self.tunnels;
        let ipip_before = tunnels.ipip.clone();
        if checks.kernel || self.tunnels_applied.as_ref() != Some(&d.tunnels) {
            match tunnels.apply(&d.tunnels).await {
                Ok(t) => {
                    if t.created + t.entries > 0 {
                        info!(
                            devices_created = t.created,
                            entries_changed = t.entries,
                            "tunnels updated"
                        );
                    }
                    self.tunnels_applied = Some(d.tunnels.clone());
                }
                Err(e) => {
                    self.tunnels_applied = None;
                    health.apply_failures.inc();
                    warn!(error = %e, "tunnel update failed; retrying at the next check");
                }
            }
        }
        if tunnels.ipip != ipip_before {
            // Learnt whether IPIP works: the routes to other nodes again
            // (not the rest of the desired state).
            d = self
                .calc
                .desired(node, state, false, policy_synced, ipip(tunnels));
        }
        health.ipip_supported.set(match tunnels.ipip {
            IpipSupport::Untried => -1,
            IpipSupport::Yes => 1,
            IpipSupport::No(_) => 0,
        });
        health
            .vxlan_peers
            .set(d.tunnels.vxlan.as_ref().map_or(0, |v| v.peers.len() as i64));
        if let Some(v) = &d.tunnels.vxlan
            && state.node(node).and_then(|n| n.vxlan_mac) != Some(v.mac)
            && self.published != Some(v.mac)
        {
            match publish_vtep(store, node, v.mac).await {
                Ok(()) => {
                    info!(mac = %format_mac(&v.mac), "VTEP MAC published on the Node");
                    self.published = Some(v.mac);
                }
                Err(e) => {
                    warn!(error = %e, "cannot publish the VTEP MAC; retrying at the next check")
                }
            }
        }
        if checks.republish {
            self.published = None;
        }
        let want = &d.routes;
        health.applies.inc();
        health.routes_desired.set(want.len() as i64);
        let started = std::time::Instant::now();
        let news = take_routes(&self.news);
        let applied = self.routes.apply(want, checks.kernel, &news).await;
        health.route_reads.inc_by(self.routes.take_reads());
        health
            .route_apply_seconds
            .observe(started.elapsed().as_secs_f64());
        match applied {
            Ok(a) => {
                health.routes_installed.inc_by(a.installed as u64);
                health.routes_removed.inc_by(a.removed as u64);
                health.routes_waiting.set(a.waiting as i64);
                health.set_ready(true);
                if a.installed + a.removed > 0 {
                    info!(
                        installed = a.installed,
                        removed = a.removed,
                        waiting = a.waiting,
                        "routes updated"
                    );
                }
                let due = self.network_up.due(checks.kernel, state.node(node));
                if policy_synced && due {
                    self.network_up = match mark_network_up(store, node).await {
                        Some(uid) => NetworkUp::Marked(uid),
                        None => NetworkUp::Failed,
                    };
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

/// Compute the policy table and write what changed.
fn apply_policy(driver: &mut PolicyDriver, want: &Ruleset, health: &Health, check: bool) {
    match driver.apply(want, check, &|_| false) {
        Ok(Written::Nothing) => {}
        Ok(Written::Difference(t)) => {
            health.policy_writes.inc();
            health.policy_write_seconds.observe(t.as_secs_f64());
            info!(
                chains = want.chains.len(),
                sets = want.sets.len(),
                took_ms = t.as_secs_f64() * 1e3,
                "policy table changed"
            );
        }
        Ok(Written::Full(t)) => {
            health.policy_writes.inc();
            health.policy_write_seconds.observe(t.as_secs_f64());
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

fn ipv6_table(proxy: &ServiceProxy) -> &crate::services::render::SvcNft<std::net::Ipv6Addr> {
    proxy.index.family::<std::net::Ipv6Addr>().table()
}

/// Write what changed in the service tables. Each family on its own:
/// the proxy is healthy only while every served family's table syncs
/// (kube-proxy's stance), and a failure is counted for each family whose
/// write failed; a failed table is written whole at the next pass.
fn apply_services(proxy: &mut ServiceProxy, health: &Health, check: bool) {
    let synced = proxy.sync_families(check);
    health.proxy_synced_families(synced.v4.is_ok(), synced.v6.as_ref().map(|r| r.is_ok()));
    for (fam, r) in synced.families() {
        let family = fam.nft_name();
        match r {
            Ok(_) => {
                if proxy.note_success(fam) {
                    info!(family, "service table written again after failures");
                }
            }
            // Once per distinct error: a node without IPv6 NAT fails the
            // same way at every pass.
            Err(e) if proxy.note_failure(fam, e) => warn!(
                family,
                error = %e,
                "service table not written; the whole table is tried again at every pass (the proxy is unhealthy until it is)"
            ),
            Err(e) => debug!(family, error = %e, "service table still not written"),
        }
    }
    match synced.written() {
        Written::Nothing => {}
        Written::Difference(t) => {
            health.service_writes.inc();
            health.service_write_seconds.observe(t.as_secs_f64());
            let (table, table6) = (proxy.index.table(), ipv6_table(proxy));
            info!(
                frontends = table.frontends.len(),
                node_ports = table.node_ports.len(),
                frontends_ipv6 = table6.frontends.len(),
                took_ms = t.as_secs_f64() * 1e3,
                "service table changed"
            );
        }
        Written::Full(t) => {
            health.service_writes.inc();
            health.service_write_seconds.observe(t.as_secs_f64());
            let (table, table6) = (proxy.index.table(), ipv6_table(proxy));
            info!(
                frontends = table.frontends.len(),
                node_ports = table.node_ports.len(),
                endpoints = table.fe_slots.len(),
                frontends_ipv6 = table6.frontends.len(),
                endpoints_ipv6 = table6.fe_slots.len(),
                took_ms = t.as_secs_f64() * 1e3,
                "service table written"
            );
        }
    }
}

/// Set the Node's condition NetworkUnavailable to False; the Node's UID
/// when it says so now.
async fn mark_network_up(store: &dyn Datastore, node: &str) -> Option<Option<String>> {
    match super::network_up::mark_network_available(store, node).await {
        Ok((wrote, uid)) => {
            if wrote {
                info!(
                    condition = super::network_up::CONDITION,
                    reason = super::network_up::REASON,
                    "the Node's network marked available"
                );
            }
            Some(uid)
        }
        Err(e) => {
            warn!(error = %e, "cannot mark the Node's network available; retrying at the next check");
            None
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_is_written_again_only_on_a_node_registered_anew() {
        let node = |uid: &str| NodeInfo {
            uid: Some(uid.to_string()),
            ..NodeInfo::default()
        };
        let marked = NetworkUp::Marked(Some("a".into()));
        // The first pass writes it; a failure waits for the check.
        assert!(NetworkUp::Untried.due(false, None));
        assert!(!NetworkUp::Failed.due(false, Some(&node("a"))));
        assert!(NetworkUp::Failed.due(true, Some(&node("a"))));
        // Marked on Node "a": the same Node (its heartbeats, or another
        // writer's condition on it) is left alone.
        assert!(!marked.due(true, Some(&node("a"))));
        // Gone: nothing to mark until it is back.
        assert!(!marked.due(true, None));
        // Registered anew: marked again, at the periodic check.
        assert!(!marked.due(false, Some(&node("b"))));
        assert!(marked.due(true, Some(&node("b"))));
    }
}
