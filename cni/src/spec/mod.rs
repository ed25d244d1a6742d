//! The CNI protocol as the 1.1.0 specification writes it: the command and
//! its environment, the network configuration on stdin, and the result or
//! error on stdout. Pure: nothing here reads the process environment or
//! touches a file.

pub mod config;
pub mod env;
pub mod error;
pub mod result;
pub mod version;

pub use config::NetConf;
pub use env::{Command, Invocation};
pub use error::CniError;
pub use result::CniResult;

/// The spec's rule for network names and container IDs: letters, digits,
/// `_`, `.` and `-`, starting with a letter or digit.
pub(crate) fn is_cni_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod fuzz;
