//! The RIB of the BGP speaker: every peer's accepted paths (the Loc-RIB;
//! no separate Adj-RIB-In, route refresh replaces soft reconfiguration),
//! best-path selection per prefix, and per-peer pending output. Pure: no
//! I/O, no async. Work per change is proportional to the change.
//!
//! Layout:
//! - attribute sets are interned (`attrs`): a path is a peer index and an
//!   attribute id, 8 bytes;
//! - each family has a slab of prefix slots (`table`), 12 bytes for IPv4,
//!   holding the single path inline; prefixes with several paths keep them
//!   in a side vector;
//! - per peer and family, two bit sets over slot numbers (`peers`):
//!   `dirty` (output pending) and `adv` (the peer holds this prefix from
//!   us). Outgoing attributes are computed from the current best path when
//!   the writer drains (`output`), so a burst of changes to a prefix sends
//!   only its last state.

mod api;
mod api_output;
mod attrs;
mod bitset;
mod decision;
mod engine;
mod export;
mod output;
mod peers;
mod table;
mod types;
mod view;

#[cfg(test)]
mod tests;

pub use types::{
    BestView, Changes, ImportError, LOCAL, LocalConfig, NextHops, OutBatch, PathView, PeerConfig,
    PeerCounts, PeerId, RouteView,
};

use attrs::AttrTable;
use peers::Peers;
use std::net::{Ipv4Addr, Ipv6Addr};
use table::{Path, Table};

/// The routing table. See the module documentation.
#[derive(Debug)]
pub struct Rib {
    local: LocalConfig,
    attrs: AttrTable,
    peers: Peers,
    v4: Table<Ipv4Addr>,
    v6: Table<Ipv6Addr>,
    scratch: Vec<usize>,
    removed: Vec<Path>,
    /// RFC 8326 graceful shutdown: every route goes out with the
    /// GRACEFUL_SHUTDOWN community (and LOCAL_PREF 0 to internal peers).
    draining: bool,
}
