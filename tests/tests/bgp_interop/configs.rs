//! Every option of the shared configuration model renders into a
//! configuration each implementation accepts (checked by the daemons' own
//! parsers; nothing is started).
use anyhow::Result;
use std::net::{IpAddr, Ipv4Addr};
use tartan_lab::peers::{BgpConfig, Bird, ExaBgp, Frr, Gobgp, Neighbor, Route};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn everything() -> BgpConfig {
    BgpConfig::new(Ipv4Addr::new(10, 0, 0, 1), 65000)
        .listen(ip("10.0.0.1"))
        .cluster_id(Ipv4Addr::new(1, 1, 1, 1))
        .neighbor(
            Neighbor::new(ip("10.0.0.2"), 65000)
                .rr_client()
                .password("s3cret")
                .graceful_restart(120)
                .next_hop_self()
                .local_address(ip("10.0.0.1"))
                .families(true, true),
        )
        .neighbor(
            Neighbor::new(ip("10.0.1.2"), 65001)
                .passive()
                .multihop(3)
                .local_address(ip("10.0.0.1")),
        )
        .neighbor(
            Neighbor::new(ip("fd00::2"), 65002)
                .local_address(ip("fd00::1"))
                .bfd(100, 200, 3),
        )
        .route(
            Route::new("192.0.2.0/24")
                .community(65000, 1)
                .community(65000, 2)
                .large_community(65000, 3, 4),
        )
        .route(Route::new("198.51.100.0/24"))
        .route(Route::new("2001:db8::/48").community(65000, 5))
}

/// One test per implementation: its own parser (`check_config`) accepts
/// `everything()`, and its rendering holds the given lines.
macro_rules! accepts_every_option {
    ($($test:ident: $peer:ty => [$($want:literal),+];)*) => {$(
        #[test]
        fn $test() -> Result<()> {
            let _one = tartan_tests::one_file_at_a_time(module_path!());
            let text = <$peer>::check_config(&everything())?;
            $(assert!(text.contains($want), "{text}");)+
            Ok(())
        }
    )*};
}

accepts_every_option! {
    bird_accepts_every_option: Bird => ["rr cluster id 1.1.1.1", "bfd on;"];
    frr_accepts_every_option: Frr => ["neighbor 10.0.0.2 route-reflector-client", "neighbor fd00::2 bfd profile tartan-2"];
    gobgp_accepts_every_option: Gobgp => ["route-reflector-client = true"];
    exabgp_accepts_every_option: ExaBgp => ["md5-password"];
}

#[test]
fn checkers_reject_bad_configurations() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let bad = |extra: &str| everything().extra(extra);
    assert!(Bird::check_config(&bad("protocol bgp x { bogus; }")).is_err());
    assert!(Frr::check_config(&bad("router bgp 65000\n neighbor 10.0.0.2 bogus-option")).is_err());
    assert!(Gobgp::check_config(&bad("[bogus\n")).is_err());
    assert!(ExaBgp::check_config(&bad("neighbor 10.9.9.9 { bogus 1; }")).is_err());
}
