//! The control API's view of the instance: requests travel to the
//! instance task over a channel (`control_channel.rs`) and are answered
//! here from its state.
use super::control_channel::ControlRequest;
use super::instance::Daemon;
use crate::control::{PathFlags, path_view};
use crate::model::Family;
use crate::rib::LOCAL;
use ipnet::IpNet;
use std::collections::BTreeMap;
use tartan_api::bgp::{
    BfdPeerStatus, GracefulRestartStatus, KernelCounts, PeerKind, PeerStatus, PrefixCounts,
    RouteCounts, RouteEntry, SpeakerStatus,
};

impl Daemon {
    /// Answers a control request from the instance's state.
    pub(super) fn answer_control(&mut self, req: ControlRequest) {
        answer(self, req);
    }
}

fn answer(d: &mut Daemon, req: ControlRequest) {
    match req {
        ControlRequest::Peers(tx) => {
            let _ = tx.send(peers(d));
        }
        ControlRequest::Routes(f, p, tx) => {
            let _ = tx.send(routes(d, f, p));
        }
        ControlRequest::Status(tx) => {
            let _ = tx.send(status(d));
        }
        ControlRequest::Drain(wait, tx) => {
            if let Some(w) = wait {
                d.start_drain(w);
            }
            let _ = tx.send(d.drain_status());
        }
        ControlRequest::Unattempted(tx) => {
            let mut v: Vec<_> = d
                .peers
                .values()
                .filter(|p| !p.link.counters.attempted())
                .map(|p| p.neighbor.address)
                .collect();
            v.sort();
            let _ = tx.send(v);
        }
    }
}

fn peers(d: &Daemon) -> Vec<PeerStatus> {
    let mut out: Vec<PeerStatus> = d
        .peers
        .iter()
        .map(|(id, p)| {
            let n = &p.neighbor;
            let c = &p.link.counters;
            let neg = c.negotiated();
            let counts = d.rib.counts(*id);
            PeerStatus {
                address: n.address,
                port: Some(n.port),
                asn: n.asn,
                local_asn: d.config.asn,
                kind: if n.asn == d.config.asn {
                    PeerKind::Ibgp
                } else {
                    PeerKind::Ebgp
                },
                state: c.state().into(),
                uptime_seconds: c.uptime().map(|u| u.as_secs()),
                router_id: neg.as_ref().map(|n| n.peer_router_id),
                hold_time: neg.as_ref().map(|n| n.hold_time.as_secs() as u16),
                families: neg
                    .as_ref()
                    .map(|n| n.families.iter().map(|f| f.to_string()).collect())
                    .unwrap_or_else(|| n.families.iter().map(|f| f.to_string()).collect()),
                prefixes: PrefixCounts {
                    received: counts.received,
                    accepted: counts.accepted,
                    advertised: counts.advertised,
                },
                last_error: c.last_error(),
                messages: c.message_counts(),
                graceful_restart: neg
                    .as_ref()
                    .and_then(|n| n.peer_graceful_restart.as_ref())
                    .map(|g| GracefulRestartStatus {
                        restart_time: g.restart_time,
                        peer_restarting: g.restarting,
                        preserved_families: g
                            .families
                            .iter()
                            .filter(|(_, f)| *f)
                            .map(|(fam, _)| fam.to_string())
                            .collect(),
                        stale_routes: d.rib.stale_count(*id),
                    }),
                rr_client: n.route_reflector_client,
                description: n.description.clone(),
                bfd: p.bfd.as_ref().map(|b| bfd_view(&b.status.borrow())),
            }
        })
        .collect();
    out.sort_by_key(|p| p.address);
    out
}

fn routes(d: &Daemon, family: Option<Family>, prefix: Option<IpNet>) -> Vec<RouteEntry> {
    let addr_of = |peer| {
        if peer == LOCAL {
            None
        } else {
            d.peers.get(&peer).map(|p| p.neighbor.address)
        }
    };
    let families: Vec<Family> = match (family, prefix) {
        (_, Some(p)) => vec![Family::of(&p)],
        (Some(f), None) => vec![f],
        (None, None) => Family::ALL.to_vec(),
    };
    let mut out = Vec::new();
    for f in families {
        for r in d.rib.routes(f) {
            if prefix.is_some_and(|p| p != r.prefix) {
                continue;
            }
            out.push(RouteEntry {
                prefix: r.prefix,
                family: f.to_string(),
                paths: r
                    .paths
                    .iter()
                    .map(|p| {
                        path_view(
                            &p.attrs,
                            addr_of(p.peer),
                            PathFlags {
                                best: p.best,
                                multipath: p.multipath,
                                stale: p.stale,
                            },
                        )
                    })
                    .collect(),
            });
        }
    }
    out.sort_by_key(|r| r.prefix);
    out
}

fn status(d: &Daemon) -> SpeakerStatus {
    let mut routes = BTreeMap::new();
    for f in Family::ALL {
        let (prefixes, paths) = (d.rib.prefix_count(f), d.rib.path_count(f));
        routes.insert(
            f.to_string(),
            RouteCounts {
                prefixes: prefixes as u64,
                paths: paths as u64,
            },
        );
    }
    let kernel = d
        .kernel
        .as_ref()
        .map(|k| {
            let s = k.stats();
            KernelCounts {
                installed: s.installed,
                removed: s.removed,
                failed: s.failed,
            }
        })
        .unwrap_or_default();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let up = d.started.elapsed().as_secs();
    SpeakerStatus {
        router_id: d.config.router_id,
        asn: d.config.asn,
        peers: d.peers.len(),
        established_peers: d.peers.values().filter(|p| p.up.is_some()).count(),
        routes,
        kernel,
        started_at: now.saturating_sub(up),
        uptime_seconds: up,
        version: env!("CARGO_PKG_VERSION").to_string(),
        restart: d.deferral_status(),
    }
}

/// The API view of a BFD session.
fn bfd_view(s: &crate::bfd::BfdStatus) -> BfdPeerStatus {
    BfdPeerStatus {
        state: s.state.name().to_string(),
        diagnostic: format!("{:?}", s.diag),
        remote_diagnostic: format!("{:?}", s.remote_diag),
        tx_interval_ms: s.tx_interval.map(|d| d.as_millis() as u64),
        detection_time_ms: s.detection_time.map(|d| d.as_millis() as u64),
        transitions: s.transitions,
        multihop: s.multihop,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::bfd::{BfdStatus, ControlPacket, Diag, Session, SessionConfig, State};

    #[test]
    fn the_bfd_view_carries_both_diagnostics() {
        let config = SessionConfig {
            desired_min_tx: Duration::from_millis(300),
            required_min_rx: Duration::from_millis(300),
            detect_mult: 3,
        };
        let t0 = Instant::now();
        let mut s = Session::new(7, config, t0, 1);
        s.receive(
            &ControlPacket {
                diag: Diag::ControlDetectionTimeExpired,
                state: State::Down,
                poll: false,
                final_: false,
                control_plane_independent: false,
                demand: false,
                detect_mult: 3,
                my_discr: 9,
                your_discr: 0,
                desired_min_tx_us: 300_000,
                required_min_rx_us: 300_000,
                required_min_echo_rx_us: 0,
            },
            t0,
        );
        let view = super::bfd_view(&BfdStatus::of(&s, 1, true));
        assert_eq!(view.diagnostic, "None");
        assert_eq!(view.remote_diagnostic, "ControlDetectionTimeExpired");
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["remoteDiagnostic"], "ControlDetectionTimeExpired");
        assert_eq!(json["multihop"], true);
    }
}
