//! Answers for the cluster domain, per the Kubernetes DNS-based service
//! discovery specification (version 1.1.0). Pure: [`answer`] turns one
//! question and the [`Records`] into the sections of a response.
//!
//! | name (relative to the zone) | records |
//! |---|---|
//! | (apex) | SOA, NS `ns.dns.<zone>` |
//! | `ns.dns` | A/AAAA of the cluster IPs of `kube-system/kube-dns` (`dns` itself exists, empty) |
//! | `dns-version` | TXT `"1.1.0"` |
//! | `<svc>.<ns>.svc` | A/AAAA of the cluster IPs; of the ready endpoints when headless; CNAME when ExternalName |
//! | `<host>.<svc>.<ns>.svc` | A/AAAA of a headless Service's endpoint by hostname (or dashed address) |
//! | `_<port>._<proto>.<svc>.<ns>.svc` | SRV per named port; per endpoint when headless |
//! | `<a-b-c-d>.<ns>.pod` | A/AAAA of that address, for a namespace that exists |
//! | `d.c.b.a.in-addr.arpa`, `….ip6.arpa` | PTR for cluster IPs and headless endpoints |
//!
//! A name that exists without the asked type is NODATA (NOERROR, empty);
//! one that does not exist is NXDOMAIN; both carry the zone's SOA in the
//! authority section, whose minimum is the negative TTL.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::op::{Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use crate::model::{ServiceKind, ServiceRec, endpoint_label, undashed};
use crate::records::Records;

/// The version of the specification served at `dns-version.<zone>`.
pub const SPEC_VERSION: &str = "1.1.0";

/// The zone served and its TTLs.
#[derive(Clone, Debug)]
pub struct Zone {
    /// Lower case, fully qualified (`cluster.local.`).
    pub domain: Name,
    /// TTL of positive answers, seconds.
    pub ttl: u32,
    /// TTL of negative answers (the SOA's TTL and minimum), seconds.
    pub negative_ttl: u32,
}

impl Zone {
    pub fn new(domain: &str, ttl: u32, negative_ttl: u32) -> Result<Zone, String> {
        let mut name = Name::from_ascii(domain.trim_end_matches('.'))
            .map_err(|e| format!("cluster domain {domain:?}: {e}"))?
            .to_lowercase();
        name.set_fqdn(true);
        if name.is_root() {
            return Err("the cluster domain cannot be the root".into());
        }
        Ok(Zone {
            domain: name,
            ttl,
            negative_ttl,
        })
    }

    /// `rel` (dot-separated labels) under the zone. The labels are taken
    /// as they are, not checked as host names: an endpoint named by its
    /// dashed IPv6 address (`--5` for `::5`) has a label that starts with
    /// a dash.
    fn abs(&self, rel: &str) -> Option<Name> {
        if rel.is_empty() {
            return Some(self.domain.clone());
        }
        let mut n = Name::from_labels(rel.split('.').map(str::as_bytes))
            .ok()?
            .append_domain(&self.domain)
            .ok()?;
        n.set_fqdn(true);
        Some(n)
    }

    /// The SOA given with negative answers about reverse names of known
    /// addresses: that of `in-addr.arpa.` or `ip6.arpa.`, as a server
    /// answering for those zones gives it.
    fn reverse_soa(&self, addr: IpAddr) -> Record {
        let owner = match addr {
            IpAddr::V4(_) => "in-addr.arpa.",
            IpAddr::V6(_) => "ip6.arpa.",
        };
        let mut soa = self.soa();
        if let Ok(name) = Name::from_ascii(owner) {
            soa.name = name;
        }
        soa
    }

    /// The zone's SOA record.
    pub fn soa(&self) -> Record {
        let mname = self.abs(NAME_SERVER).unwrap_or_else(|| self.domain.clone());
        let rname = self
            .abs("hostmaster")
            .unwrap_or_else(|| self.domain.clone());
        Record::from_rdata(
            self.domain.clone(),
            self.negative_ttl,
            RData::SOA(SOA::new(
                mname,
                rname,
                1,
                7200,
                1800,
                86400,
                self.negative_ttl,
            )),
        )
    }
}

/// The sections of a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    pub authorities: Vec<Record>,
    pub additionals: Vec<Record>,
    /// A CNAME answered (an ExternalName Service's) whose target is
    /// outside the zone: the rest of the chain is the forwarder's to
    /// resolve, for the same type.
    pub follow: Option<Name>,
}

