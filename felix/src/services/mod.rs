//! The service proxy: Services and EndpointSlices become NAT in the
//! nftables tables `ip tartan-svc` and `ip6 tartan-svc` ([`render`]).
//! Which addresses a node answers for a Service and where each goes is
//! computed here, purely.
//!
//! - Dual stack ([`family`]): a Service is served per address family as
//!   kube-proxy serves it, as two single-stack halves ([`ServiceHalves`]):
//!   the half of a family exists when the Service has a ClusterIP of that
//!   family, and holds that family's ClusterIP, external IPs and
//!   LoadBalancer IPs, fed by the EndpointSlices of that `addressType`
//!   (FQDN slices are ignored). Its NodePorts are served on the node's
//!   addresses of that family. Each family has its own table, rendered by
//!   the same code; the IPv6 one is written only once an IPv6 Service
//!   was seen (an IPv4-only cluster has none).
//!
//! - Frontends: the ClusterIP, `externalIPs` and LoadBalancer ingress IPs
//!   (not those with `ipMode: Proxy`), each with every service port (TCP,
//!   UDP, SCTP); NodePorts on the node's own addresses (not loopback).
//! - Backends: the Service's EndpointSlices' endpoints (each by its first
//!   address, their ports by name, as kube-proxy reads them) that are
//!   ready; when none is, those serving while terminating. With a
//!   `Local` traffic policy the choice is made among this node's
//!   endpoints alone (KEP-1669): a node whose only local endpoint is
//!   terminating uses it. Otherwise the endpoints the topology hints name
//!   for this node or its zone, when they apply ([`topology`]).
//! - `externalTrafficPolicy: Local`: external frontends and NodePorts go
//!   to this node's endpoints only, keeping the client's address, and
//!   traffic for them is dropped on a node without one.
//!   `internalTrafficPolicy: Local` does the same for the ClusterIP.
//!   The policy governs external clients only: this node's pods and the
//!   node itself reaching an external frontend or a NodePort of such a
//!   Service go to the cluster-wide endpoints, as kube-proxy short-circuits
//!   them, so a pod reaches a `Local` LoadBalancer IP from any node.
//! - A frontend with no endpoints at all is refused at once (TCP reset,
//!   ICMP port unreachable), and so is a ClusterIP's port the Service
//!   does not declare. Only new connections are refused or dropped.
//! - A LoadBalancer with `externalTrafficPolicy: Local` and a
//!   `healthCheckNodePort`: the node answers HTTP on that port, 200 with
//!   its count of ready local endpoints or 503 without one
//!   ([`healthcheck`]).
//! - `loadBalancerSourceRanges`: a LoadBalancer ingress IP drops clients
//!   outside those networks, the node itself included (NodePorts and
//!   external IPs are not limited), per family: the IPv6 networks limit
//!   the IPv6 ingress IPs; a list naming networks of one family only
//!   admits no client of the other (never open what the operator
//!   limited).
//!   A list with an entry that does not parse makes the Service
//!   unreadable (its last readable version stays), never open.
//! - Headless Services (`clusterIP: None`) and ExternalName ones are left
//!   alone, and so, as kube-proxy does, is a Service labelled
//!   `service.kubernetes.io/service-proxy-name` (any value: another proxy
//!   serves it) or `service.kubernetes.io/headless`.

/// The longest session affinity the Kubernetes API allows.
pub const MAX_AFFINITY_SECONDS: u32 = 86_400;

pub mod decode;
#[cfg(test)]
mod dual_tests;
pub mod elements;
pub mod family;
pub mod healthcheck;
pub mod index;
pub mod render;
pub mod stale;
#[cfg(test)]
mod tests;
pub mod topology;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;

pub use family::{Fam, Family};

/// `kubernetes.io/service-name`: the label tying a slice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A Service with this label (whatever its value) is another proxy's.
pub const SERVICE_PROXY_NAME_LABEL: &str = "service.kubernetes.io/service-proxy-name";

/// A Service with this label is not proxied (its clients reach the
/// endpoints directly).
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const SCTP: u8 = 132;

/// An endpoint address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Backend<A = Ipv4Addr> {
    pub addr: A,
    pub port: u16,
}

/// Where new connections to a frontend go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch<A = Ipv4Addr> {
    /// To one of these at random (the index is the slot); with `affinity`
    /// (seconds), a client keeps its endpoint while it comes back within
    /// that time.
    Backends {
        backends: Vec<Backend<A>>,
        affinity: Option<u32>,
    },
    /// The Service has no endpoint: refuse at once.
    Reject,
    /// The traffic policy allows only local endpoints and there are none.
    Drop,
}

