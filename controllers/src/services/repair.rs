//! What frees a claim no Service holds and claims what a Service holds
//! unrecorded: the records rebuilt from a listing of every Service, as
//! the API server's repair loop does. It lists, so it runs when the
//! records are missing, when a write is refused for a value taken or a
//! range run out (a leaked claim may be why), after deletes it cannot
//! name, or from a timer; never on every write. It must not run beside
//! a writer between its claim and its Service write (that claim would be
//! freed): the lab holds its lock.

use k8s_openapi::api::core::v1::Service;
use tartan_api::store::Datastore;
use tartan_api::store::typed::TypedStore;

use super::Error;
use super::alloc::Ranges;
use super::alloc::held::Held;
use super::records;

/// What a repair changed, in members of all the ranges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Claimed in a record, held by no Service: freed.
    pub freed: u64,
    /// Held by a Service, not in its record: claimed.
    pub claimed: u64,
}

/// The records rebuilt from the Services.
pub async fn repair(store: &dyn Datastore, ranges: &Ranges) -> Result<Repaired, Error> {
    for _ in 0..8 {
        let (services, _) = store.list_typed::<Service>(None).await?;
        if let Some(r) = repair_from(store, ranges, &services).await? {
            return Ok(r);
        }
    }
    Err(Error::RecordsKeptChanging)
}

/// The records rebuilt from `services` (every Service); `None` when
/// another writer changed a record meanwhile.
pub async fn repair_from(
    store: &dyn Datastore,
    ranges: &Ranges,
    services: &[Service],
) -> Result<Option<Repaired>, Error> {
    let mut held = Held::empty(ranges);
    for s in services {
        held.add(s);
    }
    let stored = records::read(store, ranges).await?;
    let want = held.bits();
    let mut r = Repaired::default();
    for (i, s) in stored.iter().enumerate() {
        match &s.bits {
            Some(old) => {
                r.freed += old.minus(want[i]).len() as u64;
                r.claimed += want[i].minus(old).len() as u64;
            }
            None => r.claimed += want[i].count(),
        }
    }
    Ok(records::write(store, ranges, &stored, &want)
        .await?
        .then_some(r))
}
