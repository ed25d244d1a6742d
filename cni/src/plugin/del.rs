//! DEL: best effort and idempotent. The interface, the address and the
//! record go; anything already gone is fine. An unreachable datastore is
//! an error (code 11) so that the runtime calls again and nothing leaks.

use tracing::warn;

use super::context::{Context, ipam_error, wire_error};
use super::workload;
use crate::wire;

pub async fn plugin(cx: &Context) -> Result<(), crate::spec::CniError> {
    let host_ifname = wire::host_interface_name(&cx.inv.container_id, &cx.inv.ifname);
    let netns = cx.inv.netns.as_deref().filter(|p| p.exists());
    // Three independent removals, in flight together.
    let (wiring, released, record) = tokio::join!(
        wire::del(
            netns,
            &cx.inv.ifname,
            &host_ifname,
            &[],
            crate::ROUTE_PROTOCOL
        ),
        async {
            let _turn = cx.ipam_lock().await;
            cx.ipam.release(&cx.handle()).await
        },
        workload::remove(cx),
    );
    if let Err(e) = &wiring {
        warn!(error = %e, "could not remove all of the interface");
    }
    released.map_err(ipam_error)?;
    record?;
    wiring.map_err(wire_error)
}

pub async fn ipam_only(cx: &Context) -> Result<(), crate::spec::CniError> {
    let _turn = cx.ipam_lock().await;
    cx.ipam.release(&cx.handle()).await.map_err(ipam_error)?;
    Ok(())
}