/// Everything one family's service table of the node holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceTable<A: Family = Ipv4Addr> {
    /// (address, protocol, port) → dispatch: ClusterIPs, external IPs,
    /// LoadBalancer ingress IPs.
    pub frontends: BTreeMap<(A, u8, u16), Dispatch<A>>,
    /// (protocol, node port) → dispatch, on the node's own addresses.
    pub node_ports: BTreeMap<(u8, u16), Dispatch<A>>,
    /// For clients inside the cluster (this node's pods, the node
    /// itself): the external frontends and node ports of Services with
    /// `externalTrafficPolicy: Local`, to the cluster-wide endpoints.
    /// Only frontends with endpoints are here; the others are refused as
    /// for any client.
    pub frontends_in: BTreeMap<(A, u8, u16), Dispatch<A>>,
    pub node_ports_in: BTreeMap<(u8, u16), Dispatch<A>>,
    /// Addresses of this node's pods: a pod reaching itself through a
    /// Service is masqueraded (hairpin).
    pub local_pods: BTreeSet<A>,
    /// LoadBalancer frontends with `loadBalancerSourceRanges`: only
    /// clients in these networks may use them.
    pub source_ranges: BTreeMap<(A, u8, u16), Vec<A::Net>>,
    /// The ClusterIPs served: a new connection still addressed to one
    /// after DNAT is to a port its Service does not declare, and is
    /// refused (kube-proxy's `cluster-ips-check`).
    pub cluster_ips: BTreeSet<A>,
    /// The external frontends and node ports of Services with
    /// `externalTrafficPolicy: Cluster`: every connection through them is
    /// masqueraded, whoever the client and wherever the endpoint, as
    /// kube-proxy does.
    pub masq_frontends: BTreeSet<(A, u8, u16)>,
    pub masq_node_ports: BTreeSet<(u8, u16)>,
}

impl<A: Family> Default for ServiceTable<A> {
    fn default() -> Self {
        ServiceTable {
            frontends: BTreeMap::new(),
            node_ports: BTreeMap::new(),
            frontends_in: BTreeMap::new(),
            node_ports_in: BTreeMap::new(),
            local_pods: BTreeSet::new(),
            source_ranges: BTreeMap::new(),
            cluster_ips: BTreeSet::new(),
            masq_frontends: BTreeSet::new(),
            masq_node_ports: BTreeSet::new(),
        }
    }
}

/// A watched Service, reduced to what the proxy of one address family
/// needs: its half of a dual-stack Service ([`ServiceHalves`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceInfo<A: Family = Ipv4Addr> {
    pub cluster_ips: Vec<A>,
    pub external: Vec<A>,
    /// `loadBalancerSourceRanges` of this family, applied to the
    /// LoadBalancer ingress IPs in `lb_ips`: `None`, no limit; `Some` of
    /// no network, no client of this family (the list named networks of
    /// the other family only).
    pub source_ranges: Option<Vec<A::Net>>,
    pub lb_ips: Vec<A>,
    pub ports: Vec<PortInfo>,
    pub affinity: Option<u32>,
    pub external_local: bool,
    pub internal_local: bool,
    /// `healthCheckNodePort` of a LoadBalancer with
    /// `externalTrafficPolicy: Local`: where this node answers whether it
    /// has local endpoints ([`healthcheck`]).
    pub health_port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PortInfo {
    pub name: String,
    pub protocol: u8,
    pub port: u16,
    pub node_port: Option<u16>,
}

/// A Service as the proxy keeps it: its IPv4 half and its IPv6 half,
/// each served by that family's table as a single-stack Service (as
/// kube-proxy runs a proxier per family). A half is there when the
/// Service has a ClusterIP of its family (kube-proxy's rule), and the
/// IPv4 one also for a Service that has no ClusterIP yet.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceHalves {
    pub v4: Option<ServiceInfo<Ipv4Addr>>,
    pub v6: Option<ServiceInfo<Ipv6Addr>>,
}

impl From<ServiceInfo<Ipv4Addr>> for ServiceHalves {
    fn from(v4: ServiceInfo<Ipv4Addr>) -> Self {
        ServiceHalves {
            v4: Some(v4),
            v6: None,
        }
    }
}

