//! Every WorkloadEndpoint of the cluster, kept compactly and ready for the
//! policy compiler. felix needs an endpoint's interface only on its own
//! node; of the others it keeps what selection and routing read: the node,
//! the addresses (parsed once), the named ports and the labels, with equal
//! label sets, namespaces, node names and port lists shared. Each
//! endpoint's labels are kept resolved (its Pod's when the Pod is seen,
//! else the endpoint's copy), updated per event.
//!
//! For the compiler, other nodes' endpoints alike in namespace, labels and
//! named ports (the pods of one workload) are one endpoint holding all
//! their addresses: what selects one selects all, and a named port numbers
//! the same on each, so the compiled sets are those of the endpoints one
//! by one. A pass then borrows some thousands of endpoints instead of
//! copying 150,000. Pure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::Arc;

use compact_str::CompactString;
use ipnet::IpNet;
use tartan_api::resources::WorkloadEndpointSpec;
use tartan_policy::compile::{Endpoint, Families, NamedPort};
use tracing::warn;

use super::intern::Interner;
use super::remote::{Look, Remote};
use super::state::Labels;

/// An endpoint on this node, whole as the compiler takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Local {
    ep: Endpoint,
    /// The labels the CNI plugin copied onto the endpoint at ADD.
    own: Arc<Labels>,
}

/// A shared value by identity: interned values are equal when they are
/// the same value.
#[derive(Debug)]
struct Same<T: ?Sized>(Arc<T>);

impl<T: ?Sized> Clone for Same<T> {
    fn clone(&self) -> Self {
        Same(self.0.clone())
    }
}

impl<T: ?Sized> PartialEq for Same<T> {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}

impl<T: ?Sized> Eq for Same<T> {}

impl<T: ?Sized> Hash for Same<T> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (Arc::as_ptr(&self.0) as *const () as usize).hash(h)
    }
}

/// Other nodes' endpoints alike for the compiler: namespace, labels,
/// named ports.
type Likeness = (Same<str>, Same<Labels>, Same<[NamedPort]>);

/// The endpoints, by `namespace/name`.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    node: String,
    local: BTreeMap<String, Local>,
    /// Keys of up to 24 bytes are kept in place, the B-tree's slot for a
    /// pointer to a longer one taking the same node size.
    remote: BTreeMap<CompactString, Remote>,
    /// Other nodes' endpoints merged by likeness (see the module's
    /// comment): no address appears twice unless two endpoints hold it.
    groups: HashMap<Likeness, Endpoint>,
    /// The groups' addresses counted by family (IPv4, IPv6): the compiler
    /// writes rules for a family only if some endpoint has it, and a count
    /// answers that without looking at every address.
    grouped: [usize; 2],
    /// `namespace/name` of a Pod → its labels.
    pods: HashMap<CompactString, Arc<Labels>>,
    /// `namespace/pod` → the endpoints of that Pod whose names are not
    /// `<pod>.<interface>` (none, as the CNI plugin names them), and the
    /// other way.
    odd: BTreeMap<String, BTreeSet<String>>,
    odd_pod: HashMap<String, String>,
    labels: Interner<Labels>,
    names: Interner<str>,
    ports: Interner<[NamedPort]>,
    /// Other nodes' names, as their endpoints hold them.
    nodes: Interner<Box<str>>,
    looks: Interner<Look>,
}

fn protocol_number(p: &str) -> Option<u8> {
    match p.to_ascii_uppercase().as_str() {
        "TCP" => Some(6),
        "UDP" => Some(17),
        "SCTP" => Some(132),
        _ => None,
    }
}

/// The Pod an endpoint named `name` belongs to by its name
/// (`<pod>.<interface>`; an interface part holds no dot).
fn pod_of_name(name: &str) -> Option<&str> {
    name.rsplit_once('.').map(|(pod, _)| pod)
}

