//! The host's addresses and the interfaces holding them, read from the
//! kernel while a host endpoint of this node is found by its
//! `expectedIPs` rather than named (at each such endpoint's change and
//! each periodic check, so one whose address comes later is governed
//! from the next check on).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use futures::TryStreamExt;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::LinkAttribute;
use tracing::warn;

use crate::calc::hosts::needs_addresses;
use crate::calc::state::State;

/// Read the host's addresses into `state` when some host endpoint of
/// `node` needs them (else forget them); whether they changed.
pub(super) async fn refresh(node: &str, state: &mut State) -> bool {
    let now = if needs_addresses(node, state) {
        match read().await {
            Ok(a) => a,
            Err(e) => {
                warn!(error = %e, "cannot read the host's addresses; host endpoints found by their addresses keep what was read before");
                return false;
            }
        }
    } else {
        BTreeMap::new()
    };
    if now == state.host_addrs {
        return false;
    }
    state.host_addrs = now;
    true
}

async fn read() -> Result<BTreeMap<IpAddr, String>, String> {
    let (conn, handle, _) = rtnetlink::new_connection().map_err(|e| e.to_string())?;
    let task = tokio::spawn(conn);
    let result = async {
        let mut names = HashMap::new();
        let mut links = handle.link().get().execute();
        while let Some(m) = links.try_next().await.map_err(|e| e.to_string())? {
            if let Some(n) = m.attributes.iter().find_map(|a| match a {
                LinkAttribute::IfName(n) => Some(n.clone()),
                _ => None,
            }) {
                names.insert(m.header.index, n);
            }
        }
        let mut out = BTreeMap::new();
        let mut addrs = handle.address().get().execute();
        while let Some(m) = addrs.try_next().await.map_err(|e| e.to_string())? {
            let Some(name) = names.get(&m.header.index) else {
                continue;
            };
            for a in &m.attributes {
                if let AddressAttribute::Address(ip) | AddressAttribute::Local(ip) = a {
                    out.insert(*ip, name.clone());
                }
            }
        }
        Ok(out)
    }
    .await;
    task.abort();
    result
}
