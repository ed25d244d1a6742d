//! The Service ranges' allocation records in the datastore: one
//! RangeAllocation per range (`service-cluster-ips`, `service-node-ports`,
//! and on a dual-stack cluster `service-cluster-ips-ipv6`), each a bitmap
//! of the range, read by name and
//! written with compare-and-swap on its resourceVersion, so that two
//! writers never hand out one member and a write reads no Service but
//! its own.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tartan_api::Kind;
use tartan_api::resources::rangealloc::RANGE_MAX_MEMBERS;
use tartan_api::resources::{RangeAllocation, RangeAllocationSpec};
use tartan_api::store::typed::{from_dynamic, to_dynamic};
use tartan_api::store::{Datastore, ObjectKey, StoreError};

use super::Error;
use super::alloc::Ranges;
use super::alloc::bitmap::Bitmap;
use super::alloc::held::Held;

/// The records' names: service range, NodePorts, IPv6 service range (the
/// last only on a dual-stack cluster).
pub const NAMES: [&str; 3] = [
    "service-cluster-ips",
    "service-node-ports",
    "service-cluster-ips-ipv6",
];

/// One record as read.
#[derive(Clone, Debug)]
pub struct Stored {
    /// The bitmap; `None` when the record is absent, unreadable or of
    /// another range (then only a repair, from the Services, rebuilds it).
    pub bits: Option<Bitmap>,
    /// Its resourceVersion; `None` when absent.
    version: Option<String>,
}

/// The ranges as the records name them.
fn range_texts(r: &Ranges) -> Vec<String> {
    let mut t = vec![
        r.service.to_string(),
        format!("{}-{}", r.node_ports.start(), r.node_ports.end()),
    ];
    t.extend(r.service6.map(|n| n.to_string()));
    t
}

/// The lengths of the ranges, refused when a bitmap would be too large.
pub fn lengths(r: &Ranges) -> Result<Vec<u64>, Error> {
    let l = Held::lengths(r);
    if let Some(big) = l.iter().position(|n| *n > RANGE_MAX_MEMBERS) {
        return Err(Error::RangeTooLarge(range_texts(r)[big].clone()));
    }
    Ok(l)
}

/// Record `i` (of [`NAMES`]).
async fn read_one(store: &dyn Datastore, r: &Ranges, i: usize) -> Result<Stored, Error> {
    let lens = lengths(r)?;
    let key = ObjectKey::new(Kind::RangeAllocation, None, NAMES[i]);
    let o = match store.get(&key).await {
        Ok(o) => o,
        Err(StoreError::NotFound(_)) => {
            return Ok(Stored {
                bits: None,
                version: None,
            });
        }
        Err(e) => return Err(e.into()),
    };
    let text = &range_texts(r)[i];
    Ok(Stored {
        version: o.metadata.resource_version.clone(),
        bits: from_dynamic::<RangeAllocation>(o)
            .ok()
            .filter(|ra| &ra.spec.range == text)
            .and_then(|ra| Bitmap::from_hex(lens[i], &ra.spec.data)),
    })
}

/// The records, in the order of [`NAMES`].
pub async fn read(store: &dyn Datastore, r: &Ranges) -> Result<Vec<Stored>, Error> {
    let mut out = vec![];
    for i in 0..lengths(r)?.len() {
        out.push(read_one(store, r, i).await?);
    }
    Ok(out)
}

/// Record `i` written as `bits` over `stored`; `false` on a conflict.
async fn write_one(
    store: &dyn Datastore,
    r: &Ranges,
    i: usize,
    stored: &Stored,
    bits: &Bitmap,
) -> Result<bool, Error> {
    let rec = RangeAllocation {
        metadata: ObjectMeta {
            name: Some(NAMES[i].to_string()),
            resource_version: stored.version.clone(),
            ..Default::default()
        },
        spec: RangeAllocationSpec {
            range: range_texts(r)[i].clone(),
            data: bits.to_hex(),
        },
    };
    let obj = to_dynamic(&rec)?;
    let done = match &stored.version {
        None => store.create(obj).await,
        Some(_) => store.update(obj).await,
    };
    match done {
        Ok(_) => Ok(true),
        Err(
            StoreError::AlreadyExists(_) | StoreError::Conflict { .. } | StoreError::NotFound(_),
        ) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Writes the records whose bitmap differs from `stored`; `false` when
/// another writer changed one first (read again and retry). Each record
/// is one compare-and-swap, so after a `false` those written before stay
/// written: a caller that only claimed undoes them ([`write_claims`]).
pub async fn write(
    store: &dyn Datastore,
    r: &Ranges,
    stored: &[Stored],
    new: &[&Bitmap],
) -> Result<bool, Error> {
    Ok(write_upto(store, r, stored, new).await?.is_none())
}

/// [`write`]; on a conflict, the index of the record that conflicted.
async fn write_upto(
    store: &dyn Datastore,
    r: &Ranges,
    stored: &[Stored],
    new: &[&Bitmap],
) -> Result<Option<usize>, Error> {
    for i in 0..stored.len().min(new.len()) {
        if stored[i].bits.as_ref() == Some(new[i]) {
            continue;
        }
        if !write_one(store, r, i, &stored[i], new[i]).await? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// [`write`] of `new`, which only adds members to `stored` (every
/// record readable); on a conflict the members added to the records
/// written before are freed again, so a retry leaks nothing.
pub async fn write_claims(
    store: &dyn Datastore,
    r: &Ranges,
    stored: &[Stored],
    new: &[&Bitmap],
) -> Result<bool, Error> {
    let Some(failed) = write_upto(store, r, stored, new).await? else {
        return Ok(true);
    };
    for i in 0..failed {
        let Some(old) = &stored[i].bits else { continue };
        let added = new[i].minus(old);
        if added.is_empty() {
            continue;
        }
        // Nobody else can take what these bits claim, so clearing them
        // in whatever the record holds now is right.
        for _ in 0..8 {
            let now = read_one(store, r, i).await?;
            let Some(mut bits) = now.bits.clone() else {
                break;
            };
            for a in &added {
                bits.put(*a, false);
            }
            if write_one(store, r, i, &now, &bits).await? {
                break;
            }
        }
    }
    Ok(false)
}
