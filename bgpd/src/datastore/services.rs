//! Which Services this node announces a host route for. Pure; the
//! follower feeds it one Service or EndpointSlice at a time.
//!
//! A Service with `externalTrafficPolicy: Local` is reached from outside
//! only through nodes that have one of its endpoints: its ClusterIPs,
//! external IPs and LoadBalancer ingress IPs are announced as /32 (/128)
//! by exactly those nodes (as Calico's nodes do) (the ranges of BGPConfiguration are announced by every node
//! and cover the rest; [`super::build`] filters the addresses by them).
//!
//! "Has an endpoint here" is what felix's proxy decides (felix/src/services):
//! an EndpointSlice of the Service (label `kubernetes.io/service-name`,
//! same namespace) lists an endpoint with `nodeName` = this node that is
//! ready; or, when no endpoint of the Service is ready on any node, one
//! that is serving while terminating (the proxy's fallback). A node
//! announces exactly while its proxy forwards to a local endpoint rather
//! than dropping; a draining pod keeps its node's route while it is the
//! only one left serving, and loses it once a ready endpoint exists
//! elsewhere or it stops serving.
//!
//! The index keeps only what decides that: Services with Local policy and
//! addresses, and per EndpointSlice four facts (its Service; an endpoint
//! ready anywhere; ready here; serving-terminating here), summed per
//! Service. Work per event is one object; an event that changes no
//! Service's announcement reports so, and the follower then does not
//! rebuild.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tracing::warn;

/// The label an EndpointSlice names its Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The addresses of a Service with `externalTrafficPolicy: Local` that
/// may be announced as host routes; each list sorted, no repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceIps {
    /// `spec.clusterIPs` (announced when inside `serviceClusterIPs`, as
    /// Calico does).
    pub cluster: Vec<IpAddr>,
    /// `spec.externalIPs` (announced when inside `serviceExternalIPs`).
    pub external: Vec<IpAddr>,
    /// `status.loadBalancer.ingress[].ip` (announced when inside
    /// `serviceLoadBalancerIPs`).
    pub load_balancer: Vec<IpAddr>,
}

impl ServiceIps {
    fn is_empty(&self) -> bool {
        self.cluster.is_empty() && self.external.is_empty() && self.load_balancer.is_empty()
    }
}

fn parse_ips<'a>(svc: &str, field: &str, texts: impl Iterator<Item = &'a str>) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = texts
        .filter_map(|t| match t.trim().parse::<IpAddr>() {
            Ok(a) => Some(a.to_canonical()),
            Err(_) => {
                warn!(service = %svc, field, address = %t, "not an IP address; not announced");
                None
            }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The addresses to announce from nodes with a local endpoint, if `svc`
/// has `externalTrafficPolicy: Local` and is reachable from outside (type
/// LoadBalancer or NodePort, or external IPs), as the proxy decides it.
/// LoadBalancer ingress IPs count for type LoadBalancer only, and not
/// those with `ipMode: Proxy` (the load balancer proxies to the nodes; the
/// address is its own, not the nodes').
pub fn local_policy_ips(svc: &Service) -> Option<ServiceIps> {
    let spec = svc.spec.as_ref()?;
    if spec.external_traffic_policy.as_deref() != Some("Local") {
        return None;
    }
    let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
    let external_ips = spec.external_ips.as_deref().unwrap_or_default();
    let outside = match ty {
        "LoadBalancer" | "NodePort" => true,
        "ClusterIP" => !external_ips.is_empty(),
        _ => false,
    };
    // Headless Services get no dataplane from the proxy.
    if !outside || spec.cluster_ip.as_deref() == Some("None") {
        return None;
    }
    let name = format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or(""),
        svc.metadata.name.as_deref().unwrap_or("")
    );
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default();
    let cluster_ips: Vec<&str> = match spec.cluster_ips.as_deref() {
        Some(ips) if !ips.is_empty() => ips.iter().map(String::as_str).collect(),
        _ => spec.cluster_ip.as_deref().into_iter().collect(),
    };
    let ips = ServiceIps {
        cluster: parse_ips(&name, "spec.clusterIPs", cluster_ips.into_iter()),
        external: parse_ips(
            &name,
            "spec.externalIPs",
            external_ips.iter().map(String::as_str),
        ),
        load_balancer: if ty == "LoadBalancer" {
            parse_ips(
                &name,
                "status.loadBalancer.ingress[].ip",
                ingress
                    .iter()
                    .filter(|i| i.ip_mode.as_deref() != Some("Proxy"))
                    .filter_map(|i| i.ip.as_deref()),
            )
        } else {
            vec![]
        },
    };
    (!ips.is_empty()).then_some(ips)
}

/// What one EndpointSlice says about its Service, as far as this node's
/// announcement goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSummary {
    /// The Service's `namespace/name`.
    pub service: String,
    /// Some endpoint (on any node) is ready.
    pub ready_anywhere: bool,
    /// Some endpoint on this node is ready.
    pub ready_here: bool,
    /// Some endpoint on this node is serving while terminating.
    pub terminating_here: bool,
}

impl SliceSummary {
    /// Whether the slice matters at all: a slice with no usable endpoint
    /// is the same as no slice.
    fn counts(&self) -> bool {
        self.ready_anywhere || self.ready_here || self.terminating_here
    }
}

