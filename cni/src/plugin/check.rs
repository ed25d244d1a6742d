//! CHECK: the interface (in the sandbox and with the MAC prevResult
//! lists), addresses and routes are as ADD left them and as prevResult
//! says, IPAM still holds the addresses, and the record exists.

use std::net::IpAddr;

use ipnet::IpNet;

use super::add::wire_request;
use super::context::{Context, ipam_error, wire_error};
use super::workload;
use crate::spec::result::CniResult;
use crate::spec::{CniError, error::code};
use crate::wire;
use tartan_api::resources::node::parse_mac;

/// What prevResult says of this call's interface: its addresses, and
/// the MAC it lists for it (if any). An interface prevResult puts in
/// another sandbox than CNI_NETNS is an error (CHECK must consult
/// prevResult for the expected interfaces).
struct Prev {
    addresses: Vec<IpNet>,
    mac: Option<[u8; 6]>,
}

fn prev(cx: &Context) -> Result<Prev, CniError> {
    let r = prev_result(cx)?;
    let addresses = prev_addresses(cx, &r)?;
    let Some(iface) = r
        .interfaces
        .iter()
        .find(|i| i.name == cx.inv.ifname && i.sandbox.is_some())
    else {
        return Ok(Prev {
            addresses,
            mac: None,
        });
    };
    let netns = cx.inv.netns.as_deref().map(|p| p.display().to_string());
    if let (Some(sandbox), Some(netns)) = (&iface.sandbox, &netns)
        && sandbox != netns
    {
        return Err(CniError::new(
            code::CHECK_FAILED,
            format!(
                "prevResult puts {} in {sandbox}, not in CNI_NETNS {netns}",
                cx.inv.ifname
            ),
        ));
    }
    // A MAC in another form (another plugin's, or not Ethernet's) is not
    // compared rather than failing an attachment that may be whole.
    let mac = parse_mac(&iface.mac);
    if mac.is_none() && !iface.mac.is_empty() {
        tracing::debug!(mac = %iface.mac, "prevResult MAC not in aa:bb:cc:dd:ee:ff form; not compared");
    }
    Ok(Prev { addresses, mac })
}

fn prev_result(cx: &Context) -> Result<CniResult, CniError> {
    let prev = cx.conf.prev_result.as_ref().ok_or_else(|| {
        CniError::new(
            code::INVALID_CONFIG,
            "CHECK needs prevResult in the configuration",
        )
    })?;
    CniResult::from_prev(prev)
}

/// The addresses prevResult `r` gives this call's interface.
fn prev_addresses(cx: &Context, r: &CniResult) -> Result<Vec<IpNet>, CniError> {
    let ours = r
        .interfaces
        .iter()
        .position(|i| i.name == cx.inv.ifname && i.sandbox.is_some());
    let mut out = Vec::new();
    for ip in &r.ips {
        if ip.interface.is_some() && ip.interface != ours {
            continue;
        }
        let net: IpNet = ip.address.parse().map_err(|_| {
            CniError::new(
                code::INVALID_CONFIG,
                format!(
                    "prevResult address {:?} is not an address/prefix",
                    ip.address
                ),
            )
        })?;
        out.push(net);
    }
    Ok(out)
}

/// IPAM holds exactly `addresses` for this attachment.
async fn check_ipam(cx: &Context, addresses: &[IpNet]) -> Result<(), CniError> {
    let held = cx.ipam.held(&cx.handle()).await.map_err(ipam_error)?;
    if held.is_empty() {
        return Err(CniError::new(
            code::UNKNOWN_CONTAINER,
            format!(
                "container {} has no addresses on network {}",
                cx.inv.container_id, cx.conf.name
            ),
        ));
    }
    let mut want: Vec<IpAddr> = addresses.iter().map(IpNet::addr).collect();
    want.sort();
    if want != held {
        return Err(CniError::new(
            code::CHECK_FAILED,
            format!(
                "prevResult has {want:?} but IPAM holds {held:?} for {}",
                cx.handle()
            ),
        ));
    }
    Ok(())
}

pub async fn plugin(cx: &Context) -> Result<(), CniError> {
    let Prev { addresses, mac } = prev(cx)?;
    check_ipam(cx, &addresses).await?;
    let mut req = wire_request(cx, &addresses)?;
    // The pod's interface must still have the MAC prevResult lists; none
    // listed, none checked.
    req.pod_mac = mac;
    wire::check(&req).await.map_err(|e| {
        let mut c = wire_error(e);
        if c.code == code::WIRING {
            c.code = code::CHECK_FAILED;
        }
        c
    })?;
    match workload::find(cx).await? {
        Some(w) => {
            let mut have: Vec<String> = w.spec.ip_networks.clone();
            let mut want: Vec<String> = addresses.iter().map(|a| a.to_string()).collect();
            have.sort();
            want.sort();
            if have != want {
                return Err(CniError::new(
                    code::CHECK_FAILED,
                    format!("the workload endpoint lists {have:?}, prevResult {want:?}"),
                ));
            }
            Ok(())
        }
        None => Err(CniError::new(
            code::CHECK_FAILED,
            format!("no workload endpoint for container {}", cx.inv.container_id),
        )),
    }
}

pub async fn ipam_only(cx: &Context) -> Result<(), CniError> {
    let addresses = prev_addresses(cx, &prev_result(cx)?)?;
    check_ipam(cx, &addresses).await
}
