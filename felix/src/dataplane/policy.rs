//! The policy table `inet tartan` (see `tartan_policy::compile`), written
//! by the shared nftables driver.

use std::collections::BTreeMap;

use tartan_nft::Transaction;
use tartan_policy::compile::{Ruleset, render};

use super::nft::{NftDriver, Table};

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
