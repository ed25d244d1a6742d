//! Conntrack entries that would keep traffic on a path that no longer
//! exists, as kube-proxy finds them. A UDP or SCTP client that keeps
//! sending from one source port keeps its entry alive forever, so when its
//! endpoint goes away the entry must be deleted for the next packet to be
//! dispatched afresh. TCP needs nothing: a dead endpoint's connections end.
//!
//! From a Service's part of the table before and after a change:
//! - an endpoint a frontend no longer uses → entries to that frontend
//!   whose reply comes from that endpoint;
//! - a frontend gone (Service or port deleted) → every entry to it.
//!
//! NodePorts match any destination address of this node: the entry must
//! also be DNATed (its reply source is not its original destination), so
//! that a flow to a remote host's port of the same number is left alone.
//! Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use super::render::SvcNft;
use super::{Backend, Family, SCTP, UDP};

/// One direction of a conntrack entry (of the IPv4 or the IPv6 table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tuple<A = Ipv4Addr> {
    pub src: A,
    pub dst: A,
    pub proto: u8,
    pub src_port: u16,
    pub dst_port: u16,
}

/// A conntrack entry as the kernel lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<A = Ipv4Addr> {
    pub orig: Tuple<A>,
    pub reply: Tuple<A>,
    pub zone: Option<u16>,
    pub id: Option<u32>,
}

impl<A: Family> Entry<A> {
    /// Whether the original destination was rewritten.
    pub fn dnat(&self) -> bool {
        self.reply.src != self.orig.dst || self.reply.src_port != self.orig.dst_port
    }
}

/// Which entries to delete: original protocol and destination port,
/// destination address (`None`: a NodePort, any address of the node),
/// and when `endpoint` is set, only those answered by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Flow<A = Ipv4Addr> {
    pub proto: u8,
    pub addr: Option<A>,
    pub port: u16,
    pub endpoint: Option<Backend<A>>,
}

impl<A: Family> Flow<A> {
    pub fn matches(&self, e: &Entry<A>) -> bool {
        if e.orig.proto != self.proto || e.orig.dst_port != self.port {
            return false;
        }
        match self.addr {
            Some(a) if e.orig.dst != a => return false,
            None if !e.dnat() => return false,
            _ => {}
        }
        match self.endpoint {
            Some(b) => e.reply.src == b.addr && e.reply.src_port == b.port,
            None => true,
        }
    }
}

/// Whether conntrack keeps entries of `proto` alive without a connection
/// to end them.
pub fn connectionless(proto: u8) -> bool {
    proto == UDP || proto == SCTP
}

/// The stale flows of both families, as one cleanup takes them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StaleFlows {
    pub v4: Vec<Flow<Ipv4Addr>>,
    pub v6: Vec<Flow<Ipv6Addr>>,
}

impl StaleFlows {
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }
}

/// Per frontend key: whether it exists and the endpoints it uses.
fn by_frontend<K: Ord + Copy, A: Ord + Copy>(
    dispatched: impl Iterator<Item = K>,
    slots: impl Iterator<Item = (K, Backend<A>)>,
    other: impl Iterator<Item = K>,
) -> BTreeMap<K, BTreeSet<Backend<A>>> {
    let mut m: BTreeMap<K, BTreeSet<Backend<A>>> = BTreeMap::new();
    for k in dispatched.chain(other) {
        m.entry(k).or_default();
    }
    for (k, b) in slots {
        m.entry(k).or_default().insert(b);
    }
    m
}

fn gone<K: Ord + Copy, A: Ord + Copy>(
    old: &BTreeMap<K, BTreeSet<Backend<A>>>,
    new: &BTreeMap<K, BTreeSet<Backend<A>>>,
    proto: impl Fn(&K) -> u8,
    flow: impl Fn(&K, Option<Backend<A>>) -> Flow<A>,
    out: &mut Vec<Flow<A>>,
) {
    for (k, was) in old {
        if !connectionless(proto(k)) {
            continue;
        }
        match new.get(k) {
            None => out.push(flow(k, None)),
            Some(now) => out.extend(was.difference(now).map(|b| flow(k, Some(*b)))),
        }
    }
}

