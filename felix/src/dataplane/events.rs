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

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use ipnet::IpNet;
use rtnetlink::constants::{
    RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RTMGRP_LINK, RTMGRP_NEIGH,
};
use rtnetlink::packet_core::NetlinkPayload;
use rtnetlink::packet_route::address::AddressMessage;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::packet_route::route::{RouteAttribute, RouteHeader, RouteMessage};
use rtnetlink::packet_route::{AddressFamily, RouteNetlinkMessage};
use rtnetlink::sys::{AsyncSocket, SocketAddr};
use tokio::sync::mpsc;
use tracing::{debug, error, warn};

use super::DataplaneError;
use super::routes::destination;
use crate::ROUTE_PROTOCOL;

/// Devices felix makes and watches.
const PREFIX: &str = "tartan.";

/// What happened to felix's routes since a pass last took it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RouteNews {
    /// Destinations of routes of ours (main table) deleted.
    pub deleted: BTreeSet<IpNet>,
    /// Interfaces that went down or away: the kernel dropped the IPv4
    /// routes through them without a deletion event.
    pub links_down: HashSet<u32>,
    /// Something the kernel may have dropped routes for without naming
    /// them (an IPv4 address removed): read them back.
    pub reread: bool,
    /// A tunnel device or VXLAN entry of felix's changed, or events were
    /// lost: compare everything with the kernel.
    pub check: bool,
    /// The listener stopped: no news can be trusted to come, so every
    /// pass reads.
    pub deaf: bool,
}

/// Shared between the listener and the passes.
pub type SharedNews = Arc<Mutex<RouteNews>>;

impl RouteNews {
    /// What a route pass uses, taken out (`check` stays for the loop).
    pub fn take_routes(&mut self) -> RouteNews {
        RouteNews {
            deleted: std::mem::take(&mut self.deleted),
            links_down: std::mem::take(&mut self.links_down),
            reread: std::mem::take(&mut self.reread) || self.deaf,
            check: false,
            deaf: self.deaf,
        }
    }
}

/// Nothing under the lock panics; were it poisoned, the news is still
/// whole.
fn lock(news: &SharedNews) -> MutexGuard<'_, RouteNews> {
    news.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes the news for a route pass.
pub fn take_routes(news: &SharedNews) -> RouteNews {
    lock(news).take_routes()
}

/// Whether the events since the last call ask for a whole check (taken).
pub fn take_check(news: &SharedNews) -> bool {
    std::mem::take(&mut lock(news).check)
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
                Some(dst) => {
                    news.deleted.insert(dst);
                }
                None => news.reread = true,
            }
            true
        }
        RouteNetlinkMessage::DelLink(l) | RouteNetlinkMessage::NewLink(l) => {
            // Gone or down now: the routes through it went. Coming up asks
            // for nothing (the periodic check puts back what waited for it).
            let gone = matches!(m, RouteNetlinkMessage::DelLink(_));
            if gone || !l.header.flags.contains(LinkFlags::Up) {
                news.links_down.insert(l.header.index);
            }
            let ours = ours(l);
            news.check |= ours;
            ours
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
        let sock = conn.socket_mut().socket_mut();
        sock.bind(&SocketAddr::new(0, groups))
            .map_err(|e| DataplaneError::Netlink(format!("join netlink groups: {e}")))?;
        // bgpd's routes come through here too (a session's thousands at
        // once): room for a burst while a pass runs. A full buffer loses
        // events, which the listener notices (below).
        if let Err(e) = sock.set_rx_buf_sz(4usize << 20) {
            warn!(error = %e, "netlink event buffer left at its default size");
        }
        let conn = tokio::spawn(conn);
        // One pending wake-up is enough: a burst of events is one pass.
        let (tx, rx) = mpsc::channel(1);
        let news = SharedNews::default();
        let kept = news.clone();
        let task = tokio::spawn(async move {
            while let Some((msg, _)) = messages.next().await {
                let wake = match &msg.payload {
                    NetlinkPayload::InnerMessage(m) => {
                        let wake = note(m, &mut lock(&kept));
                        if wake {
                            debug!(event = ?std::mem::discriminant(m), "kernel event; checking the dataplane");
                        }
                        wake
                    }
                    // The buffer was full: events were lost. Compare
                    // everything with the kernel.
                    NetlinkPayload::Overrun(_) => {
                        warn!("netlink events lost; reading the dataplane back");
                        let mut news = lock(&kept);
                        (news.reread, news.check) = (true, true);
                        true
                    }
                    _ => false,
                };
                if wake {
                    let _ = tx.try_send(());
                }
            }
            error!("netlink events no longer arrive; every pass reads the routes back");
            lock(&kept).deaf = true;
            let _ = tx.try_send(());
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
    use rtnetlink::packet_route::route::{RouteAddress, RouteProtocol};
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
        assert_eq!(
            news.deleted,
            BTreeSet::from(["10.0.0.7/32".parse::<IpNet>().unwrap()])
        );
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

    #[test]
    fn a_pass_takes_the_route_news_and_reads_for_ever_once_the_listener_stops() {
        let news = SharedNews::default();
        {
            let mut n = lock(&news);
            n.deleted.insert("10.0.0.7/32".parse().unwrap());
            n.links_down.insert(7);
            n.check = true;
        }
        let taken = take_routes(&news);
        assert_eq!(taken.links_down, HashSet::from([7]));
        assert_eq!(taken.deleted.len(), 1);
        assert!(!taken.reread && !taken.check);
        assert!(take_check(&news), "the check stays for the loop");
        assert!(!take_check(&news));
        assert_eq!(take_routes(&news), RouteNews::default());
        lock(&news).deaf = true;
        for _ in 0..2 {
            assert!(take_routes(&news).reread);
        }
    }
}
