//! LoadBalancer addresses from LoadBalancerIPPools: one pass reads the
//! pools and Services, [`assign`] decides, and each changed Service's
//! `status.loadBalancer.ingress` is written (a compare-and-swap on the
//! version read; one that changed meanwhile waits for the next pass).
//! With no pool at all nothing is written: the addresses are then someone
//! else's business (another implementation).

pub mod assign;
#[cfg(test)]
mod tests;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service, ServiceStatus};
use tartan_api::resources::LoadBalancerIpPool;
use tartan_api::store::typed::{TypedStore, to_dynamic};
use tartan_api::store::{Datastore, StoreError};
use tracing::{info, warn};

pub use assign::{Outcome, assign};

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub assigned: usize,
    pub released: usize,
    pub problems: Vec<String>,
    /// Per pool: (addresses, in use).
    pub usage: std::collections::BTreeMap<String, (u128, u128)>,
}

/// One pass over the pools and Services.
pub async fn pass(store: &dyn Datastore) -> Result<Report, StoreError> {
    let (pools, _) = store.list_typed::<LoadBalancerIpPool>(None).await?;
    if pools.is_empty() {
        return Ok(Report::default());
    }
    let (services, _) = store.list_typed::<Service>(None).await?;
    let outcome = assign(&pools, &services);
    let mut r = Report {
        problems: outcome.problems,
        usage: outcome.usage,
        ..Report::default()
    };
    for c in outcome.changes {
        let Some(mut s) = services
            .iter()
            .find(|s| {
                s.metadata.name.as_deref() == Some(&c.name)
                    && s.metadata.namespace.as_deref().unwrap_or("default") == c.namespace
            })
            .cloned()
        else {
            continue;
        };
        let ingress: Vec<LoadBalancerIngress> =
            c.to.iter()
                .map(|a| LoadBalancerIngress {
                    ip: Some(a.to_string()),
                    ..Default::default()
                })
                .collect();
        s.status
            .get_or_insert_with(ServiceStatus::default)
            .load_balancer = Some(LoadBalancerStatus {
            ingress: (!ingress.is_empty()).then_some(ingress),
        });
        match store.update_status(to_dynamic(&s)?).await {
            Ok(_) => {
                let added = c.to.iter().filter(|a| !c.from.contains(a)).count();
                let gone = c.from.iter().filter(|a| !c.to.contains(a)).count();
                r.assigned += added;
                r.released += gone;
                info!(service = %format!("{}/{}", c.namespace, c.name), from = ?c.from, to = ?c.to, "LoadBalancer ingress");
            }
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    for p in &r.problems {
        warn!(problem = %p, "LoadBalancer address");
    }
    Ok(r)
}
