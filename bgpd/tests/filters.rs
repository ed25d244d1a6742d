//! Import and export filters of a standalone tartan-bgpd (`[[filter]]` in
//! its TOML file) against a BIRD peer: every match operator, prefix lengths,
//! communities added and removed and AS-path prepends as BIRD sees them;
//! a filter edited while the session runs changes BIRD's view within 2 s
//! (and what tartan-bgpd keeps from BIRD, through route refresh) without a
//! session reset. Run as root.
mod support;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use anyhow::Result;
use support::{T, start_tartan};
use tartan_api::bgp::SessionState;
use tartan_lab::Pair;
use tartan_lab::netns::wait_for;
use tartan_lab::peers::{
    BgpConfig, Bird, BirdRoute, Neighbor, Route, TartanOptions, render_tartan,
};

const OURS: [&str; 5] = [
    "10.88.0.0/16",
    "10.88.1.0/24",
    "10.88.2.0/26",
    "10.89.0.0/24",
    "172.16.0.0/12",
];
const BIRDS: [&str; 3] = ["198.51.100.0/24", "198.51.100.128/25", "203.0.113.0/24"];

/// The export rules, with the first rule and the number of prepends given.
fn export_filter(first: &str, prepends: usize) -> String {
    let prepend = vec!["64512"; prepends].join(", ");
    format!(
        r#"
[[filter]]
name = "exp"
{first}
[[filter.rule]]
action = "accept"
cidr = "10.88.0.0/16"
match = "in"
prefix_length = {{ min = 26, max = 26 }}
add_communities = ["64512:100", "64512:5:5"]
remove_communities = ["64512:9"]
as_path_prepend = [{prepend}]
[[filter.rule]]
action = "reject"
cidr = "10.0.0.0/8"
match = "not-in"
[[filter.rule]]
action = "accept"
cidr = "10.88.0.0/16"
match = "not-equal"
add_communities = ["64512:200"]
"#
    )
}

const REJECT_10_88_1: &str = r#"[[filter.rule]]
action = "reject"
cidr = "10.88.1.0/24"
match = "equal""#;

fn import_filter(extra: &str) -> String {
    format!(
        r#"
[[filter]]
name = "imp"
{extra}
[[filter.rule]]
action = "reject"
cidr = "198.51.100.0/24"
match = "in"
prefix_length = {{ min = 25 }}
[[filter.rule]]
action = "accept"
cidr = "203.0.113.0/24"
match = "equal"
add_communities = ["64512:300"]
"#
    )
}