/// The records at a name the zone holds: `None` when the name does not
/// exist, an empty list for a name that exists with no records (an empty
/// non-terminal such as `svc.<zone>`).
type AtName = Option<Vec<RData>>;

/// CNAMEs followed inside the zone before the chain is cut (ExternalName
/// Services naming one another in a loop).
const MAX_CHAIN: usize = 8;

/// The answer for `q` if its name is ours (inside the zone, or a reverse
/// name of an address we know); `None` otherwise (forward it).
///
/// A CNAME (an ExternalName Service) answers every type and is followed,
/// as a server follows a chain it holds (RFC 1034 4.3.2): through the
/// zone, its target's records of the asked type are added (the rcode is
/// that of the chain's last name, RFC 6604); a target outside the zone
/// is left in [`Answer::follow`].
pub fn answer(records: &Records, zone: &Zone, q: &Query) -> Option<Answer> {
    let name = q.name().to_lowercase();
    let (at, reverse) = if zone.domain.zone_of(&name) {
        let rel = relative_labels(&name, &zone.domain)?;
        (in_zone(records, zone, &rel), None)
    } else {
        let addr = reverse_address(&name)?;
        let names = records.ptr(addr)?;
        let rdata = names
            .iter()
            .filter_map(|n| zone.abs(&n.relative(addr)))
            .map(|n| RData::PTR(PTR(n)))
            .collect();
        (Some(rdata), Some(addr))
    };
    if q.query_class() != DNSClass::IN && q.query_class() != DNSClass::ANY {
        return Some(Answer {
            rcode: ResponseCode::Refused,
            answers: vec![],
            authorities: vec![],
            additionals: vec![],
            follow: None,
        });
    }
    let soa = || match reverse {
        None => vec![zone.soa()],
        Some(addr) => vec![zone.reverse_soa(addr)],
    };
    let Some(rdata) = at else {
        return Some(Answer {
            rcode: ResponseCode::NXDomain,
            answers: vec![],
            authorities: soa(),
            additionals: vec![],
            follow: None,
        });
    };
    let qtype = q.query_type();
    let ttl = zone.ttl;
    let mut answers = Vec::new();
    let mut owner = q.name().clone();
    let mut rdata = rdata;
    let mut rcode = ResponseCode::NoError;
    let mut follow = None;
    // The chain's names so far: a CNAME back to one of them is a loop.
    let mut seen = vec![owner.to_lowercase()];
    for hop in 0.. {
        let cname = rdata.iter().find_map(|r| match r {
            RData::CNAME(c) => Some(c.0.clone()),
            _ => None,
        });
        let Some(target) = cname else {
            answers.extend(
                rdata
                    .into_iter()
                    .filter(|r| qtype == RecordType::ANY || r.record_type() == qtype)
                    .map(|r| Record::from_rdata(owner.clone(), ttl, r)),
            );
            break;
        };
        answers.push(Record::from_rdata(
            owner.clone(),
            ttl,
            RData::CNAME(CNAME(target.clone())),
        ));
        // Asked for the CNAME itself (or for anything): the chain is not
        // followed. Nor past its length limit.
        if matches!(qtype, RecordType::CNAME | RecordType::ANY) || hop + 1 >= MAX_CHAIN {
            break;
        }
        let target = target.to_lowercase();
        // A loop is an error (RFC 1034 3.6.2): the chain once, SERVFAIL.
        if seen.contains(&target) {
            rcode = ResponseCode::ServFail;
            break;
        }
        seen.push(target.clone());
        if !zone.domain.zone_of(&target) {
            follow = Some(target);
            break;
        }
        let next =
            relative_labels(&target, &zone.domain).and_then(|rel| in_zone(records, zone, &rel));
        match next {
            Some(more) => {
                rdata = more;
                owner = target;
            }
            None => {
                rcode = ResponseCode::NXDomain;
                break;
            }
        }
    }
    let mut additionals: Vec<Record> = Vec::new();
    for r in &answers {
        if let RData::SRV(srv) = &r.data {
            // A target named by several SRV records (one per port) has its
            // addresses added once (RFC 2181 5).
            for a in addresses_of(records, zone, &srv.target) {
                if !additionals.contains(&a) {
                    additionals.push(a);
                }
            }
        }
    }
    let negative = rcode == ResponseCode::NXDomain
        || (rcode == ResponseCode::NoError
            && follow.is_none()
            && !answers
                .iter()
                .any(|r| r.record_type() == qtype || qtype == RecordType::ANY));
    let authorities = if negative { soa() } else { vec![] };
    Some(Answer {
        rcode,
        answers,
        authorities,
        additionals,
        follow,
    })
}

