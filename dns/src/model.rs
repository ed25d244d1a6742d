//! The cluster's names as the DNS serves them: a Service or an
//! EndpointSlice read from the datastore into a compact record, holding
//! only what answers need. Pure: no I/O.
//!
//! Compact because a cluster has many of them (100,000 endpoints are
//! common): addresses are fixed-size values in one slice per
//! EndpointSlice (four bytes each for IPv4), an endpoint is an index into
//! it (eight bytes), hostnames are kept only for the endpoints that have
//! one, and names repeated across records (namespaces, Service names, port
//! names) are shared ([`Arc<str>`]) by the [`Records`](crate::records::Records)
//! that hold them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

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
    ClusterIp(Box<[IpAddr]>),
    /// `clusterIP: None`: the ready endpoints' addresses.
    Headless,
    /// A CNAME to this name.
    ExternalName(Box<str>),
}

/// A port's protocol (the three the Kubernetes API allows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Case-insensitive; `None` for any other name.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Some(Protocol::Tcp),
            "udp" => Some(Protocol::Udp),
            "sctp" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// As an SRV name has it (`tcp` in `_http._tcp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// A port of a Service or an EndpointSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// Lower case; empty for an unnamed port (which has no SRV record).
    pub name: Arc<str>,
    pub protocol: Protocol,
    pub port: u16,
}

impl Port {
    /// `None` for a port number out of range (or 0) or a protocol the API
    /// does not have; a missing protocol is TCP, as in the API.
    pub fn new(name: Option<&str>, protocol: Option<&str>, number: Option<i32>) -> Option<Port> {
        Some(Port {
            name: lower(name.unwrap_or_default()).into(),
            protocol: Protocol::parse(protocol.unwrap_or("TCP"))?,
            port: u16::try_from(number?).ok().filter(|p| *p != 0)?,
        })
    }

    /// Whether this is the port `_name._proto` names.
    pub fn is(&self, name: &str, proto: &str) -> bool {
        !self.name.is_empty() && &*self.name == name && self.protocol.as_str() == proto
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRec {
    pub kind: ServiceKind,
    pub ports: Box<[Port]>,
    /// Not-ready endpoints are published too.
    pub publish_not_ready: bool,
}

/// An endpoint as given (to build a [`SliceRec`] with [`SliceRec::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub addresses: Vec<IpAddr>,
    /// Lower case, when set (StatefulSet pods).
    pub hostname: Option<String>,
    /// `conditions.ready`; unknown counts as ready, as the API says.
    pub ready: bool,
}

/// The addresses of a slice's endpoints, end to end, one family each when
/// they all are (as the API's `addressType` makes them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addrs {
    V4(Box<[Ipv4Addr]>),
    V6(Box<[Ipv6Addr]>),
    Mixed(Box<[IpAddr]>),
}

impl Addrs {
    fn from_vec(all: Vec<IpAddr>) -> Addrs {
        if all.iter().all(IpAddr::is_ipv4) {
            Addrs::V4(all.iter().filter_map(v4).collect())
        } else if all.iter().all(IpAddr::is_ipv6) {
            Addrs::V6(all.iter().filter_map(v6).collect())
        } else {
            Addrs::Mixed(all.into_boxed_slice())
        }
    }

    fn get(&self, i: usize) -> Option<IpAddr> {
        match self {
            Addrs::V4(a) => a.get(i).map(|a| IpAddr::V4(*a)),
            Addrs::V6(a) => a.get(i).map(|a| IpAddr::V6(*a)),
            Addrs::Mixed(a) => a.get(i).copied(),
        }
    }
}

fn v4(a: &IpAddr) -> Option<Ipv4Addr> {
    match a {
        IpAddr::V4(a) => Some(*a),
        IpAddr::V6(_) => None,
    }
}

fn v6(a: &IpAddr) -> Option<Ipv6Addr> {
    match a {
        IpAddr::V6(a) => Some(*a),
        IpAddr::V4(_) => None,
    }
}

