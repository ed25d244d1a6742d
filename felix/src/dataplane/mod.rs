//! Drivers: read the kernel, compare with the desired state, change only
//! the difference.

pub mod conntrack;
pub mod events;
#[cfg(test)]
mod fake_tests;
pub mod nat;
pub mod nft;
pub mod plan;
pub mod policy;
pub mod routes;
pub mod services;
pub mod svc_whole;
pub mod tunnels;

#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    #[error("netlink: {0}")]
    Netlink(String),
    #[error("{what}: {detail}")]
    Refused { what: String, detail: String },
}
