//! GC: release every allocation of this network on this node whose
//! attachment the runtime no longer holds, and the records of such
//! interfaces on this node. A removal that fails does not stop the rest
//! (the CNI specification asks a GC to remove as much as it can); the
//! failures are returned at the end.

use std::collections::HashSet;

use tartan_api::resources::WorkloadEndpoint;
use tartan_api::store::typed::TypedStore;
use tracing::{info, warn};

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
    let collected = cx
        .ipam
        .gc(&prefix, |h| {
            h.strip_prefix(prefix.as_str())
                .is_some_and(|c| containers.contains(c))
        })
        .await
        .map_err(ipam_error)?;
    drop(turn);
    for (h, addrs) in &collected.released {
        info!(handle = %h, addresses = ?addrs, "GC released");
    }
    // The specification asks a GC to remove as much as it can: a failure
    // is reported once everything else has been tried.
    let mut failed: Vec<CniError> = collected.errors.into_iter().map(ipam_error).collect();
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
            if !valid.contains(&(w.spec.container_id.clone(), w.spec.endpoint.clone()))
                && let Err(e) = workload::remove_record(cx, &w).await
            {
                warn!(error = %e.msg, "GC could not remove a workload endpoint");
                failed.push(e);
            }
        }
    }
    match failed.len() {
        0 => Ok(()),
        n => {
            let first = failed.swap_remove(0);
            let more = match n {
                1 => String::new(),
                _ => format!(" (and {} more failures; see the log)", n - 1),
            };
            Err(CniError::new(
                first.code,
                format!("GC removed what it could; {}{more}", first.msg),
            )
            .with_details(first.details))
        }
    }
}
