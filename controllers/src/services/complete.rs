//! [`complete`]: the Services among objects being written given what the
//! API server would give them, against the allocation records
//! ([`super::records`]) and the written Services' own stored versions,
//! never a listing of every Service: a write's cost does not grow with
//! the Services stored. A refusal for a value taken (or a range run out)
//! is checked against a listing, which names the holder and, should the
//! records have leaked, repairs them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use tartan_api::store::typed::{TypedStore, from_dynamic, to_dynamic};
use tartan_api::store::{Datastore, DynamicObject, StoreError};
use tartan_api::validate::kube::drop_type_dependent_fields;

use super::Error;
use super::alloc::{self, Held, Ranges, key};
use super::records;
use super::release::Release;
use super::repair::repair_from;

/// The objects, their Services completed, and what to free once they are
/// written ([`super::release::release`]).
#[derive(Debug)]
pub struct Completed {
    pub objects: Vec<DynamicObject>,
    pub release: Release,
}

fn is_service(o: &DynamicObject) -> bool {
    o.types
        .as_ref()
        .is_some_and(|t| t.api_version == "v1" && t.kind == "Service")
}

/// `objects` (from files) with their Services completed and their claims
/// recorded; every problem otherwise (and nothing claimed).
pub async fn complete(
    store: &dyn Datastore,
    ranges: &Ranges,
    objects: Vec<DynamicObject>,
) -> Result<Result<Completed, Vec<String>>, Error> {
    let mut incoming = Vec::new();
    let mut problems = Vec::new();
    for o in objects.iter().filter(|o| is_service(o)) {
        match from_dynamic::<Service>(o.clone()) {
            Ok(s) => incoming.push(s),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    if incoming.is_empty() {
        return Ok(Ok(Completed {
            objects,
            release: Release::default(),
        }));
    }
    let (done, release) = match claim(store, ranges, &incoming).await? {
        Ok(d) => d,
        Err(p) => return Ok(Err(p)),
    };
    let mut done = done.into_iter();
    let mut out = Vec::with_capacity(objects.len());
    for o in objects {
        if is_service(&o) {
            let s = done.next().ok_or(Error::ServiceMissing)?;
            out.push(to_dynamic(&s)?);
        } else {
            out.push(o);
        }
    }
    Ok(Ok(Completed {
        objects: out,
        release,
    }))
}

/// The stored versions of `incoming`, by key.
async fn selves(store: &dyn Datastore, incoming: &[Service]) -> Result<Vec<Service>, Error> {
    let mut out = Vec::new();
    for s in incoming {
        let ns = s.metadata.namespace.as_deref().unwrap_or("default");
        let name = s.metadata.name.as_deref().unwrap_or("");
        match store.get_typed::<Service>(Some(ns), name).await {
            Ok(old) => out.push(old),
            Err(StoreError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// Rounds of read, allocate and compare-and-swap before giving up.
const CLAIM_ROUNDS: usize = 32;

/// `incoming` completed and claimed, with what their stored versions
/// held that they do not; or every problem.
async fn claim(
    store: &dyn Datastore,
    ranges: &Ranges,
    incoming: &[Service],
) -> Result<Result<(Vec<Service>, Release), Vec<String>>, Error> {
    let mut repaired = false;
    // Each round some writer wins; with many writing at once, each of
    // the others may win a round before this one does.
    for _ in 0..CLAIM_ROUNDS {
        let selves = selves(store, incoming).await?;
        let stored = records::read(store, ranges).await?;
        let Some(bits): Option<Vec<_>> = stored.iter().map(|s| s.bits.clone()).collect() else {
            // First use, or a record unreadable: rebuilt from the Services.
            let (all, _) = store.list_typed::<Service>(None).await?;
            repair_from(store, ranges, &all).await?;
            continue;
        };
        let mut held = Held::from_bits(ranges, bits);
        let before = held.clone();
        for s in &selves {
            held.remove(s);
        }
        let by_key: BTreeMap<String, &Service> = selves.iter().map(|s| (key(s), s)).collect();
        let incoming = prepared(incoming, &by_key)?;
        let done = match alloc::allocate_in(ranges, &mut held, &by_key, &incoming) {
            Ok(d) => d,
            Err(r) if r.taken && !repaired => {
                // Named by a listing; a claim no Service holds is freed.
                let (all, _) = store.list_typed::<Service>(None).await?;
                if let Err(problems) = alloc::allocate(ranges, &all, &incoming) {
                    return Ok(Err(problems));
                }
                repair_from(store, ranges, &all).await?;
                repaired = true;
                continue;
            }
            Err(r) => return Ok(Err(r.problems)),
        };
        // Claimed now; what the stored versions held stays claimed
        // until the write is done.
        let (old, new) = (before.bits(), held.bits());
        let union: Vec<_> = new.iter().zip(&old).map(|(n, o)| n.union(o)).collect();
        let release = Release(old.iter().zip(&new).map(|(o, n)| o.minus(n)).collect());
        let union: Vec<&_> = union.iter().collect();
        if records::write_claims(store, ranges, &stored, &union).await? {
            return Ok(Ok((done, release)));
        }
    }
    Err(Error::RecordsKeptChanging)
}

/// `incoming` as the API server prepares an update before it allocates:
/// each updated Service loses what its old type left behind unchanged (a
/// ClusterIP on a change to ExternalName, NodePorts on one to ClusterIP),
/// so that what it held is released, not carried over.
fn prepared(
    incoming: &[Service],
    selves: &BTreeMap<String, &Service>,
) -> Result<Vec<Service>, Error> {
    incoming
        .iter()
        .map(|s| {
            let Some(old) = selves.get(&key(s)) else {
                return Ok(s.clone());
            };
            let mut new = serde_json::to_value(s).map_err(to_store)?;
            let old = serde_json::to_value(old).map_err(to_store)?;
            drop_type_dependent_fields(&mut new, &old);
            serde_json::from_value(new).map_err(to_store)
        })
        .collect()
}

fn to_store(e: serde_json::Error) -> Error {
    Error::Store(StoreError::BadObject(e.to_string()))
}
