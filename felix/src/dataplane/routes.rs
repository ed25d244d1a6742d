//! Routes in the kernel: read ours (protocol 202, main table), apply a
//! [`Plan`](super::plan::Plan). Routes are replaced, never flushed.
//!
//! The kernel's routes are read back only at a check (the first pass, the
//! periodic one, a change of a tunnel device) or when the kernel may have
//! dropped routes without naming them (an IPv4 address removed, events
//! lost; see [`super::events`]). Between
//! checks a pass compares with what was last read and what felix has
//! written since, less what the kernel's events say went: routes of ours
//! deleted, and routes through an interface that went down or away (the
//! kernel drops those without a deletion event). So a pass for one pod
//! costs the writes for that pod, not a walk of a routing table that
//! holds the whole cluster.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::RouteMessageBuilder;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags};
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
    RouteType,
};
use tracing::{debug, info, warn};

use super::DataplaneError;
use super::events::RouteNews;
use super::plan::{Grace, Plan, plan};
use crate::ROUTE_PROTOCOL;
use crate::calc::routes::{Routes, Target};

/// What one pass changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub installed: usize,
    pub removed: usize,
    pub waiting: usize,
}

/// An interface as a pass sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    /// Administratively up: the kernel keeps no IPv4 route through a
    /// device that is down.
    pub up: bool,
}

/// A route of ours: what it does and the message that removes it.
#[derive(Debug, Clone)]
struct Held {
    target: Target,
    msg: RouteMessage,
}

/// Our routes in the kernel as felix knows them.
type View = BTreeMap<IpNet, Held>;

pub struct RouteDriver {
    handle: rtnetlink::Handle,
    task: tokio::task::JoinHandle<()>,
    grace: Grace,
    wait: Duration,
    /// What was last read, with felix's writes since; `None`: read the
    /// kernel at the next pass (the first one, or after a failure).
    view: Option<View>,
    /// Reads of the kernel's routes not yet taken by [`Self::take_reads`].
    reads: u64,
}

impl Drop for RouteDriver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn nl(e: rtnetlink::Error) -> DataplaneError {
    DataplaneError::Netlink(e.to_string())
}