/// The entries to delete when a Service's part of the table goes from
/// `old` to `new`.
pub fn stale<A: Family>(old: &SvcNft<A>, new: &SvcNft<A>) -> Vec<Flow<A>> {
    let fe = |t: &SvcNft<A>| {
        by_frontend(
            t.frontends.keys().copied(),
            t.fe_slots.iter().map(|((k, _), b)| (*k, *b)),
            t.reject_fe.iter().chain(&t.drop_fe).copied(),
        )
    };
    let np = |t: &SvcNft<A>| {
        by_frontend(
            t.node_ports.keys().copied(),
            t.np_slots.iter().map(|((k, _), b)| (*k, *b)),
            t.reject_np.iter().chain(&t.drop_np).copied(),
        )
    };
    let mut out = Vec::new();
    gone(
        &fe(old),
        &fe(new),
        |k| k.1,
        |k, endpoint| Flow {
            proto: k.1,
            addr: Some(k.0),
            port: k.2,
            endpoint,
        },
        &mut out,
    );
    gone(
        &np(old),
        &np(new),
        |k| k.0,
        |k, endpoint| Flow {
            proto: k.0,
            addr: None,
            port: k.1,
            endpoint,
        },
        &mut out,
    );
    out
}

/// Whether the whole `table` still sends `flow`'s traffic where its
/// entries point (another Service took the frontend over): then they are
/// not stale.
pub fn still_served<A: Family>(table: &SvcNft<A>, flow: &Flow<A>) -> bool {
    match (flow.addr, flow.endpoint) {
        (Some(a), Some(b)) => table
            .fe_slots
            .range(((a, flow.proto, flow.port), 0)..=((a, flow.proto, flow.port), u32::MAX))
            .any(|(_, x)| *x == b),
        (Some(a), None) => {
            let k = (a, flow.proto, flow.port);
            table.frontends.contains_key(&k)
                || table.reject_fe.contains(&k)
                || table.drop_fe.contains(&k)
        }
        (None, Some(b)) => table
            .np_slots
            .range(((flow.proto, flow.port), 0)..=((flow.proto, flow.port), u32::MAX))
            .any(|(_, x)| *x == b),
        (None, None) => {
            let k = (flow.proto, flow.port);
            table.node_ports.contains_key(&k)
                || table.reject_np.contains(&k)
                || table.drop_np.contains(&k)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Dispatch, ServiceTable, TCP};
    use super::*;

    const CIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
    const LB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 7);

    fn b(last: u8) -> Backend {
        Backend {
            addr: Ipv4Addr::new(10, 244, 0, last),
            port: 5353,
        }
    }

    /// A Service's part: `proto` on the ClusterIP and an LB IP, port 53,
    /// NodePort 30053, with `backends` (none: rejected).
    fn part(proto: u8, backends: &[Backend]) -> SvcNft {
        let d = if backends.is_empty() {
            Dispatch::Reject
        } else {
            Dispatch::Backends {
                backends: backends.to_vec(),
                affinity: None,
            }
        };
        let mut t = ServiceTable::default();
        t.frontends.insert((CIP, proto, 53), d.clone());
        t.frontends.insert((LB, proto, 53), d.clone());
        t.node_ports.insert((proto, 30053), d);
        SvcNft::from_table(&t)
    }

    fn flow(addr: Option<Ipv4Addr>, endpoint: Option<Backend>) -> Flow {
        Flow {
            proto: UDP,
            addr,
            port: if addr.is_some() { 53 } else { 30053 },
            endpoint,
        }
    }

    fn sorted(mut v: Vec<Flow>) -> Vec<Flow> {
        v.sort();
        v
    }

    #[test]
    fn a_removed_udp_endpoint_is_stale_for_every_frontend() {
        let got = stale(&part(UDP, &[b(1), b(2)]), &part(UDP, &[b(2), b(3)]));
        assert_eq!(
            sorted(got),
            sorted(vec![
                flow(Some(CIP), Some(b(1))),
                flow(Some(LB), Some(b(1))),
                flow(None, Some(b(1))),
            ])
        );
    }

    #[test]
    fn the_last_endpoint_gone_leaves_a_rejecting_frontend_and_stale_entries() {
        let got = stale(&part(UDP, &[b(1)]), &part(UDP, &[]));
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|f| f.endpoint == Some(b(1))));
    }

    #[test]
    fn a_deleted_service_makes_its_frontends_stale() {
        let got = stale(&part(SCTP, &[b(1)]), &SvcNft::default());
        let want: Vec<Flow> = [Some(CIP), Some(LB), None]
            .into_iter()
            .map(|a| Flow {
                proto: SCTP,
                ..flow(a, None)
            })
            .collect();
        assert_eq!(sorted(got), sorted(want));
    }

    #[test]
    fn tcp_and_unchanged_endpoints_leave_nothing() {
        assert!(stale(&part(TCP, &[b(1)]), &SvcNft::default()).is_empty());
        assert!(stale(&part(UDP, &[b(1), b(2)]), &part(UDP, &[b(2), b(1)])).is_empty());
        assert!(stale(&SvcNft::default(), &part(UDP, &[b(1)])).is_empty());
        // A frontend that gets endpoints had none to be stale.
        assert!(stale(&part(UDP, &[]), &part(UDP, &[b(1)])).is_empty());
    }

    fn entry(dst: Ipv4Addr, dport: u16, reply_src: Backend) -> Entry {
        let client = Ipv4Addr::new(10, 244, 1, 9);
        Entry {
            orig: Tuple {
                src: client,
                dst,
                proto: UDP,
                src_port: 40000,
                dst_port: dport,
            },
            reply: Tuple {
                src: reply_src.addr,
                dst: client,
                proto: UDP,
                src_port: reply_src.port,
                dst_port: 40000,
            },
            zone: None,
            id: None,
        }
    }

    #[test]
    fn flows_match_only_their_frontend_and_endpoint() {
        let f = flow(Some(CIP), Some(b(1)));
        assert!(f.matches(&entry(CIP, 53, b(1))));
        assert!(!f.matches(&entry(CIP, 53, b(2))));
        assert!(!f.matches(&entry(CIP, 54, b(1))));
        assert!(!f.matches(&entry(LB, 53, b(1))));
        let mut tcp = entry(CIP, 53, b(1));
        tcp.orig.proto = TCP;
        assert!(!f.matches(&tcp));
        assert!(flow(Some(CIP), None).matches(&entry(CIP, 53, b(7))));
    }

    #[test]
    fn node_port_flows_need_a_dnat() {
        let node = Ipv4Addr::new(172, 16, 0, 2);
        assert!(flow(None, Some(b(1))).matches(&entry(node, 30053, b(1))));
        assert!(flow(None, None).matches(&entry(node, 30053, b(1))));
        // A pod's own flow to some host's port 30053, not NATed.
        let direct = Backend {
            addr: Ipv4Addr::new(198, 51, 100, 1),
            port: 30053,
        };
        assert!(!flow(None, None).matches(&entry(direct.addr, 30053, direct)));
    }

    #[test]
    fn a_frontend_another_service_serves_is_not_stale() {
        let table = part(UDP, &[b(2)]);
        assert!(still_served(&table, &flow(Some(CIP), Some(b(2)))));
        assert!(!still_served(&table, &flow(Some(CIP), Some(b(1)))));
        assert!(still_served(&table, &flow(Some(LB), None)));
        assert!(still_served(&table, &flow(None, Some(b(2)))));
        assert!(still_served(&table, &flow(None, None)));
        assert!(!still_served(&SvcNft::default(), &flow(None, None)));
    }
}