impl From<ServiceInfo<Ipv6Addr>> for ServiceHalves {
    fn from(v6: ServiceInfo<Ipv6Addr>) -> Self {
        ServiceHalves {
            v4: None,
            v6: Some(v6),
        }
    }
}

impl ServiceHalves {
    /// Both halves of `s` ([`ServiceInfo::from_service`]); `Ok(None)` when
    /// neither family serves it.
    pub fn from_service(s: &Service) -> Result<Option<ServiceHalves>, String> {
        let h = ServiceHalves {
            v4: ServiceInfo::from_service(s)?,
            v6: ServiceInfo::from_service(s)?,
        };
        Ok((h.v4.is_some() || h.v6.is_some()).then_some(h))
    }
}

/// A watched EndpointSlice of one address family: its service and, per
/// port name, the endpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceInfo<A = Ipv4Addr> {
    /// `namespace/service`.
    pub service: String,
    /// Port name → (protocol, port).
    pub ports: BTreeMap<String, (u8, u16)>,
    pub endpoints: Vec<EndpointInfo<A>>,
}

/// An EndpointSlice of either family (its `addressType`).
#[derive(Debug, Clone, PartialEq)]
pub enum Slice {
    V4(SliceInfo<Ipv4Addr>),
    V6(SliceInfo<Ipv6Addr>),
}

impl From<SliceInfo<Ipv4Addr>> for Slice {
    fn from(s: SliceInfo<Ipv4Addr>) -> Self {
        Slice::V4(s)
    }
}

impl From<SliceInfo<Ipv6Addr>> for Slice {
    fn from(s: SliceInfo<Ipv6Addr>) -> Self {
        Slice::V6(s)
    }
}

impl Slice {
    /// `None` for slices of no Service and of FQDNs ([`SliceInfo::from_slice`]).
    pub fn from_slice(s: &EndpointSlice, node: &str) -> Option<Slice> {
        match s.address_type.as_str() {
            "IPv6" => SliceInfo::from_slice(s, node).map(Slice::V6),
            _ => SliceInfo::from_slice(s, node).map(Slice::V4),
        }
    }

    pub fn service(&self) -> &str {
        match self {
            Slice::V4(s) => &s.service,
            Slice::V6(s) => &s.service,
        }
    }
}

/// One endpoint of a slice, as the proxy of one node keeps it: a slice
/// holds 100 of them and a cluster 100,000, so it is small (not the
/// node's name, only whether it is this node).
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointInfo<A = Ipv4Addr> {
    /// Its first address: the API calls an endpoint's addresses
    /// fungible, and kube-proxy uses the first alone.
    pub addr: A,
    /// Its `nodeName` is the node this record was read for.
    pub local: bool,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// Its topology hints ([`topology`]): the zones of `hints.forZones`
    /// (kept by name, since the node's zone label may change) and whether
    /// `hints.forNodes` names this node.
    pub zones: Box<[Box<str>]>,
    pub node_hint: NodeHint,
}

/// An endpoint's `hints.forNodes`, as the proxy of one node reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeHint {
    /// No node hint.
    #[default]
    None,
    /// Hinted for this node (among others, maybe).
    Here,
    /// Hinted for other nodes only.
    Elsewhere,
}

pub fn protocol(p: Option<&str>) -> Option<u8> {
    match p.unwrap_or("TCP") {
        "TCP" => Some(TCP),
        "UDP" => Some(UDP),
        "SCTP" => Some(SCTP),
        _ => None,
    }
}

fn addr<A: Family>(s: &str) -> Option<A> {
    A::of(s.parse().ok()?)
}

fn port_info(p: &ServicePort) -> Option<PortInfo> {
    Some(PortInfo {
        name: p.name.clone().unwrap_or_default(),
        protocol: protocol(p.protocol.as_deref())?,
        port: u16::try_from(p.port).ok().filter(|p| *p > 0)?,
        node_port: p
            .node_port
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n > 0),
    })
}