impl RouteDriver {
    /// `wait`: how long an unexpected route of ours is left alone.
    pub fn connect(wait: Duration) -> Result<Self, DataplaneError> {
        // With strict checking the kernel filters a dump by the request's
        // table and protocol: a pass reads felix's own routes, not the
        // thousands bgpd installed. A kernel without it (before 4.20)
        // sends every route, and `ours` filters them here.
        let (conn, handle, _) = match rtnetlink::new_connection_with_strict_check() {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "no strict netlink checking; reading every route at each pass");
                rtnetlink::new_connection().map_err(|e| DataplaneError::Netlink(e.to_string()))?
            }
        };
        Ok(RouteDriver {
            handle,
            task: tokio::spawn(conn),
            grace: Grace::default(),
            wait,
            view: None,
            reads: 0,
        })
    }

    async fn links(&self) -> Result<HashMap<u32, Link>, DataplaneError> {
        let mut s = self.handle.link().get().execute();
        let mut out = HashMap::new();
        while let Some(m) = s.try_next().await.map_err(nl)? {
            if let Some(name) = m.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(n) => Some(n.clone()),
                _ => None,
            }) {
                let up = m.header.flags.contains(LinkFlags::Up);
                out.insert(m.header.index, Link { name, up });
            }
        }
        Ok(out)
    }

    /// Our routes in the main table, as targets, with their messages.
    async fn ours(&self, links: &HashMap<u32, Link>) -> Result<View, DataplaneError> {
        let mut out = BTreeMap::new();
        for req in [
            dump_request(RouteMessageBuilder::<Ipv4Addr>::new().build()),
            dump_request(RouteMessageBuilder::<Ipv6Addr>::new().build()),
        ] {
            let mut s = self.handle.route().get(req).execute();
            while let Some(m) = s.try_next().await.map_err(nl)? {
                if u8::from(m.header.protocol) != ROUTE_PROTOCOL
                    || m.header.table != RouteHeader::RT_TABLE_MAIN
                {
                    continue;
                }
                let Some(dst) = destination(&m) else { continue };
                let gateway = m.attributes.iter().find_map(|a| match a {
                    RouteAttribute::Gateway(RouteAddress::Inet(v)) => Some(IpAddr::V4(*v)),
                    RouteAttribute::Gateway(RouteAddress::Inet6(v)) => Some(IpAddr::V6(*v)),
                    _ => None,
                });
                let target = if m.header.kind == RouteType::BlackHole {
                    Target::Blackhole
                } else if let Some(gateway) = gateway {
                    // A native route's interface is the kernel's choice; only
                    // an on-link (tunnel) route names its device.
                    let device = if m.header.flags.contains(RouteFlags::Onlink) {
                        let oif = m.attributes.iter().find_map(|a| match a {
                            RouteAttribute::Oif(i) => Some(*i),
                            _ => None,
                        });
                        match oif.and_then(|i| links.get(&i)) {
                            Some(link) => Some(link.name.clone()),
                            None => continue,
                        }
                    } else {
                        None
                    };
                    Target::Via { gateway, device }
                } else {
                    let oif = m.attributes.iter().find_map(|a| match a {
                        RouteAttribute::Oif(i) => Some(*i),
                        _ => None,
                    });
                    match oif.and_then(|i| links.get(&i)) {
                        Some(link) => Target::Device(link.name.clone()),
                        None => continue,
                    }
                };
                out.insert(dst, Held { target, msg: m });
            }
        }
        Ok(out)
    }

    /// Make the kernel's routes of ours equal `desired`. `check`: read
    /// them back from the kernel first; otherwise the view kept since the
    /// last read is compared, corrected by `news` (unless there is none,
    /// or the news asks for a read).
    pub async fn apply(
        &mut self,
        desired: &Routes,
        check: bool,
        news: &RouteNews,
    ) -> Result<Applied, DataplaneError> {
        let links = match self.links().await {
            Ok(l) => l,
            Err(e) => {
                // `news` was taken for this pass: read at the next one.
                self.view = None;
                return Err(e);
            }
        };
        let mut applied = Applied::default();
        let mut view = match self.view.take() {
            Some(mut view) if !check && !news.reread => {
                for dst in &news.deleted {
                    view.remove(dst);
                }
                forget_gone(&mut view, &links, &news.links_down);
                view
            }
            _ => {
                self.reads += 1;
                self.ours(&links).await?
            }
        };
        // Kept only if every write went as expected; otherwise the next
        // pass reads the kernel again.
        let sure = self.write(desired, &links, &mut view, &mut applied).await?;
        if sure {
            self.view = Some(view);
        }
        Ok(applied)
    }

    /// The reads of the kernel's routes since the last call, failed
    /// passes' included.
    pub fn take_reads(&mut self) -> u64 {
        std::mem::take(&mut self.reads)
    }

    /// Writes the difference between `desired` and `view`, keeping `view`
    /// equal to what the kernel then has. False if the kernel did not have
    /// what `view` said.
    async fn write(
        &mut self,
        desired: &Routes,
        links: &HashMap<u32, Link>,
        view: &mut View,
        applied: &mut Applied,
    ) -> Result<bool, DataplaneError> {
        // A route through an interface that is down waits for it to come
        // up (the kernel refuses it until then): the CNI plugin brings a
        // pod's up after its record is written.
        let names: HashSet<String> = links
            .values()
            .filter(|l| l.up)
            .map(|l| l.name.clone())
            .collect();
        let by_name: HashMap<&str, u32> =
            links.iter().map(|(i, l)| (l.name.as_str(), *i)).collect();
        let actual: BTreeMap<IpNet, Target> =
            view.iter().map(|(k, h)| (*k, h.target.clone())).collect();
        let Plan {
            install,
            remove,
            waiting,
        } = plan(
            desired,
            &actual,
            &names,
            &mut self.grace,
            Instant::now(),
            self.wait,
        );
        applied.waiting = waiting.len();
        let mut sure = true;
        for (dst, target) in install {
            let msg = route_message(dst, &target, &by_name)?;
            self.handle
                .route()
                .add(msg.clone())
                .replace()
                .execute()
                .await
                .map_err(|e| DataplaneError::Refused {
                    what: format!("install {dst} {target:?}"),
                    detail: e.to_string(),
                })?;
            info!(route = %dst, ?target, "route installed");
            // A route via a gateway with no device of ours goes out of the
            // interface the kernel picks; only a reading tells which, and
            // so when the kernel drops it with that interface.
            if matches!(target, Target::Via { device: None, .. }) {
                sure = false;
            }
            view.insert(dst, Held { target, msg });
            applied.installed += 1;
        }
        for dst in remove {
            let Some(held) = view.remove(&dst) else {
                continue;
            };
            match self.handle.route().del(held.msg).execute().await {
                Ok(()) => {
                    info!(route = %dst, "route removed");
                    applied.removed += 1;
                }
                // Gone already (its interface went with the pod), or not as
                // the view had it: read the kernel again at the next pass.
                Err(rtnetlink::Error::NetlinkError(m))
                    if matches!(
                        m.raw_code().abs(),
                        libc::ESRCH | libc::ENOENT | libc::ENODEV
                    ) =>
                {
                    sure = false;
                }
                Err(e) => {
                    return Err(DataplaneError::Refused {
                        what: format!("remove {dst}"),
                        detail: e.to_string(),
                    });
                }
            }
        }
        if applied.waiting > 0 {
            debug!(
                waiting = applied.waiting,
                "routes waiting for their interfaces"
            );
        }
        Ok(sure)
    }
}

