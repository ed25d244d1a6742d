//! nftables as a typed library. Tartan builds its tables as values of
//! the [`model`] (the `nftables` crate's schema types, plus the verdict
//! maps that crate cannot declare), collects the changes of one
//! transaction in a [`Transaction`], and commits it through a backend:
//! [`backend::netlink`] encodes it as nf_tables netlink messages,
//! [`backend::program`] hands its JSON rendering to the `nft` program,
//! and [`backend::fake`] applies it to an in-memory ruleset for tests
//! that run without root. JSON is an output format of the program
//! backend only; nothing here reads its own JSON back.

pub mod backend;
pub mod model;
pub mod transaction;

pub use model::Command;
pub use transaction::Transaction;

/// Why a transaction was not committed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel, the `nft` program or the fake refused the transaction;
    /// nothing of it was applied.
    #[error("{0}")]
    Refused(String),
    /// The backend cannot express one of the commands.
    #[error("not supported by this backend: {0}")]
    Unsupported(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A JSON command that is not one of the model's.
    #[error("not an nftables command: {0}")]
    Json(String),
}
