//! The instance task: owns the configuration, the RIB, the kernel sync and
//! the peers, and reacts to their events one at a time.
use super::control_channel::{ControlHandle, ControlRequest};
use super::encode::encode_batch;
use super::listener::{Listeners, Routes};
use crate::config::{Config, Neighbor};
use crate::control::Metrics;
use crate::kernel::{Kernel, KernelSync, KernelSyncHandle, Nexthop};
use crate::model::{Family, NextHop, Origin, PathAttrs};
use crate::rib::{Changes, ImportError, LocalConfig, PeerConfig, PeerId, Rib};
use crate::session::{LocalParams, Negotiated, PeerCommand, PeerEvent, PeerLink, spawn_peer};
use crate::wire::{self, EncodeOptions, Notification};
use ipnet::IpNet;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};
use tracing::{debug, info, warn};

/// How much of a peer's output one pull returns, so that a large table
/// goes out in steps and the instance stays responsive.
const PULL_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// The file SIGHUP re-reads.
    pub config_path: PathBuf,
    /// Where the Prometheus series live (served by `control::serve_metrics`).
    pub metrics: Arc<Metrics>,
}

/// A neighbor as the instance sees it.
pub(super) struct PeerSlot {
    pub neighbor: Arc<Neighbor>,
    pub link: PeerLink,
    pub up: Option<UpState>,
    /// Graceful restart (helper side): the peer's routes are stale and kept
    /// until this deadline unless it comes back and sends End-of-RIB.
    pub stale_until: Option<Instant>,
}

pub(super) struct UpState {
    pub session: u64,
    pub negotiated: Negotiated,
    pub output: Arc<Notify>,
    pub encode: EncodeOptions,
    /// The initial table has gone out and End-of-RIB with it.
    pub initial_done: bool,
    /// Families whose End-of-RIB the peer has sent.
    pub eor_received: HashSet<Family>,
}

pub struct Daemon {
    pub(super) config: Config,
    pub(super) options: DaemonOptions,
    pub(super) rib: Rib,
    pub(super) kernel: Option<KernelSync>,
    /// Owns the sync task: dropping it would stop kernel updates.
    kernel_task: Option<KernelSyncHandle>,
    pub(super) peers: HashMap<PeerId, PeerSlot>,
    pub(super) by_address: HashMap<IpAddr, PeerId>,
    pub(super) routes: Routes,
    pub(super) listeners: Option<Listeners>,
    pub(super) events_tx: mpsc::Sender<PeerEvent>,
    events_rx: mpsc::Receiver<PeerEvent>,
    control_rx: mpsc::Receiver<ControlRequest>,
    next_id: PeerId,
    /// We found our own routes in the kernel at start: a restart with
    /// forwarding kept (RFC 4724 R bit); they go once peers have resent.
    pub(super) restarting: bool,
    kernel_stale_until: Option<Instant>,
    pub(super) started: Instant,
}

impl Daemon {
    /// Sets up the kernel sync and the listeners, and starts a peer task
    /// per neighbor. Returns the daemon (to be run) and the handle the
    /// control API uses.
    pub async fn start(
        config: Config,
        options: DaemonOptions,
    ) -> anyhow::Result<(Daemon, ControlHandle)> {
        let (kernel, kernel_task, restarting) = if config.kernel_install {
            let k = Kernel::connect().await?;
            let own = k.list_own().await?;
            if !own.is_empty() {
                info!(
                    routes = own.len(),
                    "found routes of a previous run in the kernel; keeping them until peers have resent theirs"
                );
            }
            let restarting = !own.is_empty();
            let (sync, handle) = KernelSync::spawn(k, own);
            (Some(sync), Some(handle), restarting)
        } else {
            (None, None, false)
        };
        let routes: Routes = Default::default();
        let listeners = if config.listen.is_empty() {
            None
        } else {
            Some(Listeners::bind(&config.listen, routes.clone())?)
        };
        let (events_tx, events_rx) = mpsc::channel(1024);
        let (control_tx, control_rx) = mpsc::channel(64);
        let rib = Rib::new(LocalConfig {
            asn: config.asn,
            router_id: config.router_id,
            cluster_id: config.cluster_id,
        });
        let kernel_stale_until =
            restarting.then(|| Instant::now() + config.graceful_restart.stale_routes_time);
        let mut d = Daemon {
            config: config.clone(),
            options,
            rib,
            kernel,
            kernel_task,
            peers: HashMap::new(),
            by_address: HashMap::new(),
            routes,
            listeners,
            events_tx,
            events_rx,
            control_rx,
            next_id: 1,
            restarting,
            kernel_stale_until,
            started: Instant::now(),
        };
        for a in &config.announce {
            let c = d.rib.originate(announce_attrs(a), a.prefix);
            d.apply(c);
        }
        for n in config.neighbors {
            d.add_peer(Arc::new(n));
        }
        Ok((d, ControlHandle::new(control_tx)))
    }