/// A/AAAA records of a name in the zone (for the additional section).
fn addresses_of(records: &Records, zone: &Zone, target: &Name) -> Vec<Record> {
    let target = target.to_lowercase();
    if !zone.domain.zone_of(&target) {
        return vec![];
    }
    let Some(rel) = relative_labels(&target, &zone.domain) else {
        return vec![];
    };
    in_zone(records, zone, &rel)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| matches!(r, RData::A(_) | RData::AAAA(_)))
        .map(|r| Record::from_rdata(target.clone(), zone.ttl, r))
        .collect()
}

/// The labels of `name` left of `zone`, lower case, left to right.
///
/// Every label counts, a leading `*` too (`Name::num_labels` leaves it
/// out): `*.<zone>` is a name below the apex, not the apex.
fn relative_labels(name: &Name, zone: &Name) -> Option<Vec<String>> {
    let n = name.iter().count().checked_sub(zone.iter().count())?;
    Some(
        name.iter()
            .take(n)
            .map(|l| String::from_utf8_lossy(l).to_ascii_lowercase())
            .collect(),
    )
}

fn address(ip: IpAddr) -> RData {
    match ip {
        IpAddr::V4(a) => RData::A(A(a)),
        IpAddr::V6(a) => RData::AAAA(AAAA(a)),
    }
}

fn in_zone(records: &Records, zone: &Zone, rel: &[String]) -> AtName {
    let labels: Vec<&str> = rel.iter().map(String::as_str).collect();
    match labels.as_slice() {
        [] => Some(vec![
            zone.soa().data.clone(),
            RData::NS(NS(zone.abs(NAME_SERVER)?)),
        ]),
        ["ns", "dns"] => Some(name_server_addresses(records)),
        // The empty non-terminal above the name server's name: it exists
        // (RFC 4592 2.2.2, RFC 8020), so NODATA, not NXDOMAIN.
        ["dns"] => Some(vec![]),
        ["dns-version"] => Some(vec![RData::TXT(TXT::new(vec![SPEC_VERSION.into()]))]),
        ["svc"] | ["pod"] => Some(vec![]),
        [ns, "svc"] | [ns, "pod"] => records.namespace_exists(ns).then(Vec::new),
        [ip, ns, "pod"] => {
            if !records.namespace_exists(ns) {
                return None;
            }
            undashed(ip).map(|a| vec![address(a)])
        }
        [svc, ns, "svc"] => service_name(records, ns, svc),
        [proto, svc, ns, "svc"] if proto.starts_with('_') => {
            let s = named(records, ns, svc)?;
            let proto = &proto[1..];
            s.ports
                .iter()
                .any(|p| !p.name.is_empty() && p.protocol.as_str() == proto)
                .then(Vec::new)
        }
        [host, svc, ns, "svc"] => endpoint_name(records, ns, svc, host),
        [port, proto, svc, ns, "svc"] if port.starts_with('_') && proto.starts_with('_') => {
            srv(records, zone, ns, svc, &port[1..], &proto[1..])
        }
        _ => None,
    }
}

/// The Service `ns/svc` if it has a name: a headless one only while it
/// has ready endpoints (without, the specification answers NXDOMAIN for
/// it and so for every name under it).
fn named<'a>(records: &'a Records, ns: &str, svc: &str) -> Option<&'a ServiceRec> {
    let s = records.service(ns, svc)?;
    if s.kind == ServiceKind::Headless && !records.has_endpoints(ns, svc) {
        return None;
    }
    Some(s)
}

/// The name server the apex's NS record names (also the SOA's MNAME).
const NAME_SERVER: &str = "ns.dns";

/// The cluster DNS Service, whose addresses are the name server's.
const DNS_SERVICE: (&str, &str) = ("kube-system", "kube-dns");

/// The addresses of [`NAME_SERVER`]: the cluster IPs of [`DNS_SERVICE`]
/// (none while it has none: the name exists, without addresses).
fn name_server_addresses(records: &Records) -> Vec<RData> {
    match records
        .service(DNS_SERVICE.0, DNS_SERVICE.1)
        .map(|s| &s.kind)
    {
        Some(ServiceKind::ClusterIp(ips)) => ips.iter().map(|ip| address(*ip)).collect(),
        _ => vec![],
    }
}

