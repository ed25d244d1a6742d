//! The service tables kept up to date by Service, one per address family
//! ([`FamilyIndex`]): a Service's IPv4 half goes to the IPv4 index and its
//! IPv6 half to the IPv6 one, and each EndpointSlice to the index of its
//! `addressType` (as kube-proxy feeds each family's proxier). A change to
//! one Service or slice recomputes that Service's part in each family it
//! touches, so the work per change does not grow with the number of
//! Services. An IPv4-only cluster leaves the IPv6 index empty. Pure.

mod family;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use family::FamilyIndex;

use super::healthcheck::Target;
use super::render::SvcNft;
use super::stale::StaleFlows;
use super::{Family, ServiceHalves, Slice};

/// The Services and slices felix has seen, in one [`FamilyIndex`] per
/// address family, and the node's zone they are computed for.
pub struct ServiceIndex {
    node: String,
    /// The node's `topology.kubernetes.io/zone` (`""` without): the
    /// topology hints are read against it.
    zone: String,
    v4: FamilyIndex<Ipv4Addr>,
    v6: FamilyIndex<Ipv6Addr>,
}

/// An address family with its index in a [`ServiceIndex`].
pub trait Indexed: Family {
    fn half(ix: &ServiceIndex) -> &FamilyIndex<Self>;
    fn half_mut(ix: &mut ServiceIndex) -> &mut FamilyIndex<Self>;
}

impl Indexed for Ipv4Addr {
    fn half(ix: &ServiceIndex) -> &FamilyIndex<Self> {
        &ix.v4
    }
    fn half_mut(ix: &mut ServiceIndex) -> &mut FamilyIndex<Self> {
        &mut ix.v4
    }
}

impl Indexed for Ipv6Addr {
    fn half(ix: &ServiceIndex) -> &FamilyIndex<Self> {
        &ix.v6
    }
    fn half_mut(ix: &mut ServiceIndex) -> &mut FamilyIndex<Self> {
        &mut ix.v6
    }
}

impl ServiceIndex {
    pub fn new(node: &str) -> ServiceIndex {
        ServiceIndex {
            node: node.to_string(),
            zone: String::new(),
            v4: FamilyIndex::default(),
            v6: FamilyIndex::default(),
        }
    }

    /// The node this index is for: slices are read for it
    /// ([`super::SliceInfo::from_slice`]).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The node's zone.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The index of family `A`.
    pub fn family<A: Indexed>(&self) -> &FamilyIndex<A> {
        A::half(self)
    }

    /// The index of family `A`, for what needs no zone (taking its patch,
    /// marking it written).
    pub fn family_mut<A: Indexed>(&mut self) -> &mut FamilyIndex<A> {
        A::half_mut(self)
    }

    /// The node's zone changed (`""`: it has none): every Service is
    /// computed again, since which endpoints the topology hints name
    /// depends on it. Whether it changed.
    pub fn set_zone(&mut self, zone: &str) -> bool {
        if self.zone == zone {
            return false;
        }
        self.v4.zone_changing(&self.zone);
        self.v6.zone_changing(&self.zone);
        self.zone = zone.to_string();
        true
    }

    /// The health-check node ports this node answers on, with what each
    /// says ([`super::healthcheck::targets`]). A dual-stack Service's
    /// local endpoints are counted in the family that has more (a pod
    /// has an address of each, in two slices).
    pub fn health_targets(&self) -> BTreeMap<u16, Target> {
        let mut out = self.v4.health_targets();
        for (port, t) in self.v6.health_targets() {
            match out.get_mut(&port) {
                Some(had) => had.local_endpoints = had.local_endpoints.max(t.local_endpoints),
                None => {
                    out.insert(port, t);
                }
            }
        }
        out
    }

    /// A Service came, changed or went (`None`: gone, or one the proxy
    /// leaves alone). Whether anything the proxy uses changed.
    pub fn set_service<S: Into<ServiceHalves>>(&mut self, key: &str, info: Option<S>) -> bool {
        let (v4, v6) = match info.map(Into::into) {
            Some(h) => (h.v4, h.v6),
            None => (None, None),
        };
        let a = self.v4.set_service(key, v4, &self.zone);
        let b = self.v6.set_service(key, v6, &self.zone);
        a || b
    }

    /// An EndpointSlice came, changed or went: to the index of its family
    /// (and out of the other one, should its `addressType` have changed).
    pub fn set_slice<S: Into<Slice>>(&mut self, key: &str, info: Option<S>) -> bool {
        let (v4, v6) = match info.map(Into::into) {
            Some(Slice::V4(s)) => (Some(s), None),
            Some(Slice::V6(s)) => (None, Some(s)),
            None => (None, None),
        };
        let a = self.v4.set_slice(key, v4, &self.zone);
        let b = self.v6.set_slice(key, v6, &self.zone);
        a || b
    }

    /// This node's pod addresses, of both families (for hairpin).
    pub fn set_local_pods<I: Into<IpAddr>>(&mut self, pods: impl IntoIterator<Item = I>) {
        let (mut v4, mut v6) = (BTreeSet::new(), BTreeSet::new());
        for a in pods {
            match a.into() {
                IpAddr::V4(a) => v4.insert(a),
                IpAddr::V6(a) => v6.insert(a),
            };
        }
        self.v4.set_local_pods(v4);
        self.v6.set_local_pods(v6);
    }

    /// Recompute the Services that changed, in both families; the IPv4
    /// table after it.
    pub fn update(&mut self) -> &SvcNft<Ipv4Addr> {
        self.v6.update(&self.zone);
        self.v4.update(&self.zone)
    }

    /// The IPv4 table (the IPv6 one: `family::<Ipv6Addr>().table()`).
    pub fn table(&self) -> &SvcNft<Ipv4Addr> {
        self.v4.table()
    }

    /// The nft commands for what changed in the IPv4 table since its last
    /// patch ([`FamilyIndex::take_patch`]).
    pub fn take_patch(&mut self) -> Option<tartan_nft::Transaction> {
        self.v4.take_patch()
    }

    /// The IPv4 table computed afresh ([`FamilyIndex::recomputed`]).
    pub fn recomputed(&self) -> SvcNft<Ipv4Addr> {
        self.v4.recomputed(&self.zone)
    }

    /// Whether each family's kept table equals one computed afresh
    /// ([`FamilyIndex::consistent`]).
    pub fn consistent(&self) -> bool {
        self.v4.consistent(&self.zone) && self.v6.consistent(&self.zone)
    }

    /// Whether family `A`'s kept table equals one computed afresh.
    pub fn family_consistent<A: Indexed>(&self) -> bool {
        self.family::<A>().consistent(&self.zone)
    }

    /// Start family `A` over, the other left as it is.
    pub fn rebuild_family<A: Indexed>(&mut self) {
        let zone = self.zone.clone();
        self.family_mut::<A>().rebuild(&zone);
    }

    /// Start both families over ([`FamilyIndex::rebuild`]).
    pub fn rebuild(&mut self) {
        self.v4.rebuild(&self.zone);
        self.v6.rebuild(&self.zone);
    }

    /// The conntrack flows changes left stale, of both families
    /// ([`FamilyIndex::take_stale`]).
    pub fn take_stale(&mut self) -> StaleFlows {
        StaleFlows {
            v4: self.v4.take_stale(),
            v6: self.v6.take_stale(),
        }
    }

    /// Flows whose cleanup failed, to try again with the next ones.
    pub fn keep_stale(&mut self, flows: StaleFlows) {
        self.v4.keep_stale(flows.v4);
        self.v6.keep_stale(flows.v6);
    }
}