/// BIRD in AS 65000 on the pair's side b, peering with side a (AS 64512)
/// and announcing [`BIRDS`].
fn start_bird(p: &Pair) -> Result<Bird> {
    let mut cfg =
        BgpConfig::new(p.b_v4(), 65000).neighbor(Neighbor::new(IpAddr::from(p.a_v4()), 64512));
    for r in BIRDS {
        cfg = cfg.route(Route::new(r));
    }
    Bird::start(&p.b, cfg)
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn bird_view(bird: &Bird, prefix: &str) -> Option<BirdRoute> {
    bird.routes_for(prefix).ok()?.into_iter().next()
}

#[test]
fn filters_from_the_file_shape_what_bird_sees_and_change_without_a_reset() -> Result<()> {
    let p = Pair::new("bflt")?;
    let bird_addr = IpAddr::from(p.b_v4());
    let mut cfg = BgpConfig::new(p.a_v4(), 64512).neighbor(Neighbor::new(bird_addr, 65000));
    for r in OURS {
        let route = Route::new(r);
        cfg = cfg.route(if r == "10.88.2.0/26" {
            route.community(64512, 9).community(64512, 10)
        } else {
            route
        });
    }
    let opts = TartanOptions::default();
    let tartan = start_tartan(&p.a, &cfg, &opts)?;
    let bird = start_bird(&p)?;
    // The file with filters on the neighbor, as a reload would give it.
    let base = render_tartan(&cfg, &opts);
    let neighbor = format!("address = \"{bird_addr}\"\nasn = 65000\n");
    assert!(base.contains(&neighbor), "{base}");
    let file = |export: &str, import: &str| {
        base.replace(
            &neighbor,
            &format!("{neighbor}import_filters = [\"imp\"]\nexport_filters = [\"exp\"]\n"),
        ) + export
            + import
    };
    tartan.reload(&file(&export_filter(REJECT_10_88_1, 2), &import_filter("")))?;
    tartan.wait_established(bird_addr, T)?;
    bird.wait_established(T)?;

    // Export: Equal rejects 10.88.1.0/24; In with lengths 26-26 changes
    // 10.88.2.0/26; NotIn rejects 172.16.0.0/12; NotEqual tags 10.89.0.0/24
    // but not 10.88.0.0/16 itself (which no rule matches: accepted as is).
    let expect_initial = || -> Option<()> {
        let tagged = bird_view(&bird, "10.88.2.0/26")?;
        let plain = bird_view(&bird, "10.88.0.0/16")?;
        let other = bird_view(&bird, "10.89.0.0/24")?;
        (bird_view(&bird, "10.88.1.0/24").is_none()
            && bird_view(&bird, "172.16.0.0/12").is_none()
            && tagged.as_path() == vec![64512, 64512, 64512]
            && sorted(tagged.communities()) == vec![(64512, 10), (64512, 100)]
            && tagged.large_communities() == vec![(64512, 5, 5)]
            && plain.communities().is_empty()
            && plain.as_path() == vec![64512]
            && other.communities() == vec![(64512, 200)])
        .then_some(())
    };
    wait_for("BIRD's view under the first filters", T, expect_initial).map_err(|e| {
        anyhow::anyhow!(
            "{e}\n{}\n{}",
            bird.birdc(&["show", "route", "all"]).unwrap_or_default(),
            tartan.log()
        )
    })?;
    // Import: the /25 inside 198.51.100.0/24 is refused, the /24 itself
    // kept; 203.0.113.0/24 gets a community.
    let ours = |prefix: &str| -> Option<Vec<String>> {
        tartan
            .routes("ipv4-unicast")
            .ok()?
            .into_iter()
            .find(|r| r.prefix.to_string() == prefix)
            .map(|r| r.paths[0].communities.clone())
    };
    wait_for("the imported routes", T, || {
        (ours("198.51.100.0/24").is_some()
            && ours("198.51.100.128/25").is_none()
            && ours("203.0.113.0/24") == Some(vec!["64512:300".into()]))
        .then_some(())
    })
    .map_err(|e| anyhow::anyhow!("{e}\n{:?}\n{}", tartan.routes("ipv4-unicast"), tartan.log()))?;

    // Edit both filters while the session runs: 10.88.1.0/24 is let out,
    // one prepend instead of two, and 198.51.100.0/24 refused on import.
    // A connection collision while the session came up may already have
    // sent one Cease (6/7); only what the edit sends counts.
    let before = tartan.peer(bird_addr)?;
    let up_before = before.uptime_seconds.unwrap_or(0);
    let started = Instant::now();
    tartan.reload(&file(
        &export_filter("", 1),
        &import_filter(
            "[[filter.rule]]\naction = \"reject\"\ncidr = \"198.51.100.0/24\"\nmatch = \"equal\"",
        ),
    ))?;
    wait_for(
        "BIRD's view under the edited filters",
        Duration::from_secs(2),
        || {
            let tagged = bird_view(&bird, "10.88.2.0/26")?;
            (bird_view(&bird, "10.88.1.0/24").is_some() && tagged.as_path() == vec![64512, 64512])
                .then_some(())
        },
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}\n{}\n{}",
            bird.birdc(&["show", "route", "all"]).unwrap_or_default(),
            tartan.log()
        )
    })?;
    wait_for("the re-imported routes", Duration::from_secs(2), || {
        ours("198.51.100.0/24").is_none().then_some(())
    })
    .map_err(|e| anyhow::anyhow!("{e}\n{}", tartan.log()))?;
    let took = started.elapsed();
    // No reset: the session stayed up all along, on both sides.
    let peer = tartan.peer(bird_addr)?;
    assert_eq!(peer.state, SessionState::Established);
    assert!(
        peer.uptime_seconds.unwrap_or(0) >= up_before,
        "the session was reset: uptime {:?} after {up_before}",
        peer.uptime_seconds
    );
    assert_eq!(
        peer.messages.sent.notification, before.messages.sent.notification,
        "the edit sent a NOTIFICATION: {peer:?}"
    );
    assert!(
        peer.messages.sent.route_refresh > before.messages.sent.route_refresh,
        "new import rules ask the peer again: {peer:?}"
    );
    assert_eq!(bird.neighbor_state(IpAddr::from(p.a_v4()))?, "Established");
    eprintln!("filters edited: BIRD's view and the import changed in {took:?}");
    Ok(())
}

