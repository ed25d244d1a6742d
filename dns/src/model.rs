//! The cluster's names as the DNS serves them: Services, their EndpointSlices
//! and the Namespaces, read from the datastore's objects and changed one
//! object at a time. Pure: no I/O.
//!
//! Besides the objects, [`Records`] keeps a reverse index (address → names,
//! for PTR) that is recomputed only for the Service an object change touches.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// (namespace, name).
pub type Key = (String, String);

/// How a Service is named in DNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceKind {
    /// A/AAAA records for its cluster IPs (both families when dual-stack).
    ClusterIp(Vec<IpAddr>),
    /// `clusterIP: None`: the ready endpoints' addresses.
    Headless,
    /// A CNAME to this name.
    ExternalName(String),
}

/// A port of a Service or an EndpointSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// Lower case; empty for an unnamed port (which has no SRV record).
    pub name: String,
    /// Lower case: `tcp`, `udp`, `sctp`.
    pub protocol: String,
    pub port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRec {
    pub kind: ServiceKind,
    pub ports: Vec<Port>,
    /// Not-ready endpoints are published too.
    pub publish_not_ready: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub addresses: Vec<IpAddr>,
    /// Lower case, when set (StatefulSet pods).
    pub hostname: Option<String>,
    /// `conditions.ready`; unknown counts as ready, as the API says.
    pub ready: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceRec {
    /// The Service's name (from the `kubernetes.io/service-name` label).
    pub service: String,
    pub endpoints: Vec<Endpoint>,
    pub ports: Vec<Port>,
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

fn port(name: Option<&str>, protocol: Option<&str>, number: Option<i32>) -> Option<Port> {
    Some(Port {
        name: lower(name.unwrap_or_default()),
        protocol: lower(protocol.unwrap_or("TCP")),
        port: u16::try_from(number?).ok().filter(|p| *p != 0)?,
    })
}

impl ServiceRec {
    /// What DNS serves for `svc`; `None` when it has no name in DNS yet (a
    /// ClusterIP Service whose address is not allocated).
    pub fn from_service(svc: &Service) -> Option<ServiceRec> {
        let spec = svc.spec.as_ref()?;
        let ports = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| port(p.name.as_deref(), p.protocol.as_deref(), Some(p.port)))
            .collect();
        let kind = if spec.type_.as_deref() == Some("ExternalName") {
            let target = spec.external_name.as_deref()?.trim_end_matches('.');
            if target.is_empty() {
                return None;
            }
            ServiceKind::ExternalName(lower(target))
        } else if spec.cluster_ip.as_deref() == Some("None") {
            ServiceKind::Headless
        } else {
            let mut ips: Vec<IpAddr> = spec
                .cluster_ips
                .iter()
                .flatten()
                .chain(spec.cluster_ip.iter())
                .filter_map(|s| s.parse().ok())
                .collect();
            ips.sort();
            ips.dedup();
            if ips.is_empty() {
                return None;
            }
            ServiceKind::ClusterIp(ips)
        };
        Some(ServiceRec {
            kind,
            ports,
            publish_not_ready: spec.publish_not_ready_addresses.unwrap_or(false),
        })
    }
}

impl SliceRec {
    /// `None` for a slice of no Service (no `kubernetes.io/service-name`)
    /// or of an address type DNS does not serve (FQDN).
    pub fn from_slice(slice: &EndpointSlice) -> Option<SliceRec> {
        let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
        if slice.address_type != "IPv4" && slice.address_type != "IPv6" {
            return None;
        }
        let endpoints = slice
            .endpoints
            .iter()
            .map(|e| Endpoint {
                addresses: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
                hostname: e.hostname.as_deref().filter(|h| !h.is_empty()).map(lower),
                ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
            })
            .filter(|e| !e.addresses.is_empty())
            .collect();
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| port(p.name.as_deref(), p.protocol.as_deref(), p.port))
            .collect();
        Some(SliceRec {
            service: lower(service),
            endpoints,
            ports,
        })
    }
}

/// The name an endpoint has under its headless Service: its hostname, or
/// else its address with dashes (`10-0-0-1`, IPv6 `fd00--1`).
pub fn endpoint_label(hostname: Option<&str>, addr: IpAddr) -> String {
    match hostname {
        Some(h) => h.to_string(),
        None => dashed(addr),
    }
}

/// An address with its separators as dashes.
pub fn dashed(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => a.to_string().replace('.', "-"),
        IpAddr::V6(a) => a.to_string().replace(':', "-"),
    }
}

