//! The service tables `ip tartan-svc` and `ip6 tartan-svc` (see
//! [`crate::services`]): each written whole at the start, after a refused
//! change or after drift; otherwise only the part of each Service that
//! changed, in one transaction per table. The IPv6 table is written only
//! once the index has held an IPv6 Service, or the kernel has one from an
//! earlier felix: an IPv4-only cluster has no IPv6 table and pays nothing
//! for it. Once written it stays (empty when its last Service goes).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use tartan_nft::Transaction;
use tracing::{debug, warn};

use super::DataplaneError;
use super::conntrack::Conntrack;
use super::nft::{NftWriter, Table, Written, kernel_summary};
use crate::services::family::Fam;
use crate::services::index::{Indexed, ServiceIndex};
use crate::services::render::{self, SvcNft, TABLE, is_dynamic};
use crate::services::stale::StaleFlows;

impl<A: crate::services::Family> Table for SvcNft<A> {
    const FAMILY: &'static str = A::FAM.nft_name();
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

/// How one family's table stands in the kernel.
#[derive(Debug, Default)]
pub struct TableState {
    /// The kernel holds the index's table as of the last write.
    written: bool,
    /// The table is served (always for IPv4; for IPv6 once an IPv6
    /// Service was seen or the kernel had the table).
    pub active: bool,
    /// How the latest whole-table write went (for tests and logs).
    pub last_whole: Option<super::svc_whole::Whole>,
}

pub struct ServiceProxy {
    pub index: ServiceIndex,
    /// Opened at the first cleanup.
    conntrack: Option<Conntrack>,
    /// Entries deleted (`tartan_felix_conntrack_entries_deleted`).
    pub conntrack_deleted: Counter,
    pub writer: NftWriter,
    /// How each family's table stands.
    pub v4: TableState,
    pub v6: TableState,
    /// Whether the kernel was asked for an IPv6 table left by an earlier
    /// felix (at the first sync, again while asking fails).
    v6_probed: bool,
    /// Writes of this family's table fail without reaching the kernel
    /// (tests: a family whose table nft refuses).
    #[doc(hidden)]
    pub refuse: Option<Fam>,
    /// Per family (IPv4, IPv6): the error its last write failed with,
    /// while it fails (to log each distinct one once).
    failing: [Option<String>; 2],
}

/// What a sync came to, per family.
#[derive(Debug)]
pub struct Synced {
    pub v4: Result<Written, DataplaneError>,
    /// `None`: no IPv6 table is served.
    pub v6: Option<Result<Written, DataplaneError>>,
}

impl Synced {
    /// The first family's error, or both writes as one: the larger kind
    /// of write, the longer time.
    pub fn merged(self) -> Result<Written, DataplaneError> {
        let w4 = self.v4?;
        match self.v6 {
            None => Ok(w4),
            Some(w6) => Ok(merge(w4, w6?)),
        }
    }

    /// The writes that succeeded, as one.
    pub fn written(&self) -> Written {
        self.families()
            .into_iter()
            .filter_map(|(_, r)| r.as_ref().ok().copied())
            .fold(Written::Nothing, merge)
    }

    /// Each served family with its outcome.
    pub fn families(&self) -> Vec<(Fam, &Result<Written, DataplaneError>)> {
        let mut v = vec![(Fam::V4, &self.v4)];
        if let Some(w6) = &self.v6 {
            v.push((Fam::V6, w6));
        }
        v
    }
}

impl ServiceProxy {
    pub fn new(node: &str) -> ServiceProxy {
        ServiceProxy {
            index: ServiceIndex::new(node),
            conntrack: None,
            conntrack_deleted: Counter::default(),
            writer: NftWriter::default(),
            v4: TableState {
                active: true,
                ..TableState::default()
            },
            v6: TableState::default(),
            v6_probed: false,
            refuse: None,
            failing: [None, None],
        }
    }

    /// Write what changed, then delete the conntrack entries the change
    /// left pointing where traffic no longer goes (kube-proxy's order: the
    /// new rules first, so the next packet is dispatched by them). With
    /// `check`, first make sure the kept tables equal ones computed afresh
    /// and the kernel's equal the kept ones. As one result: the first
    /// family's error, or both writes merged ([`ServiceProxy::sync_families`]
    /// tells them apart).
    pub fn sync(&mut self, check: bool) -> Result<Written, DataplaneError> {
        self.sync_families(check).merged()
    }