/// One endpoint: its addresses are `addrs[first..first + count]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EndpointRec {
    first: u32,
    count: u16,
    ready: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceRec {
    /// The Service's name (from the `kubernetes.io/service-name` label).
    pub service: Arc<str>,
    pub ports: Box<[Port]>,
    addrs: Addrs,
    endpoints: Box<[EndpointRec]>,
    /// (endpoint index, hostname), by index: only endpoints with one.
    hostnames: Box<[(u32, Arc<str>)]>,
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
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
            .filter_map(|p| Port::new(p.name.as_deref(), p.protocol.as_deref(), Some(p.port)))
            .collect();
        let kind = if spec.type_.as_deref() == Some("ExternalName") {
            let target = spec.external_name.as_deref()?.trim_end_matches('.');
            if target.is_empty() {
                return None;
            }
            ServiceKind::ExternalName(lower(target).into())
        } else if headless(spec) {
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
            ServiceKind::ClusterIp(ips.into_boxed_slice())
        };
        Some(ServiceRec {
            kind,
            ports,
            publish_not_ready: spec.publish_not_ready_addresses.unwrap_or(false)
                || svc
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(TOLERATE_UNREADY))
                    .is_some_and(|v| v == "true"),
        })
    }
}

/// The annotation that, set to `true`, makes a Service's unready
/// endpoints ready for DNS (the specification's definition of ready, besides
/// `publishNotReadyAddresses`).
pub const TOLERATE_UNREADY: &str = "service.alpha.kubernetes.io/tolerate-unready-endpoints";

/// `clusterIP: None`, or with no `clusterIP` given the first of
/// `clusterIPs` `None` (the API server defaults the one from the other).
fn headless(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> bool {
    match spec.cluster_ip.as_deref() {
        Some("") | None => spec
            .cluster_ips
            .as_ref()
            .and_then(|ips| ips.first())
            .is_some_and(|ip| ip == "None"),
        Some(ip) => ip == "None",
    }
}

impl SliceRec {
    /// A slice of `service`'s endpoints. Endpoints without an address are
    /// left out (they have no name); an endpoint keeps at most 65,535
    /// addresses (the API allows 100).
    pub fn new(
        service: &str,
        ports: Vec<Port>,
        endpoints: impl IntoIterator<Item = Endpoint>,
    ) -> SliceRec {
        let mut addrs = Vec::new();
        let mut recs = Vec::new();
        let mut hostnames = Vec::new();
        for e in endpoints {
            let (Ok(first), Ok(index)) = (u32::try_from(addrs.len()), u32::try_from(recs.len()))
            else {
                break;
            };
            let count = e.addresses.len().min(usize::from(u16::MAX));
            if count == 0 {
                continue;
            }
            addrs.extend(e.addresses.into_iter().take(count));
            recs.push(EndpointRec {
                first,
                count: u16::try_from(count).unwrap_or(u16::MAX),
                ready: e.ready,
            });
            if let Some(h) = e.hostname.filter(|h| !h.is_empty()) {
                hostnames.push((index, Arc::from(lower(&h))));
            }
        }
        SliceRec {
            service: lower(service).into(),
            ports: ports.into_boxed_slice(),
            addrs: Addrs::from_vec(addrs),
            endpoints: recs.into_boxed_slice(),
            hostnames: hostnames.into_boxed_slice(),
        }
    }

    /// `None` for a slice of no Service (no `kubernetes.io/service-name`)
    /// or of an address type DNS does not serve (FQDN).
    pub fn from_slice(slice: &EndpointSlice) -> Option<SliceRec> {
        let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
        if slice.address_type != "IPv4" && slice.address_type != "IPv6" {
            return None;
        }
        let endpoints = slice.endpoints.iter().map(|e| Endpoint {
            addresses: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
            hostname: e.hostname.clone(),
            ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
        });
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| Port::new(p.name.as_deref(), p.protocol.as_deref(), p.port))
            .collect();
        Some(SliceRec::new(service, ports, endpoints))
    }

    /// How many endpoints (with an address) the slice has.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The `i`th endpoint.
    pub fn endpoint(&self, i: usize) -> Option<EndpointView<'_>> {
        (i < self.endpoints.len()).then_some(EndpointView {
            slice: self,
            index: i,
        })
    }

    /// The endpoints in order.
    pub fn endpoints(&self) -> impl Iterator<Item = EndpointView<'_>> {
        (0..self.endpoints.len()).map(move |index| EndpointView { slice: self, index })
    }
}

/// An endpoint of a slice, as DNS publishes it, with its slice's ports.
#[derive(Clone, Copy, Debug)]
pub struct EndpointView<'a> {
    slice: &'a SliceRec,
    index: usize,
}

impl<'a> EndpointView<'a> {
    fn rec(&self) -> EndpointRec {
        self.slice.endpoints[self.index]
    }

    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + use<'a> {
        let r = self.rec();
        let first = r.first as usize;
        let slice = self.slice;
        (first..first + usize::from(r.count)).filter_map(move |i| slice.addrs.get(i))
    }

    /// Lower case, when set.
    pub fn hostname(&self) -> Option<&'a Arc<str>> {
        let hs = &self.slice.hostnames;
        let i = u32::try_from(self.index).ok()?;
        hs.binary_search_by_key(&i, |(n, _)| *n)
            .ok()
            .map(|k| &hs[k].1)
    }

    pub fn ready(&self) -> bool {
        self.rec().ready
    }

    pub fn ports(&self) -> &'a [Port] {
        &self.slice.ports
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

