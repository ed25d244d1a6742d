//! CNI errors: a well-known code, a message and details, printed as the
//! spec's JSON error object.

use serde::Serialize;

/// The spec's well-known error codes.
pub mod code {
    /// Incompatible CNI version.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// Unsupported field in network configuration.
    pub const UNSUPPORTED_FIELD: u32 = 2;
    /// Container unknown or does not exist.
    pub const UNKNOWN_CONTAINER: u32 = 3;
    /// Invalid necessary environment variables.
    pub const INVALID_ENV: u32 = 4;
    /// I/O failure.
    pub const IO_FAILURE: u32 = 5;
    /// Failed to decode content.
    pub const DECODE: u32 = 6;
    /// Invalid network config.
    pub const INVALID_CONFIG: u32 = 7;
    /// Try again later.
    pub const TRY_AGAIN: u32 = 11;
    /// STATUS: the plugin is not available (cannot serve ADD).
    pub const NOT_AVAILABLE: u32 = 50;
    /// STATUS: limited connectivity.
    pub const LIMITED_CONNECTIVITY: u32 = 51;
    /// Tartan's own: no free address in any pool that applies.
    pub const POOL_EXHAUSTED: u32 = 100;
    /// Tartan's own: the kernel refused to wire the interface.
    pub const WIRING: u32 = 101;
    /// Tartan's own: the datastore refused or failed a call.
    pub const DATASTORE: u32 = 102;
    /// Tartan's own: CHECK found the interface not as ADD left it.
    pub const CHECK_FAILED: u32 = 103;
}

/// An error as a plugin reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{msg}{}", if details.is_empty() { String::new() } else { format!(": {details}") })]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        CniError {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The JSON error object, carrying `cni_version` (the config's, when
    /// it was read).
    pub fn to_json(&self, cni_version: &str) -> String {
        #[derive(Serialize)]
        struct Wire<'a> {
            #[serde(rename = "cniVersion")]
            cni_version: &'a str,
            code: u32,
            msg: &'a str,
            #[serde(skip_serializing_if = "str::is_empty")]
            details: &'a str,
        }
        serde_json::to_string(&Wire {
            cni_version,
            code: self.code,
            msg: &self.msg,
            details: &self.details,
        })
        .unwrap_or_else(|_| format!("{{\"code\":{},\"msg\":\"error\"}}", self.code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape() {
        let e =
            CniError::new(code::INVALID_ENV, "CNI_NETNS is not set").with_details("needed by ADD");
        let v: serde_json::Value = serde_json::from_str(&e.to_json("1.1.0")).unwrap();
        assert_eq!(v["cniVersion"], "1.1.0");
        assert_eq!(v["code"], 4);
        assert_eq!(v["msg"], "CNI_NETNS is not set");
        assert_eq!(v["details"], "needed by ADD");
        let bare: serde_json::Value =
            serde_json::from_str(&CniError::new(1, "x").to_json("1.0.0")).unwrap();
        assert!(bare.get("details").is_none());
    }
}
