//! Objects that are in the store but do not read as their kind: written by
//! another tool straight into etcd, or by an older version. They are never
//! skipped: a backend hands out a value that is not even an object as a
//! placeholder carrying its key and the reason ([`placeholder`]), and every
//! reader decodes objects with [`typed::from_dynamic`] (or [`check`]), which
//! refuses both kinds of unreadable object with the field at fault. Agents
//! report each one once ([`UnreadableLog`]); `tartanctl check` lists them.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Node, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy as KubeNetworkPolicy;
use tracing::{error, info};

use super::DynamicObject;
use super::typed::{self, Resource};
use crate::kind::Kind;
use crate::resources::{
    BgpConfiguration, BgpFilter, BgpNodeStatus, BgpPeer, BlockAffinity, GlobalNetworkPolicy,
    GlobalNetworkSet, HostEndpoint, IpPool, IpReservation, IpamBlock, IpamHandle,
    LoadBalancerIpPool, NetworkPolicy, NetworkSet, RangeAllocation, WorkloadEndpoint,
};

pub use super::placeholder::{UNREADABLE_ANNOTATION, placeholder, placeholder_reason};

fn decodes<T: Resource>(o: &DynamicObject) -> Result<(), String> {
    typed::from_dynamic::<T>(o.clone())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Whether `o` reads as `kind`'s type, as the agents read it; the error
/// names the field at fault.
pub fn check(kind: Kind, o: &DynamicObject) -> Result<(), String> {
    match kind {
        Kind::IpPool => decodes::<IpPool>(o),
        Kind::IpReservation => decodes::<IpReservation>(o),
        Kind::BgpConfiguration => decodes::<BgpConfiguration>(o),
        Kind::BgpPeer => decodes::<BgpPeer>(o),
        Kind::BgpFilter => decodes::<BgpFilter>(o),
        Kind::NetworkPolicy => decodes::<NetworkPolicy>(o),
        Kind::GlobalNetworkPolicy => decodes::<GlobalNetworkPolicy>(o),
        Kind::NetworkSet => decodes::<NetworkSet>(o),
        Kind::GlobalNetworkSet => decodes::<GlobalNetworkSet>(o),
        Kind::HostEndpoint => decodes::<HostEndpoint>(o),
        Kind::IpamBlock => decodes::<IpamBlock>(o),
        Kind::IpamHandle => decodes::<IpamHandle>(o),
        Kind::BlockAffinity => decodes::<BlockAffinity>(o),
        Kind::WorkloadEndpoint => decodes::<WorkloadEndpoint>(o),
        Kind::BgpNodeStatus => decodes::<BgpNodeStatus>(o),
        Kind::LoadBalancerIpPool => decodes::<LoadBalancerIpPool>(o),
        Kind::RangeAllocation => decodes::<RangeAllocation>(o),
        Kind::Node => decodes::<Node>(o),
        Kind::Namespace => decodes::<Namespace>(o),
        Kind::Pod => decodes::<Pod>(o),
        Kind::Service => decodes::<Service>(o),
        Kind::EndpointSlice => decodes::<EndpointSlice>(o),
        Kind::Secret => decodes::<Secret>(o),
        Kind::KubeNetworkPolicy => decodes::<KubeNetworkPolicy>(o),
        Kind::Lease => decodes::<Lease>(o),
        Kind::ConfigMap => decodes::<ConfigMap>(o),
        Kind::ServiceAccount => decodes::<ServiceAccount>(o),
    }
}

/// What an agent has said about unreadable objects: each is logged at
/// ERROR once when it arrives unreadable (again only if the reason
/// changes), and once at INFO when a readable version replaces it or it is
/// deleted. Keys are the agent's own (`namespace/name`).
#[derive(Debug, Default)]
pub struct UnreadableLog {
    now: BTreeMap<(Kind, String), String>,
}

impl UnreadableLog {
    /// `key` of `kind` is unreadable for `reason`; true when this is news
    /// (and was logged).
    pub fn unreadable(&mut self, kind: Kind, key: &str, reason: &str) -> bool {
        let k = (kind, key.to_string());
        if self.now.get(&k).is_some_and(|r| r == reason) {
            return false;
        }
        error!(%kind, object = %key, %reason, "unreadable object; it is an error until a readable version replaces it");
        self.now.insert(k, reason.to_string());
        true
    }

    /// `key` of `kind` is readable (or gone); true when it was unreadable.
    pub fn readable(&mut self, kind: Kind, key: &str) -> bool {
        let was = self.now.remove(&(kind, key.to_string())).is_some();
        if was {
            info!(%kind, object = %key, "object readable again (or deleted)");
        }
        was
    }

    /// How many objects of `kind` are unreadable now.
    pub fn count(&self, kind: Kind) -> usize {
        self.now.keys().filter(|(k, _)| *k == kind).count()
    }

    /// Every unreadable object now: (kind, key, reason).
    pub fn all(&self) -> impl Iterator<Item = (Kind, &str, &str)> {
        self.now
            .iter()
            .map(|((k, key), r)| (*k, key.as_str(), r.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ObjectKey;
    use serde_json::json;

    fn obj(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_boolean_label_value_names_its_field() {
        let o = obj(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "bad", "namespace": "x"},
            "spec": {"podSelector": {"matchLabels": {"role": true}}}
        }));
        let e = check(Kind::KubeNetworkPolicy, &o).unwrap_err();
        assert!(e.contains("spec.podSelector.matchLabels[role]"), "{e}");
        assert!(e.contains("\"x/bad\""), "{e}");
        let good = obj(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "bad", "namespace": "x"},
            "spec": {"podSelector": {"matchLabels": {"role": "db"}}}
        }));
        assert_eq!(check(Kind::KubeNetworkPolicy, &good), Ok(()));
    }

    #[test]
    fn a_placeholder_is_unreadable_as_every_kind() {
        for kind in Kind::all() {
            let key = ObjectKey::new(kind, kind.info().namespaced.then_some("ns"), "broken");
            let p = placeholder(&key, "not JSON: expected value at line 1 column 1");
            assert_eq!(ObjectKey::of(&p).unwrap(), key);
            assert_eq!(
                placeholder_reason(&p),
                Some("not JSON: expected value at line 1 column 1")
            );
            let e = check(kind, &p).unwrap_err();
            assert!(e.contains("not JSON"), "{kind}: {e}");
        }
    }

    #[test]
    fn a_tartan_object_the_write_path_refuses_is_unreadable() {
        // Both decode; neither passes the write path's rules, which a CRD
        // schema cannot fully say: `kubectl apply` may have stored them.
        let np = obj(json!({
            "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "sel", "namespace": "x"},
            "spec": {"selector": "role = 'db'"}
        }));
        let e = check(Kind::NetworkPolicy, &np).unwrap_err();
        assert!(e.contains("spec.selector") && e.contains("column"), "{e}");
        let pool = obj(json!({
            "apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "p"},
            "spec": {"cidr": "fd00:10::/56", "blockSize": 26}
        }));
        let e = check(Kind::IpPool, &pool).unwrap_err();
        assert!(e.contains("spec.blockSize"), "{e}");
    }

    #[test]
    fn the_unreadable_annotation_is_refused_on_write() {
        let mut o = crate::examples::example(Kind::IpPool, "p");
        o.metadata.annotations =
            Some([(UNREADABLE_ANNOTATION.to_string(), "x".to_string())].into());
        let e = crate::validate::validate(&o).unwrap_err().to_string();
        assert!(
            e.contains("metadata.annotations[tartan.dev/unreadable]: reserved"),
            "{e}"
        );
    }

    #[test]
    fn every_example_reads() {
        for kind in Kind::all() {
            let o = crate::examples::example(kind, "example-1");
            assert_eq!(check(kind, &o), Ok(()), "{kind}");
        }
    }

    #[test]
    fn each_unreadable_object_is_news_once() {
        let mut log = UnreadableLog::default();
        assert!(log.unreadable(Kind::NetworkPolicy, "a/p", "spec.order: bad"));
        assert!(!log.unreadable(Kind::NetworkPolicy, "a/p", "spec.order: bad"));
        assert!(log.unreadable(Kind::NetworkPolicy, "a/q", "spec.order: bad"));
        assert!(log.unreadable(Kind::GlobalNetworkPolicy, "/g", "x"));
        assert_eq!(log.count(Kind::NetworkPolicy), 2);
        assert_eq!(log.count(Kind::GlobalNetworkPolicy), 1);
        assert_eq!(log.count(Kind::IpPool), 0);
        // Another reason is news again; the count does not change.
        assert!(log.unreadable(Kind::NetworkPolicy, "a/p", "spec.types: bad"));
        assert_eq!(log.count(Kind::NetworkPolicy), 2);
        assert!(log.readable(Kind::NetworkPolicy, "a/p"));
        assert!(!log.readable(Kind::NetworkPolicy, "a/p"));
        assert_eq!(log.count(Kind::NetworkPolicy), 1);
        assert_eq!(log.all().count(), 2);
    }
}
