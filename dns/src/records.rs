//! All the names of the cluster, indexed for answering: per namespace its
//! Services and EndpointSlices, and a reverse index (address → names, for
//! PTR) recomputed only for the Service an object change touches. Pure: no
//! I/O.
//!
//! Names are held once: a namespace's name is the key of its entry, a
//! Service's name is shared by its entry, its slices and its PTR names, a
//! slice's name by the slice map and its Service's list, and port names
//! are interned. The PTR index keeps references (namespace, Service,
//! endpoint hostname), not written-out names; what a Service put into it is
//! found again from the Service itself when it changes, not from a copy.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use crate::model::{EndpointView, Key, ServiceKind, ServiceRec, SliceRec, dashed};

/// Whose name an address has.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PtrName {
    pub namespace: Arc<str>,
    pub service: Arc<str>,
    pub host: PtrHost,
}

/// Which name under the Service.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PtrHost {
    /// The Service's own name (a cluster IP).
    Service,
    /// A headless Service's endpoint without a hostname: the address, dashed.
    Dashed,
    /// A headless Service's endpoint by its hostname.
    Named(Arc<str>),
}

impl PtrName {
    /// The name relative to the zone (`web.default.svc`,
    /// `db-0.db.default.svc`) that `addr` has through this.
    pub fn relative(&self, addr: IpAddr) -> String {
        let base = format!("{}.{}.svc", self.service, self.namespace);
        match &self.host {
            PtrHost::Service => base,
            PtrHost::Dashed => format!("{}.{base}", dashed(addr)),
            PtrHost::Named(h) => format!("{h}.{base}"),
        }
    }
}

/// A Service's name in a namespace: its record, if the Service exists, and
/// its slices (which may come before it), by name.
#[derive(Debug, Default)]
struct Entry {
    rec: Option<ServiceRec>,
    slices: Vec<Arc<str>>,
}

#[derive(Debug, Default)]
struct Namespace {
    /// The Namespace object is there.
    object: bool,
    /// Services with a record (a namespace with Services exists in DNS
    /// even before its Namespace object is seen).
    live: usize,
    services: HashMap<Arc<str>, Entry>,
    slices: HashMap<Arc<str>, SliceRec>,
}

impl Namespace {
    fn unused(&self) -> bool {
        !self.object && self.services.is_empty() && self.slices.is_empty()
    }
}

#[derive(Debug, Default)]
pub struct Records {
    namespaces: HashMap<Arc<str>, Namespace>,
    ptr: HashMap<IpAddr, Vec<PtrName>>,
    /// Port names, shared.
    strings: HashSet<Arc<str>>,
    services: usize,
    slices: usize,
    /// Bumped by every change (for caches of answers).
    generation: u64,
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

/// A namespace's entry, made if need be (its name held once, as the key).
fn namespace_mut<'a>(
    namespaces: &'a mut HashMap<Arc<str>, Namespace>,
    ns: &str,
) -> &'a mut Namespace {
    let key = match namespaces.get_key_value(ns) {
        Some((k, _)) => k.clone(),
        None => Arc::from(ns),
    };
    namespaces.entry(key).or_default()
}

impl Records {
    pub fn new() -> Self {
        Self::default()
    }

    fn forget_namespace_if_unused(&mut self, ns: &str) {
        if self.namespaces.get(ns).is_some_and(Namespace::unused) {
            self.namespaces.remove(ns);
        }
    }

    fn intern(strings: &mut HashSet<Arc<str>>, s: &Arc<str>) -> Arc<str> {
        if let Some(k) = strings.get(s) {
            return k.clone();
        }
        strings.insert(s.clone());
        s.clone()
    }

    /// Forget interned names no record uses any more.
    fn release(&mut self, names: impl IntoIterator<Item = Arc<str>>) {
        for n in names {
            // Ours and the one in hand.
            if Arc::strong_count(&n) == 2 {
                self.strings.remove(&n);
            }
        }
    }

