use super::*;

const GOOD: &str = r#"
router_id = "10.0.0.1"
asn = 65000
cluster_id = "1.1.1.1"

[listen]
addresses = ["10.0.0.1"]
port = 1179

[kernel]
install = false

[[neighbor]]
address = "10.0.0.2"
asn = 65001
password = "s3cret"
max_prefix = 100
families = ["ipv4-unicast", "ipv6-unicast"]

[[neighbor]]
address = "fd00::2"
asn = 65000
route_reflector_client = true
passive = true
hold_time = 9

[[announce]]
prefix = "10.1.0.0/24"
communities = ["65000:100", "no-export"]
large_communities = ["65000:1:2"]
"#;

#[test]
fn parses_a_full_file_with_defaults() {
    let c = parse("t.toml", GOOD).unwrap();
    assert_eq!(c.asn, 65000);
    assert_eq!(c.cluster_id, "1.1.1.1".parse::<Ipv4Addr>().unwrap());
    assert_eq!(c.listen, vec!["10.0.0.1:1179".parse().unwrap()]);
    assert!(!c.kernel_install);
    assert_eq!(c.graceful_restart.restart_time, 120);
    assert_eq!(c.neighbors.len(), 2);
    let ebgp = &c.neighbors[0];
    assert_eq!(ebgp.multihop, 1);
    assert_eq!(ebgp.hold_time, 90);
    assert!(ebgp.graceful_restart);
    assert_eq!(ebgp.password.as_deref(), Some("s3cret"));
    assert_eq!(
        ebgp.families,
        vec![Family::Ipv4Unicast, Family::Ipv6Unicast]
    );
    let ibgp = &c.neighbors[1];
    assert_eq!(ibgp.families, vec![Family::Ipv6Unicast]);
    assert!(ibgp.route_reflector_client && ibgp.passive);
    assert_eq!(ibgp.hold_time, 9);
    assert_eq!(c.announce[0].communities, vec![0xFDE8_0064, 0xFFFF_FF01]);
    assert_eq!(c.announce[0].large_communities, vec![[65000, 1, 2]]);
}

#[test]
fn minimal_file_listens_on_179_everywhere() {
    let c = parse("t", "router_id = \"1.2.3.4\"\nasn = 4200000000\n").unwrap();
    assert_eq!(c.listen, vec!["[::]:179".parse().unwrap()]);
    assert!(c.kernel_install);
    assert_eq!(c.cluster_id, c.router_id);
}

fn error_of(text: &str) -> ConfigError {
    parse("bgpd.toml", text).unwrap_err()
}

#[test]
fn errors_name_the_key_and_the_line() {
    let cases: &[(&str, usize, &str)] = &[
        ("router_id = \"1.2.3.4\"\nasn = 1\nbogus = 1\n", 3, "bogus"),
        ("router_id = \"1.2.3.4\"\nasn = \"x\"\n", 2, "asn"),
        ("router_id = \"1.2.3\"\nasn = 1\n", 1, "router_id"),
        ("router_id = \"1.2.3.4\"\nasn = 23456\n", 2, "AS_TRANS"),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\nhold_time = 2\n",
            6,
            "hold_time",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 3\n",
            7,
            "twice",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\nfamilies = [\"ipv4-multicast\"]\n",
            6,
            "ipv4-multicast",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\npasive = true\n",
            6,
            "pasive",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\nroute_reflector_client = true\n",
            4,
            "iBGP",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[announce]]\nprefix = \"10.0.0.1/24\"\n",
            4,
            "host bits",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[announce]]\nprefix = \"10.0.0.0/24\"\ncommunities = [\"1:99999\"]\n",
            5,
            "99999",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[announce]]\nprefix = \"10.0.0.0/24\"\nnext_hop = \"fd00::1\"\n",
            4,
            "other address family",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[graceful_restart]\nrestart_time = 5000\n",
            4,
            "12-bit",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\nnext_hop = \"myself\"\n",
            6,
            "\"auto\", \"self\", \"keep\"",
        ),
        (
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\nnext_hop = \"keep\"\nnext_hop_self = true\n",
            7,
            "not both",
        ),
        ("router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]\n", 3, ""),
    ];
    for (text, line, needle) in cases {
        let e = error_of(text);
        assert_eq!(e.line, *line, "wrong line for {text:?}: {e}");
        assert!(
            e.to_string().contains(needle),
            "{e} should mention {needle:?}"
        );
        assert!(e.to_string().starts_with("bgpd.toml:"), "{e}");
    }
}

