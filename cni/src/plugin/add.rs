//! ADD: an address from IPAM, the interface wired, the record written; and
//! every step undone if a later one fails.

use std::collections::BTreeMap;

use ipnet::IpNet;
use tracing::{info, warn};

use super::context::{Context, ipam_error, wire_error};
use super::workload;
use crate::spec::result::{CniResult, Interface, IpConfig, Route};
use crate::spec::{CniError, error::code};
use crate::wire::{self, GATEWAY_V4, GATEWAY_V6, WireRequest};

/// Facts about the holder kept beside each allocation.
fn holder(cx: &Context) -> BTreeMap<String, String> {
    let (ns, pod) = workload::pod_of(cx);
    BTreeMap::from([
        ("node".to_string(), cx.node.clone()),
        ("namespace".to_string(), ns),
        ("pod".to_string(), pod),
    ])
}

/// Give back what this call took, logging (not failing) if that fails:
/// GC will find it.
async fn undo_assign(cx: &Context) {
    let _turn = cx.ipam_lock().await;
    if let Err(e) = cx.ipam.release(&cx.handle()).await {
        warn!(handle = %cx.handle(), error = %e, "could not release after a failed ADD; GC will");
    }
}

pub fn wire_request(cx: &Context, addresses: &[IpNet]) -> Result<WireRequest, CniError> {
    let netns = cx
        .inv
        .netns
        .clone()
        .ok_or_else(|| CniError::new(code::INVALID_ENV, "CNI_NETNS is not set"))?;
    Ok(WireRequest {
        netns,
        ifname: cx.inv.ifname.clone(),
        host_ifname: wire::host_interface_name(&cx.inv.container_id, &cx.inv.ifname),
        addresses: addresses.to_vec(),
        mtu: cx.conf.mtu,
        pod_mac: Some(wire::pod_mac(&cx.inv.container_id, &cx.inv.ifname)),
        route_protocol: crate::ROUTE_PROTOCOL,
    })
}

pub async fn plugin(cx: &Context) -> Result<String, CniError> {
    let netns = cx.inv.netns.clone().unwrap_or_default();
    if !netns.exists() {
        return Err(CniError::new(
            code::UNKNOWN_CONTAINER,
            format!("network namespace {} does not exist", netns.display()),
        ));
    }
    // The Pod's labels are read while IPAM works; the interface, the
    // handle and the record are written together. Each step is independent
    // of the others' results, so the round trips overlap.
    let (alloc, facts) = tokio::join!(
        async {
            let _turn = cx.ipam_lock().await;
            cx.ipam.allocate(&cx.handle(), &holder(cx)).await
        },
        workload::pod_facts(cx),
    );
    let alloc = alloc.map_err(ipam_error)?;
    let facts = match facts {
        Ok(f) => f,
        Err(e) => {
            undo_assign(cx).await;
            return Err(e);
        }
    };
    let addresses = alloc.addresses.clone();
    let req = wire_request(cx, &addresses)?;
    let pod_mac = req
        .pod_mac
        .map(|m| wire::mac_string(&m))
        .unwrap_or_default();
    let (wired, recorded, handle) = tokio::join!(
        wire::add(&req),
        workload::record(cx, facts, &req.host_ifname, &pod_mac, &addresses),
        cx.ipam.record(&alloc),
    );
    let failure = match (&wired, &recorded, handle) {
        (Err(_), _, _) => None,
        (Ok(_), Err(e), _) => Some(e.clone()),
        (Ok(_), Ok(()), Err(e)) => Some(ipam_error(e)),
        (Ok(_), Ok(()), Ok(())) => None,
    };
    // The interface exists already, made by an earlier ADD of this same
    // container and interface (its host end is there): that attachment
    // is whole, and the address and record this call found are its own.
    // The call fails (the specification's rule) and undoes nothing.
    let earlier = match &wired {
        Err(wire::WireError::AlreadyExists { .. }) => wire::host_end_exists(&req.host_ifname)
            .await
            .unwrap_or(false),
        _ => false,
    };
    if earlier && let Err(e) = &wired {
        warn!(host = %req.host_ifname, "ADD of an interface an earlier ADD made; left as it is");
        return Err(CniError::new(code::WIRING, e.to_string()));
    }
    let wired = match (wired, failure) {
        (Ok(w), None) => w,
        (w, f) => {
            // Undo in reverse: the interface, the record, the addresses.
            if w.is_ok() {
                let _ = wire::del(
                    Some(&req.netns),
                    &req.ifname,
                    &req.host_ifname,
                    &addresses,
                    crate::ROUTE_PROTOCOL,
                )
                .await;
            }
            if recorded.is_ok()
                && let Err(e) = workload::remove(cx).await
            {
                warn!(error = %e, "could not remove the record after a failed ADD; GC will");
            }
            undo_assign(cx).await;
            return Err(match (w, f) {
                (Err(e), _) => wire_error(e),
                (_, Some(e)) => e,
                (Ok(_), None) => CniError::new(code::WIRING, "ADD failed"),
            });
        }
    };
    info!(addresses = ?addresses, host = %wired.host_ifname, "pod wired");
    let mut r = CniResult {
        interfaces: vec![
            Interface {
                name: wired.host_ifname.clone(),
                mac: wired.host_mac.clone(),
                sandbox: None,
                mtu: cx.conf.mtu,
            },
            Interface {
                name: cx.inv.ifname.clone(),
                mac: wired.pod_mac.clone(),
                sandbox: Some(netns.display().to_string()),
                mtu: cx.conf.mtu,
            },
        ],
        ..Default::default()
    };
    for a in &addresses {
        r.ips.push(IpConfig {
            address: a.to_string(),
            gateway: None,
            interface: Some(1),
        });
    }
    if addresses.iter().any(|a| matches!(a, IpNet::V4(_))) {
        r.routes.push(Route {
            dst: "0.0.0.0/0".into(),
            gw: Some(GATEWAY_V4.to_string()),
        });
    }
    if addresses.iter().any(|a| matches!(a, IpNet::V6(_))) {
        r.routes.push(Route {
            dst: "::/0".into(),
            gw: Some(GATEWAY_V6.to_string()),
        });
    }
    // Earlier plugins' result, if any, is passed through with ours after.
    Ok(match &cx.conf.prev_result {
        Some(prev) => r.after(prev, &cx.conf.cni_version),
        None => r.to_json(&cx.conf.cni_version),
    }
    .to_string())
}

/// `tartan-ipam` ADD: addresses only, for the main plugin to configure.
pub async fn ipam_only(cx: &Context) -> Result<String, CniError> {
    let addresses = {
        let _turn = cx.ipam_lock().await;
        cx.ipam
            .assign(&cx.handle(), &holder(cx))
            .await
            .map_err(ipam_error)?
    };
    let r = CniResult {
        ips: addresses
            .iter()
            .map(|a| IpConfig {
                address: a.to_string(),
                gateway: None,
                interface: None,
            })
            .collect(),
        ..Default::default()
    };
    Ok(r.to_json(&cx.conf.cni_version).to_string())
}
