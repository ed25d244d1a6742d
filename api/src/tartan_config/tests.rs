//! The ConfigMap's keys: defaults, every value a key takes, every problem
//! reported at once against its key, and the pods' MTU.

use std::collections::BTreeMap;

use super::*;
use crate::resources::ippool::EncapMode;

fn data(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn keys(e: &ConfigError) -> Vec<&str> {
    e.problems.iter().map(|(k, _)| k.as_str()).collect()
}

#[test]
fn an_empty_config_map_means_the_documented_defaults() {
    let c = TartanConfig::parse(&BTreeMap::new()).unwrap();
    assert_eq!(c.ipv4_pool, Some("10.244.0.0/16".parse().unwrap()));
    assert_eq!(c.ipv6_pool, None);
    assert_eq!(c.encapsulation, PoolEncapsulation::VxlanCrossSubnet);
    assert!(c.nat_outgoing && c.services);
    assert_eq!(c.mtu, Mtu::Auto);
    assert_eq!(c, TartanConfig::default());
    let pools = c.default_pools();
    assert_eq!(pools.len(), 1);
    assert_eq!(pools[0].metadata.name.as_deref(), Some("default-ipv4"));
    let s = &pools[0].spec;
    assert_eq!(s.cidr, "10.244.0.0/16");
    assert_eq!(
        (s.ipip_mode, s.vxlan_mode),
        (EncapMode::Never, EncapMode::CrossSubnet)
    );
    assert!(s.nat_outgoing && !s.disabled);
    assert_eq!(s.block_size, None);
}

#[test]
fn dual_stack_makes_two_pools_and_the_ipv6_one_is_native() {
    let c = TartanConfig::parse(&data(&[
        ("ipv4-pool-cidr", "192.168.0.0/16\n"),
        ("ipv6-pool-cidr", " fd00:10:244::/56 "),
        ("encapsulation", "IPIP"),
        ("nat-outgoing", "false"),
        ("mtu", "1400"),
        ("services", "off"),
    ]))
    .unwrap();
    assert_eq!(c.mtu, Mtu::Fixed(1400));
    assert!(!c.services);
    let pools = c.default_pools();
    let names: Vec<_> = pools
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["default-ipv4", "default-ipv6"]);
    assert_eq!(pools[0].spec.cidr, "192.168.0.0/16");
    assert_eq!(pools[0].spec.ipip_mode, EncapMode::Always);
    assert_eq!(pools[1].spec.cidr, "fd00:10:244::/56");
    assert_eq!(
        (pools[1].spec.ipip_mode, pools[1].spec.vxlan_mode),
        (EncapMode::Never, EncapMode::Never)
    );
    assert!(pools.iter().all(|p| !p.spec.nat_outgoing));
}

#[test]
fn every_encapsulation_name_maps_to_the_pool_modes() {
    use EncapMode::*;
    for (name, ipip, vxlan) in [
        ("None", Never, Never),
        ("VXLAN", Never, Always),
        ("VXLANCrossSubnet", Never, CrossSubnet),
        ("IPIP", Always, Never),
        ("IPIPCrossSubnet", CrossSubnet, Never),
    ] {
        let e: PoolEncapsulation = name.parse().unwrap();
        assert_eq!(e.modes(), (ipip, vxlan), "{name}");
        assert_eq!(e.to_string(), name);
    }
    let e = "vxlan".parse::<PoolEncapsulation>().unwrap_err();
    assert!(e.contains("allowed None, VXLAN"), "{e}");
}

#[test]
fn an_ipv6_only_cluster_leaves_the_ipv4_cidr_empty() {
    let c = TartanConfig::parse(&data(&[
        ("ipv4-pool-cidr", ""),
        ("ipv6-pool-cidr", "fd00:10:244::/56"),
    ]))
    .unwrap();
    let pools = c.default_pools();
    assert_eq!(pools.len(), 1);
    assert_eq!(pools[0].metadata.name.as_deref(), Some("default-ipv6"));
    // The IPv4 pool's encapsulation does not apply: nothing to subtract.
    let u = Underlay {
        mtu: 1500,
        family: Family::Ipv6,
    };
    assert_eq!(c.pod_mtu(Some(u)), Ok(Some(1500)));
}

