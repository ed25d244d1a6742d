//! The kernel tells felix when something of its own goes: a route of
//! Tartan's local protocol deleted, a tunnel device removed or changed, a
//! neighbour entry of the VXLAN device gone. Each such event asks for a
//! pass at once, so drift is repaired in milliseconds; the periodic check
//! stays as the safety net (an event lost to a full socket buffer).
//!
//! What the kernel did to felix's routes is also kept as [`RouteNews`]:
//! the next pass takes it to correct the routes it knows of without
//! reading the table back. Besides deletions, that is the interfaces that
//! went down or away and the IPv4 addresses removed, after which the
//! kernel drops routes without a deletion event of its own.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use ipnet::IpNet;
use rtnetlink::constants::{
    RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RTMGRP_LINK, RTMGRP_NEIGH,
};
use rtnetlink::packet_core::NetlinkPayload;
use rtnetlink::packet_route::address::AddressMessage;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::{AsyncSocket, SocketAddr};
use tokio::sync::mpsc;
use tracing::debug;

use super::DataplaneError;
use crate::ROUTE_PROTOCOL;

/// Devices felix makes and watches.
const PREFIX: &str = "tartan.";

/// What happened to felix's routes since a pass last took it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RouteNews {
    /// Destinations of routes of ours (main table) deleted.
    pub deleted: Vec<IpNet>,
    /// Interfaces that went down or away: the kernel dropped the IPv4
    /// routes through them without a deletion event.
    pub links_down: HashSet<u32>,
    /// Something the kernel may have dropped routes for without naming
    /// them (an IPv4 address removed): read them back.
    pub reread: bool,
    /// A tunnel device or VXLAN entry of felix's changed: compare
    /// everything with the kernel.
    pub check: bool,
}

/// Shared between the listener and the passes.
pub type SharedNews = Arc<Mutex<RouteNews>>;

impl RouteNews {
    /// What a route pass uses, taken out (`check` stays for the loop).
    pub fn take_routes(&mut self) -> RouteNews {
        RouteNews {
            deleted: std::mem::take(&mut self.deleted),
            links_down: std::mem::take(&mut self.links_down),
            reread: std::mem::take(&mut self.reread),
            check: false,
        }
    }
}

/// Takes the news for a route pass; if the listener died holding the
/// lock, the pass reads the kernel.
pub fn take_routes(news: &SharedNews) -> RouteNews {
    match news.lock() {
        Ok(mut n) => n.take_routes(),
        Err(_) => RouteNews {
            reread: true,
            ..RouteNews::default()
        },
    }
}

/// Whether the events since the last call ask for a whole check (taken).
pub fn take_check(news: &SharedNews) -> bool {
    news.lock()
        .map_or(true, |mut n| std::mem::take(&mut n.check))
}

/// Wakes felix on kernel events that may undo its work. Dropping it stops
/// listening.
pub struct KernelEvents {
    task: tokio::task::JoinHandle<()>,
    conn: tokio::task::JoinHandle<()>,
    pub rx: mpsc::Receiver<()>,
    pub news: SharedNews,
}

impl Drop for KernelEvents {
    fn drop(&mut self) {
        self.task.abort();
        self.conn.abort();
    }
}

fn ours(link: &LinkMessage) -> bool {
    link.attributes
        .iter()
        .any(|a| matches!(a, LinkAttribute::IfName(n) if n.starts_with(PREFIX)))
}

fn destination(r: &RouteMessage) -> Option<IpNet> {
    let addr: IpAddr = r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(v)) => Some(IpAddr::V4(*v)),
        RouteAttribute::Destination(RouteAddress::Inet6(v)) => Some(IpAddr::V6(*v)),
        _ => None,
    })?;
    IpNet::new(addr, r.header.destination_prefix_length).ok()
}

fn main_table(r: &RouteMessage) -> bool {
    let table = r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Table(t) => Some(*t),
        _ => None,
    });
    table.unwrap_or(u32::from(r.header.table)) == u32::from(RouteHeader::RT_TABLE_MAIN)
}

fn ipv4(a: &AddressMessage) -> bool {
    a.header.family == AddressFamily::Inet
}

/// Notes in `news` what event `m` did to felix's work; true when it asks
/// for a pass.
pub fn note(m: &RouteNetlinkMessage, news: &mut RouteNews) -> bool {
    match m {
        RouteNetlinkMessage::DelRoute(r) if u8::from(r.header.protocol) == ROUTE_PROTOCOL => {
            if !main_table(r) {
                return false;
            }
            match destination(r) {
                Some(dst) => news.deleted.push(dst),
                None => news.reread = true,
            }
            true
        }
        RouteNetlinkMessage::DelLink(l) => {
            news.links_down.insert(l.header.index);
            if ours(l) {
                news.check = true;
            }
            ours(l)
        }
        RouteNetlinkMessage::NewLink(l) => {
            // Down now: the routes through it went. Coming up asks for
            // nothing (the periodic check puts back what waited for it).
            if !l.header.flags.contains(LinkFlags::Up) {
                news.links_down.insert(l.header.index);
            }
            if ours(l) {
                news.check = true;
            }
            ours(l)
        }
        RouteNetlinkMessage::DelAddress(a) if ipv4(a) => {
            news.reread = true;
            true
        }
        // Permanent entries are the VXLAN device's (ARP's own come and go).
        RouteNetlinkMessage::DelNeighbour(n) if n.header.state == NeighbourState::Permanent => {
            news.check = true;
            true
        }
        _ => false,
    }
}

