//! Kernel route sync against a real kernel. Needs root: every test runs in
//! network namespaces of its own (removed at the end, also on panic), with
//! a veth pair to a peer namespace so that gateways are reachable.
use ipnet::IpNet;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;
use tartan_bgpd::kernel::{
    Kernel, KernelError, KernelRoute, KernelStats, KernelSync, Nexthop, RTPROT_TARTAN,
};
use tartan_lab::netns::{Netns, veth};

/// A namespace for bgpd's side, joined by a veth pair to a peer namespace
/// that owns the gateways 10.0.0.2-3, fd00::2-3 and fe80::2.
struct Lab {
    ns: Netns,
    _peer: Netns,
    ifindex: u32,
}

fn lab() -> Lab {
    let ns = Netns::new("tk").expect("create namespace");
    let peer = Netns::new("tkp").expect("create peer namespace");
    let (dev, _) = veth(
        &ns,
        &["10.0.0.1/24", "fd00::1/64", "fe80::1/64"],
        &peer,
        &[
            "10.0.0.2/24",
            "10.0.0.3/24",
            "fd00::2/64",
            "fd00::3/64",
            "fe80::2/64",
        ],
    )
    .expect("veth pair");
    let link: Value = serde_json::from_str(&ns.ip(&["-j", "link", "show", "dev", &dev]).unwrap())
        .expect("ip -j link");
    let ifindex = link[0]["ifindex"].as_u64().expect("ifindex") as u32;
    Lab {
        ns,
        _peer: peer,
        ifindex,
    }
}

