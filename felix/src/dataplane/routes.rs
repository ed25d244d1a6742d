//! Routes in the kernel: read ours (protocol 202, main table), apply a
//! [`Plan`](super::plan::Plan). Routes are replaced, never flushed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::RouteMessageBuilder;
use rtnetlink::packet_route::link::LinkAttribute;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope,
    RouteType,
};
use tracing::{debug, info, warn};

use super::DataplaneError;
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

pub struct RouteDriver {
    handle: rtnetlink::Handle,
    task: tokio::task::JoinHandle<()>,
    grace: Grace,
    wait: Duration,
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
        })
    }

    async fn links(&self) -> Result<HashMap<u32, String>, DataplaneError> {
        let mut s = self.handle.link().get().execute();
        let mut out = HashMap::new();
        while let Some(m) = s.try_next().await.map_err(nl)? {
            if let Some(name) = m.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(n) => Some(n.clone()),
                _ => None,
            }) {
                out.insert(m.header.index, name);
            }
        }
        Ok(out)
    }

    /// Our routes in the main table, as targets, with their messages.
    async fn ours(
        &self,
        links: &HashMap<u32, String>,
    ) -> Result<BTreeMap<IpNet, (Target, RouteMessage)>, DataplaneError> {
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
                            Some(name) => Some(name.clone()),
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
                        Some(name) => Target::Device(name.clone()),
                        None => continue,
                    }
                };
                out.insert(dst, (target, m));
            }
        }
        Ok(out)
    }

    /// Make the kernel's routes of ours equal `desired`.
    pub async fn apply(&mut self, desired: &Routes) -> Result<Applied, DataplaneError> {
        let links = self.links().await?;
        let names: HashSet<String> = links.values().cloned().collect();
        let by_name: HashMap<&str, u32> = links.iter().map(|(i, n)| (n.as_str(), *i)).collect();
        let ours = self.ours(&links).await?;
        let actual: BTreeMap<IpNet, Target> =
            ours.iter().map(|(k, (t, _))| (*k, t.clone())).collect();
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
        let mut applied = Applied {
            waiting: waiting.len(),
            ..Applied::default()
        };
        for (dst, target) in install {
            let msg = route_message(dst, &target, &by_name)?;
            self.handle
                .route()
                .add(msg)
                .replace()
                .execute()
                .await
                .map_err(|e| DataplaneError::Refused {
                    what: format!("install {dst} {target:?}"),
                    detail: e.to_string(),
                })?;
            info!(route = %dst, ?target, "route installed");
            applied.installed += 1;
        }
        for dst in remove {
            let Some((_, msg)) = ours.get(&dst) else {
                continue;
            };
            match self.handle.route().del(msg.clone()).execute().await {
                Ok(()) => {
                    info!(route = %dst, "route removed");
                    applied.removed += 1;
                }
                // Gone already (its interface went with the pod).
                Err(rtnetlink::Error::NetlinkError(m))
                    if matches!(
                        m.raw_code().abs(),
                        libc::ESRCH | libc::ENOENT | libc::ENODEV
                    ) => {}
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
        Ok(applied)
    }
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

fn destination(m: &RouteMessage) -> Option<IpNet> {
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
}