/// `slice` reduced for `node`; `None` for a slice of no Service (no
/// `kubernetes.io/service-name` label), of FQDN addresses, or with no
/// endpoint that is ready anywhere or serving here. Conditions are read as
/// the proxy reads them: `ready` unset means ready, `serving` unset
/// follows `ready`, `terminating` unset means not.
pub fn summarize(slice: &EndpointSlice, node: &str) -> Option<SliceSummary> {
    if slice.address_type == "FQDN" {
        return None;
    }
    let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    let mut out = SliceSummary {
        service: format!(
            "{}/{}",
            slice.metadata.namespace.as_deref().unwrap_or(""),
            service
        ),
        ready_anywhere: false,
        ready_here: false,
        terminating_here: false,
    };
    for e in slice.endpoints.iter().filter(|e| !e.addresses.is_empty()) {
        let c = e.conditions.as_ref();
        let ready = c.and_then(|c| c.ready).unwrap_or(true);
        let serving = c.and_then(|c| c.serving).unwrap_or(ready);
        let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
        let here = e.node_name.as_deref() == Some(node);
        out.ready_anywhere |= ready;
        out.ready_here |= here && ready;
        out.terminating_here |= here && !ready && serving && terminating;
    }
    out.counts().then_some(out)
}

/// Per Service, how many of its slices have a ready endpoint anywhere, a
/// ready one here, a serving-terminating one here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    ready_anywhere: usize,
    ready_here: usize,
    terminating_here: usize,
}

impl Counts {
    /// The proxy forwards to an endpoint here: a ready one, or, when no
    /// endpoint of the Service is ready anywhere, a serving-terminating one.
    fn usable_here(&self) -> bool {
        self.ready_here > 0 || (self.ready_anywhere == 0 && self.terminating_here > 0)
    }

    fn add(&mut self, s: &SliceSummary, sign: isize) {
        let step = |n: &mut usize, on: bool| {
            if on {
                *n = n.saturating_add_signed(sign);
            }
        };
        step(&mut self.ready_anywhere, s.ready_anywhere);
        step(&mut self.ready_here, s.ready_here);
        step(&mut self.terminating_here, s.terminating_here);
    }

    fn is_zero(&self) -> bool {
        *self == Counts::default()
    }
}

/// What this node knows of Services and EndpointSlices, reduced to what
/// decides its host routes.
#[derive(Debug, Default)]
pub struct LocalServices {
    node: String,
    /// Services with Local policy and addresses, by `namespace/name`.
    services: HashMap<String, ServiceIps>,
    /// EndpointSlices with a usable endpoint, by `namespace/name`.
    slices: HashMap<String, SliceSummary>,
    /// Their sums per Service.
    counts: HashMap<String, Counts>,
}

impl LocalServices {
    pub fn new(node: &str) -> LocalServices {
        LocalServices {
            node: node.to_string(),
            ..Default::default()
        }
    }

    /// What `service` contributes now: its addresses while it has Local
    /// policy and an endpoint here the proxy forwards to.
    fn announced(&self, service: &str) -> Option<&ServiceIps> {
        if !self.counts.get(service).is_some_and(Counts::usable_here) {
            return None;
        }
        self.services.get(service)
    }

    /// A Service was added or changed (`Some`), or deleted (`None`).
    /// Returns whether what this node announces changed.
    pub fn service(&mut self, key: &str, svc: Option<&Service>) -> bool {
        let new = svc.and_then(local_policy_ips);
        if self.services.get(key) == new.as_ref() {
            return false;
        }
        let before = self.announced(key).cloned();
        match new {
            Some(ips) => self.services.insert(key.to_string(), ips),
            None => self.services.remove(key),
        };
        self.announced(key) != before.as_ref()
    }

    /// An EndpointSlice was added or changed (`Some`), or deleted (`None`).
    /// Returns whether what this node announces changed.
    pub fn slice(&mut self, key: &str, slice: Option<&EndpointSlice>) -> bool {
        let new = slice.and_then(|s| summarize(s, &self.node));
        if self.slices.get(key) == new.as_ref() {
            return false;
        }
        let old = self.slices.remove(key);
        let affected: Vec<String> = old.iter().chain(&new).map(|s| s.service.clone()).collect();
        let before: Vec<bool> = affected
            .iter()
            .map(|svc| self.announced(svc).is_some())
            .collect();
        if let Some(o) = &old {
            self.count(o, -1);
        }
        if let Some(n) = new {
            self.count(&n, 1);
            self.slices.insert(key.to_string(), n);
        }
        affected
            .iter()
            .zip(before)
            .any(|(svc, b)| self.announced(svc).is_some() != b)
    }

    fn count(&mut self, s: &SliceSummary, sign: isize) {
        let c = self.counts.entry(s.service.clone()).or_default();
        c.add(s, sign);
        if c.is_zero() {
            self.counts.remove(&s.service);
        }
    }

    /// The Services this node announces host routes for, by
    /// `namespace/name`.
    pub fn announced_all(&self) -> BTreeMap<String, ServiceIps> {
        self.services
            .iter()
            .filter(|(k, _)| self.counts.get(*k).is_some_and(Counts::usable_here))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