#[test]
fn next_hop_modes() {
    let mode = |line: &str| {
        let text = format!(
            "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\n{line}\n"
        );
        parse("t", &text).unwrap().neighbors[0].next_hop
    };
    assert_eq!(mode(""), NextHopMode::Auto);
    assert_eq!(mode("next_hop = \"auto\""), NextHopMode::Auto);
    assert_eq!(mode("next_hop = \"self\""), NextHopMode::SelfAddress);
    assert_eq!(mode("next_hop = \"keep\""), NextHopMode::Keep);
    assert_eq!(mode("next_hop_self = true"), NextHopMode::SelfAddress);
    assert_eq!(mode("next_hop_self = false"), NextHopMode::Auto);
}

#[test]
fn max_restart_time_is_read_and_bounded() {
    let text = "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\nmax_restart_time = 30\n";
    assert_eq!(
        parse("t", text).unwrap().neighbors[0].max_restart_time,
        Some(30)
    );
    let e = error_of(&text.replace("30", "5000"));
    assert_eq!(e.line, 6);
    assert!(e.to_string().contains("4095"), "{e}");
}

#[test]
fn description_change_keeps_the_session() {
    let c = parse("t", GOOD).unwrap();
    let mut n = c.neighbors[0].clone();
    n.description = Some("renamed".into());
    assert!(c.neighbors[0].session_settings_equal(&n));
    n.hold_time = 30;
    assert!(!c.neighbors[0].session_settings_equal(&n));
}

const FILTERS: &str = r#"
router_id = "1.2.3.4"
asn = 64512

[[filter]]
name = "pods-only"
[[filter.rule]]
action = "accept"
cidr = "10.88.0.0/16"
match = "in"
prefix_length = { max = 26 }
add_communities = ["64512:1", "64512:7:9"]
as_path_prepend = [64512]
[[filter.rule]]
action = "reject"

[[filter]]
name = "no-default"
[[filter.rule]]
action = "reject"
cidr = "0.0.0.0/0"
match = "equal"
[[filter.rule]]
action = "reject"
source = "remote-peers"
prefix_length = { min = 120 }

[[neighbor]]
address = "10.0.0.2"
asn = 65001
import_filters = ["no-default"]
export_filters = ["no-default", "pods-only"]
"#;

#[test]
fn filters_are_read_in_the_order_named() {
    use crate::filter::{MatchOp, Verdict};
    let c = parse("t", FILTERS).unwrap();
    let f = &c.neighbors[0].filters;
    // Import: the default route and (both families) /120 and longer.
    assert_eq!(f.import.v4.len(), 2);
    assert_eq!(f.import.v6.len(), 1);
    assert_eq!(
        f.import.v4[0].network,
        Some(("0.0.0.0/0".parse().unwrap(), MatchOp::Equal))
    );
    assert_eq!(f.import.v6[0].lengths, Some((120, 128)));
    assert!(f.import.v6[0].remote_only);
    // Export: no-default's rules, then pods-only's.
    assert_eq!(f.export.v4.len(), 4);
    let r = &f.export.v4[2];
    assert_eq!(
        r.lengths,
        Some((16, 26)),
        "min defaults to the cidr's length"
    );
    assert_eq!(r.add_communities, vec![(64512 << 16) | 1]);
    assert_eq!(r.add_large_communities, vec![[64512, 7, 9]]);
    assert_eq!(r.prepend, vec![64512]);
    let v = |p: &str| f.export.verdict(&p.parse().unwrap(), false);
    assert_eq!(v("10.88.0.64/26"), Verdict::Accept(Some(2)));
    assert_eq!(v("10.88.0.64/27"), Verdict::Reject);
    assert_eq!(v("0.0.0.0/0"), Verdict::Reject);
    assert_eq!(v("192.0.2.0/24"), Verdict::Reject);
}

#[test]
fn as_path_prepend_refuses_as_0_and_as_trans() {
    // RFC 7607: AS 0 is never originated; AS_TRANS (RFC 6793) is no real AS.
    for (asn, why) in [("0", "0 is not an AS number"), ("23456", "AS_TRANS")] {
        let text = FILTERS.replacen(
            "as_path_prepend = [64512]",
            &format!("as_path_prepend = [64512, {asn}]"),
            1,
        );
        let e = error_of(&text).to_string();
        assert!(e.contains("as_path_prepend"), "{e}");
        assert!(e.contains(why), "{e}");
        let line = FILTERS
            .lines()
            .position(|l| l.starts_with("as_path_prepend"))
            .unwrap()
            + 1;
        assert!(
            e.contains(&format!("bgpd.toml:{line}:")),
            "line {line}: {e}"
        );
    }
}

