//! The instance task: owns the configuration, the RIB, the kernel sync and
//! the peers, and reacts to their events one at a time.
use super::control_channel::{ControlHandle, ControlRequest};
use super::deferral::Deferral;
use super::drain_state::DrainState;
use super::listener::{Listeners, Routes};
use super::origin::announce_attrs;
use crate::bfd::{BfdClient, BfdHandle, Hops, RuntimeOptions, SessionConfig};
use crate::config::{Config, Neighbor};
use crate::control::Metrics;
use crate::kernel::{Kernel, KernelSync, KernelSyncHandle, Nexthop};
use crate::model::{Family, NextHop};
use crate::rib::{Changes, LocalConfig, PeerId, Rib};
use crate::session::{
    LocalParams, Negotiated, PeerCommand, PeerEvent, PeerLink, RestartFlag, spawn_peer,
};
use crate::wire::{EncodeOptions, Notification};
use ipnet::IpNet;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};
use tracing::{info, warn};

#[derive(Debug, Clone)]
pub struct DaemonOptions {
    /// The file SIGHUP re-reads.
    pub config_path: PathBuf,
    /// Where the Prometheus series live (served by `control::serve_metrics`).
    pub metrics: Arc<Metrics>,
    /// On shutdown, drain first (RFC 8326) for this long, close the
    /// sessions, then stop; `None`: stop at once, leaving graceful-restart
    /// peers to keep our routes.
    pub shutdown_drain: Option<Duration>,
    /// Where BFD listens (port 3784 but in tests).
    pub bfd: RuntimeOptions,
}

/// A neighbor as the instance sees it.
pub(super) struct PeerSlot {
    pub neighbor: Arc<Neighbor>,
    pub link: PeerLink,
    pub up: Option<UpState>,
    /// Graceful restart (helper side): the peer's routes are stale and kept
    /// until this deadline unless it comes back and sends End-of-RIB.
    pub stale_until: Option<Instant>,
    /// The neighbor's interest in its BFD session (dropping it ends it).
    pub bfd: Option<BfdClient>,
}

pub(super) struct UpState {
    pub session: u64,
    pub negotiated: Negotiated,
    pub output: Arc<Notify>,
    pub encode: EncodeOptions,
    /// Families whose initial table has gone out, End-of-RIB with it.
    pub eor_sent: HashSet<Family>,
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
    /// The Restart State bit of our OPENs, shared with the peer tasks:
    /// set from a restart with forwarding kept (our own routes found in
    /// the kernel at start) until route selection is done (RFC 4724 3 and
    /// 4.1, `deferral.rs`); `deferral.is_some()` says the same.
    pub(super) restart_flag: RestartFlag,
    /// Restarting: route selection deferred, and what goes out held, for
    /// the families still pending (RFC 4724 4.1, `deferral.rs`), until
    /// `restart_until` at the latest.
    pub(super) deferral: Option<Deferral>,
    /// Restarting, while the kernel routes of the previous run not learned
    /// again are kept: until every neighbor is up and has sent End-of-RIB
    /// on its session, or until this time, the Selection_Deferral_Timer's,
    /// so that no route goes before its replacement could come
    /// (`deferral.rs`). Set while `deferral` is: selection is done first.
    pub(super) restart_until: Option<Instant>,
    pub(super) started: Instant,
    pub(super) drain: DrainState,
    /// The BFD runtime, started with the first neighbor that uses BFD.
    bfd: Option<BfdHandle>,
}

impl Daemon {
    /// Sets up the kernel sync and the listeners, and starts a peer task
    /// per neighbor. Returns the daemon (to be run) and the handle the
    /// control API uses.
    pub async fn start(
        config: Config,
        options: DaemonOptions,
    ) -> anyhow::Result<(Daemon, ControlHandle)> {
        Daemon::start_as(config, options, false).await
    }

    /// [`Daemon::start`] as if our routes of a previous run had been found
    /// in the kernel (a restart), without one.
    #[cfg(test)]
    pub(super) async fn start_restarting(
        config: Config,
        options: DaemonOptions,
    ) -> anyhow::Result<(Daemon, ControlHandle)> {
        Daemon::start_as(config, options, true).await
    }

    async fn start_as(
        config: Config,
        options: DaemonOptions,
        assume_restart: bool,
    ) -> anyhow::Result<(Daemon, ControlHandle)> {
        let (kernel, kernel_task, restarting) = if config.kernel_install {
            let k = Kernel::connect().await?;
            let own = k.list_own().await?;
            if !own.is_empty() {
                info!(
                    routes = own.len(),
                    "found routes of a previous run in the kernel; keeping them until every neighbor has sent End-of-RIB or the selection deferral time is over"
                );
            }
            let restarting = !own.is_empty();
            let (sync, handle) = KernelSync::spawn_recording(
                k,
                own,
                options.metrics.durations().kernel_route_apply.clone(),
            );
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
        let restarting = restarting || assume_restart;
        // Route selection deferral (RFC 4724 4.1); the kernel's leftovers
        // go once every neighbor has resent its routes, at its end at the
        // latest.
        let deferral = restarting.then(Deferral::new);
        let restart_until =
            restarting.then(|| Instant::now() + config.graceful_restart.selection_deferral);
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
            restart_flag: RestartFlag::new(restarting),
            deferral,
            restart_until,
            started: Instant::now(),
            drain: DrainState::default(),
            bfd: None,
        };
        d.deferral_started();
        for a in &config.announce {
            let c = d.rib.originate(announce_attrs(a), a.prefix);
            d.apply(c);
        }
        for n in config.neighbors {
            d.add_peer(Arc::new(n));
        }
        // What waits for nobody is done now, whatever comes first later.
        d.check_deferral();
        d.check_kernel_stale();
        Ok((d, ControlHandle::new(control_tx)))
    }