impl<A: Family> ServiceInfo<A> {
    /// The half of family `A` ([`ServiceHalves`]). `Ok(None)` for what
    /// the proxy of `A` leaves alone: a Service without a ClusterIP of
    /// `A` (but one with no ClusterIP at all is the IPv4 proxy's),
    /// ExternalName and headless Services, those labelled for another
    /// proxy or as headless, and objects without a spec. `Err` for a LoadBalancer
    /// whose `loadBalancerSourceRanges` felix cannot read: it is
    /// unreadable (its last readable version stays served), never served
    /// as open to every client.
    pub fn from_service(s: &Service) -> Result<Option<Self>, String> {
        if let Some(labels) = &s.metadata.labels
            && (labels.contains_key(SERVICE_PROXY_NAME_LABEL)
                || labels.contains_key(HEADLESS_LABEL))
        {
            return Ok(None);
        }
        let Some(spec) = s.spec.as_ref() else {
            return Ok(None);
        };
        if spec.type_.as_deref() == Some("ExternalName") {
            return Ok(None);
        }
        // Only a LoadBalancer's are applied (the API allows them on no
        // other type).
        let source_ranges = if spec.type_.as_deref() == Some("LoadBalancer") {
            source_ranges::<A>(
                spec.load_balancer_source_ranges
                    .as_deref()
                    .unwrap_or_default(),
            )?
        } else {
            None
        };
        let mut ips: Vec<String> = spec.cluster_ips.clone().unwrap_or_default();
        if let Some(ip) = &spec.cluster_ip
            && !ips.contains(ip)
        {
            ips.insert(0, ip.clone());
        }
        if ips.iter().any(|ip| ip == "None") {
            return Ok(None);
        }
        let cluster_ips: Vec<A> = ips.iter().filter_map(|a| addr(a)).collect();
        // As kube-proxy: a family's proxier serves a Service only through
        // a ClusterIP of its family; the external addresses of the other
        // family are that one's.
        let unallocated = A::FAM == Fam::V4 && ips.iter().all(|a| a.is_empty());
        if cluster_ips.is_empty() && !unallocated {
            return Ok(None);
        }
        let mut external: Vec<A> = spec
            .external_ips
            .iter()
            .flatten()
            .filter_map(|a| addr(a))
            .collect();
        let mut lb_ips: Vec<A> = Vec::new();
        if spec.type_.as_deref() == Some("LoadBalancer") {
            let ingress = s
                .status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref());
            // As kube-proxy: an ingress IP with `ipMode: Proxy` is the
            // load balancer's own address, which it proxies from; only a
            // VIP (or an unset mode) is one the node answers for.
            lb_ips.extend(
                ingress
                    .into_iter()
                    .flatten()
                    .filter(|i| i.ip_mode.as_deref().is_none_or(|m| m == "VIP"))
                    .filter_map(|i| i.ip.as_deref().and_then(addr::<A>)),
            );
            external.extend(lb_ips.iter().copied());
        }
        external.sort();
        external.dedup();
        let node_ports = matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
        Ok(Some(ServiceInfo {
            cluster_ips,
            external,
            ports: spec
                .ports
                .iter()
                .flatten()
                .filter_map(port_info)
                .map(|mut p| {
                    if !node_ports {
                        p.node_port = None;
                    }
                    p
                })
                .collect(),
            affinity: (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
                spec.session_affinity_config
                    .as_ref()
                    .and_then(|c| c.client_ip.as_ref())
                    .and_then(|c| c.timeout_seconds)
                    .and_then(|t| u32::try_from(t).ok())
                    .filter(|t| *t > 0)
                    // The API allows at most a day.
                    .map(|t| t.min(MAX_AFFINITY_SECONDS))
                    .unwrap_or(10_800)
            }),
            source_ranges,
            lb_ips,
            external_local: spec.external_traffic_policy.as_deref() == Some("Local"),
            internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
            health_port: (spec.type_.as_deref() == Some("LoadBalancer")
                && spec.external_traffic_policy.as_deref() == Some("Local"))
            .then_some(spec.health_check_node_port)
            .flatten()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n > 0),
        }))
    }
}

/// `loadBalancerSourceRanges` as the proxy of family `A` applies them:
/// the networks of `A` (those of the other family limit that family's
/// clients, in its table). A list is a limit even when no network of `A`
/// is left in it (networks of the other family only: no client of `A`
/// may connect; kube-proxy leaves that family open then, Tartan does not
/// open what the operator limited); an empty or absent one is none. One
/// entry that is no network at all makes the whole list unreadable:
/// skipping it could leave no network, and so no limit.
fn source_ranges<A: Family>(ranges: &[String]) -> Result<Option<Vec<A::Net>>, String> {
    if ranges.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for (i, r) in ranges.iter().enumerate() {
        match r.trim().parse::<IpNet>() {
            Ok(n) => out.extend(A::net_of(n)),
            Err(_) => {
                return Err(format!(
                    "spec.loadBalancerSourceRanges[{i}]: {r:?} is not a network (CIDR)"
                ));
            }
        }
    }
    Ok(Some(out))
}