#[test]
fn filter_mistakes_name_the_line() {
    let with = |from: &str, to: &str| FILTERS.replacen(from, to, 1);
    let cases: Vec<(String, &str)> = vec![
        (with("match = \"in\"", "match = \"inside\""), "inside"),
        (with("action = \"accept\"", "action = \"allow\""), "allow"),
        (
            with("cidr = \"10.88.0.0/16\"", "cidr = \"10.88.0.1/16\""),
            "host bits",
        ),
        (
            with(
                "prefix_length = { max = 26 }",
                "prefix_length = { max = 33 }",
            ),
            "0-32",
        ),
        (
            with(
                "prefix_length = { max = 26 }",
                "prefix_length = { min = 8 }",
            ),
            "shorter",
        ),
        (
            with("source = \"remote-peers\"", "source = \"peers\""),
            "remote-peers",
        ),
        (
            with(
                "import_filters = [\"no-default\"]",
                "import_filters = [\"nope\"]",
            ),
            "no filter named \"nope\"",
        ),
        (
            with(
                "import_filters = [\"no-default\"]",
                "import_filters = [\"pods-only\"]",
            ),
            "only export filters",
        ),
        (
            with("name = \"no-default\"", "name = \"pods-only\""),
            "defined twice",
        ),
        (
            with(
                "cidr = \"0.0.0.0/0\"\nmatch = \"equal\"",
                "cidr = \"0.0.0.0/0\"",
            ),
            "needs match",
        ),
        (
            with(
                "add_communities = [\"64512:1\"",
                "add_communities = [\"64512:99999\"",
            ),
            "99999",
        ),
    ];
    for (text, needle) in cases {
        let e = error_of(&text);
        assert!(
            e.to_string().contains(needle),
            "{e} should mention {needle:?}"
        );
        assert!(e.line > 1, "{e}");
    }
    // Changing communities needs an accept rule.
    let bad = with(
        "action = \"reject\"\n\n[[filter]]",
        "action = \"reject\"\nadd_communities = [\"1:1\"]\n\n[[filter]]",
    );
    assert!(error_of(&bad).to_string().contains("only an accept rule"));
}

#[test]
fn a_filter_change_keeps_the_session() {
    let a = parse("t", FILTERS).unwrap();
    let b = parse("t", &FILTERS.replace("max = 26", "max = 27")).unwrap();
    assert_ne!(a.neighbors[0], b.neighbors[0]);
    assert!(a.neighbors[0].session_settings_equal(&b.neighbors[0]));
}

#[test]
fn bfd_is_off_by_default_and_read_per_neighbor() {
    let c = parse("t.toml", GOOD).unwrap();
    assert!(c.neighbors.iter().all(|n| n.bfd.is_none()));
    let text = r#"
router_id = "10.0.0.1"
asn = 65000

[[neighbor]]
address = "10.0.0.2"
asn = 65001
bfd = { min_rx = "50ms", min_tx = "100ms", multiplier = 5 }

[[neighbor]]
address = "10.0.0.3"
asn = 65001
bfd = {}
"#;
    let c = parse("t.toml", text).unwrap();
    let b = c.neighbors[0].bfd.expect("bfd set");
    assert_eq!(b.required_min_rx, Duration::from_millis(50));
    assert_eq!(b.desired_min_tx, Duration::from_millis(100));
    assert_eq!(b.detect_mult, 5);
    let d = c.neighbors[1].bfd.expect("defaults");
    assert_eq!(
        (d.required_min_rx, d.desired_min_tx, d.detect_mult),
        (Duration::from_millis(300), Duration::from_millis(300), 3)
    );
}

#[test]
fn bad_bfd_settings_are_errors_with_their_line() {
    let base = "router_id = \"10.0.0.1\"\nasn = 65000\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 65001\n";
    for (bfd, why) in [
        ("bfd = { min_rx = \"1ms\" }", "allowed 10ms to 60s"),
        ("bfd = { min_tx = \"soon\" }", "is not a duration"),
        ("bfd = { multiplier = 0 }", "multiplier 0"),
    ] {
        let e = error_of(&format!("{base}{bfd}\n"));
        assert_eq!(e.line, 6, "{e}");
        assert!(e.message.contains(why), "{e}");
    }
    let e = error_of(&format!("{base}bfd = {{ interval = \"1s\" }}\n"));
    assert!(e.message.contains("interval"), "{e}");
}