    pub fn set_namespace(&mut self, name: &str, present: bool) {
        self.generation += 1;
        let name = lower(name);
        if present {
            namespace_mut(&mut self.namespaces, &name).object = true;
        } else if let Some(n) = self.namespaces.get_mut(name.as_str()) {
            n.object = false;
            self.forget_namespace_if_unused(&name);
        }
    }

    pub fn namespace_exists(&self, ns: &str) -> bool {
        self.namespaces
            .get(ns)
            .is_some_and(|n| n.object || n.live > 0)
    }

    /// Set (or with `None` remove) the Service `key`.
    pub fn set_service(&mut self, key: &Key, rec: Option<ServiceRec>) {
        self.generation += 1;
        let (ns, name) = (lower(&key.0), lower(&key.1));
        self.unindex(&ns, &name);
        let mut rec = rec;
        if let Some(r) = &mut rec {
            for p in r.ports.iter_mut() {
                p.name = Self::intern(&mut self.strings, &p.name);
            }
        }
        let n = namespace_mut(&mut self.namespaces, &ns);
        let old = match n.services.get_mut(name.as_str()) {
            Some(e) => std::mem::replace(&mut e.rec, rec),
            None => {
                let had = rec.is_some();
                if had {
                    n.services.insert(
                        Arc::from(name.as_str()),
                        Entry {
                            rec,
                            slices: Vec::new(),
                        },
                    );
                }
                None
            }
        };
        let now = n
            .services
            .get(name.as_str())
            .is_some_and(|e| e.rec.is_some());
        match (old.is_some(), now) {
            (false, true) => {
                n.live += 1;
                self.services += 1;
            }
            (true, false) => {
                n.live -= 1;
                self.services -= 1;
            }
            _ => {}
        }
        if n.services
            .get(name.as_str())
            .is_some_and(|e| e.rec.is_none() && e.slices.is_empty())
        {
            n.services.remove(name.as_str());
        }
        if let Some(old) = old {
            self.release(old.ports.into_vec().into_iter().map(|p| p.name));
        }
        self.index(&ns, &name);
        self.forget_namespace_if_unused(&ns);
    }

    /// Set (or with `None` remove) the EndpointSlice `key` (namespace,
    /// slice name).
    pub fn set_slice(&mut self, key: &Key, rec: Option<SliceRec>) {
        self.generation += 1;
        let (ns, name) = (lower(&key.0), lower(&key.1));
        // The Services whose names the change touches: the slice's old one
        // and its new one.
        let mut touched: Vec<String> = self
            .namespaces
            .get(ns.as_str())
            .and_then(|n| n.slices.get(name.as_str()))
            .map(|s| s.service.to_string())
            .into_iter()
            .collect();
        if let Some(r) = &rec
            && !touched.iter().any(|s| **s == *r.service)
        {
            touched.push(r.service.to_string());
        }
        for s in &touched {
            self.unindex(&ns, s);
        }
        let n = namespace_mut(&mut self.namespaces, &ns);
        let mut released = Vec::new();
        if let Some((slice_name, old)) = n.slices.remove_entry(name.as_str()) {
            self.slices -= 1;
            if let Some(e) = n.services.get_mut(&*old.service) {
                e.slices.retain(|s| *s != slice_name);
                if e.rec.is_none() && e.slices.is_empty() {
                    n.services.remove(&*old.service);
                }
            }
            released.extend(old.ports.into_vec().into_iter().map(|p| p.name));
        }
        if let Some(mut rec) = rec {
            for p in rec.ports.iter_mut() {
                p.name = Self::intern(&mut self.strings, &p.name);
            }
            // The Service's name, shared with its entry.
            let service = match n.services.get_key_value(&*rec.service) {
                Some((k, _)) => k.clone(),
                None => rec.service.clone(),
            };
            rec.service = service.clone();
            let slice_name: Arc<str> = Arc::from(name.as_str());
            let entry = n.services.entry(service).or_default();
            if let Err(at) = entry.slices.binary_search(&slice_name) {
                entry.slices.insert(at, slice_name.clone());
            }
            n.slices.insert(slice_name, rec);
            self.slices += 1;
        }
        self.release(released);
        for s in &touched {
            self.index(&ns, s);
        }
        self.forget_namespace_if_unused(&ns);
    }

