//! DEL: best effort and idempotent. The interface, the address and the
//! record go; anything already gone is fine. An unreachable datastore is
//! an error (code 11) so that the runtime calls again and nothing leaks.

use tracing::warn;

use super::context::{Context, ipam_error, wire_error};
use super::workload;
use crate::wire;

pub async fn plugin(cx: &Context) -> Result<(), crate::spec::CniError> {
    let host_ifname = wire::host_interface_name(&cx.inv.container_id, &cx.inv.ifname);
    // The addresses, to remove exactly our host routes.
    let held = workload::find(cx).await.ok().flatten();
    let addresses: Vec<ipnet::IpNet> = held
        .iter()
        .flat_map(|w| w.spec.ip_networks.iter())
        .filter_map(|a| a.parse().ok())
        .collect();
    let netns = cx.inv.netns.as_deref().filter(|p| p.exists());
    let wiring = wire::del(
        netns,
        &cx.inv.ifname,
        &host_ifname,
        &addresses,
        crate::ROUTE_PROTOCOL,
    )
    .await;
    if let Err(e) = &wiring {
        warn!(error = %e, "could not remove all of the interface");
    }
    {
        let _turn = cx.ipam_lock().await;
        cx.ipam.release(&cx.handle()).await.map_err(ipam_error)?;
    }
    if let Some(w) = held {
        workload::remove_record(cx, &w).await?;
    }
    wiring.map_err(wire_error)
}

pub async fn ipam_only(cx: &Context) -> Result<(), crate::spec::CniError> {
    let _turn = cx.ipam_lock().await;
    cx.ipam.release(&cx.handle()).await.map_err(ipam_error)?;
    Ok(())
}
