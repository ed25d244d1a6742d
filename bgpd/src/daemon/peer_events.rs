//! What the instance does with its peers' events: a session up (the RIB
//! learns the peer, stale routes of families no longer preserved go), an
//! UPDATE (withdrawals, announcements, the maximum-prefix reset, End-of-RIB),
//! a refresh request, a writer's pull for its next bytes, a session down.
use super::encode::encode_batch;
use super::instance::{Daemon, UpState};
use super::restart::families_not_preserved;
use crate::model::Family;
use crate::rib::{ImportError, OutBatch, PeerConfig, PeerId};
use crate::session::{Negotiated, PeerCommand, PeerEvent};
use crate::wire::{self, EncodeOptions, Notification};
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

/// How much of a peer's output one pull returns, so that a large table
/// goes out in steps and the instance stays responsive.
const PULL_BYTES: usize = 256 * 1024;

impl Daemon {
    pub(super) async fn on_peer_event(&mut self, ev: PeerEvent) {
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
            sweeps = families_not_preserved(negotiated.peer_graceful_restart.as_ref());
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
            eor_sent: HashSet::new(),
            eor_received: HashSet::new(),
        });
        // Those routes are gone: an End-of-RIB before counts no more.
        self.deferral_forget(n.address, Some(&sweeps));
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
        // A peer that will not send End-of-RIB is waited for no more.
        self.check_deferral();
        self.check_kernel_stale();
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
            self.on_end_of_rib(id, f);
        }
    }

    /// The next bytes for a peer's socket: queued updates, then (once)
    /// End-of-RIB for each family after the initial table. Nothing of a
    /// family whose route selection is deferred (RFC 4724 4.1).
    fn pull(&mut self, id: PeerId) -> Option<Vec<u8>> {
        let (opts, counters, families) = {
            let slot = self.peers.get(&id)?;
            let up = slot.up.as_ref()?;
            let families: Vec<Family> = (up.negotiated.families.iter().copied())
                .filter(|f| !self.deferred(*f))
                .collect();
            (up.encode, slot.link.counters.clone(), families)
        };
        if families.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        let mut messages = 0;
        while out.len() < PULL_BYTES {
            match self.rib.take_output_of(id, 4096, &families) {
                Some(batch) => {
                    let e = encode_batch(&batch, &opts, &mut out);
                    messages += e.messages;
                    if let (
                        true,
                        OutBatch::Announce {
                            family, prefixes, ..
                        },
                    ) = (e.withdrawn_instead, &batch)
                    {
                        self.rib.not_advertised(id, *family, prefixes);
                    }
                }
                None => break,
            }
        }
        let up = self.peers.get_mut(&id)?.up.as_mut()?;
        if out.len() < PULL_BYTES {
            for f in families {
                if up.eor_sent.insert(f) {
                    wire::encode_end_of_rib(f, &mut out);
                    messages += 1;
                }
            }
        }
        counters.sent_n(wire::msg_type::UPDATE, messages);
        (!out.is_empty()).then_some(out)
    }
}