/// The address a dashed label names (`10-0-0-1`, `fd00--1`).
pub fn undashed(label: &str) -> Option<IpAddr> {
    if label.contains('.') || label.contains(':') {
        return None;
    }
    let dots = label.replace('-', ".");
    if let Ok(IpAddr::V4(a)) = dots.parse::<IpAddr>() {
        return Some(IpAddr::V4(a));
    }
    match label.replace('-', ":").parse::<IpAddr>() {
        Ok(IpAddr::V6(a)) => Some(IpAddr::V6(a)),
        _ => None,
    }
}

/// All the names of the cluster, indexed for answering.
#[derive(Debug, Default)]
pub struct Records {
    namespaces: HashSet<String>,
    services: HashMap<Key, ServiceRec>,
    /// By (namespace, slice name).
    slices: HashMap<Key, SliceRec>,
    /// Service key → the names of its slices.
    slices_of: HashMap<Key, BTreeSet<String>>,
    /// Address → names relative to the zone (`web.default.svc`).
    ptr: HashMap<IpAddr, BTreeSet<String>>,
    /// What each Service put into `ptr`.
    ptr_of: HashMap<Key, Vec<(IpAddr, String)>>,
    /// Services per namespace (a namespace with Services exists in DNS
    /// even before its Namespace object is seen).
    services_in: HashMap<String, usize>,
    /// Bumped by every change (for caches of answers).
    generation: u64,
}

/// An endpoint as DNS publishes it, with its slice's ports.
#[derive(Clone, Copy, Debug)]
pub struct EndpointView<'a> {
    pub endpoint: &'a Endpoint,
    pub ports: &'a [Port],
}

impl Records {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set_namespace(&mut self, name: &str, present: bool) {
        self.generation += 1;
        if present {
            self.namespaces.insert(lower(name));
        } else {
            self.namespaces.remove(&lower(name));
        }
    }

    pub fn namespace_exists(&self, ns: &str) -> bool {
        self.namespaces.contains(ns) || self.services_in.get(ns).is_some_and(|n| *n > 0)
    }

    /// Set (or with `None` remove) the Service `key`.
    pub fn set_service(&mut self, key: &Key, rec: Option<ServiceRec>) {
        self.generation += 1;
        let key = (lower(&key.0), lower(&key.1));
        let existed = self.services.contains_key(&key);
        match rec {
            Some(r) => {
                self.services.insert(key.clone(), r);
                if !existed {
                    *self.services_in.entry(key.0.clone()).or_default() += 1;
                }
            }
            None if existed => {
                self.services.remove(&key);
                if let Some(n) = self.services_in.get_mut(&key.0) {
                    *n -= 1;
                    if *n == 0 {
                        self.services_in.remove(&key.0);
                    }
                }
            }
            None => {}
        }
        self.reindex(&key);
    }

    /// Set (or with `None` remove) the EndpointSlice `key` (namespace,
    /// slice name).
    pub fn set_slice(&mut self, key: &Key, rec: Option<SliceRec>) {
        self.generation += 1;
        let key = (lower(&key.0), lower(&key.1));
        let old = self.slices.remove(&key);
        if let Some(old) = &old {
            let svc = (key.0.clone(), old.service.clone());
            if let Some(set) = self.slices_of.get_mut(&svc) {
                set.remove(&key.1);
                if set.is_empty() {
                    self.slices_of.remove(&svc);
                }
            }
        }
        let new_service = rec.as_ref().map(|r| r.service.clone());
        if let Some(rec) = rec {
            self.slices_of
                .entry((key.0.clone(), rec.service.clone()))
                .or_default()
                .insert(key.1.clone());
            self.slices.insert(key.clone(), rec);
        }
        let old_service = old.map(|o| o.service);
        if let Some(s) = &old_service {
            self.reindex(&(key.0.clone(), s.clone()));
        }
        if let Some(s) = new_service.filter(|s| Some(s) != old_service.as_ref()) {
            self.reindex(&(key.0.clone(), s));
        }
    }

    pub fn service(&self, ns: &str, name: &str) -> Option<&ServiceRec> {
        self.services.get(&(ns.to_string(), name.to_string()))
    }

