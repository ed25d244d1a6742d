//! The election against a store: read the Lease, write what the
//! [`Candidate`] plans (a create, or an update carrying the version read),
//! and publish whether this replica leads.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, StoreError};
use tokio::sync::watch;
use tracing::{info, warn};

use super::candidate::{Candidate, Plan};

/// Where the Lease lives and who this replica is.
pub struct Elector {
    pub store: Arc<dyn Datastore>,
    pub namespace: String,
    pub name: String,
    pub candidate: Candidate,
}

/// The outcome of one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Round {
    /// This replica holds the Lease (created, renewed or taken).
    Holds,
    /// Another holds it.
    Follows(String),
    /// The write lost a race or the store failed: not leading.
    Failed(String),
}

impl Elector {
    /// One read and at most one write, at the time `now` gives.
    pub async fn round(&mut self, now: impl Fn() -> Timestamp) -> Round {
        let current: Option<Lease> = match self
            .store
            .get_typed::<Lease>(Some(&self.namespace), &self.name)
            .await
        {
            Ok(l) => Some(l),
            Err(StoreError::NotFound(_)) => None,
            Err(e) => {
                self.candidate.lost();
                return Round::Failed(format!("read the Lease: {e}"));
            }
        };
        let began = now();
        let spec = current
            .as_ref()
            .and_then(|l| l.spec.clone())
            .unwrap_or_default();
        let plan = self.candidate.plan(current.as_ref().map(|_| &spec), began);
        let result = match plan {
            Plan::Follow { holder } => {
                self.candidate.lost();
                return Round::Follows(holder);
            }
            Plan::Create(spec) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(spec.clone()),
                };
                self.store.create_typed(&lease).await.map(|_| spec)
            }
            Plan::Update(spec) => {
                let mut lease = current.unwrap_or_default();
                lease.spec = Some(spec.clone());
                self.store.update_typed(&lease).await.map(|_| spec)
            }
        };
        match result {
            Ok(spec) => {
                self.candidate.written(began, &spec);
                Round::Holds
            }
            Err(e) => {
                self.candidate.lost();
                Round::Failed(format!("write the Lease: {e}"))
            }
        }
    }
}

fn wall_clock() -> Timestamp {
    Timestamp::now()
}

/// Run the election for ever: a round every retry period, publishing
/// whether this replica may act on `leading` (also turned off when the
/// renew deadline passes without a successful round, e.g. a store call
/// that hangs).
pub async fn run(mut e: Elector, leading: watch::Sender<bool>) {
    let timing = e.candidate.timing();
    let mut was = false;
    loop {
        let round = tokio::time::timeout(timing.renew_deadline, e.round(wall_clock)).await;
        let round = round.unwrap_or_else(|_| {
            e.candidate.lost();
            Round::Failed("the Lease's store did not answer in time".into())
        });
        let now = e.candidate.leading(wall_clock());
        match (&round, was, now) {
            (Round::Holds, false, true) => {
                info!(lease = %e.name, id = %e.candidate.id(), "leading")
            }
            (_, true, false) => warn!(lease = %e.name, ?round, "stopped leading"),
            (Round::Failed(why), false, _) => warn!(lease = %e.name, %why, "election round failed"),
            _ => {}
        }
        was = now;
        leading.send_replace(now);
        // Check the deadline between rounds too, so that the flag drops
        // in time even if the next round is slow.
        let mut slept = Duration::ZERO;
        while slept < timing.retry_period {
            let step = (timing.retry_period - slept).min(Duration::from_millis(250));
            tokio::time::sleep(step).await;
            slept += step;
            if was && !e.candidate.leading(wall_clock()) {
                warn!(lease = %e.name, "renew deadline passed; stopped leading");
                was = false;
                leading.send_replace(false);
            }
        }
    }
}

/// Give the Lease up on purpose (a replica shutting down): when `id`
/// holds it, write it with no holder, so that another takes it at its
/// next round instead of after the lease duration. Whether it was held.
/// The caller stops acting first.
pub async fn release(
    store: &dyn Datastore,
    namespace: &str,
    name: &str,
    id: &str,
) -> Result<bool, StoreError> {
    let mut lease: Lease = store.get_typed(Some(namespace), name).await?;
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(id) {
        return Ok(false);
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    store.update_typed(&lease).await?;
    Ok(true)
}