    pub(super) fn local_params(&self, n: &Neighbor) -> LocalParams {
        LocalParams {
            asn: self.config.asn,
            router_id: self.config.router_id,
            hold_time: n.hold_time,
            families: n.families.clone(),
            peer_asn: n.asn,
            graceful_restart: n
                .graceful_restart
                .then_some(self.config.graceful_restart.restart_time),
            restarting: self.restarting,
            forwarding_preserved: self.config.kernel_install,
        }
    }

    pub(super) fn add_peer(&mut self, n: Arc<Neighbor>) {
        let id = self.next_id;
        self.next_id += 1;
        if let Some(l) = &self.listeners
            && let Some(pw) = &n.password
        {
            l.set_md5(n.address, Some(pw));
        }
        let link = spawn_peer(
            id,
            n.clone(),
            self.local_params(&n),
            self.config.connect_retry,
            self.events_tx.clone(),
            self.options.metrics.peer(n.address),
        );
        self.routes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(n.address, link.incoming.clone());
        self.by_address.insert(n.address, id);
        info!(peer = %n.address, asn = n.asn, id, "neighbor added");
        self.peers.insert(
            id,
            PeerSlot {
                neighbor: n,
                link,
                up: None,
                stale_until: None,
            },
        );
    }

    /// Stops a neighbor's session with `notification` and forgets it.
    pub(super) fn remove_peer(&mut self, id: PeerId, notification: Notification) {
        let Some(slot) = self.peers.remove(&id) else {
            return;
        };
        let _ = slot.link.commands.try_send(PeerCommand::Stop(notification));
        self.routes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&slot.neighbor.address);
        self.by_address.remove(&slot.neighbor.address);
        self.options.metrics.remove_peer(slot.neighbor.address);
        if let Some(l) = &self.listeners
            && slot.neighbor.password.is_some()
        {
            l.set_md5(slot.neighbor.address, None);
        }
        let c = self.rib.peer_down(id);
        self.apply(c);
        info!(peer = %slot.neighbor.address, "neighbor removed");
    }

    /// Runs until `shutdown` resolves. On SIGHUP the config file is read
    /// again. On shutdown sessions are closed without NOTIFICATION and
    /// kernel routes are left in place, so that graceful-restart peers
    /// keep forwarding to us while we restart.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        self.run_with_updates(shutdown, None).await
    }

    /// [`Daemon::run`], also taking new configurations from `updates` (the
    /// datastore mode) and applying only their difference.
    pub async fn run_with_updates(
        mut self,
        shutdown: impl Future<Output = ()>,
        mut updates: Option<mpsc::Receiver<Config>>,
    ) {
        let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(e) => {
                warn!(error = %e, "cannot watch SIGHUP; reload disabled");
                None
            }
        };
        tokio::pin!(shutdown);
        let mut gauges = tokio::time::interval(Duration::from_secs(5));
        loop {
            let deadline = self.next_deadline();
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(ev) = self.events_rx.recv() => self.on_peer_event(ev).await,
                Some(req) = self.control_rx.recv() => self.on_control(req),
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => self.reload(),
                Some(cfg) = async { match updates.as_mut() { Some(u) => u.recv().await, None => std::future::pending().await } } => self.apply_config(cfg),
                _ = sleep_until_opt(deadline) => self.on_timers().await,
                _ = gauges.tick() => self.refresh_gauges(),
            }
        }
        info!("shutting down; kernel routes stay for the next start");
        for (_, slot) in self.peers.drain() {
            slot.link.task.abort();
        }
        self.kernel.take();
        if let Some(h) = self.kernel_task.take() {
            h.shutdown().await;
        }
    }

    /// Gauges that are cheaper to read now and then than to keep current.
    fn refresh_gauges(&self) {
        let m = &self.options.metrics;
        for (id, p) in &self.peers {
            let c = self.rib.counts(*id);
            p.link
                .counters
                .metrics()
                .set_prefixes(tartan_api::bgp::PrefixCounts {
                    received: c.received,
                    accepted: c.accepted,
                    advertised: c.advertised,
                });
            p.link.counters.metrics().set_filtered(c.filtered);
        }
        for f in Family::ALL {
            m.set_rib_prefixes(f, self.rib.prefix_count(f) as u64);
        }
        if let Some(k) = &self.kernel {
            let s = k.stats();
            m.set_kernel_installed(s.installed);
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.peers
            .values()
            .filter_map(|p| p.stale_until)
            .chain(self.kernel_stale_until)
            .min()
    }

    async fn on_timers(&mut self) {
        let now = Instant::now();
        let expired: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| p.stale_until.is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(p) = self.peers.get_mut(&id) {
                p.stale_until = None;
                info!(peer = %p.neighbor.address, "graceful restart time over; removing the peer's stale routes");
            }
            let c = self.rib.sweep_stale(id, None);
            self.apply(c);
        }
        if self.kernel_stale_until.is_some_and(|t| t <= now) {
            info!("stale-routes time over; removing kernel routes not learned again");
            self.flush_kernel_stale().await;
        }
    }

    async fn flush_kernel_stale(&mut self) {
        self.kernel_stale_until = None;
        self.restarting = false;
        // The peer tasks hold the R bit they put in OPEN; later sessions
        // must not claim a restart.
        for p in self.peers.values() {
            let _ = p.link.commands.try_send(PeerCommand::RestartDone);
        }
        if let Some(k) = &self.kernel {
            k.flush_stale().await;
        }
    }

    /// Pushes a RIB change to the kernel and wakes the writers concerned.
    pub(super) fn apply(&mut self, changes: Changes) {
        if let Some(k) = &self.kernel {
            for (prefix, hops) in changes.kernel {
                if excluded(&self.config.kernel_exclude, &prefix) {
                    continue;
                }
                let hops = hops.map(|h| h.iter().filter_map(kernel_nexthop).collect::<Vec<_>>());
                k.set(prefix, hops.filter(|h| !h.is_empty()));
            }
        }
        for id in changes.peers_with_output {
            if let Some(up) = self.peers.get(&id).and_then(|p| p.up.as_ref()) {
                up.output.notify_one();
            }
        }
    }

    async fn on_peer_event(&mut self, ev: PeerEvent) {
        match ev {
            PeerEvent::Up {
                id,
                session,
                negotiated,
                local,
                output,
                ..
            } => self.on_up(id, session, negotiated, local, output),
            PeerEvent::Update {
                id,
                session,
                update,
            } => {
                if self.is_current(id, session) {
                    self.on_update(id, update).await;
                }
            }
            PeerEvent::RouteRefresh {
                id,
                session,
                family,
            } => {
                if self.is_current(id, session) {
                    debug!(id, %family, "route refresh requested");
                    let c = self.rib.refresh(id, family);
                    self.apply(c);
                }
            }
            PeerEvent::Pull { id, session, reply } => {
                let bytes = if self.is_current(id, session) {
                    self.pull(id)
                } else {
                    None
                };
                let _ = reply.send(bytes);
            }
            PeerEvent::Down {
                id,
                session,
                graceful,
                reason,
            } => {
                if self.is_current(id, session) {
                    self.on_down(id, graceful, &reason);
                }
            }
        }
    }

    fn is_current(&self, id: PeerId, session: u64) -> bool {
        self.peers
            .get(&id)
            .and_then(|p| p.up.as_ref())
            .is_some_and(|u| u.session == session)
    }

    fn on_up(
        &mut self,
        id: PeerId,
        session: u64,
        negotiated: Negotiated,
        local: SocketAddr,
        output: Arc<Notify>,
    ) {
        let Some(slot) = self.peers.get_mut(&id) else {
            return;
        };
        let n = slot.neighbor.clone();
        let local_ip = local.ip().to_canonical();
        let (local_v4, local_v6) = match local_ip {
            IpAddr::V4(a) => (Some(a), None),
            IpAddr::V6(a) => (None, Some(a)),
        };
        let local_v6_link_local = local_v6.filter(|a| a.is_unicast_link_local());
        let cfg = PeerConfig {
            id,
            asn: n.asn,
            router_id: negotiated.peer_router_id,
            address: n.address,
            ibgp: n.asn == self.config.asn,
            rr_client: n.route_reflector_client,
            next_hop: n.next_hop,
            shared_subnet: crate::net::shared_subnet(local_ip, n.address.to_canonical()),
            local_v4,
            local_v6,
            local_v6_link_local,
            families: negotiated.families.clone(),
            max_prefix: n.max_prefix,
            filters: n.filters.clone(),
        };
        // RFC 4724 4.2: stale routes of a family the peer no longer keeps
        // forwarding for (no capability, or F bit clear) go at once.
        let mut sweeps = Vec::new();
        if slot.stale_until.is_some() {
            let preserved: Vec<Family> = negotiated
                .peer_graceful_restart
                .as_ref()
                .map(|g| {
                    g.families
                        .iter()
                        .filter(|(_, f)| *f)
                        .map(|(fam, _)| *fam)
                        .collect()
                })
                .unwrap_or_default();
            for f in Family::ALL {
                if !preserved.contains(&f) {
                    sweeps.push(f);
                }
            }
            // Wait for its End-of-RIB, but not forever.
            slot.stale_until =
                Some(Instant::now() + self.config.graceful_restart.stale_routes_time);
        }
        slot.up = Some(UpState {
            session,
            encode: EncodeOptions {
                four_octet_as: negotiated.four_octet_as,
                ..Default::default()
            },
            negotiated,
            output: output.clone(),
            initial_done: false,
            eor_received: HashSet::new(),
        });
        for f in sweeps {
            let c = self.rib.sweep_stale(id, Some(f));
            self.apply(c);
        }
        let c = self.rib.peer_up(cfg);
        self.apply(c);
        if !n.export {
            let c = self.rib.set_export(id, false);
            self.apply(c);
        }
        output.notify_one();
    }

    async fn on_update(&mut self, id: PeerId, update: wire::Update) {
        let families = match self.peers.get(&id).and_then(|p| p.up.as_ref()) {
            Some(up) => up.negotiated.families.clone(),
            None => return,
        };
        if let Some(why) = &update.treat_as_withdraw {
            if let Some(p) = self.peers.get(&id) {
                p.link.counters.metrics().inc_treat_as_withdraw();
            }
            warn!(peer = id, reason = %why, withdrawn = update.withdrawn.len(), "malformed UPDATE treated as withdraw (RFC 7606)");
        }
        for d in &update.discarded {
            info!(peer = id, attribute = %d, "malformed attribute discarded (RFC 7606)");
        }
        if !update.withdrawn.is_empty() {
            let c = self.rib.withdraw(id, &update.withdrawn);
            self.apply(c);
        }
        if let Some(attrs) = update.attrs {
            for reach in update.reach {
                // RFC 4760 7: routes of a family that was not negotiated are ignored.
                if !families.contains(&reach.family) || reach.prefixes.is_empty() {
                    continue;
                }
                let mut a = attrs.clone();
                a.next_hop = reach.next_hop;
                match self.rib.announce(id, a, &reach.prefixes) {
                    Ok(c) => self.apply(c),
                    Err(ImportError::MaxPrefix { limit }) => {
                        warn!(
                            peer = id,
                            limit, "maximum prefix limit exceeded; closing the session"
                        );
                        if let Some(p) = self.peers.get(&id) {
                            let _ = p.link.commands.try_send(PeerCommand::Reset(
                                Notification::max_prefixes_reached(reach.family, limit),
                            ));
                        }
                        return;
                    }
                    Err(e) => warn!(peer = id, error = %e, "update not applied"),
                }
            }
        }
        if let Some(f) = update.end_of_rib {
            self.on_end_of_rib(id, f).await;
        }
    }

    async fn on_end_of_rib(&mut self, id: PeerId, family: Family) {
        debug!(peer = id, %family, "End-of-RIB received");
        let c = self.rib.sweep_stale(id, Some(family));
        self.apply(c);
        let Some(slot) = self.peers.get_mut(&id) else {
            return;
        };
        if let Some(up) = slot.up.as_mut() {
            up.eor_received.insert(family);
            if up
                .negotiated
                .families
                .iter()
                .all(|f| up.eor_received.contains(f))
            {
                slot.stale_until = None;
            }
        }
        // Restarting: once every neighbor has resent its table, the
        // kernel's leftovers from before the restart can go.
        if self.kernel_stale_until.is_some() && self.all_peers_resent() {
            info!("every neighbor has sent End-of-RIB; removing kernel routes not learned again");
            self.flush_kernel_stale().await;
        }
    }

    fn all_peers_resent(&self) -> bool {
        self.peers.values().all(|p| match &p.up {
            Some(up) => up
                .negotiated
                .families
                .iter()
                .all(|f| up.eor_received.contains(f)),
            None => false,
        })
    }

    fn on_down(&mut self, id: PeerId, graceful: bool, reason: &str) {
        let restart_time = self.peers.get(&id).and_then(|p| {
            p.up.as_ref()
                .and_then(|u| u.negotiated.peer_graceful_restart.as_ref())
                .map(|g| g.restart_time)
        });
        let Some(slot) = self.peers.get_mut(&id) else {
            return;
        };
        slot.up = None;
        let restart_time =
            restart_time.map(|t| bounded_restart_time(t, slot.neighbor.max_restart_time));
        match restart_time {
            Some(t) if graceful => {
                info!(peer = %slot.neighbor.address, restart_time = t, "peer may be restarting; keeping its routes as stale (RFC 4724)");
                slot.stale_until = Some(Instant::now() + Duration::from_secs(u64::from(t)));
                self.rib.mark_stale(id);
            }
            _ => {
                debug!(peer = %slot.neighbor.address, %reason, "removing the peer's routes");
                slot.stale_until = None;
                let c = self.rib.peer_down(id);
                self.apply(c);
            }
        }
    }

    /// The next bytes for a peer's socket: queued updates, then (once)
    /// End-of-RIB for each family after the initial table.
    fn pull(&mut self, id: PeerId) -> Option<Vec<u8>> {
        let (opts, counters) = {
            let slot = self.peers.get(&id)?;
            (slot.up.as_ref()?.encode, slot.link.counters.clone())
        };
        let mut out = Vec::new();
        let mut messages = 0;
        while out.len() < PULL_BYTES {
            match self.rib.take_output(id, 4096) {
                Some(batch) => messages += encode_batch(&batch, &opts, &mut out),
                None => break,
            }
        }
        let up = self.peers.get_mut(&id)?.up.as_mut()?;
        if out.len() < PULL_BYTES && !up.initial_done {
            up.initial_done = true;
            for f in &up.negotiated.families {
                wire::encode_end_of_rib(*f, &mut out);
                messages += 1;
            }
        }
        counters.sent_n(wire::msg_type::UPDATE, messages);
        (!out.is_empty()).then_some(out)
    }

    fn on_control(&mut self, req: ControlRequest) {
        self.answer_control(req);
    }

    pub(super) fn next_origin_changes(&mut self, old: &Config, new: &Config) {
        let old_a: HashMap<_, _> = old.announce.iter().map(|a| (a.prefix, a)).collect();
        let new_a: HashMap<_, _> = new.announce.iter().map(|a| (a.prefix, a)).collect();
        for (p, a) in &old_a {
            if !new_a.contains_key(p) {
                let c = self.rib.unoriginate(*p);
                self.apply(c);
                info!(prefix = %a.prefix, "announcement removed");
            }
        }
        for (p, a) in &new_a {
            if old_a.get(p) != Some(a) {
                let c = self.rib.originate(announce_attrs(a), *p);
                self.apply(c);
                info!(prefix = %a.prefix, "announcement added or changed");
            }
        }
    }
}