    /// The endpoints of a Service that DNS publishes: ready ones, or all
    /// when the Service publishes not-ready addresses. Slices in name
    /// order, so answers do not depend on hashing.
    pub fn endpoints(&self, ns: &str, name: &str) -> Vec<EndpointView<'_>> {
        let key = (ns.to_string(), name.to_string());
        let publish_all = self.services.get(&key).is_some_and(|s| s.publish_not_ready);
        let Some(names) = self.slices_of.get(&key) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|n| self.slices.get(&(ns.to_string(), n.clone())))
            .flat_map(|s| {
                s.endpoints
                    .iter()
                    .filter(move |e| publish_all || e.ready)
                    .map(move |e| EndpointView {
                        endpoint: e,
                        ports: &s.ports,
                    })
            })
            .collect()
    }

    /// The names (relative to the zone) an address has.
    pub fn ptr(&self, addr: IpAddr) -> Option<&BTreeSet<String>> {
        self.ptr.get(&addr)
    }

    /// A number that changes with every change of the records.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many Services and slices are held (for metrics and logs).
    pub fn counts(&self) -> (usize, usize) {
        (self.services.len(), self.slices.len())
    }

    /// Recompute the reverse records of one Service.
    fn reindex(&mut self, key: &Key) {
        for (addr, name) in self.ptr_of.remove(key).unwrap_or_default() {
            if let Some(set) = self.ptr.get_mut(&addr) {
                set.remove(&name);
                if set.is_empty() {
                    self.ptr.remove(&addr);
                }
            }
        }
        let Some(svc) = self.services.get(key) else {
            return;
        };
        let base = format!("{}.{}.svc", key.1, key.0);
        let mut mine = Vec::new();
        match &svc.kind {
            ServiceKind::ClusterIp(ips) => mine.extend(ips.iter().map(|ip| (*ip, base.clone()))),
            ServiceKind::Headless => {
                for e in self.endpoints(&key.0, &key.1) {
                    for a in &e.endpoint.addresses {
                        let label = endpoint_label(e.endpoint.hostname.as_deref(), *a);
                        mine.push((*a, format!("{label}.{base}")));
                    }
                }
            }
            ServiceKind::ExternalName(_) => {}
        }
        for (addr, name) in &mine {
            self.ptr.entry(*addr).or_default().insert(name.clone());
        }
        if !mine.is_empty() {
            self.ptr_of.insert(key.clone(), mine);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashed_addresses_round_trip() {
        for a in ["10.0.0.1", "fd00::1", "2001:db8::a:b"] {
            let ip: IpAddr = a.parse().unwrap();
            assert_eq!(undashed(&dashed(ip)), Some(ip), "{a}");
        }
        assert_eq!(undashed("web"), None);
        assert_eq!(undashed("1-2-3"), None);
    }

    #[test]
    fn slice_moves_between_services_and_ptr_follows() {
        let mut r = Records::new();
        let headless = ServiceRec {
            kind: ServiceKind::Headless,
            ports: vec![],
            publish_not_ready: false,
        };
        r.set_service(&("ns".into(), "a".into()), Some(headless.clone()));
        r.set_service(&("ns".into(), "b".into()), Some(headless));
        let ip: IpAddr = "10.1.0.5".parse().unwrap();
        let slice = |svc: &str| SliceRec {
            service: svc.into(),
            endpoints: vec![Endpoint {
                addresses: vec![ip],
                hostname: None,
                ready: true,
            }],
            ports: vec![],
        };
        r.set_slice(&("ns".into(), "s1".into()), Some(slice("a")));
        assert!(r.ptr(ip).unwrap().contains("10-1-0-5.a.ns.svc"));
        r.set_slice(&("ns".into(), "s1".into()), Some(slice("b")));
        let names: Vec<_> = r.ptr(ip).unwrap().iter().cloned().collect();
        assert_eq!(names, vec!["10-1-0-5.b.ns.svc".to_string()]);
        r.set_slice(&("ns".into(), "s1".into()), None);
        assert!(r.ptr(ip).is_none());
        assert!(r.endpoints("ns", "a").is_empty());
    }

    #[test]
    fn namespace_exists_through_services_until_they_go() {
        let mut r = Records::new();
        let k: Key = ("team".into(), "web".into());
        let rec = ServiceRec {
            kind: ServiceKind::ClusterIp(vec!["10.96.0.5".parse().unwrap()]),
            ports: vec![],
            publish_not_ready: false,
        };
        r.set_service(&k, Some(rec.clone()));
        r.set_service(&k, Some(rec));
        assert!(r.namespace_exists("team"));
        r.set_service(&k, None);
        assert!(!r.namespace_exists("team"));
        r.set_namespace("team", true);
        assert!(r.namespace_exists("team"));
    }
}
