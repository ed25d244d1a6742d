//! Freeing what Services held: after a Service is deleted, and after a
//! write that dropped something (a NodePort Service turned ClusterIP
//! gives back its ports). Freed only once the Service write is done, so
//! that a failed write leaves its old holdings claimed (a leak a repair
//! frees, never one member handed out twice).

use k8s_openapi::api::core::v1::Service;
use tartan_api::store::Datastore;

use super::Error;
use super::alloc::Ranges;
use super::alloc::held::Held;
use super::records;

/// Members to free, per range (service, NodePorts, IPv6 service), as
/// offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Release(pub Vec<Vec<u64>>);

impl Release {
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Vec::is_empty)
    }

    /// Everything `services` hold.
    pub fn of(ranges: &Ranges, services: &[Service]) -> Release {
        let mut held = Held::empty(ranges);
        for s in services {
            held.add(s);
        }
        let none = Held::empty(ranges);
        let (had, empty) = (held.bits(), none.bits());
        Release(had.iter().zip(&empty).map(|(h, e)| h.minus(e)).collect())
    }
}

/// Frees `release` in the records.
pub async fn release(
    store: &dyn Datastore,
    ranges: &Ranges,
    release: &Release,
) -> Result<(), Error> {
    if release.is_empty() {
        return Ok(());
    }
    for _ in 0..8 {
        let stored = records::read(store, ranges).await?;
        let Some(bits): Option<Vec<_>> = stored.iter().map(|s| s.bits.clone()).collect() else {
            // No usable record: the next write repairs from the Services.
            return Ok(());
        };
        let mut bits = bits;
        for (b, offsets) in bits.iter_mut().zip(&release.0) {
            for i in offsets {
                b.put(*i, false);
            }
        }
        let refs: Vec<&_> = bits.iter().collect();
        if records::write(store, ranges, &stored, &refs).await? {
            return Ok(());
        }
    }
    Err(Error::RecordsKeptChanging)
}