/// Whether `prefix` lies in one of `exclude` (left out of the kernel).
pub(super) fn excluded(exclude: &[IpNet], prefix: &IpNet) -> bool {
    exclude.iter().any(|n| n.contains(prefix))
}

pub(super) fn announce_attrs(a: &crate::config::Announce) -> PathAttrs {
    PathAttrs {
        origin: Origin::Igp,
        next_hop: a.next_hop.map(NextHop::from_addr).unwrap_or_default(),
        communities: a.communities.clone(),
        large_communities: a.large_communities.clone(),
        ..Default::default()
    }
}

/// A BGP next hop as a kernel gateway. IPv6 uses the global address; a
/// link-local-only next hop would need the interface and is not installed.
/// How long a restarting peer's routes are kept: the time it announced,
/// bounded by the operator's `max_restart_time`.
fn bounded_restart_time(announced: u16, max: Option<u16>) -> u16 {
    max.map_or(announced, |m| announced.min(m))
}

#[cfg(test)]
#[test]
fn the_restart_time_is_bounded_by_the_operator() {
    assert_eq!(bounded_restart_time(120, None), 120);
    assert_eq!(bounded_restart_time(120, Some(30)), 30);
    assert_eq!(bounded_restart_time(10, Some(30)), 10);
    assert_eq!(bounded_restart_time(120, Some(0)), 0);
}

pub(super) fn kernel_nexthop(nh: &NextHop) -> Option<Nexthop> {
    match nh {
        NextHop::None => None,
        NextHop::V4(a) => Some(Nexthop::new(IpAddr::V4(*a))),
        NextHop::V6 { global, .. } if !global.is_unicast_link_local() => {
            Some(Nexthop::new(IpAddr::V6(*global)))
        }
        NextHop::V6 { .. } => None,
    }
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}
