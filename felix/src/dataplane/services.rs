//! The service table `ip tartan-svc` (see [`crate::services`]): written
//! whole at the start, after a refused change or after drift; otherwise
//! only the part of each Service that changed, in one transaction.

use std::collections::BTreeMap;
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use tartan_nft::Transaction;
use tracing::{debug, warn};

use super::DataplaneError;
use super::conntrack::Conntrack;
use super::nft::{NftWriter, Table, Written, kernel_summary};
use crate::services::index::ServiceIndex;
use crate::services::render::{self, SvcNft, TABLE, is_dynamic};

impl Table for SvcNft {
    const FAMILY: &'static str = "ip";
    const NAME: &'static str = render::TABLE;

    fn full(&self) -> Transaction {
        render::full(self)
    }

    fn diff(old: &Self, new: &Self) -> Option<Transaction> {
        render::diff(old, new)
    }

    fn summary(&self) -> BTreeMap<String, usize> {
        render::summary(self)
    }
}

/// Past this many changed Services, the whole table is written rather
/// than a patch.
const WHOLE_AFTER: usize = 500;

pub struct ServiceProxy {
    pub index: ServiceIndex,
    /// Opened at the first cleanup.
    conntrack: Option<Conntrack>,
    /// Entries deleted (`tartan_felix_conntrack_entries_deleted`).
    pub conntrack_deleted: Counter,
    /// The kernel holds the index's table as of the last write.
    written: bool,
    pub writer: NftWriter,
    /// How the latest whole-table write went (for tests and logs).
    pub last_whole: Option<super::svc_whole::Whole>,
}

impl ServiceProxy {
    pub fn new(node: &str) -> ServiceProxy {
        ServiceProxy {
            index: ServiceIndex::new(node),
            conntrack: None,
            conntrack_deleted: Counter::default(),
            written: false,
            writer: NftWriter::default(),
            last_whole: None,
        }
    }

    /// Write what changed, then delete the conntrack entries the change
    /// left pointing where traffic no longer goes (kube-proxy's order: the
    /// new rules first, so the next packet is dispatched by them). With
    /// `check`, first make sure the kept table equals one computed afresh
    /// and the kernel's equals the kept one.
    pub fn sync(&mut self, check: bool) -> Result<Written, DataplaneError> {
        let written = self.write(check)?;
        self.clean_conntrack();
        Ok(written)
    }

    /// Delete the entries of the flows changes left stale; on failure keep
    /// them for the next sync.
    fn clean_conntrack(&mut self) {
        let flows = self.index.take_stale();
        if flows.is_empty() {
            return;
        }
        let ct = match self.conntrack.take() {
            Some(c) => Ok(c),
            None => Conntrack::open(),
        };
        let result = ct.and_then(|mut c| {
            let r = c.clean(&flows);
            self.conntrack = Some(c);
            r
        });
        match result {
            Ok(c) => {
                self.conntrack_deleted.inc_by(c.deleted as u64);
                debug!(
                    flows = flows.len(),
                    listed = c.listed,
                    deleted = c.deleted,
                    vanished = c.vanished,
                    took_ms = c.took.as_secs_f64() * 1e3,
                    "stale conntrack entries deleted"
                );
            }
            Err(e) => {
                // A socket that failed is opened afresh next time.
                self.conntrack = None;
                warn!(error = %e, flows = flows.len(), "stale conntrack entries not deleted; retrying at the next sync");
                if flows.len() < 100_000 {
                    self.index.keep_stale(flows);
                }
            }
        }
    }

    fn write(&mut self, check: bool) -> Result<Written, DataplaneError> {
        let started = Instant::now();
        self.index.update();
        if check {
            if !self.index.consistent() {
                warn!("the kept service table differs from one computed afresh; rebuilding it");
                self.index.rebuild();
                self.written = false;
            }
            // Chains, rules and which sets exist: listing 100,000 elements
            // at every check would cost seconds.
            let mut want = render::summary(self.index.table());
            want.iter_mut()
                .filter(|(k, _)| k.starts_with('@'))
                .for_each(|(_, v)| *v = 0);
            if self.written
                && kernel_summary("ip", TABLE, &is_dynamic, true).as_ref() != Some(&want)
            {
                warn!("the service table differs from what felix wrote; rebuilding it");
                self.written = false;
            }
        }
        if self.written && self.index.changed_services() > WHOLE_AFTER {
            // A patch is built whole before it is sent, each element as
            // nftables JSON: for thousands of Services at once (a store
            // being filled while felix runs) that is far more memory than
            // the whole table's elements streamed over netlink.
            debug!(
                services = self.index.changed_services(),
                "many Services changed at once; writing the whole table"
            );
            self.written = false;
        }
        if self.written {
            let Some(batch) = self.index.take_patch() else {
                return Ok(Written::Nothing);
            };
            match self.writer.write(&batch, "ip", TABLE) {
                Ok(_) => return Ok(Written::Difference(started.elapsed())),
                Err(e) => {
                    warn!(error = %e, "nft refused a service change; rebuilding the whole table");
                    self.written = false;
                }
            }
        }
        self.last_whole = Some(super::svc_whole::write(
            &mut self.writer,
            self.index.table(),
        )?);
        self.index.written_whole();
        self.written = true;
        Ok(Written::Full(started.elapsed()))
    }
}

/// With Services off (kube-proxy implements them), remove a service table
/// an earlier felix left: its NAT would still steer Service traffic, in
/// front of kube-proxy's rules. Logged either way it goes.
pub fn remove_left_table() {
    if !super::nft::table_present("ip", TABLE) {
        return;
    }
    match std::process::Command::new("nft")
        .args(["delete", "table", "ip", TABLE])
        .output()
    {
        Ok(o) if o.status.success() => {
            tracing::info!(
                table = TABLE,
                "Services are off: removed the service table an earlier felix wrote"
            )
        }
        Ok(o) => {
            warn!(table = TABLE, error = %String::from_utf8_lossy(&o.stderr).trim(), "Services are off but the service table left by an earlier felix could not be removed")
        }
        Err(e) => {
            warn!(table = TABLE, error = %e, "Services are off but nft could not be run to remove the service table")
        }
    }
}
