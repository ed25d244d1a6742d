use thiserror::Error;

#[derive(Debug, Error)]
pub enum WireError {
    #[error("network namespace {path}: {source}")]
    Netns {
        path: String,
        source: std::io::Error,
    },
    /// CNI_NETNS names a file that is not a pod's network namespace.
    #[error("{path} is {why}")]
    NotNetns { path: String, why: String },
    #[error("interface {ifname} already exists in {netns}")]
    AlreadyExists { ifname: String, netns: String },
    #[error("{what}: {detail}")]
    Kernel { what: String, detail: String },
    /// CHECK found something not as ADD left it.
    #[error("{0}")]
    Mismatch(String),
}

impl WireError {
    /// The namespace does not exist (the container is gone or unknown).
    pub fn is_missing_netns(&self) -> bool {
        matches!(self, WireError::Netns { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    pub(crate) fn kernel(what: impl Into<String>, e: impl std::fmt::Display) -> Self {
        WireError::Kernel {
            what: what.into(),
            detail: e.to_string(),
        }
    }
}

/// The errno of a netlink error, if it is one.
pub(crate) fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(m) => Some(m.raw_code().abs()),
        _ => None,
    }
}