    /// [`ServiceProxy::sync`], each family's outcome on its own. A
    /// family's stale conntrack flows are deleted only after its own
    /// table was written: while a write fails the kernel keeps the old
    /// rules, and the flows wait for the write that removes them.
    pub fn sync_families(&mut self, check: bool) -> Synced {
        let started = Instant::now();
        self.index.update();
        let w4 = self.sync_family::<Ipv4Addr>(check, started);
        if !self.v6_probed {
            match super::nft::table_known("ip6", TABLE) {
                Ok(present) => {
                    self.v6_probed = true;
                    self.v6.active |= present;
                }
                // Asked again at the next sync: an error is not "absent".
                Err(e) => debug!(error = %e, "the kernel not asked for an IPv6 service table"),
            }
        }
        self.v6.active |= !self.index.family::<Ipv6Addr>().is_empty();
        let w6 = self
            .v6
            .active
            .then(|| self.sync_family::<Ipv6Addr>(check, Instant::now()));
        // Only the flows of families whose write succeeded; the others'
        // stay in the index for the sync that writes their table.
        let flows = StaleFlows {
            v4: if w4.is_ok() {
                self.index.family_mut::<Ipv4Addr>().take_stale()
            } else {
                Vec::new()
            },
            v6: if matches!(w6, Some(Ok(_))) {
                self.index.family_mut::<Ipv6Addr>().take_stale()
            } else {
                Vec::new()
            },
        };
        self.clean_conntrack(flows);
        Synced { v4: w4, v6: w6 }
    }

    /// One family's part of a sync: its kept table checked against one
    /// computed afresh (with `check`; rebuilt and rewritten alone when it
    /// differs), then written.
    fn sync_family<A: Indexed>(
        &mut self,
        check: bool,
        started: Instant,
    ) -> Result<Written, DataplaneError> {
        let mut state = std::mem::take(self.state_mut::<A>());
        if check && !self.index.family_consistent::<A>() {
            warn!(
                family = A::FAM.nft_name(),
                "the kept service table differs from one computed afresh; rebuilding it"
            );
            self.index.rebuild_family::<A>();
            state.written = false;
        }
        let w = match self.refuse {
            Some(f) if f == A::FAM => {
                state.written = false;
                Err(DataplaneError::Refused {
                    what: format!("the {} service table", A::FAM.nft_name()),
                    detail: "refused for a test".into(),
                })
            }
            _ => self.write::<A>(&mut state, check, started),
        };
        *self.state_mut::<A>() = state;
        w
    }

    /// Family `fam`'s write failed with `e`: whether that is news (the
    /// first failure, or another error than the last one).
    pub fn note_failure(&mut self, fam: Fam, e: &DataplaneError) -> bool {
        let e = e.to_string();
        let last = &mut self.failing[fam as usize];
        let new = last.as_deref() != Some(e.as_str());
        *last = Some(e);
        new
    }

    /// Family `fam`'s write succeeded: whether it had been failing.
    pub fn note_success(&mut self, fam: Fam) -> bool {
        self.failing[fam as usize].take().is_some()
    }

    fn state_mut<A: Indexed>(&mut self) -> &mut TableState {
        match A::FAM {
            Fam::V4 => &mut self.v4,
            Fam::V6 => &mut self.v6,
        }
    }

    /// Delete the entries of `flows`; a family whose cleanup failed keeps
    /// its flows for the next sync.
    fn clean_conntrack(&mut self, flows: StaleFlows) {
        if flows.is_empty() {
            return;
        }
        let n = flows.len();
        let ct = match self.conntrack.take() {
            Some(c) => Ok(c),
            None => Conntrack::open(),
        };
        let mut c = match ct {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, flows = n, "stale conntrack entries not deleted; retrying at the next sync");
                self.keep_stale(flows);
                return;
            }
        };
        let cleaned = c.clean_each(&flows);
        self.conntrack_deleted.inc_by(cleaned.done.deleted as u64);
        debug!(
            flows = n,
            listed = cleaned.done.listed,
            deleted = cleaned.done.deleted,
            vanished = cleaned.done.vanished,
            took_ms = cleaned.done.took.as_secs_f64() * 1e3,
            "stale conntrack entries deleted"
        );
        match cleaned.failed {
            None => self.conntrack = Some(c),
            Some((e, left)) => {
                // A socket that failed is opened afresh next time.
                warn!(error = %e, flows = left.len(), "stale conntrack entries not deleted; retrying at the next sync");
                self.keep_stale(left);
            }
        }
    }

    fn keep_stale(&mut self, flows: StaleFlows) {
        if flows.len() < 100_000 {
            self.index.keep_stale(flows);
        }
    }

    /// Write what changed in the table of family `A` (`state`: how it
    /// stands in the kernel).
    fn write<A: Indexed>(
        &mut self,
        state: &mut TableState,
        check: bool,
        started: Instant,
    ) -> Result<Written, DataplaneError> {
        let family = A::FAM.nft_name();
        let index = self.index.family_mut::<A>();
        if check {
            // Chains, rules and which sets exist: listing 100,000 elements
            // at every check would cost seconds.
            let mut want = render::summary(index.table());
            want.iter_mut()
                .filter(|(k, _)| k.starts_with('@'))
                .for_each(|(_, v)| *v = 0);
            if state.written
                && kernel_summary(family, TABLE, &is_dynamic, true).as_ref() != Some(&want)
            {
                warn!(
                    family,
                    "the service table differs from what felix wrote; rebuilding it"
                );
                state.written = false;
            }
        }
        if state.written && index.changed_services() > WHOLE_AFTER {
            // A patch is built whole before it is sent, each element as
            // nftables JSON: for thousands of Services at once (a store
            // being filled while felix runs) that is far more memory than
            // the whole table's elements streamed over netlink.
            debug!(
                family,
                services = index.changed_services(),
                "many Services changed at once; writing the whole table"
            );
            state.written = false;
        }
        if state.written {
            let Some(batch) = index.take_patch() else {
                return Ok(Written::Nothing);
            };
            match self.writer.write(&batch, family, TABLE) {
                Ok(_) => return Ok(Written::Difference(started.elapsed())),
                Err(e) => {
                    warn!(family, error = %e, "nft refused a service change; rebuilding the whole table");
                    state.written = false;
                }
            }
        }
        let index = self.index.family_mut::<A>();
        state.last_whole = Some(super::svc_whole::write(&mut self.writer, index.table())?);
        index.written_whole();
        state.written = true;
        Ok(Written::Full(started.elapsed()))
    }
}