/// Drops from `view` the routes through an interface that is gone or
/// down, or went down since the last pass (`went_down`, from the kernel's
/// events: it may be up again): the kernel removes those itself, and
/// tells no one. Blackholes name no interface and stay. Returns how many
/// went.
fn forget_gone(view: &mut View, links: &HashMap<u32, Link>, went_down: &HashSet<u32>) -> usize {
    let before = view.len();
    view.retain(|_, held| {
        held.msg.attributes.iter().all(|a| match a {
            RouteAttribute::Oif(i) => links.get(i).is_some_and(|l| l.up) && !went_down.contains(i),
            _ => true,
        })
    });
    before - view.len()
}

/// A dump of felix's routes in the main table, of every type (blackholes
/// too). A strict kernel accepts in a dump request only a table, a
/// protocol, a type and flags in the header, and no attribute but a table
/// or an output interface.
fn dump_request(mut m: RouteMessage) -> RouteMessage {
    m.header.table = RouteHeader::RT_TABLE_MAIN;
    m.header.protocol = RouteProtocol::from(ROUTE_PROTOCOL);
    m.header.kind = RouteType::Unspec;
    m.header.scope = RouteScope::Universe;
    m.attributes.clear();
    m
}

/// A route's destination, from its message.
pub(super) fn destination(m: &RouteMessage) -> Option<IpNet> {
    let addr: IpAddr = m.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(v)) => Some(IpAddr::V4(*v)),
        RouteAttribute::Destination(RouteAddress::Inet6(v)) => Some(IpAddr::V6(*v)),
        _ => None,
    })?;
    IpNet::new(addr, m.header.destination_prefix_length).ok()
}

