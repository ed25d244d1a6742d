//! The node's own BGP addresses, detected at start when its Node lacks the
//! `tartan.dev/bgp-ipv4-address` / `-ipv6-` annotation (or when a method
//! is configured in BGPConfiguration), and written back as those
//! annotations: other nodes, felix and operators read them from there.
//! [`decide`] is pure; [`run`] reads the Node, the configuration and the
//! interfaces, and writes the Node.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::BgpConfiguration;
use tartan_api::resources::autodetect::{AddressAutodetection, Family, LocalAddress};
use tartan_api::resources::bgpconfiguration::{DEFAULT_NAME, NODE_PREFIX};
use tartan_api::resources::node::{BGP_IPV4_ADDRESS, BGP_IPV6_ADDRESS};
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, StoreError};
use tracing::{error, info, warn};

use crate::kernel::Kernel;

/// What to do about one family's annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// The annotation stays as it is (or stays absent).
    Keep,
    /// Write this address into the annotation.
    Write(IpNet),
    /// The method found nothing: why.
    Fail(String),
}

/// The inputs of one family's decision.
pub struct Facts<'a> {
    pub family: Family,
    /// The annotation's current value.
    pub current: Option<&'a str>,
    /// The method configured in BGPConfiguration, if any.
    pub configured: Option<&'a AddressAutodetection>,
    /// The Node's InternalIP addresses.
    pub internal: &'a [IpAddr],
    pub local: &'a [LocalAddress],
    /// The source address towards `canReach`, when that is the method.
    pub reach_source: Option<IpAddr>,
}

/// An annotation written by hand is kept unless a method is configured;
/// an absent one is filled by the configured method or, by default, from
/// the Node's InternalIP (for IPv6 only when the Node has an IPv6 one).
pub fn decide(f: &Facts) -> Action {
    let default = AddressAutodetection::node_internal_ip();
    let method = match (f.configured, f.current) {
        (Some(m), _) => m,
        (None, Some(_)) => return Action::Keep,
        (None, None) => {
            if f.family == Family::V6 && !f.internal.iter().any(|a| Family::of(a) == Family::V6) {
                return Action::Keep;
            }
            &default
        }
    };
    match method.choose(f.family, f.internal, f.local, f.reach_source) {
        Ok(n) if f.current.and_then(|c| c.parse::<IpNet>().ok()) == Some(n) => Action::Keep,
        Ok(n) => Action::Write(n),
        Err(why) => Action::Fail(why),
    }
}

/// The Node's InternalIP addresses.
fn internal_ips(n: &Node) -> Vec<IpAddr> {
    n.status
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse().ok())
        .collect()
}

/// The source address the routing table picks towards `target`.
fn source_towards(target: IpAddr) -> Option<IpAddr> {
    let any: SocketAddr = match target {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    // Connecting a UDP socket sends nothing; it only routes.
    let s = UdpSocket::bind(any).ok()?;
    s.connect((target, 9)).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// The configured methods: the cluster's, with this node's overrides.
async fn methods(
    store: &dyn Datastore,
    node: &str,
) -> Result<(Option<AddressAutodetection>, Option<AddressAutodetection>), StoreError> {
    let get = |name: String| async move {
        match store.get_typed::<BgpConfiguration>(None, &name).await {
            Ok(c) => Ok(Some(c.spec)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let cluster = get(DEFAULT_NAME.to_string()).await?.unwrap_or_default();
    let spec = match get(format!("{NODE_PREFIX}{node}")).await? {
        Some(o) => cluster.overlay(&o),
        None => cluster,
    };
    Ok((
        spec.node_address_autodetection_v4,
        spec.node_address_autodetection_v6,
    ))
}

/// One attempt: decide both families and write what changed. Returns
/// whether the datastore should be tried again (a read or write failed).
async fn attempt(store: &dyn Datastore, node: &str, local: &[LocalAddress]) -> bool {
    let (v4, v6) = match methods(store, node).await {
        Ok(m) => m,
        Err(e) => {
            warn!(error = %e, "address autodetection: cannot read BGPConfiguration; retrying");
            return true;
        }
    };
    let mut n: Node = match store.get_typed(None, node).await {
        Ok(n) => n,
        Err(StoreError::NotFound(_)) => {
            warn!(node, "address autodetection: no Node object yet; retrying");
            return true;
        }
        Err(e) => {
            warn!(error = %e, "address autodetection: cannot read the Node; retrying");
            return true;
        }
    };
    let internal = internal_ips(&n);
    let empty = BTreeMap::new();
    let ann = n.metadata.annotations.as_ref().unwrap_or(&empty);
    let mut writes = Vec::new();
    for (family, key, configured) in [
        (Family::V4, BGP_IPV4_ADDRESS, v4.as_ref()),
        (Family::V6, BGP_IPV6_ADDRESS, v6.as_ref()),
    ] {
        let reach_source = configured
            .and_then(AddressAutodetection::reach_target)
            .and_then(source_towards);
        let facts = Facts {
            family,
            current: ann.get(key).map(String::as_str),
            configured,
            internal: &internal,
            local,
            reach_source,
        };
        let how = if configured.is_some() {
            "configured"
        } else {
            "default"
        };
        match decide(&facts) {
            Action::Keep => {}
            Action::Write(net) => {
                info!(node, annotation = key, address = %net, method = how, "BGP address autodetected");
                writes.push((key, net));
            }
            Action::Fail(why) => {
                error!(
                    node,
                    annotation = key,
                    method = how,
                    "BGP address autodetection found nothing: {why}"
                );
            }
        }
    }
    if writes.is_empty() {
        return false;
    }
    let a = n.metadata.annotations.get_or_insert_with(Default::default);
    for (key, net) in writes {
        a.insert(key.to_string(), net.to_string());
    }
    match store.update_typed(&n).await {
        Ok(_) => false,
        Err(e) => {
            // A kubelet heartbeat in between is a conflict: read again.
            warn!(error = %e, "address autodetection: cannot write the Node; retrying");
            true
        }
    }
}

/// Detect and publish this node's BGP addresses, retrying while the
/// datastore fails or the Node does not exist yet.
pub async fn run(store: &dyn Datastore, node: &str) {
    let local = match Kernel::connect().await {
        Ok(k) => match k.addresses().await {
            Ok(l) => l,
            Err(e) => {
                error!(error = %e, "address autodetection: cannot list interface addresses");
                return;
            }
        },
        Err(e) => {
            error!(error = %e, "address autodetection: no netlink socket");
            return;
        }
    };
    let mut wait = Duration::from_millis(100);
    while attempt(store, node, &local).await {
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(10));
    }
}

#[cfg(test)]
#[path = "autodetect_tests.rs"]
mod tests;
