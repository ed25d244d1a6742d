//! The typed `tartan.dev/v1` resources, one file per kind, and their CRDs.
//!
//! Each spec has a `check()` that returns every semantic problem with
//! field paths from `spec`; [`crate::validate::validate`] runs it after
//! parsing. Defaults are written in each field's documentation (which
//! becomes the CRD's description).

pub mod autodetect;
pub mod bfd;
pub mod bgpconfiguration;
pub mod bgpfilter;
pub mod bgppeer;
pub mod common;
pub mod community;
pub mod crd;
pub mod hostendpoint;
pub mod ipam;
pub mod ippool;
pub mod ipreservation;
pub mod lbpool;
pub mod limits;
pub mod networkset;
pub mod node;
pub mod nodestatus;
pub mod policy;
mod policy_values;
pub mod rangealloc;
pub mod schema_rules;
pub mod schema_rules_policy;
pub mod workload;

pub use bfd::{BfdSpec, BfdTimers};
pub use bgpconfiguration::{BgpConfiguration, BgpConfigurationSpec};
pub use bgpfilter::{BgpFilter, BgpFilterSpec};
pub use bgppeer::{BgpPeer, BgpPeerSpec};
pub use common::{SecretKeyRef, SecretSource, TARTAN_NAMESPACE};
pub use crd::crds;
pub use hostendpoint::{HostEndpoint, HostEndpointSpec};
pub use ipam::{
    AffinityState, AllocationAttributes, BlockAffinity, BlockAffinitySpec, IpamBlock,
    IpamBlockSpec, IpamHandle, IpamHandleSpec, ReleasedAddress, block_name,
};
pub use ippool::{IpPool, IpPoolSpec};
pub use ipreservation::{IpReservation, IpReservationSpec};
pub use lbpool::{LoadBalancerIpPool, LoadBalancerIpPoolSpec};
pub use networkset::{GlobalNetworkSet, GlobalNetworkSetSpec, NetworkSet, NetworkSetSpec};
pub use node::NodeBgp;
pub use nodestatus::{BgpNodeStatus, BgpNodeStatusSpec, BgpSessionReport};
pub use policy::{GlobalNetworkPolicy, GlobalNetworkPolicySpec, NetworkPolicy, NetworkPolicySpec};
pub use rangealloc::{RangeAllocation, RangeAllocationSpec};
pub use workload::{EndpointPort, WorkloadEndpoint, WorkloadEndpointSpec, workload_name};

use crate::kind::Kind;
use crate::store::resource::Resource;

macro_rules! tartan_resource {
    ($($ty:ty => $kind:ident),* $(,)?) => {
        $(impl Resource for $ty {
            const KIND: Kind = Kind::$kind;
        })*
    };
}

tartan_resource!(
    IpPool => IpPool,
    IpReservation => IpReservation,
    BgpConfiguration => BgpConfiguration,
    BgpPeer => BgpPeer,
    BgpFilter => BgpFilter,
    NetworkPolicy => NetworkPolicy,
    GlobalNetworkPolicy => GlobalNetworkPolicy,
    NetworkSet => NetworkSet,
    GlobalNetworkSet => GlobalNetworkSet,
    HostEndpoint => HostEndpoint,
    IpamBlock => IpamBlock,
    IpamHandle => IpamHandle,
    BlockAffinity => BlockAffinity,
    WorkloadEndpoint => WorkloadEndpoint,
    BgpNodeStatus => BgpNodeStatus,
    LoadBalancerIpPool => LoadBalancerIpPool,
    RangeAllocation => RangeAllocation,
);