impl KernelEvents {
    pub fn subscribe() -> Result<KernelEvents, DataplaneError> {
        let (mut conn, _handle, mut messages) =
            rtnetlink::new_connection().map_err(|e| DataplaneError::Netlink(e.to_string()))?;
        let groups =
            RTMGRP_LINK | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE | RTMGRP_NEIGH | RTMGRP_IPV4_IFADDR;
        conn.socket_mut()
            .socket_mut()
            .bind(&SocketAddr::new(0, groups))
            .map_err(|e| DataplaneError::Netlink(format!("join netlink groups: {e}")))?;
        let conn = tokio::spawn(conn);
        // One pending wake-up is enough: a burst of events is one pass.
        let (tx, rx) = mpsc::channel(1);
        let news = SharedNews::default();
        let kept = news.clone();
        let task = tokio::spawn(async move {
            while let Some((msg, _)) = messages.next().await {
                if let NetlinkPayload::InnerMessage(m) = &msg.payload {
                    let wake = match kept.lock() {
                        Ok(mut news) => note(m, &mut news),
                        Err(_) => return,
                    };
                    if wake {
                        debug!(event = ?std::mem::discriminant(m), "kernel event; checking the dataplane");
                        let _ = tx.try_send(());
                    }
                }
            }
        });
        Ok(KernelEvents {
            task,
            conn,
            rx,
            news,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::neighbour::NeighbourMessage;
    use rtnetlink::packet_route::route::RouteProtocol;
    use std::net::Ipv4Addr;

    fn route(proto: u8, dst: Ipv4Addr, len: u8) -> RouteMessage {
        let mut r = RouteMessage::default();
        r.header.protocol = RouteProtocol::from(proto);
        r.header.table = RouteHeader::RT_TABLE_MAIN;
        r.header.destination_prefix_length = len;
        r.attributes
            .push(RouteAttribute::Destination(RouteAddress::Inet(dst)));
        r
    }

    fn link(index: u32, name: &str, up: bool) -> LinkMessage {
        let mut l = LinkMessage::default();
        l.header.index = index;
        if up {
            l.header.flags |= LinkFlags::Up;
        }
        l.attributes.push(LinkAttribute::IfName(name.into()));
        l
    }

    #[test]
    fn what_undoes_our_work_wakes_felix_and_is_kept_for_the_pass() {
        let mut news = RouteNews::default();
        let r = route(ROUTE_PROTOCOL, Ipv4Addr::new(10, 0, 0, 7), 32);
        assert!(note(&RouteNetlinkMessage::DelRoute(r.clone()), &mut news));
        assert!(!note(&RouteNetlinkMessage::NewRoute(r.clone()), &mut news));
        assert!(!note(
            &RouteNetlinkMessage::DelRoute(route(201, Ipv4Addr::new(10, 0, 1, 0), 26)),
            &mut news
        ));
        let mut other_table = r.clone();
        other_table.attributes.push(RouteAttribute::Table(100));
        assert!(!note(
            &RouteNetlinkMessage::DelRoute(other_table),
            &mut news
        ));
        assert_eq!(news.deleted, ["10.0.0.7/32".parse::<IpNet>().unwrap()]);
        assert!(!news.check && !news.reread);

        // A pod's interface made (down), brought up, deleted: noted, no
        // pass; a tunnel device's change asks for a check.
        assert!(!note(
            &RouteNetlinkMessage::NewLink(link(7, "tarab", false)),
            &mut news
        ));
        assert!(!note(
            &RouteNetlinkMessage::NewLink(link(8, "tarcd", true)),
            &mut news
        ));
        assert!(!note(
            &RouteNetlinkMessage::DelLink(link(9, "eth0", true)),
            &mut news
        ));
        assert_eq!(news.links_down, HashSet::from([7, 9]));
        assert!(!news.check);
        assert!(note(
            &RouteNetlinkMessage::DelLink(link(3, "tartan.vxlan", false)),
            &mut news
        ));
        assert!(news.check);

        let mut n = NeighbourMessage::default();
        n.header.state = NeighbourState::Stale;
        assert!(!note(
            &RouteNetlinkMessage::DelNeighbour(n.clone()),
            &mut news
        ));
        n.header.state = NeighbourState::Permanent;
        assert!(note(&RouteNetlinkMessage::DelNeighbour(n), &mut news));

        // An IPv4 address removed: the routes are read back.
        let mut a = AddressMessage::default();
        a.header.family = AddressFamily::Inet6;
        assert!(!note(
            &RouteNetlinkMessage::DelAddress(a.clone()),
            &mut news
        ));
        assert!(!news.reread);
        a.header.family = AddressFamily::Inet;
        assert!(note(&RouteNetlinkMessage::DelAddress(a), &mut news));
        assert!(news.reread);
    }
}
