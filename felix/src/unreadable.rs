//! Objects felix cannot read: each is logged once at ERROR (by the api
//! crate's [`UnreadableLog`]) and counted in the gauge
//! `tartan_felix_unreadable_objects{kind}`. What felix does with one is
//! the daemon's business: a policy isolates, anything else keeps the last
//! readable version (or is absent).

use std::sync::Arc;

use tartan_api::Kind;
use tartan_api::store::readable::UnreadableLog;

use crate::health::Health;

/// The kinds felix watches, whose gauges read 0 from the start.
pub const WATCHED: [Kind; 15] = [
    Kind::WorkloadEndpoint,
    Kind::IpPool,
    Kind::IpamBlock,
    Kind::Node,
    Kind::Pod,
    Kind::Namespace,
    Kind::ServiceAccount,
    Kind::KubeNetworkPolicy,
    Kind::NetworkPolicy,
    Kind::GlobalNetworkPolicy,
    Kind::NetworkSet,
    Kind::GlobalNetworkSet,
    Kind::HostEndpoint,
    Kind::Service,
    Kind::EndpointSlice,
];

pub struct Unreadable {
    log: UnreadableLog,
    health: Option<Arc<Health>>,
}

impl Unreadable {
    /// Counting into `health`'s gauge, if any.
    pub fn new(health: Option<Arc<Health>>) -> Self {
        if let Some(h) = &health {
            for k in WATCHED {
                h.set_unreadable(k, 0);
            }
        }
        Unreadable {
            log: UnreadableLog::default(),
            health,
        }
    }

    /// `key` (`namespace/name`) of `kind` read as `result` says (or was
    /// deleted: `Ok`).
    pub fn note(&mut self, kind: Kind, key: &str, result: Result<(), &str>) {
        let news = match result {
            Ok(()) => self.log.readable(kind, key),
            Err(why) => self.log.unreadable(kind, key, why),
        };
        if news && let Some(h) = &self.health {
            h.set_unreadable(kind, self.log.count(kind));
        }
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.log.count(kind)
    }

    /// The keys of the objects of `kind` unreadable now.
    pub fn keys(&self, kind: Kind) -> impl Iterator<Item = &str> {
        self.log
            .all()
            .filter(move |(k, ..)| *k == kind)
            .map(|(_, key, _)| key)
    }
}