fn service_name(records: &Records, ns: &str, svc: &str) -> AtName {
    let s = named(records, ns, svc)?;
    Some(match &s.kind {
        ServiceKind::ClusterIp(ips) => ips.iter().map(|ip| address(*ip)).collect(),
        ServiceKind::ExternalName(target) => {
            let mut n = Name::from_ascii(target).ok()?;
            n.set_fqdn(true);
            vec![RData::CNAME(CNAME(n))]
        }
        ServiceKind::Headless => {
            let mut addrs: Vec<IpAddr> = records
                .endpoints(ns, svc)
                .iter()
                .flat_map(|e| e.addresses())
                .collect();
            addrs.sort();
            addrs.dedup();
            addrs.into_iter().map(address).collect()
        }
    })
}

fn endpoint_name(records: &Records, ns: &str, svc: &str, host: &str) -> AtName {
    let s = records.service(ns, svc)?;
    if s.kind != ServiceKind::Headless {
        return None;
    }
    let mut addrs: Vec<IpAddr> = records
        .endpoints(ns, svc)
        .iter()
        .flat_map(|e| {
            e.addresses()
                .filter(move |a| endpoint_label(e.hostname().map(|h| &**h), *a) == host)
        })
        .collect();
    if addrs.is_empty() {
        return None;
    }
    addrs.sort();
    addrs.dedup();
    Some(addrs.into_iter().map(address).collect())
}

fn srv(records: &Records, zone: &Zone, ns: &str, svc: &str, port: &str, proto: &str) -> AtName {
    let s = named(records, ns, svc)?;
    let base = format!("{svc}.{ns}.svc");
    let mut out = Vec::new();
    match &s.kind {
        ServiceKind::ClusterIp(_) => {
            let target = zone.abs(&base)?;
            for p in s.ports.iter().filter(|p| p.is(port, proto)) {
                out.push(RData::SRV(SRV::new(0, 100, p.port, target.clone())));
            }
        }
        ServiceKind::Headless => {
            if !s.ports.iter().any(|p| p.is(port, proto)) {
                return None;
            }
            let mut seen = std::collections::BTreeSet::new();
            for e in records.endpoints(ns, svc) {
                for p in e.ports().iter().filter(|p| p.is(port, proto)) {
                    for a in e.addresses() {
                        let label = endpoint_label(e.hostname().map(|h| &**h), a);
                        // A label that cannot be a name (over 63 bytes)
                        // leaves out its endpoint, not the others.
                        if seen.insert((label.clone(), p.port))
                            && let Some(target) = zone.abs(&format!("{label}.{base}"))
                        {
                            out.push(RData::SRV(SRV::new(0, 100, p.port, target)));
                        }
                    }
                }
            }
        }
        ServiceKind::ExternalName(_) => return None,
    }
    if out.is_empty() && !matches!(s.kind, ServiceKind::Headless) {
        return None;
    }
    Some(out)
}

/// The address a reverse name (`4.3.2.1.in-addr.arpa.`, nibbles under
/// `ip6.arpa.`) stands for.
pub fn reverse_address(name: &Name) -> Option<IpAddr> {
    let labels: Vec<String> = name
        .iter()
        .map(|l| String::from_utf8_lossy(l).to_ascii_lowercase())
        .collect();
    let n = labels.len();
    if n == 6 && labels[4] == "in-addr" && labels[5] == "arpa" {
        let mut o = [0u8; 4];
        for (i, l) in labels[..4].iter().enumerate() {
            if l.is_empty() || l.len() > 3 || (l.len() > 1 && l.starts_with('0')) {
                return None;
            }
            o[3 - i] = l.parse().ok()?;
        }
        return Some(IpAddr::V4(Ipv4Addr::from(o)));
    }
    if n == 34 && labels[32] == "ip6" && labels[33] == "arpa" {
        let mut v: u128 = 0;
        for l in labels[..32].iter().rev() {
            if l.len() != 1 {
                return None;
            }
            v = (v << 4) | u128::from(u8::from_str_radix(l, 16).ok()?);
        }
        return Some(IpAddr::V6(Ipv6Addr::from(v)));
    }
    None
}

#[cfg(test)]
#[path = "answer_tests.rs"]
pub(crate) mod tests;
