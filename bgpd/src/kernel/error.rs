//! Errors of the kernel route sync.
use ipnet::IpNet;
use std::io;

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("cannot open a netlink route socket: {0}")]
    Connect(#[source] io::Error),

    /// The kernel refused a request (a netlink NACK).
    #[error("kernel refused to {op} {prefix}: {} (errno {errno})", io::Error::from_raw_os_error(*.errno))]
    Refused {
        op: &'static str,
        prefix: IpNet,
        errno: i32,
    },

    /// A route of another protocol holds the key a replace would overwrite.
    #[error(
        "{prefix}: a route of protocol {protocol} already uses this prefix and metric; not overwriting it"
    )]
    Foreign { prefix: IpNet, protocol: u8 },

    #[error("{prefix}: cannot install: {reason}")]
    Invalid { prefix: IpNet, reason: &'static str },

    #[error("listing routes failed: {} (errno {errno})", io::Error::from_raw_os_error(*.errno))]
    Dump { errno: i32 },

    /// The netlink connection itself failed (closed socket, garbled reply).
    #[error("netlink {op} failed: {detail}")]
    Transport { op: &'static str, detail: String },
}

impl KernelError {
    /// The errno the kernel answered with, if it answered with one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            KernelError::Refused { errno, .. } | KernelError::Dump { errno } => Some(*errno),
            KernelError::Connect(e) => e.raw_os_error(),
            _ => None,
        }
    }

    /// Maps an rtnetlink failure of `op` on `prefix`.
    pub(crate) fn from_netlink(
        op: &'static str,
        prefix: IpNet,
        e: rtnetlink::Error,
    ) -> KernelError {
        match e {
            rtnetlink::Error::NetlinkError(m) if m.raw_code() != 0 => KernelError::Refused {
                op,
                prefix,
                errno: m.raw_code().abs(),
            },
            other => KernelError::Transport {
                op,
                detail: other.to_string(),
            },
        }
    }
}