#[test]
fn every_problem_is_reported_against_its_key_and_nothing_is_made() {
    let e = TartanConfig::parse(&data(&[
        ("ipv4-pool-cidr", "10.244.0.1/16"),
        ("ipv6-pool-cidr", "10.0.0.0/8"),
        ("encapsulation", "GRE"),
        ("nat-outgoing", "yes"),
        ("mtu", "9999999"),
        ("services", "maybe"),
        ("ipv4_pool_cidr", "10.0.0.0/8"),
    ]))
    .unwrap_err();
    assert_eq!(
        keys(&e),
        [
            "ipv4_pool_cidr",
            "ipv4-pool-cidr",
            "ipv6-pool-cidr",
            "encapsulation",
            "nat-outgoing",
            "mtu",
            "services"
        ]
    );
    let text = e.to_string();
    assert!(
        text.starts_with("ConfigMap tartan-system/tartan-config: "),
        "{text}"
    );
    assert!(text.contains("has host bits set"), "{text}");
    assert!(text.contains("is not an IPv6 network"), "{text}");
    assert!(text.contains("not a key of tartan-config"), "{text}");
}

#[test]
fn pools_the_api_server_would_refuse_are_config_errors() {
    // A /28 cannot hold a /26 block: the IPPool's own rule.
    let e = TartanConfig::parse(&data(&[("ipv4-pool-cidr", "10.0.0.0/28")])).unwrap_err();
    assert_eq!(keys(&e), ["ipv4-pool-cidr"]);
    assert!(
        e.problems[0]
            .1
            .contains("the IPPool default-ipv4 would be invalid: spec.blockSize"),
        "{e}"
    );
    let e = TartanConfig::parse(&data(&[
        ("ipv6-pool-cidr", "fd00::/126"),
        ("encapsulation", "None"),
    ]))
    .unwrap_err();
    assert_eq!(keys(&e), ["ipv6-pool-cidr"]);
}

#[test]
fn a_fixed_mtu_below_1280_refused_with_an_ipv6_pool() {
    let e = TartanConfig::parse(&data(&[
        ("ipv6-pool-cidr", "fd00:10:244::/56"),
        ("mtu", "1200"),
    ]))
    .unwrap_err();
    assert_eq!(keys(&e), ["mtu"]);
    assert!(TartanConfig::parse(&data(&[("mtu", "1200")])).is_ok());
}

#[test]
fn pod_mtu_follows_the_underlay_and_the_encapsulation() {
    let v4 = |mtu| {
        Some(Underlay {
            mtu,
            family: Family::Ipv4,
        })
    };
    let v6 = |mtu| {
        Some(Underlay {
            mtu,
            family: Family::Ipv6,
        })
    };
    let with = |enc: &str| TartanConfig::parse(&data(&[("encapsulation", enc)])).unwrap();
    assert_eq!(with("VXLAN").pod_mtu(v4(1500)), Ok(Some(1450)));
    assert_eq!(with("VXLANCrossSubnet").pod_mtu(v4(9000)), Ok(Some(8950)));
    assert_eq!(with("VXLAN").pod_mtu(v6(1500)), Ok(Some(1430)));
    assert_eq!(with("IPIP").pod_mtu(v4(1500)), Ok(Some(1480)));
    assert_eq!(with("None").pod_mtu(v4(9000)), Ok(Some(9000)));
    assert_eq!(with("None").pod_mtu(None), Ok(None));
    let e = with("VXLAN").pod_mtu(None).unwrap_err();
    assert!(e.contains("set mtu in tartan-config"), "{e}");
    let e = with("IPIP").pod_mtu(v6(1500)).unwrap_err();
    assert!(e.contains("IPv6 underlay"), "{e}");
    let fixed = TartanConfig::parse(&data(&[("mtu", "1300")])).unwrap();
    assert_eq!(fixed.pod_mtu(None), Ok(Some(1300)));
    let auto = TartanConfig::parse(&data(&[("mtu", "auto")])).unwrap();
    assert_eq!(auto.mtu, Mtu::Auto);
    // Dual stack on a small underlay: IPv6 needs 1280.
    let dual = TartanConfig::parse(&data(&[("ipv6-pool-cidr", "fd00::/56")])).unwrap();
    assert!(dual.pod_mtu(v4(1300)).unwrap_err().contains("1280"));
}
