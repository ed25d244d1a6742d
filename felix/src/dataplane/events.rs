//! The kernel tells felix when something of its own goes: a route of
//! Tartan's local protocol deleted, a tunnel device removed or changed, a
//! neighbour entry of the VXLAN device gone. Each such event asks for a
//! pass at once, so drift is repaired in milliseconds; the periodic check
//! stays as the safety net (an event lost to a full socket buffer).

use futures::StreamExt;
use rtnetlink::constants::{RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RTMGRP_LINK, RTMGRP_NEIGH};
use rtnetlink::packet_core::NetlinkPayload;
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::sys::{AsyncSocket, SocketAddr};
use tokio::sync::mpsc;
use tracing::debug;

use super::DataplaneError;
use crate::ROUTE_PROTOCOL;

/// Devices felix makes and watches.
const PREFIX: &str = "tartan.";

/// Wakes felix on kernel events that may undo its work. Dropping it stops
/// listening.
pub struct KernelEvents {
    task: tokio::task::JoinHandle<()>,
    conn: tokio::task::JoinHandle<()>,
    pub rx: mpsc::Receiver<()>,
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

/// Whether an event may have undone felix's work.
pub fn concerns_us(m: &RouteNetlinkMessage) -> bool {
    match m {
        RouteNetlinkMessage::DelRoute(r) => u8::from(r.header.protocol) == ROUTE_PROTOCOL,
        RouteNetlinkMessage::DelLink(l) | RouteNetlinkMessage::NewLink(l) => ours(l),
        // Permanent entries are the VXLAN device's (ARP's own come and go).
        RouteNetlinkMessage::DelNeighbour(n) => n.header.state == NeighbourState::Permanent,
        _ => false,
    }
}

impl KernelEvents {
    pub fn subscribe() -> Result<KernelEvents, DataplaneError> {
        let (mut conn, _handle, mut messages) =
            rtnetlink::new_connection().map_err(|e| DataplaneError::Netlink(e.to_string()))?;
        let groups = RTMGRP_LINK | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE | RTMGRP_NEIGH;
        conn.socket_mut()
            .socket_mut()
            .bind(&SocketAddr::new(0, groups))
            .map_err(|e| DataplaneError::Netlink(format!("join netlink groups: {e}")))?;
        let conn = tokio::spawn(conn);
        // One pending wake-up is enough: a burst of events is one pass.
        let (tx, rx) = mpsc::channel(1);
        let task = tokio::spawn(async move {
            while let Some((msg, _)) = messages.next().await {
                if let NetlinkPayload::InnerMessage(m) = &msg.payload
                    && concerns_us(m)
                {
                    debug!(event = ?std::mem::discriminant(m), "kernel event; checking the dataplane");
                    let _ = tx.try_send(());
                }
            }
        });
        Ok(KernelEvents { task, conn, rx })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtnetlink::packet_route::neighbour::NeighbourMessage;
    use rtnetlink::packet_route::route::{RouteMessage, RouteProtocol};

    #[test]
    fn only_what_undoes_our_work_wakes_felix() {
        let mut r = RouteMessage::default();
        r.header.protocol = RouteProtocol::from(ROUTE_PROTOCOL);
        assert!(concerns_us(&RouteNetlinkMessage::DelRoute(r.clone())));
        assert!(!concerns_us(&RouteNetlinkMessage::NewRoute(r.clone())));
        r.header.protocol = RouteProtocol::from(201);
        assert!(!concerns_us(&RouteNetlinkMessage::DelRoute(r)));
        let mut l = LinkMessage::default();
        l.attributes
            .push(LinkAttribute::IfName("tartan.vxlan".into()));
        assert!(concerns_us(&RouteNetlinkMessage::DelLink(l.clone())));
        l.attributes = vec![LinkAttribute::IfName("eth0".into())];
        assert!(!concerns_us(&RouteNetlinkMessage::DelLink(l)));
        let mut n = NeighbourMessage::default();
        n.header.state = NeighbourState::Stale;
        assert!(!concerns_us(&RouteNetlinkMessage::DelNeighbour(n.clone())));
        n.header.state = NeighbourState::Permanent;
        assert!(concerns_us(&RouteNetlinkMessage::DelNeighbour(n)));
    }
}
