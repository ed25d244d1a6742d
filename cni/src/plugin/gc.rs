//! GC: release every allocation of this network on this node whose
//! attachment the runtime no longer holds, and the records of such
//! interfaces on this node.

use std::collections::HashSet;

use tartan_api::resources::WorkloadEndpoint;
use tartan_api::store::typed::TypedStore;
use tracing::info;

use super::Mode;
use super::context::{Context, ipam_error, store_error};
use super::workload;
use crate::spec::CniError;

pub async fn gc(cx: &Context, mode: Mode) -> Result<(), CniError> {
    let valid: HashSet<(String, String)> = cx
        .conf
        .valid_attachments
        .iter()
        .flatten()
        .map(|a| (a.container_id.clone(), a.ifname.clone()))
        .collect();
    let containers: HashSet<&str> = valid.iter().map(|(c, _)| c.as_str()).collect();
    let prefix = format!("{}.", cx.conf.name);
    let turn = cx.ipam_lock().await;
    // The container ID is all that follows `<network>.`: it may hold dots
    // itself.
    let released = cx
        .ipam
        .gc(&prefix, |h| {
            h.strip_prefix(prefix.as_str())
                .is_some_and(|c| containers.contains(c))
        })
        .await
        .map_err(ipam_error)?;
    drop(turn);
    for (h, addrs) in &released {
        info!(handle = %h, addresses = ?addrs, "GC released");
    }
    if mode == Mode::Plugin {
        let (weps, _) = cx
            .store
            .list_typed::<WorkloadEndpoint>(None)
            .await
            .map_err(store_error)?;
        for w in weps {
            if w.spec.node != cx.node {
                continue;
            }
            if !valid.contains(&(w.spec.container_id.clone(), w.spec.endpoint.clone())) {
                workload::remove_record(cx, &w).await?;
            }
        }
    }
    Ok(())
}
