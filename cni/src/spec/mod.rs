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
mod fuzz {
    use proptest::prelude::*;

    proptest! {
        /// Whatever a runtime sends, reading it never panics.
        #[test]
        fn any_stdin_and_environment(
            stdin in proptest::collection::vec(any::<u8>(), 0..400),
            json in "\\{(\"[a-zA-Z]{1,10}\": ?(\"[ -~]{0,12}\"|[0-9]{1,6}|null|\\[\\]|\\{\\}),? ?){0,6}\\}",
            vars in proptest::collection::vec(("CNI_[A-Z]{2,11}", "[ -~]{0,40}"), 0..8),
        ) {
            let _ = super::NetConf::parse(&stdin);
            let _ = super::NetConf::parse(json.as_bytes());
            let _ = super::Invocation::from_env(vars);
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&json) {
                let _ = super::CniResult::from_prev(&v);
            }
        }
    }
}
