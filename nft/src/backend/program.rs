//! The `nft` program as a backend: a transaction rendered as JSON and
//! handed to `nft -j -f -`, which applies it as one kernel transaction.
//! For the commands the netlink encoder does not write.

use super::Backend;
use crate::{Error, Transaction};

/// The `nft` program found on the PATH.
#[derive(Debug, Clone, Copy, Default)]
pub struct Program;

/// Hand `tx` to `nft` as one transaction; on refusal, what `nft` said.
pub fn run(tx: &Transaction) -> Result<(), Error> {
    nftables::helper::apply_ruleset_raw(
        &tx.to_json().to_string(),
        nftables::helper::DEFAULT_NFT,
        nftables::helper::DEFAULT_ARGS,
    )
    .map(|_| ())
    .map_err(|e| {
        Error::Refused(match e {
            nftables::helper::NftablesError::NftFailed { stderr, .. } => stderr,
            other => other.to_string(),
        })
    })
}

impl Backend for Program {
    fn commit(&mut self, tx: &Transaction) -> Result<(), Error> {
        run(tx)
    }
}
