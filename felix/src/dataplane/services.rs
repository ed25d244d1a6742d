//! The service table `ip tartan-svc` (see [`crate::services`]), written
//! by the shared nftables driver.

use std::collections::BTreeMap;

use serde_json::Value;

use super::nft::{NftDriver, Table};
use crate::services::render::{self, SvcNft};

impl Table for SvcNft {
    const FAMILY: &'static str = "ip";
    const NAME: &'static str = render::TABLE;

    fn full(&self) -> Value {
        render::full(self)
    }

    fn diff(old: &Self, new: &Self) -> Option<Value> {
        render::diff(old, new)
    }

    fn summary(&self) -> BTreeMap<String, usize> {
        render::summary(self)
    }
}

pub type ServiceDriver = NftDriver<SvcNft>;
