//! Two speakers on a veth pair, as the BGP interop tests set them up: the
//! configurations of side a (announcing) and side b (learning), in iBGP
//! over IPv4 or in eBGP over IPv6, and how long to wait for a peer.

use std::time::Duration;

use tartan_lab::Pair;
use tartan_lab::peers::{BgpConfig, Neighbor, Route};

/// How long a peer may take to establish a session or learn a route.
pub const PEER_WAIT: Duration = Duration::from_secs(30);

/// iBGP in AS 65000 over the pair's IPv4 addresses; a announces `route`.
pub fn ibgp_v4(p: &Pair, route: Route) -> (BgpConfig, BgpConfig) {
    (
        BgpConfig::new(p.a_v4(), 65000)
            .neighbor(Neighbor::new(p.b_v4().into(), 65000))
            .route(route),
        BgpConfig::new(p.b_v4(), 65000).neighbor(Neighbor::new(p.a_v4().into(), 65000)),
    )
}

/// eBGP between AS 65001 (a) and AS 65002 (b) over the pair's IPv6
/// addresses; a announces `prefix`.
pub fn ebgp_v6(p: &Pair, prefix: &str) -> (BgpConfig, BgpConfig) {
    (
        BgpConfig::new(p.a_v4(), 65001)
            .neighbor(Neighbor::new(p.b_v6().into(), 65002))
            .route(Route::new(prefix)),
        BgpConfig::new(p.b_v4(), 65002).neighbor(Neighbor::new(p.a_v6().into(), 65001)),
    )
}