    pub(super) fn local_params(&self, n: &Neighbor) -> LocalParams {
        LocalParams {
            asn: self.config.asn,
            router_id: self.config.router_id,
            hold_time: n.hold_time,
            families: n.families.clone(),
            peer_asn: n.asn,
            graceful_restart: super::restart::announced_restart_time(
                n,
                self.config.graceful_restart.restart_time,
            ),
            restarting: self.restart_flag.clone(),
            // RFC 4724 3: F only when our forwarding state was kept, that
            // is, our routes of the previous run were found in the kernel.
            forwarding_preserved: self.config.kernel_install && self.restarting(),
            installs_routes: self.config.kernel_install,
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
        let bfd = n.bfd.map(|cfg| self.bfd_client(&n, cfg));
        let link = spawn_peer(
            id,
            n.clone(),
            self.local_params(&n),
            self.config.connect_retry,
            self.events_tx.clone(),
            self.options.metrics.peer(n.address),
            bfd.as_ref().map(|c| c.subscribe()),
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
                bfd,
            },
        );
    }

    /// A BFD session for `n`, starting the runtime if need be. When the
    /// runtime cannot start (port 3784 taken) the session stays Down, and
    /// so does BGP with it: BFD was asked for, so the path is unproven.
    /// Single hop or multihop is decided here, once per neighbor
    /// (`Hops::for_neighbor`), from the node's connected networks now:
    /// the BGP connection it could also be told from is opened only once
    /// BFD is Up.
    fn bfd_client(&mut self, n: &Neighbor, cfg: SessionConfig) -> BfdClient {
        let connected = crate::bfd::hops::is_connected(n.address);
        let hops = Hops::for_neighbor(n.asn == self.config.asn, n.multihop, connected);
        info!(
            peer = %n.address,
            mode = hops.name(),
            connected,
            ttl = n.multihop,
            "BFD mode chosen"
        );
        if self.bfd.is_none() {
            match crate::bfd::spawn(self.options.bfd, Some(self.options.metrics.clone())) {
                Ok(h) => self.bfd = Some(h),
                Err(e) => {
                    warn!(error = %e, "BFD runtime cannot start; sessions with BFD stay down")
                }
            }
        }
        match &self.bfd {
            Some(h) => h.add(n.address, n.local_address, hops, cfg),
            None => BfdClient::detached(cfg),
        }
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
        // Its routes are gone: an End-of-RIB of it counts no more.
        self.deferral_forget(slot.neighbor.address, None);
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
        let mut shutdown_seen = false;
        loop {
            if self.drain.closed && self.drain.exit_when_closed {
                self.wait_for_peer_tasks(Duration::from_secs(2)).await;
                break;
            }
            let deadline = self.next_deadline();
            tokio::select! {
                biased;
                _ = &mut shutdown, if !shutdown_seen => {
                    shutdown_seen = true;
                    match self.options.shutdown_drain {
                        Some(wait) if !self.drain.closed => {
                            info!(wait_seconds = wait.as_secs(), "shutting down with a graceful shutdown first (RFC 8326)");
                            self.drain.exit_when_closed = true;
                            self.start_drain(wait);
                        }
                        _ => break,
                    }
                }
                Some(ev) = self.events_rx.recv() => self.on_peer_event(ev).await,
                Some(req) = self.control_rx.recv() => self.on_control(req),
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => self.reload(),
                Some(cfg) = async { match updates.as_mut() { Some(u) => u.recv().await, None => std::future::pending().await } } => self.apply_config(cfg),
                _ = sleep_until_opt(deadline) => self.on_timers(),
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
            .chain(self.restart_until)
            .chain(self.drain.close_at)
            .min()
    }

    /// Gives the peer tasks told to stop up to `limit` to send their
    /// NOTIFICATIONs and end.
    async fn wait_for_peer_tasks(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        for p in self.peers.values_mut() {
            let _ = tokio::time::timeout_at(deadline, &mut p.link.task).await;
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

    fn on_control(&mut self, req: ControlRequest) {
        self.answer_control(req);
    }
}

/// Whether `prefix` lies in one of `exclude` (left out of the kernel).
pub(super) fn excluded(exclude: &[IpNet], prefix: &IpNet) -> bool {
    exclude.iter().any(|n| n.contains(prefix))
}

/// A BGP next hop as a kernel gateway. IPv6 uses the global address; a
/// link-local-only next hop would need the interface and is not installed.
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