/// What the two tables' writes came to, as one: the larger kind of
/// write, the longer time.
fn merge(a: Written, b: Written) -> Written {
    let took = |w: &Written| match w {
        Written::Nothing => Duration::ZERO,
        Written::Difference(t) | Written::Full(t) => *t,
    };
    let t = took(&a).max(took(&b));
    match (a, b) {
        (Written::Nothing, Written::Nothing) => Written::Nothing,
        (Written::Full(_), _) | (_, Written::Full(_)) => Written::Full(t),
        _ => Written::Difference(t),
    }
}

/// With Services off (kube-proxy implements them), remove the service
/// tables (IPv4 and IPv6) an earlier felix left: their NAT would still
/// steer Service traffic, in front of kube-proxy's rules. Logged either
/// way it goes.
pub fn remove_left_table() {
    for family in ["ip", "ip6"] {
        remove_left(family);
    }
}

fn remove_left(family: &str) {
    if !super::nft::table_present(family, TABLE) {
        return;
    }
    match std::process::Command::new("nft")
        .args(["delete", "table", family, TABLE])
        .output()
    {
        Ok(o) if o.status.success() => {
            tracing::info!(
                family,
                table = TABLE,
                "Services are off: removed the service table an earlier felix wrote"
            )
        }
        Ok(o) => {
            warn!(family, table = TABLE, error = %String::from_utf8_lossy(&o.stderr).trim(), "Services are off but the service table left by an earlier felix could not be removed")
        }
        Err(e) => {
            warn!(family, table = TABLE, error = %e, "Services are off but nft could not be run to remove the service table")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A family failing the same way at every pass is news once; another
    /// error is news again, and a success after failures is reported.
    #[test]
    fn a_persistent_failure_is_news_once_per_distinct_error() {
        let mut p = ServiceProxy::new("n1");
        let e = |d: &str| DataplaneError::Refused {
            what: "ip6 tartan-svc".into(),
            detail: d.into(),
        };
        assert!(p.note_failure(Fam::V6, &e("no nat")));
        assert!(!p.note_failure(Fam::V6, &e("no nat")));
        assert!(p.note_failure(Fam::V4, &e("no nat")), "each family apart");
        assert!(p.note_failure(Fam::V6, &e("other")));
        assert!(p.note_success(Fam::V4));
        assert!(p.note_success(Fam::V6));
        assert!(!p.note_success(Fam::V6));
        assert!(p.note_failure(Fam::V6, &e("other")), "failing anew");
    }

    #[test]
    fn merged_is_the_first_error_and_written_the_successes() {
        let e = || DataplaneError::Refused {
            what: "t".into(),
            detail: "d".into(),
        };
        let t = Duration::from_millis(3);
        let s = Synced {
            v4: Ok(Written::Difference(t)),
            v6: Some(Err(e())),
        };
        assert_eq!(s.written(), Written::Difference(t));
        assert!(s.merged().is_err(), "an IPv6 failure is not hidden");
        let s = Synced {
            v4: Ok(Written::Nothing),
            v6: Some(Ok(Written::Full(t))),
        };
        assert_eq!(s.merged().unwrap(), Written::Full(t));
    }
}