#[test]
fn new_bfd_timers_keep_the_session_turning_bfd_on_or_off_does_not() {
    let text = "router_id = \"1.2.3.4\"\nasn = 1\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 2\n";
    let off = parse("t", text).unwrap();
    let on = parse("t", &format!("{text}bfd = {{}}\n")).unwrap();
    let faster = parse("t", &format!("{text}bfd = {{ min_rx = \"50ms\" }}\n")).unwrap();
    let (off, on, faster) = (&off.neighbors[0], &on.neighbors[0], &faster.neighbors[0]);
    assert_ne!(on, faster);
    assert!(on.session_settings_equal(faster), "timers: a Poll sequence");
    assert!(!off.session_settings_equal(on), "BFD turned on");
    assert!(!on.session_settings_equal(off), "BFD turned off");
}

/// The verdicts of a neighbor's import and export rules on an IPv4 and an
/// IPv6 prefix, from a peer and of our own: true where every one accepts.
fn accepts_all(rules: &crate::filter::RuleList) -> bool {
    use crate::filter::Verdict;
    ["10.1.0.0/24", "0.0.0.0/0", "2001:db8::/48"]
        .iter()
        .flat_map(|p| [(p, true), (p, false)])
        .all(|(p, remote)| rules.verdict(&p.parse().unwrap(), remote) != Verdict::Reject)
}

fn rejects_all(rules: &crate::filter::RuleList) -> bool {
    use crate::filter::Verdict;
    ["10.1.0.0/24", "0.0.0.0/0", "2001:db8::/48"]
        .iter()
        .flat_map(|p| [(p, true), (p, false)])
        .all(|(p, remote)| rules.verdict(&p.parse().unwrap(), remote) == Verdict::Reject)
}

#[test]
fn an_ebgp_neighbor_without_filters_exchanges_no_routes_as_rfc_8212_asks() {
    // GOOD: 10.0.0.2 is eBGP with no filters, fd00::2 iBGP with none.
    let c = parse("t", GOOD).unwrap();
    let ebgp = &c.neighbors[0].filters;
    assert!(rejects_all(&ebgp.import), "{:?}", ebgp.import);
    assert!(rejects_all(&ebgp.export), "{:?}", ebgp.export);
    let ibgp = &c.neighbors[1].filters;
    assert!(accepts_all(&ibgp.import) && accepts_all(&ibgp.export));
    // Turned off: the eBGP neighbor exchanges everything again.
    let off = GOOD.replacen(
        "asn = 65000\n",
        "asn = 65000\nebgp_requires_policy = false\n",
        1,
    );
    let c = parse("t", &off).unwrap();
    let ebgp = &c.neighbors[0].filters;
    assert!(accepts_all(&ebgp.import) && accepts_all(&ebgp.export));
}

#[test]
fn rfc_8212_looks_at_each_direction_apart() {
    // FILTERS: 10.0.0.2 (eBGP) names both; one direction at a time here.
    let import_only = FILTERS.replace("export_filters = [\"no-default\", \"pods-only\"]\n", "");
    let c = parse("t", &import_only).unwrap();
    let f = &c.neighbors[0].filters;
    assert!(rejects_all(&f.export), "no export filters: nothing is sent");
    let v = |p: &str| f.import.verdict(&p.parse().unwrap(), true);
    assert_eq!(v("10.1.0.0/24"), crate::filter::Verdict::Accept(None));
    assert_eq!(v("0.0.0.0/0"), crate::filter::Verdict::Reject);
    // A filter without rules is a policy too: it accepts every route.
    let open = format!(
        "{}\n[[filter]]\nname = \"everything\"\n",
        import_only.replace(
            "import_filters = [\"no-default\"]",
            "import_filters = [\"no-default\"]\nexport_filters = [\"everything\"]"
        )
    );
    let c = parse("t", &open).unwrap();
    assert!(accepts_all(&c.neighbors[0].filters.export));
}

#[test]
fn the_selection_deferral_is_shorter_than_the_stale_routes_time() {
    let c = parse("t", GOOD).unwrap();
    assert_eq!(
        c.graceful_restart.stale_routes_time,
        Duration::from_secs(300)
    );
    assert_eq!(
        c.graceful_restart.selection_deferral,
        Duration::from_secs(150),
        "by default half of it"
    );
    let with = |gr: &str| {
        GOOD.replacen(
            "[kernel]",
            &format!("[graceful_restart]\n{gr}\n[kernel]"),
            1,
        )
    };
    let c = parse(
        "t",
        &with("stale_routes_time = 100\nselection_deferral_time = 30"),
    )
    .unwrap();
    assert_eq!(
        c.graceful_restart.selection_deferral,
        Duration::from_secs(30)
    );
    let e = error_of(&with(
        "stale_routes_time = 100\nselection_deferral_time = 100",
    ));
    assert!(
        e.message
            .contains("selection_deferral_time = 100 must be shorter than stale_routes_time = 100"),
        "{e}"
    );
}