/// Runs `body` on a thread inside `ns`, on a current-thread runtime built
/// there, so that the netlink socket opens in the namespace. A panic in
/// the body fails the test after the namespaces are dropped.
fn in_ns<T, F, Fut>(ns: &Netns, body: F) -> T
where
    T: Send,
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = T>,
{
    std::thread::scope(|s| {
        let thread = s.spawn(|| {
            ns.enter_current_thread().expect("enter namespace");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(body())
        });
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn hop(s: &str) -> Nexthop {
    Nexthop::new(s.parse().unwrap())
}

fn route(prefix: &str, gateways: &[&str]) -> KernelRoute {
    KernelRoute::new(net(prefix), gateways.iter().map(|g| hop(g)).collect())
}

/// `ip -j [-6] route show proto 201` as destination → sorted gateways.
fn shown(ns: &Netns, v6: bool) -> BTreeMap<String, Vec<String>> {
    let mut args = vec!["-j"];
    if v6 {
        args.push("-6");
    }
    args.extend(["route", "show", "proto", "201"]);
    let out = ns.ip(&args).expect("ip route show");
    let routes: Value = serde_json::from_str(&out).expect("ip -j output");
    let mut map = BTreeMap::new();
    for r in routes.as_array().expect("array") {
        let dst = r["dst"].as_str().unwrap_or_default().to_string();
        let mut gws: Vec<String> = match r["nexthops"].as_array() {
            Some(hops) => hops
                .iter()
                .map(|h| h["gateway"].as_str().unwrap_or_default().to_string())
                .collect(),
            None => vec![r["gateway"].as_str().unwrap_or_default().to_string()],
        };
        gws.sort();
        map.insert(dst, gws);
    }
    map
}

fn expect(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    pairs
        .iter()
        .map(|(d, g)| (d.to_string(), g.iter().map(|s| s.to_string()).collect()))
        .collect()
}

/// The whole JSON description of the main-table routes for `prefix`.
fn route_json(ns: &Netns, v6: bool, prefix: &str) -> String {
    let fam = if v6 { "-6" } else { "-4" };
    ns.ip(&["-j", fam, "route", "show", "table", "main", "exact", prefix])
        .expect("ip route show exact")
}

#[test]
fn ipv4_single_ecmp_replace_delete() {
    let lab = lab();
    let ns = &lab.ns;
    in_ns(ns, || async {
        let k = Kernel::connect().await.unwrap();

        k.replace(&route("10.1.0.0/24", &["10.0.0.2"]))
            .await
            .unwrap();
        assert_eq!(shown(ns, false), expect(&[("10.1.0.0/24", &["10.0.0.2"])]));
        let own = k.list_own().await.unwrap();
        assert_eq!(
            own,
            vec![KernelRoute::new(
                net("10.1.0.0/24"),
                vec![Nexthop::with_ifindex(
                    "10.0.0.2".parse().unwrap(),
                    lab.ifindex
                )]
            )]
        );

        let ecmp = route("10.2.0.0/24", &["10.0.0.3", "10.0.0.2"]);
        k.replace(&ecmp).await.unwrap();
        // Replacing with the same route again is harmless.
        k.replace(&ecmp).await.unwrap();
        assert_eq!(
            shown(ns, false),
            expect(&[
                ("10.1.0.0/24", &["10.0.0.2"]),
                ("10.2.0.0/24", &["10.0.0.2", "10.0.0.3"]),
            ])
        );
        let own = k.list_own().await.unwrap();
        let listed = own.iter().find(|r| r.prefix == ecmp.prefix).unwrap();
        assert_eq!(listed.nexthops.len(), 2);

        k.replace(&route("10.2.0.0/24", &["10.0.0.3"]))
            .await
            .unwrap();
        assert_eq!(
            shown(ns, false),
            expect(&[
                ("10.1.0.0/24", &["10.0.0.2"]),
                ("10.2.0.0/24", &["10.0.0.3"]),
            ])
        );

        k.delete(net("10.2.0.0/24")).await.unwrap();
        k.delete(net("10.2.0.0/24")).await.unwrap(); // absent: Ok
        k.delete(net("10.1.0.0/24")).await.unwrap();
        assert!(shown(ns, false).is_empty());
        assert!(k.list_own().await.unwrap().is_empty());
    });
}

#[test]
fn ipv6_global_link_local_and_ecmp() {
    let lab = lab();
    let ns = &lab.ns;
    in_ns(ns, || async {
        let k = Kernel::connect().await.unwrap();
        let ll = Nexthop::with_ifindex("fe80::2".parse().unwrap(), lab.ifindex);

        k.replace(&route("fd01::/64", &["fd00::2"])).await.unwrap();
        k.replace(&KernelRoute::new(net("fd02::/64"), vec![ll]))
            .await
            .unwrap();
        k.replace(&route("fd03::/64", &["fd00::3", "fd00::2"]))
            .await
            .unwrap();
        assert_eq!(
            shown(ns, true),
            expect(&[
                ("fd01::/64", &["fd00::2"]),
                ("fd02::/64", &["fe80::2"]),
                ("fd03::/64", &["fd00::2", "fd00::3"]),
            ])
        );
        let own = k.list_own().await.unwrap();
        assert_eq!(own.len(), 3);
        let listed = own.iter().find(|r| r.prefix == net("fd02::/64")).unwrap();
        assert_eq!(listed.nexthops, vec![ll]);

        // A link-local gateway means nothing without its interface.
        let err = k
            .replace(&route("fd04::/64", &["fe80::2"]))
            .await
            .unwrap_err();
        assert!(matches!(err, KernelError::Invalid { .. }), "{err}");

        k.replace(&route("fd03::/64", &["fd00::3"])).await.unwrap();
        assert_eq!(shown(ns, true)["fd03::/64"], vec!["fd00::3".to_string()]);

        for p in ["fd01::/64", "fd02::/64", "fd03::/64"] {
            k.delete(net(p)).await.unwrap();
        }
        assert!(shown(ns, true).is_empty());
    });
}

#[test]
fn foreign_routes_are_never_touched() {
    let lab = lab();
    let ns = &lab.ns;
    ns.ip(&[
        "route",
        "add",
        "10.99.0.0/24",
        "via",
        "10.0.0.2",
        "proto",
        "static",
    ])
    .unwrap();
    ns.ip(&[
        "-6",
        "route",
        "add",
        "fd99::/64",
        "via",
        "fd00::2",
        "proto",
        "static",
    ])
    .unwrap();
    let before_v4 = route_json(ns, false, "10.99.0.0/24");
    let before_v6 = route_json(ns, true, "fd99::/64");
    assert!(before_v4.contains("10.0.0.2") && before_v6.contains("fd00::2"));

    in_ns(ns, || async {
        let k = Kernel::connect().await.unwrap();
        for (p, gw) in [("10.99.0.0/24", "10.0.0.3"), ("fd99::/64", "fd00::3")] {
            let err = k.replace(&route(p, &[gw])).await.unwrap_err();
            assert!(
                matches!(err, KernelError::Foreign { protocol, .. } if protocol != RTPROT_TARTAN),
                "{err}"
            );
            k.delete(net(p)).await.unwrap();
        }
        assert!(k.list_own().await.unwrap().is_empty());

        // Through the sync task: set, withdraw, reconcile.
        let (sync, handle) = KernelSync::spawn(k, Vec::new());
        sync.set(net("10.99.0.0/24"), Some(vec![hop("10.0.0.3")]));
        sync.set(net("fd99::/64"), Some(vec![hop("fd00::3")]));
        sync.wait_idle().await;
        assert_eq!(sync.stats().refused, 2);
        assert_eq!(sync.stats().installed, 0);
        sync.set(net("10.99.0.0/24"), None);
        sync.set(net("fd99::/64"), None);
        sync.flush_stale().await;
        assert_eq!(sync.stats().removed, 0);
        handle.shutdown().await.expect("task ends");
    });

    assert_eq!(route_json(ns, false, "10.99.0.0/24"), before_v4);
    assert_eq!(route_json(ns, true, "fd99::/64"), before_v6);
    assert!(shown(ns, false).is_empty() && shown(ns, true).is_empty());
}

#[test]
fn start_time_reconcile_keeps_relearned_routes() {
    let lab = lab();
    let ns = &lab.ns;
    let p = "201";
    for args in [
        &[
            "route",
            "add",
            "10.10.1.0/24",
            "via",
            "10.0.0.2",
            "proto",
            p,
        ][..],
        &[
            "route",
            "add",
            "10.10.2.0/24",
            "via",
            "10.0.0.2",
            "proto",
            p,
        ],
        &[
            "route",
            "add",
            "10.10.3.0/24",
            "proto",
            p,
            "nexthop",
            "via",
            "10.0.0.2",
            "nexthop",
            "via",
            "10.0.0.3",
        ],
        &[
            "-6",
            "route",
            "add",
            "fd10:4::/64",
            "via",
            "fd00::2",
            "proto",
            p,
        ],
        &[
            "-6",
            "route",
            "add",
            "fd10:5::/64",
            "via",
            "fd00::2",
            "proto",
            p,
        ],
    ] {
        ns.ip(args).unwrap();
    }
    // A foreign route beside them must survive the reconcile too.
    ns.ip(&[
        "route",
        "add",
        "10.10.9.0/24",
        "via",
        "10.0.0.2",
        "proto",
        "static",
    ])
    .unwrap();

    in_ns(ns, || async {
        let k = Kernel::connect().await.unwrap();
        let initial = k.list_own().await.unwrap();
        assert_eq!(initial.len(), 5, "{initial:?}");
        let (sync, handle) = KernelSync::spawn(k, initial);

        // Re-learned: one unchanged, one with fewer paths, one IPv6.
        sync.set(net("10.10.1.0/24"), Some(vec![hop("10.0.0.2")]));
        sync.set(net("10.10.3.0/24"), Some(vec![hop("10.0.0.3")]));
        sync.set(net("fd10:4::/64"), Some(vec![hop("fd00::2")]));
        sync.wait_idle().await;
        // Only the changed route was written; nothing was removed yet.
        assert_eq!(
            sync.stats(),
            KernelStats {
                installed: 1,
                ..KernelStats::default()
            }
        );
        assert_eq!(shown(ns, false).len(), 3);
        assert_eq!(shown(ns, true).len(), 2);

        sync.flush_stale().await;
        assert_eq!(sync.stats().removed, 2);
        assert_eq!(
            shown(ns, false),
            expect(&[
                ("10.10.1.0/24", &["10.0.0.2"]),
                ("10.10.3.0/24", &["10.0.0.3"]),
            ])
        );
        assert_eq!(shown(ns, true), expect(&[("fd10:4::/64", &["fd00::2"])]));
        handle.shutdown().await.expect("task ends");
    });
    assert!(route_json(ns, false, "10.10.9.0/24").contains("10.0.0.2"));
}

#[test]
fn unreachable_next_hop_is_counted_not_fatal() {
    let lab = lab();
    let ns = &lab.ns;
    in_ns(ns, || async {
        let k = Kernel::connect().await.unwrap();
        // 192.0.2.1 is on no connected subnet: the kernel says ENETUNREACH.
        let err = k
            .replace(&route("10.20.0.0/24", &["192.0.2.1"]))
            .await
            .unwrap_err();
        assert_eq!(err.errno(), Some(libc::ENETUNREACH), "{err}");

        let (sync, handle) = KernelSync::spawn(k, Vec::new());
        sync.set(net("10.21.0.0/24"), Some(vec![hop("10.0.0.2")]));
        sync.wait_idle().await;
        assert_eq!(shown(ns, false).len(), 1);

        // The RIB moves both to an unreachable next hop: counted, and the
        // older route is not left behind.
        sync.set(net("10.20.0.0/24"), Some(vec![hop("192.0.2.1")]));
        sync.set(net("10.21.0.0/24"), Some(vec![hop("192.0.2.1")]));
        sync.wait_idle().await;
        let stats = sync.stats();
        assert_eq!(stats.failed, 2, "{stats:?}");
        assert_eq!(stats.removed, 1, "{stats:?}");
        assert!(shown(ns, false).is_empty());

        // The task carries on.
        sync.set(net("10.22.0.0/24"), Some(vec![hop("10.0.0.3")]));
        sync.wait_idle().await;
        assert_eq!(shown(ns, false), expect(&[("10.22.0.0/24", &["10.0.0.3"])]));
        handle.shutdown().await.expect("task ends");
    });
}

#[test]
fn changes_to_one_prefix_coalesce() {
    let lab = lab();
    let ns = &lab.ns;
    in_ns(ns, || async {
        let (sync, handle) = KernelSync::spawn(Kernel::connect().await.unwrap(), Vec::new());
        let p = net("10.30.0.0/24");
        // All queued before the task runs (current-thread runtime).
        sync.set(p, Some(vec![hop("10.0.0.2")]));
        sync.set(p, None);
        sync.set(p, Some(vec![hop("10.0.0.2"), hop("10.0.0.3")]));
        sync.set(p, Some(vec![hop("10.0.0.3"), hop("10.0.0.2")]));
        sync.wait_idle().await;
        assert_eq!(sync.stats().installed, 1);
        assert_eq!(
            shown(ns, false),
            expect(&[("10.30.0.0/24", &["10.0.0.2", "10.0.0.3"])])
        );
        handle.shutdown().await.expect("task ends");
    });
}

#[test]
fn batch_task_applies_ten_thousand_routes() {
    const N: u32 = 10_000;
    let lab = lab();
    let ns = &lab.ns;
    in_ns(ns, || async {
        let (sync, handle) = KernelSync::spawn(Kernel::connect().await.unwrap(), Vec::new());
        let mut desired = HashMap::new();
        for i in 0..N {
            let prefix =
                IpNet::new(IpAddr::V4(Ipv4Addr::from(0x0a80_0000 + (i << 8))), 24).unwrap();
            // Every fourth route is 2-way ECMP.
            let hops = if i % 4 == 0 {
                vec![hop("10.0.0.2"), hop("10.0.0.3")]
            } else {
                vec![hop("10.0.0.2")]
            };
            desired.insert(prefix, hops);
        }

        let start = Instant::now();
        for (p, hops) in &desired {
            sync.set(*p, Some(hops.clone()));
        }
        sync.wait_idle().await;
        let install = start.elapsed();
        eprintln!("installed {N} routes in {install:?}");
        assert_eq!(
            sync.stats(),
            KernelStats {
                installed: N as u64,
                ..KernelStats::default()
            }
        );

        let k = Kernel::connect().await.unwrap();
        let own = k.list_own().await.unwrap();
        assert_eq!(own.len(), N as usize);
        assert!(tartan_bgpd::kernel::diff(&desired, &own).is_empty());
        assert_eq!(shown(ns, false).len(), N as usize);

        let start = Instant::now();
        for p in desired.keys() {
            sync.set(*p, None);
        }
        sync.wait_idle().await;
        eprintln!("removed {N} routes in {:?}", start.elapsed());
        assert_eq!(sync.stats().removed, N as u64);
        assert!(k.list_own().await.unwrap().is_empty());
        handle.shutdown().await.expect("task ends");
    });
}
