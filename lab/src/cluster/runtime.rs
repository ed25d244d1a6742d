//! The runtime a lab command makes its datastore calls on.
use anyhow::Result;

/// A current-thread runtime for the datastore calls of one command.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}