/// RFC 8212 against BIRD (which exchanges everything): with no filters
/// named, tartan-bgpd takes none of BIRD's routes and sends it none of its
/// own; naming a filter (here one without rules, which accepts all) in
/// each direction lets the routes through without a session reset.
#[test]
fn an_ebgp_neighbor_without_filters_exchanges_nothing_until_filters_are_named() -> Result<()> {
    let p = Pair::new("b8212")?;
    let bird_addr = IpAddr::from(p.b_v4());
    let mut cfg = BgpConfig::new(p.a_v4(), 64512).neighbor(Neighbor::new(bird_addr, 65000));
    for r in OURS {
        cfg = cfg.route(Route::new(r));
    }
    let opts = TartanOptions {
        ebgp_requires_policy: true,
        ..TartanOptions::default()
    };
    let tartan = start_tartan(&p.a, &cfg, &opts)?;
    let bird = start_bird(&p)?;
    let strict = render_tartan(&cfg, &opts);
    assert!(strict.contains("ebgp_requires_policy = true\n"), "{strict}");
    tartan.wait_established(bird_addr, T)?;
    bird.wait_established(T)?;
    wait_for("BIRD's three routes received and refused", T, || {
        let peer = tartan.peer(bird_addr).ok()?;
        (peer.prefixes.received == BIRDS.len() as u64).then_some(peer)
    })
    .map_err(|e| anyhow::anyhow!("{e}\n{}", tartan.log()))?;
    // BIRD has sent everything it will; give ours the same time to arrive.
    std::thread::sleep(Duration::from_secs(1));
    let peer = tartan.peer(bird_addr)?;
    assert_eq!(peer.prefixes.accepted, 0, "{peer:?}");
    assert_eq!(peer.prefixes.advertised, 0, "{peer:?}");
    assert!(
        tartan
            .routes("ipv4-unicast")?
            .iter()
            .all(|r| !BIRDS.contains(&r.prefix.to_string().as_str())),
        "{:?}",
        tartan.routes("ipv4-unicast")
    );
    for r in OURS {
        assert!(bird_view(&bird, r).is_none(), "BIRD has {r}");
    }
    assert!(
        tartan.log().contains("RFC 8212"),
        "the log says why: {}",
        tartan.log()
    );

    // Filters named in both directions: everything flows, no reset.
    let up_before = tartan.peer(bird_addr)?.uptime_seconds.unwrap_or(0);
    let neighbor = format!("address = \"{bird_addr}\"\nasn = 65000\n");
    let open = strict.replace(
        &neighbor,
        &format!("{neighbor}import_filters = [\"all\"]\nexport_filters = [\"all\"]\n"),
    ) + "\n[[filter]]\nname = \"all\"\n";
    tartan.reload(&open)?;
    wait_for("both tables exchanged", T, || {
        let peer = tartan.peer(bird_addr).ok()?;
        (peer.prefixes.accepted == BIRDS.len() as u64
            && OURS.iter().all(|r| bird_view(&bird, r).is_some()))
        .then_some(())
    })
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}\n{}\n{}",
            bird.birdc(&["show", "route", "all"]).unwrap_or_default(),
            tartan.log()
        )
    })?;
    let peer = tartan.peer(bird_addr)?;
    assert_eq!(peer.state, SessionState::Established);
    assert!(peer.uptime_seconds.unwrap_or(0) >= up_before, "{peer:?}");
    Ok(())
}