impl<A: Family> SliceInfo<A> {
    /// `None` for slices of no Service or of another `addressType` than
    /// `A`'s (the other family's, or FQDN). `node`: the node whose proxy
    /// reads it (which endpoints are local). An endpoint whose first
    /// address is not of `A` is passed over.
    pub fn from_slice(s: &EndpointSlice, node: &str) -> Option<SliceInfo<A>> {
        if s.address_type != A::FAM.address_type() {
            return None;
        }
        let ns = s.metadata.namespace.as_deref().unwrap_or("default");
        let svc = s.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
        Some(SliceInfo {
            service: format!("{ns}/{svc}"),
            // As kube-proxy reads them: a port without a name (`null`, not
            // `""`) or without a port number is ignored.
            ports: s
                .ports
                .iter()
                .flatten()
                .filter_map(|p| {
                    let port = u16::try_from(p.port?).ok().filter(|p| *p > 0)?;
                    Some((p.name.clone()?, (protocol(p.protocol.as_deref())?, port)))
                })
                .collect(),
            endpoints: s
                .endpoints
                .iter()
                .filter_map(|e| {
                    let c = e.conditions.as_ref();
                    // As kube-proxy: an unset `ready` or `serving` is true,
                    // an unset `terminating` false.
                    let hints = e.hints.as_ref();
                    let for_nodes = hints
                        .and_then(|h| h.for_nodes.as_deref())
                        .unwrap_or_default();
                    Some(EndpointInfo {
                        addr: addr(e.addresses.first()?)?,
                        local: e.node_name.as_deref() == Some(node),
                        ready: c.and_then(|c| c.ready).unwrap_or(true),
                        serving: c.and_then(|c| c.serving).unwrap_or(true),
                        terminating: c.and_then(|c| c.terminating).unwrap_or(false),
                        zones: hints
                            .and_then(|h| h.for_zones.as_deref())
                            .unwrap_or_default()
                            .iter()
                            .map(|z| z.name.as_str().into())
                            .collect(),
                        node_hint: if for_nodes.is_empty() {
                            NodeHint::None
                        } else if for_nodes.iter().any(|n| n.name == node) {
                            NodeHint::Here
                        } else {
                            NodeHint::Elsewhere
                        },
                    })
                })
                .collect(),
        })
    }
}

/// Where a usable endpoint of one service port is: on this node, and
/// near it by the topology hints ([`topology`]).
#[derive(Debug, Clone, Copy)]
struct Place {
    local: bool,
    near: bool,
}

/// The usable endpoints of one service port, each with its place: the
/// ready ones, and those serving while terminating.
#[derive(Debug)]
struct PortEndpoints<A> {
    ready: BTreeMap<Backend<A>, Place>,
    terminating: BTreeMap<Backend<A>, Place>,
}

impl<A: Family> PortEndpoints<A> {
    /// Where traffic goes, as KEP-1669 (and kube-proxy) decide it: filter
    /// by node first when `local_only`, else by the topology hints; then
    /// the ready endpoints, or when none is ready, those serving while
    /// terminating (hints do not apply to those). So a node whose only
    /// local endpoint is terminating uses it.
    fn usable(&self, local_only: bool) -> Vec<Backend<A>> {
        let pick = |m: &BTreeMap<Backend<A>, Place>| -> Vec<Backend<A>> {
            m.iter()
                .filter(|(_, p)| if local_only { p.local } else { p.near })
                .map(|(b, _)| *b)
                .collect()
        };
        let ready = pick(&self.ready);
        if ready.is_empty() {
            pick(&self.terminating)
        } else {
            ready
        }
    }

    fn is_empty(&self) -> bool {
        self.ready.is_empty() && self.terminating.is_empty()
    }
}

fn endpoints_of<A: Family>(
    service: &str,
    port: &PortInfo,
    slices: &[&SliceInfo<A>],
    zone: &str,
) -> PortEndpoints<A> {
    // This port's endpoints, each with the port number it serves it on.
    let serving = slices
        .iter()
        .filter(|s| s.service == service)
        .filter_map(|s| {
            let (proto, target) = s.ports.get(&port.name)?;
            (*proto == port.protocol).then_some((s, *target))
        })
        .flat_map(|(s, target)| s.endpoints.iter().map(move |e| (e, target)));
    // The ready ones, each once (an endpoint in two slices, mid-update,
    // counts once, by its last copy): the topology mode and the filter
    // must read the same set, or no endpoint could be left near.
    let mut ready: BTreeMap<Backend<A>, &EndpointInfo<A>> = BTreeMap::new();
    let mut out = PortEndpoints {
        ready: BTreeMap::new(),
        terminating: BTreeMap::new(),
    };
    for (e, target) in serving {
        let b = Backend {
            addr: e.addr,
            port: target,
        };
        if e.ready {
            ready.insert(b, e);
        } else if e.serving && e.terminating {
            // Hints do not apply to these (used only when none is ready).
            out.terminating.insert(
                b,
                Place {
                    local: e.local,
                    near: true,
                },
            );
        }
    }
    let mode = topology::mode(ready.values().copied(), zone);
    for (b, e) in ready {
        let near = topology::near(e, mode, zone);
        out.ready.insert(
            b,
            Place {
                local: e.local,
                near,
            },
        );
    }
    out
}

