use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a control or metrics server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("cannot create directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} exists and is not a socket; refusing to remove it")]
    NotASocket { path: PathBuf },
    #[error("another process is serving on {path}")]
    InUse { path: PathBuf },
    #[error("cannot prepare control socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    BindTcp {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("server failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// The daemon could not answer a control query (its task is gone or busy
/// shutting down).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tartan-bgpd cannot answer: {0}")]
pub struct SourceUnavailable(pub String);
