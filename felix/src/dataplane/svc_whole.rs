//! The whole service table written without a second copy of it: `nft`
//! writes the chains, rules and declarations (a few kB of JSON), and the
//! elements (200,000 at 10,000 Services) are encoded straight from the
//! kept table into one netlink transaction. Neither felix nor `nft` holds
//! the table as JSON or as nft's objects.
//!
//! - No table in the kernel: `render::skeleton` makes it, then the
//!   elements fill it. Nothing was served before, so the moment between
//!   the two writes breaks nothing.
//! - A table in the kernel (felix restarted, a refused change, drift):
//!   `render::in_place` makes the chains and rules the new table needs
//!   without touching the elements, so the old elements go on serving;
//!   then one netlink transaction empties every element map and fills it
//!   anew (the kernel switches at its commit); then the chains and sets
//!   the new table lacks, unreferenced by now, are removed. A table that
//!   cannot be updated in place (a set of another type, from another
//!   version of felix) is replaced whole through `nft` in one
//!   transaction, as before.

use std::collections::BTreeMap;

use tartan_nft::backend::netlink::message::{ChainRef, Op, SetRef};
use tracing::{info, warn};

use super::DataplaneError;
use super::nft::{NftWriter, kernel_summary};
use crate::services::render::{self, SvcNft, TABLE};
use crate::services::{Fam, Family, elements};

/// How a whole table went to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whole {
    /// No table was there: the skeleton, then the elements.
    Fresh,
    /// Over the kernel's table: in place, the elements in one netlink
    /// transaction.
    InPlace,
    /// One `nft` transaction with every element (netlink off, or a
    /// table that could not be updated in place).
    Replaced,
}

/// Write `t` as the whole table `ip tartan-svc` (`ip6 tartan-svc` for
/// an IPv6 one).
pub fn write<A: Family>(w: &mut NftWriter, t: &SvcNft<A>) -> Result<Whole, DataplaneError> {
    let family = A::FAM.nft_name();
    if !w.netlink_enabled() {
        w.write(&render::full(t), family, TABLE)?;
        return Ok(Whole::Replaced);
    }
    let fresh = w.table_absent(family, TABLE);
    if fresh {
        w.write_streamed(
            &render::skeleton(t),
            |s| elements::write(t, s),
            family,
            TABLE,
            true,
        )?;
        return Ok(Whole::Fresh);
    }
    let Some(kernel) = kernel_summary(family, TABLE, &|_| false, true) else {
        warn!(
            family,
            "cannot list the service table; replacing it whole through nft"
        );
        w.write(&render::full(t), family, TABLE)?;
        return Ok(Whole::Replaced);
    };
    let has = |set: &str| kernel.contains_key(&format!("@{set}"));
    let streamed = w.write_streamed(
        &render::in_place(t, &has),
        |s| elements::write(t, s),
        family,
        TABLE,
        false,
    );
    if let Err(e) = streamed {
        warn!(family, error = %e, "the service table could not be updated in place; replacing it whole through nft");
        w.write(&render::full(t), family, TABLE)?;
        return Ok(Whole::Replaced);
    }
    remove_extras(w, t, &kernel);
    Ok(Whole::InPlace)
}

/// Remove the chains and sets of the kernel's table (`kernel`, listed
/// before the write: what the write made, `t` has) that `t` lacks
/// (picking chains no Service uses any more, affinity sets beyond the
/// largest count, objects of an older felix): after the elements were
/// replaced nothing refers to them. On failure the periodic check finds
/// the difference and writes the table again.
fn remove_extras<A: Family>(w: &mut NftWriter, t: &SvcNft<A>, kernel: &BTreeMap<String, usize>) {
    let ops = extras(A::FAM, kernel, &wanted(t));
    if ops.is_empty() {
        return;
    }
    match w.send_ops(&ops, A::FAM.nft_name(), TABLE) {
        Ok(()) => info!(
            removed = ops.len(),
            "removed chains and sets the service table no longer needs"
        ),
        Err(e) => {
            warn!(error = %e, "could not remove chains and sets the service table no longer needs")
        }
    }
}

/// The names the table `t` has: its summary's, and its affinity sets.
fn wanted<A: Family>(t: &SvcNft<A>) -> BTreeMap<String, usize> {
    let mut want = render::summary(t);
    for i in 0..t.affinity_slots {
        want.insert(format!("@aff_{i}"), 0);
    }
    want
}

/// Netlink operations removing what `kernel` (a terse summary: chains,
/// and sets as `@name`) has and `want` lacks: every such chain flushed,
/// then the sets deleted, then the chains. Pure.
fn extras(f: Fam, kernel: &BTreeMap<String, usize>, want: &BTreeMap<String, usize>) -> Vec<Op> {
    let gone: Vec<&String> = kernel.keys().filter(|k| !want.contains_key(*k)).collect();
    let chain = |c: &str| ChainRef {
        family: f.nfproto(),
        table: TABLE.to_string(),
        chain: c.to_string(),
    };
    let chains: Vec<&str> = gone
        .iter()
        .filter(|k| !k.starts_with('@'))
        .map(|k| k.as_str())
        .collect();
    let mut ops: Vec<Op> = chains.iter().map(|c| Op::FlushChain(chain(c))).collect();
    ops.extend(gone.iter().filter_map(|k| k.strip_prefix('@')).map(|s| {
        Op::DeleteSet(SetRef {
            family: f.nfproto(),
            table: TABLE.to_string(),
            name: s.to_string(),
        })
    }));
    ops.extend(chains.iter().map(|c| Op::DeleteChain(chain(c))));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extras_are_flushed_then_sets_then_chains_deleted_and_the_rest_kept() {
        let kernel: BTreeMap<String, usize> = [
            ("prerouting", 4),
            ("fe_40", 2),
            ("@frontends", 0),
            ("@aff_3", 0),
            ("@old", 0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let want: BTreeMap<String, usize> = [("prerouting", 4), ("@frontends", 0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let ops = extras(Fam::V4, &kernel, &want);
        let shape: Vec<String> = ops
            .iter()
            .map(|o| match o {
                Op::FlushChain(c) => format!("flush {}", c.chain),
                Op::DeleteSet(s) => format!("delete @{}", s.name),
                Op::DeleteChain(c) => format!("delete {}", c.chain),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "flush fe_40",
                "delete @aff_3",
                "delete @old",
                "delete fe_40"
            ]
        );
        assert!(extras(Fam::V4, &want, &want).is_empty());
    }
}