/// No usable endpoint anywhere: refuse; none the traffic policy allows
/// here: drop.
fn dispatch<A: Family>(
    eps: &PortEndpoints<A>,
    local_only: bool,
    affinity: Option<u32>,
) -> Dispatch<A> {
    if eps.is_empty() {
        return Dispatch::Reject;
    }
    let backends = eps.usable(local_only);
    if backends.is_empty() {
        Dispatch::Drop
    } else {
        Dispatch::Backends { backends, affinity }
    }
}

/// `key` in `set` when `on`, out of it otherwise.
fn flag<K: Ord>(set: &mut BTreeSet<K>, key: K, on: bool) {
    if on {
        set.insert(key);
    } else {
        set.remove(&key);
    }
}

/// Add one Service's half of family `A` (its slices of that family
/// given) to `t`, for a node in `zone` (its `topology.kubernetes.io/zone`,
/// `""` without).
pub fn desired_for<A: Family>(
    key: &str,
    svc: &ServiceInfo<A>,
    slices: &[&SliceInfo<A>],
    zone: &str,
    t: &mut ServiceTable<A>,
) {
    for port in &svc.ports {
        let eps = endpoints_of(key, port, slices, zone);
        let internal = dispatch(&eps, svc.internal_local, svc.affinity);
        let external = dispatch(&eps, svc.external_local, svc.affinity);
        // Where two Services claim one frontend or node port, the last
        // one's entry stands, its masquerade flag with it.
        for ip in &svc.cluster_ips {
            let fe = (*ip, port.protocol, port.port);
            t.frontends.insert(fe, internal.clone());
            flag(&mut t.masq_frontends, fe, false);
            t.cluster_ips.insert(*ip);
        }
        for ip in &svc.external {
            let fe = (*ip, port.protocol, port.port);
            t.frontends.insert(fe, external.clone());
            flag(&mut t.masq_frontends, fe, !svc.external_local);
        }
        if let Some(ranges) = &svc.source_ranges {
            for ip in &svc.lb_ips {
                t.source_ranges
                    .insert((*ip, port.protocol, port.port), ranges.clone());
            }
        }
        if let Some(np) = port.node_port {
            t.node_ports.insert((port.protocol, np), external.clone());
            flag(
                &mut t.masq_node_ports,
                (port.protocol, np),
                !svc.external_local,
            );
        }
        if !svc.external_local {
            continue;
        }
        let inside = dispatch(&eps, false, svc.affinity);
        if !matches!(inside, Dispatch::Backends { .. }) {
            continue;
        }
        for ip in &svc.external {
            t.frontends_in
                .insert((*ip, port.protocol, port.port), inside.clone());
        }
        if let Some(np) = port.node_port {
            t.node_ports_in.insert((port.protocol, np), inside.clone());
        }
    }
}

/// The table of the node the slices were read for ([`SliceInfo::from_slice`]),
/// in `zone`. `services` by `namespace/name`.
pub fn desired<A: Family>(
    services: &BTreeMap<String, ServiceInfo<A>>,
    slices: &BTreeMap<String, SliceInfo<A>>,
    zone: &str,
    local_pods: BTreeSet<A>,
) -> ServiceTable<A> {
    let mut by_service: BTreeMap<&str, Vec<&SliceInfo<A>>> = BTreeMap::new();
    for s in slices.values() {
        by_service.entry(s.service.as_str()).or_default().push(s);
    }
    let mut t = ServiceTable {
        local_pods,
        ..ServiceTable::default()
    };
    for (key, svc) in services {
        let slices = by_service.get(key.as_str()).map_or(&[][..], Vec::as_slice);
        desired_for(key, svc, slices, zone, &mut t);
    }
    t
}