/// An address with its separators as dashes. An IPv6 address whose
/// usual text ends in dotted IPv4 (`::ffff:10.1.2.3`) is written in its
/// eight groups instead (`0-0-0-0-0-ffff-a01-203`), so that the label
/// holds no dot.
pub fn dashed(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => a.to_string().replace('.', "-"),
        IpAddr::V6(a) => {
            let text = a.to_string();
            if text.contains('.') {
                let groups: Vec<String> = a.segments().iter().map(|g| format!("{g:x}")).collect();
                groups.join("-")
            } else {
                text.replace(':', "-")
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn dashed_addresses_round_trip() {
        for a in [
            "10.0.0.1",
            "fd00::1",
            "2001:db8::a:b",
            "::5",
            "::ffff:10.1.2.3",
        ] {
            assert_eq!(undashed(&dashed(ip(a))), Some(ip(a)), "{a}");
            assert!(!dashed(ip(a)).contains('.'), "{a}");
        }
        assert_eq!(dashed(ip("::ffff:10.1.2.3")), "0-0-0-0-0-ffff-a01-203");
        assert_eq!(undashed("web"), None);
        assert_eq!(undashed("1-2-3"), None);
    }

    #[test]
    fn a_slice_keeps_each_endpoints_addresses_hostname_and_readiness() {
        let eps = vec![
            Endpoint {
                addresses: vec![ip("10.0.0.1"), ip("10.0.0.2")],
                hostname: Some("DB-0".into()),
                ready: true,
            },
            Endpoint {
                addresses: vec![],
                hostname: Some("gone".into()),
                ready: true,
            },
            Endpoint {
                addresses: vec![ip("10.0.0.3")],
                hostname: None,
                ready: false,
            },
            Endpoint {
                addresses: vec![ip("fd00::4")],
                hostname: Some("db-3".into()),
                ready: true,
            },
        ];
        let s = SliceRec::new("DB", vec![], eps);
        assert_eq!(&*s.service, "db");
        assert_eq!(s.len(), 3, "the endpoint without an address has no name");
        assert!(matches!(s.addrs, Addrs::Mixed(_)));
        let got: Vec<(Vec<IpAddr>, Option<String>, bool)> = s
            .endpoints()
            .map(|e| {
                (
                    e.addresses().collect(),
                    e.hostname().map(|h| h.to_string()),
                    e.ready(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    vec![ip("10.0.0.1"), ip("10.0.0.2")],
                    Some("db-0".into()),
                    true
                ),
                (vec![ip("10.0.0.3")], None, false),
                (vec![ip("fd00::4")], Some("db-3".into()), true),
            ]
        );
    }

    #[test]
    fn one_family_is_kept_in_fixed_size_addresses() {
        let one = |a: &str| Endpoint {
            addresses: vec![ip(a)],
            hostname: None,
            ready: true,
        };
        let s4 = SliceRec::new("a", vec![], [one("10.0.0.1"), one("10.0.0.2")]);
        assert!(matches!(&s4.addrs, Addrs::V4(a) if a.len() == 2));
        let s6 = SliceRec::new("a", vec![], [one("fd00::1")]);
        assert!(matches!(&s6.addrs, Addrs::V6(a) if a.len() == 1));
        assert_eq!(
            s6.endpoint(0).unwrap().addresses().collect::<Vec<_>>(),
            vec![ip("fd00::1")]
        );
        assert!(s6.endpoint(1).is_none());
    }

    #[test]
    fn ports_of_other_protocols_or_numbers_are_not_names() {
        assert!(Port::new(Some("x"), Some("TCP"), Some(0)).is_none());
        assert!(Port::new(Some("x"), Some("TCP"), Some(70_000)).is_none());
        assert!(Port::new(Some("x"), Some("QUIC"), Some(80)).is_none());
        let p = Port::new(Some("HTTP"), None, Some(80)).unwrap();
        assert!(p.is("http", "tcp"));
        assert!(!p.is("http", "udp"));
        let unnamed = Port::new(None, Some("udp"), Some(53)).unwrap();
        assert!(!unnamed.is("", "udp"), "an unnamed port has no SRV name");
    }
}
