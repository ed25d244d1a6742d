//! Unit tests of the RIB, through its public API.

mod decision;
mod export;
mod filters;
mod gshut;
mod import;
mod lifecycle;
mod output;
mod prop;
mod scale;

use super::*;
use crate::model::{AsPath, AsSegment, Family, NextHop, NextHopMode, Origin, PathAttrs, RawAttr};
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

pub(super) const OUR_AS: u32 = 64512;

pub(super) fn local() -> LocalConfig {
    LocalConfig {
        asn: OUR_AS,
        router_id: Ipv4Addr::new(10, 0, 0, 1),
        cluster_id: Ipv4Addr::new(10, 0, 0, 1),
    }
}

pub(super) fn rib() -> Rib {
    Rib::new(local())
}

/// A peer numbered `id`: address 192.0.2.id, router id 10.9.9.id.
pub(super) fn peer(id: PeerId, asn: u32) -> PeerConfig {
    let b = id as u8;
    PeerConfig {
        id,
        asn,
        router_id: Ipv4Addr::new(10, 9, 9, b),
        address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, b)),
        ibgp: asn == OUR_AS,
        rr_client: false,
        next_hop: NextHopMode::Auto,
        shared_subnet: None,
        local_v4: Some(Ipv4Addr::new(192, 0, 2, 254)),
        local_v6: Some("2001:db8::fe".parse().unwrap()),
        local_v6_link_local: Some("fe80::fe".parse().unwrap()),
        families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
        max_prefix: None,
        filters: Default::default(),
    }
}

pub(super) fn ebgp(id: PeerId) -> PeerConfig {
    peer(id, 65000 + id)
}

pub(super) fn ibgp(id: PeerId) -> PeerConfig {
    peer(id, OUR_AS)
}

pub(super) fn client(id: PeerId) -> PeerConfig {
    PeerConfig {
        rr_client: true,
        ..ibgp(id)
    }
}

pub(super) fn attrs(path: &[u32], nh: [u8; 4]) -> PathAttrs {
    PathAttrs {
        origin: Origin::Igp,
        as_path: AsPath {
            segments: if path.is_empty() {
                vec![]
            } else {
                vec![AsSegment::Sequence(path.to_vec())]
            },
        },
        next_hop: NextHop::V4(Ipv4Addr::from(nh)),
        ..PathAttrs::default()
    }
}

pub(super) fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

pub(super) fn nh(a: [u8; 4]) -> NextHop {
    NextHop::V4(Ipv4Addr::from(a))
}

pub(super) fn v6nh(s: &str) -> NextHop {
    NextHop::V6 {
        global: s.parse::<Ipv6Addr>().unwrap(),
        link_local: None,
    }
}

/// What a peer holds, replayed from its batches.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Sent(pub HashMap<IpNet, Arc<PathAttrs>>);

impl Sent {
    /// Drains everything pending for `peer` in batches of `max`; returns
    /// the batches seen.
    pub fn drain(&mut self, rib: &mut Rib, peer: PeerId, max: usize) -> Vec<OutBatch> {
        let mut seen = Vec::new();
        while let Some(b) = rib.take_output(peer, max) {
            self.apply(&b);
            seen.push(b);
            assert!(seen.len() < 1_000_000, "output never ends");
        }
        seen
    }

    pub fn apply(&mut self, b: &OutBatch) {
        match b {
            OutBatch::Announce {
                attrs, prefixes, ..
            } => {
                for p in prefixes {
                    self.0.insert(*p, attrs.clone());
                }
            }
            OutBatch::Withdraw { prefixes, .. } => {
                for p in prefixes {
                    self.0.remove(p);
                }
            }
        }
    }
}

/// The peer's current view after draining all its output.
pub(super) fn drained(rib: &mut Rib, peer: PeerId) -> Sent {
    let mut s = Sent::default();
    s.drain(rib, peer, 1000);
    s
}

pub(super) fn best_peer(rib: &Rib, p: &str) -> Option<PeerId> {
    rib.best(&net(p)).map(|b| b.peer)
}
