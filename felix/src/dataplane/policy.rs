//! The policy table `inet tartan` (see `tartan_policy::compile`), written
//! by the shared nftables driver.

use std::collections::BTreeMap;

use tartan_nft::Transaction;
use tartan_policy::compile::{Ruleset, render};

use super::DataplaneError;
use super::nft::{NftDriver, Table, run, table_known};

impl Table for Ruleset {
    const FAMILY: &'static str = "inet";
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

pub type PolicyDriver = NftDriver<Ruleset>;

/// The table felix writes at its start when the kernel has none (a node
/// just booted): the table of no endpoint, whose `from_endpoint` and
/// `to_endpoint` maps are empty, so everything forwarded from or to an
/// interface that looks like a pod's (the full table's own match:
/// `tar…`, not `tartan…`) is dropped until felix has read the datastore
/// and written the real table. That first full write replaces it in one
/// transaction (`add table; delete table; add table; …`), so nothing of
/// it is left behind and no packet sees the node without a table.
pub fn closed() -> Transaction {
    render::full(&Ruleset::default())
}

/// At felix's start, before it waits for the datastore: when the kernel
/// has no policy table, write [`closed`]. A table already there (felix
/// restarted) is left as it is: it holds what the last felix wrote, which
/// stands until this one writes anew. Whether it wrote the table. When
/// `nft` cannot say whether the table is there, an error: writing the
/// closed table over a live one would cut every pod off until the first
/// full write, and going on without knowing could leave a node that has
/// no table open.
pub fn close_pods_if_no_table() -> Result<bool, DataplaneError> {
    if table_known(Ruleset::FAMILY, Ruleset::NAME)? {
        return Ok(false);
    }
    run(&closed(), Ruleset::FAMILY, Ruleset::NAME)?;
    Ok(true)
}