fn namespace_of(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

/// What an event makes of one endpoint.
enum Record {
    Local(Local),
    Remote(Remote),
}

impl Endpoints {
    /// Endpoints as seen by node `node`: only its own keep their
    /// interface.
    pub fn for_node(node: &str) -> Endpoints {
        Endpoints {
            node: node.to_string(),
            ..Endpoints::default()
        }
    }

    /// This node's endpoints, by key.
    pub fn local(&self) -> impl Iterator<Item = (&str, &Endpoint)> {
        self.local.iter().map(|(k, r)| (k.as_str(), &r.ep))
    }

    /// Other nodes' endpoints, by key.
    pub fn remote(&self) -> impl Iterator<Item = (&str, &Remote)> {
        self.remote.iter().map(|(k, r)| (k.as_str(), r))
    }

    /// Every endpoint as the policy compiler takes them: this node's in
    /// key order, then the others merged by likeness.
    pub fn for_compile(&self) -> Vec<&Endpoint> {
        self.local
            .values()
            .map(|r| &r.ep)
            .chain(self.groups.values())
            .collect()
    }

    /// The IP families the endpoints have addresses of: this node's
    /// looked at, the others' counted.
    pub fn families(&self) -> Families {
        let mut f = Families::of(&self.local.values().map(|r| &r.ep).collect::<Vec<_>>());
        f.v4 |= self.grouped[0] > 0;
        f.v6 |= self.grouped[1] > 0;
        f
    }

    /// The labels endpoint `key` is selected by.
    pub fn labels_of(&self, key: &str) -> Option<&Arc<Labels>> {
        match self.local.get(key) {
            Some(l) => Some(&l.ep.labels),
            None => self.remote.get(key).map(Remote::labels),
        }
    }

    /// The keys of every endpoint held.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.local
            .keys()
            .map(String::as_str)
            .chain(self.remote.keys().map(CompactString::as_str))
    }

    /// The keys of every Pod whose labels are held.
    pub fn pod_keys(&self) -> impl Iterator<Item = &str> {
        self.pods.keys().map(CompactString::as_str)
    }

    /// The labels of Pod `key` (`namespace/name`), when it is seen.
    pub fn pod_labels(&self, key: &str) -> Option<&Arc<Labels>> {
        self.pods.get(key)
    }

    /// Endpoint `key` when it is on this node.
    pub fn local_endpoint(&self, key: &str) -> Option<&Endpoint> {
        self.local.get(key).map(|l| &l.ep)
    }

    pub fn len(&self) -> usize {
        self.local.len() + self.remote.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many distinct label sets are held (by endpoints, Pods, or
    /// looks not yet swept).
    pub fn label_sets(&self) -> usize {
        self.labels.len()
    }

    /// Endpoint `key` (`namespace/name`) is now `spec` with `labels` (its
    /// copy of the Pod's), or gone (`None`). Whether anything felix keeps
    /// changed.
    pub fn set(&mut self, key: &str, new: Option<(WorkloadEndpointSpec, Labels)>) -> bool {
        let Some((w, labels)) = new else {
            return self.remove(key);
        };
        let odd = pod_of_name(key.split_once('/').map_or(key, |(_, n)| n)) != Some(w.pod.as_str());
        let rec = self.record(key, &w, labels);
        let same = match &rec {
            Record::Local(l) => self.local.get(key) == Some(l),
            Record::Remote(r) => self.remote.get(key) == Some(r),
        };
        let same =
            same && self.odd_pod.get(key).map(String::as_str) == odd.then_some(w.pod.as_str());
        if same {
            self.release(rec);
            return false;
        }
        self.remove(key);
        match rec {
            Record::Local(l) => {
                self.local.insert(key.to_string(), l);
            }
            Record::Remote(r) => {
                self.group_add(key, &r);
                self.remote.insert(key.into(), r);
            }
        }
        if odd {
            let pk = format!("{}/{}", namespace_of(key), w.pod);
            self.odd
                .entry(pk.clone())
                .or_default()
                .insert(key.to_string());
            self.odd_pod.insert(key.to_string(), pk);
        }
        true
    }

    /// Pod `key` (`namespace/name`) now has `labels`, or is gone. Whether
    /// the labels of any endpoint changed.
    pub fn set_pod(&mut self, key: &str, labels: Option<Labels>) -> bool {
        let labels = labels.map(|l| self.labels.intern(l));
        let old = match &labels {
            Some(l) => self.pods.insert(key.into(), l.clone()),
            None => self.pods.remove(key),
        };
        if let Some(old) = old {
            self.labels.release(old);
        }
        let mut changed = false;
        for k in self.endpoints_of(key) {
            changed |= self.relabel(&k, labels.as_ref());
        }
        if let Some(l) = labels {
            self.labels.release(l);
        }
        changed
    }

    /// Endpoint `key`'s labels are now `pod`'s, or its own copy's.
    fn relabel(&mut self, key: &str, pod: Option<&Arc<Labels>>) -> bool {
        if let Some(l) = self.local.get_mut(key) {
            let now = pod.unwrap_or(&l.own).clone();
            if l.ep.labels == now {
                return false;
            }
            let was = std::mem::replace(&mut l.ep.labels, now);
            self.labels.release(was);
            return true;
        }
        let Some(r) = self.remote.get(key) else {
            return false;
        };
        let was = r.look();
        let now = pod.unwrap_or(&was.own).clone();
        if was.labels == now {
            return false;
        }
        let (own, ports) = (was.own.clone(), was.ports.clone());
        let old = r.clone();
        let look = self.look(Look {
            labels: now,
            own,
            ports,
        });
        let new = old.with_look(look);
        self.group_remove(key, &old);
        self.group_add(key, &new);
        // Our copy goes before the stored one is released, so that a sweep
        // that release starts sees the old look unused.
        drop(old);
        if let Some(stored) = self.remote.insert(key.into(), new) {
            self.release(Record::Remote(stored));
        }
        true
    }

    /// The keys of the endpoints of Pod `pod` (`namespace/name`).
    fn endpoints_of(&self, pod: &str) -> Vec<String> {
        let (ns, name) = pod.split_once('/').unwrap_or(("", pod));
        let prefix = format!("{pod}.");
        let ours = |k: &str| {
            k.starts_with(&prefix)
                && !self.odd_pod.contains_key(k)
                && k.split_once('/')
                    .is_some_and(|(n, rest)| n == ns && pod_of_name(rest) == Some(name))
        };
        let mut out: Vec<String> = self
            .local
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .map(|(k, _)| k.as_str())
            .take_while(|k| k.starts_with(&prefix))
            .filter(|k| ours(k))
            .map(String::from)
            .collect();
        out.extend(
            self.remote
                .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                .map(|(k, _)| k.as_str())
                .take_while(|k| k.starts_with(&prefix))
                .filter(|k| ours(k))
                .map(String::from),
        );
        out.extend(self.odd.get(pod).into_iter().flatten().cloned());
        out
    }

    /// What `w` (endpoint `key`) makes, its parts shared.
    fn record(&mut self, key: &str, w: &WorkloadEndpointSpec, labels: Labels) -> Record {
        let ns = namespace_of(key);
        let local = w.node == self.node;
        let mut addrs = Vec::with_capacity(w.ip_networks.len());
        for n in &w.ip_networks {
            match n.parse::<IpNet>() {
                Ok(net) => addrs.push(net.addr()),
                // Only this node's are routed here; the others' are
                // another felix's to report.
                Err(_) if local => {
                    warn!(endpoint = %key, network = %n, "unparsable address; no route")
                }
                Err(_) => {}
            }
        }
        let ports: Vec<NamedPort> = w
            .ports
            .iter()
            .filter_map(|p| {
                Some(NamedPort {
                    name: p.name.clone(),
                    protocol: protocol_number(&p.protocol)?,
                    port: p.port,
                })
            })
            .collect();
        let ports = self.ports.intern(ports);
        let own = self.labels.intern(labels);
        let labels = self
            .pods
            .get(format!("{ns}/{}", w.pod).as_str())
            .cloned()
            .unwrap_or_else(|| own.clone());
        if local {
            Record::Local(Local {
                ep: Endpoint {
                    namespace: self.names.intern(ns),
                    labels,
                    addrs,
                    ports,
                    interface: Some(w.interface_name.clone()),
                },
                own,
            })
        } else {
            let look = self.look(Look { labels, own, ports });
            let node = self.nodes.intern(Box::<str>::from(w.node.as_str()));
            Record::Remote(Remote::new(look, node, addrs))
        }
    }

    /// The shared copy of look `l`; a copy already held takes its parts
    /// back.
    fn look(&mut self, l: Look) -> Arc<Look> {
        match self.looks.get(&l) {
            Some(a) => {
                self.release_look_parts(l);
                a
            }
            None => self.looks.intern(l),
        }
    }

    fn release_look_parts(&mut self, l: Look) {
        self.labels.release(l.labels);
        self.labels.release(l.own);
        self.ports.release(l.ports);
    }

    /// Give look `a` back; the looks no one holds any more give their
    /// parts back in turn.
    fn release_look(&mut self, a: Arc<Look>) {
        let mut unused = Vec::new();
        self.looks.release_with(a, |l| unused.push(l));
        for l in unused.into_iter().filter_map(Arc::into_inner) {
            self.release_look_parts(l);
        }
    }

    /// Rebuild the map of other nodes' endpoints with its nodes full. A
    /// listing inserts in key order, which leaves every node of a B-tree
    /// half empty; built from sorted entries at once, they are full (at
    /// 150,000 endpoints, some 4 MB less). Call once a listing is in.
    pub fn compact(&mut self) {
        self.remote = std::mem::take(&mut self.remote).into_iter().collect();
        // The groups' address lists grew by doubling.
        for g in self.groups.values_mut() {
            g.addrs.shrink_to_fit();
        }
    }

    /// `r`'s addresses into its group.
    fn group_add(&mut self, key: &str, r: &Remote) {
        if !r.has_addrs() {
            return;
        }
        let ns = self.names.intern(namespace_of(key));
        let look = r.look();
        let like = (
            Same(ns.clone()),
            Same(look.labels.clone()),
            Same(look.ports.clone()),
        );
        let g = self.groups.entry(like).or_insert_with(|| Endpoint {
            namespace: ns,
            labels: look.labels.clone(),
            addrs: Vec::new(),
            ports: look.ports.clone(),
            interface: None,
        });
        for a in r.addrs() {
            g.addrs.push(a);
            self.grouped[usize::from(a.is_ipv6())] += 1;
        }
    }

    /// `r`'s addresses out of its group, and the group gone with its last.
    fn group_remove(&mut self, key: &str, r: &Remote) {
        if !r.has_addrs() {
            return;
        }
        let ns = self.names.intern(namespace_of(key));
        let look = r.look();
        let like = (
            Same(ns),
            Same(look.labels.clone()),
            Same(look.ports.clone()),
        );
        if let Some(g) = self.groups.get_mut(&like) {
            for a in r.addrs() {
                if let Some(i) = g.addrs.iter().position(|x| *x == a) {
                    g.addrs.swap_remove(i);
                    self.grouped[usize::from(a.is_ipv6())] -= 1;
                }
            }
            if g.addrs.is_empty() {
                self.groups.remove(&like);
            }
        }
        let (ns, ..) = like;
        self.names.release(ns.0);
    }

    fn remove(&mut self, key: &str) -> bool {
        if let Some(pk) = self.odd_pod.remove(key)
            && let Some(s) = self.odd.get_mut(&pk)
        {
            s.remove(key);
            if s.is_empty() {
                self.odd.remove(&pk);
            }
        }
        if let Some(l) = self.local.remove(key) {
            self.release(Record::Local(l));
            return true;
        }
        let Some(r) = self.remote.remove(key) else {
            return false;
        };
        self.group_remove(key, &r);
        self.release(Record::Remote(r));
        true
    }

    /// Hand a record's shared parts back.
    fn release(&mut self, r: Record) {
        match r {
            Record::Local(Local { ep, own }) => {
                self.labels.release(ep.labels);
                self.labels.release(own);
                self.names.release(ep.namespace);
                self.ports.release(ep.ports);
            }
            Record::Remote(r) => {
                let (look, node) = r.into_parts();
                self.release_look(look);
                self.nodes.release(node);
            }
        }
    }
}

#[cfg(test)]
#[path = "endpoints_tests.rs"]
mod tests;