    pub fn service(&self, ns: &str, name: &str) -> Option<&ServiceRec> {
        self.namespaces.get(ns)?.services.get(name)?.rec.as_ref()
    }

    /// The endpoints of a Service that DNS publishes: ready ones, or all
    /// when the Service publishes not-ready addresses. Slices in name
    /// order, so answers do not depend on hashing.
    pub fn endpoints(&self, ns: &str, name: &str) -> Vec<EndpointView<'_>> {
        self.published(ns, name).collect()
    }

    /// Whether a Service has an endpoint DNS publishes ([`Self::endpoints`]),
    /// without collecting them.
    pub fn has_endpoints(&self, ns: &str, name: &str) -> bool {
        self.published(ns, name).next().is_some()
    }

    fn published<'a>(
        &'a self,
        ns: &str,
        name: &str,
    ) -> impl Iterator<Item = EndpointView<'a>> + 'a {
        let n = self.namespaces.get(ns);
        let e = n.and_then(|n| n.services.get(name));
        let publish_all = e
            .and_then(|e| e.rec.as_ref())
            .is_some_and(|s| s.publish_not_ready);
        e.into_iter()
            .flat_map(|e| e.slices.iter())
            .filter_map(move |s| n?.slices.get(s))
            .flat_map(move |s| s.endpoints().filter(move |e| publish_all || e.ready()))
    }

    /// Whose names an address has, in a fixed order.
    pub fn ptr(&self, addr: IpAddr) -> Option<&[PtrName]> {
        self.ptr.get(&addr).map(Vec::as_slice)
    }

    /// A number that changes with every change of the records.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many Services and slices are held (for metrics and logs).
    pub fn counts(&self) -> (usize, usize) {
        (self.services, self.slices)
    }

    /// The reverse records a Service has now.
    fn ptr_names(&self, ns: &str, name: &str) -> Vec<(IpAddr, PtrName)> {
        let Some((ns_key, n)) = self.namespaces.get_key_value(ns) else {
            return Vec::new();
        };
        let Some((svc_key, e)) = n.services.get_key_value(name) else {
            return Vec::new();
        };
        let Some(rec) = &e.rec else {
            return Vec::new();
        };
        let at = |host| PtrName {
            namespace: ns_key.clone(),
            service: svc_key.clone(),
            host,
        };
        let mut out = Vec::new();
        match &rec.kind {
            ServiceKind::ClusterIp(ips) => {
                out.extend(ips.iter().map(|ip| (*ip, at(PtrHost::Service))));
            }
            ServiceKind::Headless => {
                for e in self.endpoints(ns, name) {
                    let host = e
                        .hostname()
                        .map_or(PtrHost::Dashed, |h| PtrHost::Named(h.clone()));
                    out.extend(e.addresses().map(|a| (a, at(host.clone()))));
                }
            }
            ServiceKind::ExternalName(_) => {}
        }
        out
    }

    fn unindex(&mut self, ns: &str, name: &str) {
        for (addr, p) in self.ptr_names(ns, name) {
            if let Some(v) = self.ptr.get_mut(&addr) {
                if let Ok(i) = v.binary_search(&p) {
                    v.remove(i);
                }
                if v.is_empty() {
                    self.ptr.remove(&addr);
                }
            }
        }
    }

    fn index(&mut self, ns: &str, name: &str) {
        for (addr, p) in self.ptr_names(ns, name) {
            let v = self.ptr.entry(addr).or_default();
            if let Err(i) = v.binary_search(&p) {
                v.insert(i, p);
            }
            v.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Endpoint;

    fn headless() -> ServiceRec {
        ServiceRec {
            kind: ServiceKind::Headless,
            ports: Box::new([]),
            publish_not_ready: false,
        }
    }

    fn names(r: &Records, ip: IpAddr) -> Vec<String> {
        r.ptr(ip)
            .unwrap_or_default()
            .iter()
            .map(|p| p.relative(ip))
            .collect()
    }

    #[test]
    fn slice_moves_between_services_and_ptr_follows() {
        let mut r = Records::new();
        r.set_service(&("ns".into(), "a".into()), Some(headless()));
        r.set_service(&("ns".into(), "b".into()), Some(headless()));
        let ip: IpAddr = "10.1.0.5".parse().unwrap();
        let slice = |svc: &str| {
            SliceRec::new(
                svc,
                vec![],
                [Endpoint {
                    addresses: vec![ip],
                    hostname: None,
                    ready: true,
                }],
            )
        };
        r.set_slice(&("ns".into(), "s1".into()), Some(slice("a")));
        assert_eq!(names(&r, ip), vec!["10-1-0-5.a.ns.svc".to_string()]);
        r.set_slice(&("ns".into(), "s1".into()), Some(slice("b")));
        assert_eq!(names(&r, ip), vec!["10-1-0-5.b.ns.svc".to_string()]);
        assert!(r.endpoints("ns", "a").is_empty());
        r.set_slice(&("ns".into(), "s1".into()), None);
        assert!(r.ptr(ip).is_none());
        assert!(r.endpoints("ns", "b").is_empty());
        assert_eq!(r.counts(), (2, 0));
    }

    #[test]
    fn a_slice_before_its_service_counts_once_the_service_comes() {
        let mut r = Records::new();
        let ip: IpAddr = "10.1.0.7".parse().unwrap();
        let s = SliceRec::new(
            "late",
            vec![],
            [Endpoint {
                addresses: vec![ip],
                hostname: Some("late-0".into()),
                ready: true,
            }],
        );
        r.set_slice(&("ns".into(), "late-1".into()), Some(s));
        assert!(r.ptr(ip).is_none(), "no Service, no names");
        assert!(!r.namespace_exists("ns"));
        r.set_service(&("ns".into(), "late".into()), Some(headless()));
        assert_eq!(names(&r, ip), vec!["late-0.late.ns.svc".to_string()]);
        assert_eq!(r.endpoints("ns", "late").len(), 1);
        r.set_service(&("ns".into(), "late".into()), None);
        assert!(r.ptr(ip).is_none());
        r.set_slice(&("ns".into(), "late-1".into()), None);
        assert!(r.namespaces.is_empty(), "nothing left behind");
        assert!(r.ptr.is_empty());
    }

    #[test]
    fn namespace_exists_through_services_until_they_go() {
        let mut r = Records::new();
        let k: Key = ("team".into(), "web".into());
        let rec = ServiceRec {
            kind: ServiceKind::ClusterIp(Box::new(["10.96.0.5".parse().unwrap()])),
            ports: Box::new([]),
            publish_not_ready: false,
        };
        r.set_service(&k, Some(rec.clone()));
        r.set_service(&k, Some(rec));
        assert!(r.namespace_exists("team"));
        assert_eq!(r.counts(), (1, 0));
        r.set_service(&k, None);
        assert!(!r.namespace_exists("team"));
        assert_eq!(r.counts(), (0, 0));
        r.set_namespace("team", true);
        assert!(r.namespace_exists("team"));
        r.set_namespace("team", false);
        assert!(r.namespaces.is_empty());
    }

    #[test]
    fn port_names_are_shared_and_forgotten_with_their_last_user() {
        let mut r = Records::new();
        let rec = |n: &str| ServiceRec {
            kind: ServiceKind::ClusterIp(Box::new(["10.96.0.5".parse().unwrap()])),
            ports: vec![crate::model::Port::new(Some(n), None, Some(80)).unwrap()].into(),
            publish_not_ready: false,
        };
        r.set_service(&("a".into(), "x".into()), Some(rec("http")));
        r.set_service(&("b".into(), "y".into()), Some(rec("http")));
        let x = &r.service("a", "x").unwrap().ports[0].name;
        let y = &r.service("b", "y").unwrap().ports[0].name;
        assert!(Arc::ptr_eq(x, y));
        r.set_service(&("a".into(), "x".into()), None);
        assert_eq!(r.strings.len(), 1);
        r.set_service(&("b".into(), "y".into()), Some(rec("grpc")));
        assert_eq!(
            r.strings.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            vec!["grpc".to_string()]
        );
    }
}
