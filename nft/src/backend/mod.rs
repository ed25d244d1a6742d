//! The ways a [`crate::Transaction`] reaches a ruleset: over netlink, through
//! the `nft` program, or into an in-memory fake.

pub mod fake;
#[cfg(feature = "kernel")]
pub mod netlink;
#[cfg(feature = "kernel")]
pub mod program;

use crate::{Error, Transaction};

/// Something a transaction can be committed to, whole or not at all.
pub trait Backend {
    fn commit(&mut self, tx: &Transaction) -> Result<(), Error>;
}