fn route_message(
    dst: IpNet,
    target: &Target,
    by_name: &HashMap<&str, u32>,
) -> Result<RouteMessage, DataplaneError> {
    let proto = RouteProtocol::from(ROUTE_PROTOCOL);
    let mut msg = match dst {
        IpNet::V4(n) => RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(n.network(), n.prefix_len())
            .protocol(proto)
            .build(),
        IpNet::V6(n) => RouteMessageBuilder::<Ipv6Addr>::new()
            .destination_prefix(n.network(), n.prefix_len())
            .protocol(proto)
            .build(),
    };
    let index = |name: &str| {
        by_name
            .get(name)
            .copied()
            .ok_or_else(|| DataplaneError::Refused {
                what: format!("install {dst}"),
                detail: format!("no interface {name}"),
            })
    };
    match target {
        Target::Blackhole => {
            msg.header.kind = RouteType::BlackHole;
        }
        Target::Device(name) => {
            msg.header.scope = RouteScope::Link;
            msg.attributes.push(RouteAttribute::Oif(index(name)?));
        }
        Target::Via { gateway, device } => {
            msg.attributes.push(RouteAttribute::Gateway(match gateway {
                IpAddr::V4(a) => RouteAddress::Inet(*a),
                IpAddr::V6(a) => RouteAddress::Inet6(*a),
            }));
            if let Some(name) = device {
                msg.header.flags |= RouteFlags::Onlink;
                msg.attributes.push(RouteAttribute::Oif(index(name)?));
            }
        }
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::AddressFamily;

    #[test]
    fn a_dump_asks_for_our_protocol_in_the_main_table_and_every_type() {
        for (m, family) in [
            (
                RouteMessageBuilder::<Ipv4Addr>::new().build(),
                AddressFamily::Inet,
            ),
            (
                RouteMessageBuilder::<Ipv6Addr>::new().build(),
                AddressFamily::Inet6,
            ),
        ] {
            let r = dump_request(m);
            assert_eq!(r.header.address_family, family);
            assert_eq!(u8::from(r.header.protocol), ROUTE_PROTOCOL);
            assert_eq!(r.header.table, RouteHeader::RT_TABLE_MAIN);
            // A type would leave blackholes (or unicast routes) out; a
            // scope, prefix length or attribute makes a strict kernel
            // refuse the dump.
            assert_eq!(r.header.kind, RouteType::Unspec);
            assert_eq!(r.header.scope, RouteScope::Universe);
            assert_eq!(
                (
                    r.header.destination_prefix_length,
                    r.header.source_prefix_length,
                    r.header.tos
                ),
                (0, 0, 0)
            );
            assert!(r.attributes.is_empty());
        }
    }

    fn held(dst: &str, target: Target, oif: Option<u32>) -> (IpNet, Held) {
        let dst: IpNet = dst.parse().unwrap();
        let mut by_name = HashMap::new();
        if let (Some(i), Some(name)) = (oif, target.device()) {
            by_name.insert(name, i);
        }
        let mut msg = route_message(dst, &target, &by_name).unwrap();
        if let (Some(i), None) = (oif, target.device()) {
            // As the kernel reports a route via a gateway: with the
            // interface it chose.
            msg.attributes.push(RouteAttribute::Oif(i));
        }
        (dst, Held { target, msg })
    }

    #[test]
    fn routes_through_an_interface_gone_or_down_leave_the_view() {
        let dev = |n: &str| Target::Device(n.to_string());
        let via = Target::Via {
            gateway: "192.168.1.2".parse().unwrap(),
            device: None,
        };
        let mut view: View = [
            held("10.0.0.1/32", dev("tara"), Some(7)),
            // The pod's interface made again: same name, a new index.
            held("10.0.0.2/32", dev("tarb"), Some(8)),
            held("10.0.0.3/32", dev("tarc"), Some(9)),
            held("10.0.0.0/26", Target::Blackhole, None),
            held("10.0.1.0/26", via.clone(), Some(2)),
            held("10.0.2.0/26", via, Some(3)),
            held("fd00::1/128", dev("tard"), Some(10)),
        ]
        .into_iter()
        .collect();
        let link = |name: &str, up: bool| Link {
            name: name.into(),
            up,
        };
        let links: HashMap<u32, Link> = [
            (7, link("tara", true)),
            (18, link("tarb", true)),
            (9, link("tarc", false)),
            (2, link("eth0", true)),
            (3, link("eth1", false)),
            (10, link("tard", true)),
        ]
        .into();
        assert_eq!(forget_gone(&mut view, &links, &HashSet::new()), 3);
        let kept: Vec<String> = view.keys().map(|k| k.to_string()).collect();
        assert_eq!(
            kept,
            ["10.0.0.0/26", "10.0.0.1/32", "10.0.1.0/26", "fd00::1/128"]
        );
        assert_eq!(forget_gone(&mut view, &links, &HashSet::new()), 0);
        // Down and up again between two passes: up now, its routes gone.
        assert_eq!(forget_gone(&mut view, &links, &HashSet::from([7])), 1);
        assert!(!view.contains_key(&"10.0.0.1/32".parse().unwrap()));
    }
}
