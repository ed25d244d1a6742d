//! Two speakers on a veth pair, as the BGP interop tests set them up: the
//! configurations of side a (announcing) and side b (learning), in iBGP
//! over IPv4 or in eBGP over IPv6, both sides started as one
//! implementation and waited for, and how long to wait for a peer.

use std::time::Duration;

use anyhow::Result;
use tartan_lab::Pair;
use tartan_lab::netns::Netns;
use tartan_lab::peers::{BgpConfig, Bird, Frr, Gobgp, Neighbor, Route};

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

/// A peer implementation the interop tests start and wait for alike.
pub trait Speaker: Sized {
    /// Started in `ns` with `config`.
    fn start(ns: &Netns, config: BgpConfig) -> Result<Self>;
    /// Waits until its session is Established.
    fn wait_established(&self, timeout: Duration) -> Result<()>;
}

macro_rules! speaker {
    ($($peer:ty),*) => {$(
        impl Speaker for $peer {
            fn start(ns: &Netns, config: BgpConfig) -> Result<Self> {
                <$peer>::start(ns, config)
            }
            fn wait_established(&self, timeout: Duration) -> Result<()> {
                <$peer>::wait_established(self, timeout)
            }
        }
    )*};
}

speaker!(Bird, Frr, Gobgp);

/// `ibgp_v4(p, route)` run: a then b started as `S`, then both sessions
/// waited for (a's first).
pub fn ibgp_v4_established<S: Speaker>(p: &Pair, route: Route) -> Result<(S, S)> {
    let (a, b) = ibgp_v4(p, route);
    let (a, b) = (S::start(&p.a, a)?, S::start(&p.b, b)?);
    a.wait_established(PEER_WAIT)?;
    b.wait_established(PEER_WAIT)?;
    Ok((a, b))
}

/// `ebgp_v6(p, prefix)` run: a then b started as `S`, then b's session
/// waited for.
pub fn ebgp_v6_established<S: Speaker>(p: &Pair, prefix: &str) -> Result<(S, S)> {
    let (a, b) = ebgp_v6(p, prefix);
    let (a, b) = (S::start(&p.a, a)?, S::start(&p.b, b)?);
    b.wait_established(PEER_WAIT)?;
    Ok((a, b))
}
