//! TCP for BGP: listening and dialling sockets with the options BGP needs
//! (RFC 2385 TCP MD5, RFC 5082 TTL security, eBGP TTL), set on the socket
//! before the handshake so that they cover the SYN too.
mod sockopt;
mod subnet;
mod tcp;

pub use sockopt::{set_md5, set_min_ttl, set_ttl};
pub use subnet::shared_subnet;
pub use tcp::{TtlPolicy, bind_listener, dial};
