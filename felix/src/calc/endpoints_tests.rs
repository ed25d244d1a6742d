//! Tests of the endpoint index: sharing, Pods' labels, locality.

use super::*;
use std::net::IpAddr;

fn wep(node: &str, pod: &str, ip: &str) -> WorkloadEndpointSpec {
    crate::calc::policy::tests::wep(node, pod, &format!("tar{pod}"), ip)
}

fn app(a: &str) -> Labels {
    [("app".to_string(), a.to_string())].into()
}

#[test]
fn the_pods_of_a_workload_share_their_labels_namespace_and_ports_until_gone() {
    let mut e = Endpoints::for_node("n0");
    for w in 0..5 {
        for p in 0..30 {
            let pod = format!("w{w}-{p}");
            let ip = format!("10.0.{w}.{p}/32");
            assert!(e.set(
                &format!("ns/{pod}.eth0"),
                Some((wep(&format!("n{w}"), &pod, &ip), app(&format!("w{w}"))))
            ));
        }
    }
    assert_eq!(e.len(), 150);
    assert_eq!(e.label_sets(), 5);
    let a = &e.remote.get("ns/w1-0.eth0").unwrap();
    let b = &e.remote.get("ns/w1-29.eth0").unwrap();
    assert!(Arc::ptr_eq(a.look(), b.look()), "one look per workload");
    assert_eq!(e.looks.len(), 4, "w0 is on this node");
    assert_eq!(a.node().as_ptr(), b.node().as_ptr());
    assert_eq!(e.nodes.len(), 4);
    assert_eq!(
        a.addrs().collect::<Vec<_>>(),
        ["10.0.1.0".parse::<IpAddr>().unwrap()]
    );
    // Only this node's keep their interface; the others' are one
    // endpoint per workload for the compiler, with every address.
    assert_eq!(e.local().count(), 30);
    assert!(e.local().all(|(_, ep)| ep.interface.is_some()));
    let compiled = e.for_compile();
    assert_eq!(compiled.len(), 30 + 4);
    let w1 = compiled.iter().find(|ep| ep.labels["app"] == "w1").unwrap();
    assert_eq!(w1.addrs.len(), 30);
    assert!(w1.interface.is_none());
    assert!(Arc::ptr_eq(&w1.labels, a.labels()));
    // Delivered again: no change.
    assert!(!e.set(
        "ns/w1-0.eth0",
        Some((wep("n1", "w1-0", "10.0.1.0/32"), app("w1")))
    ));
    // Relabelled: its own set, the old one still shared by the rest.
    assert!(e.set(
        "ns/w1-0.eth0",
        Some((wep("n1", "w1-0", "10.0.1.0/32"), app("other")))
    ));
    assert_eq!(e.label_sets(), 6);
    assert_eq!(e.for_compile().len(), 30 + 5);
    for w in 0..5 {
        for p in 0..30 {
            assert!(e.set(&format!("ns/w{w}-{p}.eth0"), None));
        }
    }
    assert!(e.is_empty());
    assert_eq!(e.label_sets(), 0, "label sets outlived their endpoints");
    assert!(e.names.is_empty() && e.ports.is_empty());
    assert!(e.nodes.is_empty() && e.looks.is_empty());
    assert!(e.groups.is_empty());
    assert!(!e.set("ns/w0-0.eth0", None));
}

#[test]
fn a_pods_labels_win_whenever_seen_and_the_copy_serves_when_it_is_gone() {
    let mut e = Endpoints::for_node("n0");
    let labels = |e: &Endpoints, k: &str| e.labels_of(k).unwrap()["app"].clone();
    // The compiler's view: a group per likeness, each address once.
    let compiled = |e: &Endpoints| -> Vec<(String, Vec<IpAddr>)> {
        let mut v: Vec<_> = e
            .for_compile()
            .iter()
            .map(|ep| (ep.labels["app"].clone(), ep.addrs.clone()))
            .collect();
        v.sort();
        v
    };
    // Pod first, then its endpoint.
    assert!(!e.set_pod("x/a", Some(app("pod-a"))), "no endpoint yet");
    e.set(
        "x/a.eth0",
        Some((wep("n1", "a", "10.0.0.1/32"), app("copy"))),
    );
    assert_eq!(labels(&e, "x/a.eth0"), "pod-a");
    // Endpoint first, then its Pod; a pod whose name is a prefix of
    // another's ("a" and "a.b") does not take the other's endpoint.
    e.set(
        "x/a.b.eth0",
        Some((wep("n0", "a.b", "10.0.0.2/32"), app("copy"))),
    );
    assert_eq!(labels(&e, "x/a.b.eth0"), "copy");
    assert!(e.set_pod("x/a.b", Some(app("pod-ab"))));
    assert_eq!(labels(&e, "x/a.b.eth0"), "pod-ab");
    assert!(e.set_pod("x/a", Some(app("pod-a2"))));
    assert_eq!(labels(&e, "x/a.eth0"), "pod-a2");
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(
        compiled(&e),
        [
            ("pod-a2".to_string(), vec![ip("10.0.0.1")]),
            ("pod-ab".to_string(), vec![ip("10.0.0.2")])
        ]
    );
    assert_eq!(labels(&e, "x/a.b.eth0"), "pod-ab");
    // Same labels again: nothing changed.
    assert!(!e.set_pod("x/a", Some(app("pod-a2"))));
    // Another namespace's pod of the same name: not ours.
    assert!(!e.set_pod("y/a", Some(app("elsewhere"))));
    // The Pod gone: the endpoint's copy.
    assert!(e.set_pod("x/a", None));
    assert_eq!(labels(&e, "x/a.eth0"), "copy");
    assert_eq!(
        compiled(&e),
        [
            ("copy".to_string(), vec![ip("10.0.0.1")]),
            ("pod-ab".to_string(), vec![ip("10.0.0.2")])
        ]
    );
    // An endpoint not named after its Pod still follows it.
    e.set("x/odd", Some((wep("n1", "c", "10.0.0.3/32"), app("copy"))));
    assert!(e.set_pod("x/c", Some(app("pod-c"))));
    assert_eq!(labels(&e, "x/odd"), "pod-c");
    e.set("x/odd", None);
    assert!(e.odd.is_empty());
    assert!(!e.set_pod("x/c", Some(app("pod-c2"))));
}

#[test]
fn an_endpoint_moving_to_this_node_becomes_local_and_back() {
    let mut e = Endpoints::for_node("n0");
    e.set("x/a.eth0", Some((wep("n1", "a", "10.0.0.1/32"), app("a"))));
    assert_eq!((e.local().count(), e.remote().count()), (0, 1));
    assert!(e.set("x/a.eth0", Some((wep("n0", "a", "10.0.0.1/32"), app("a")))));
    assert_eq!((e.local().count(), e.remote().count()), (1, 0));
    assert_eq!(
        e.local_endpoint("x/a.eth0").unwrap().interface.as_deref(),
        Some("tara")
    );
    assert_eq!(e.for_compile().len(), 1);
    assert!(e.set("x/a.eth0", Some((wep("n1", "a", "10.0.0.1/32"), app("a")))));
    assert_eq!((e.local().count(), e.remote().count()), (0, 1));
    assert_eq!(e.for_compile().len(), 1);
}

#[test]
fn compacting_after_a_listing_keeps_every_endpoint_and_group_as_they_were() {
    let mut e = Endpoints::for_node("n0");
    for p in 0..200 {
        let pod = format!("w{}-{p:03}", p % 3);
        let ip = format!("10.1.{}.{}/32", p / 200, p % 200);
        e.set(
            &format!("ns/{pod}.eth0"),
            Some((
                wep(&format!("n{}", 1 + p % 7), &pod, &ip),
                app(&format!("w{}", p % 3)),
            )),
        );
    }
    let view = |e: &Endpoints| {
        let remote: Vec<(String, String, Vec<IpAddr>)> = e
            .remote()
            .map(|(k, r)| (k.to_string(), r.node().to_string(), r.addrs().collect()))
            .collect();
        let mut groups: Vec<(String, Vec<IpAddr>)> = e
            .for_compile()
            .iter()
            .map(|g| {
                let mut a = g.addrs.clone();
                a.sort();
                (g.labels["app"].clone(), a)
            })
            .collect();
        groups.sort();
        (remote, groups)
    };
    let before = view(&e);
    e.compact();
    assert_eq!(view(&e), before);
    // And it goes on as before.
    assert!(e.set("ns/w0-000.eth0", None));
    assert!(e.set(
        "ns/w0-000.eth0",
        Some((wep("n1", "w0-000", "10.1.0.0/32"), app("w0")))
    ));
    assert_eq!(view(&e), before);
}

/// One change of the endpoint index, as the watches deliver them.
#[derive(Debug, Clone)]
enum Op {
    /// Endpoint `pod` set on node `node` with addresses from `addrs`
    /// (bit 0: an IPv4 one, bit 1: an IPv6 one) and labels `app`.
    Set {
        pod: u8,
        node: u8,
        addrs: u8,
        app: u8,
    },
    Remove(u8),
    /// The Pod's own labels seen (or gone).
    Pod {
        pod: u8,
        app: Option<u8>,
    },
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..12, 0u8..3, 0u8..4, 0u8..3).prop_map(|(pod, node, addrs, app)| Op::Set { pod, node, addrs, app }),
        2 => (0u8..12).prop_map(Op::Remove),
        1 => (0u8..12, proptest::option::of(0u8..3)).prop_map(|(pod, app)| Op::Pod { pod, app }),
    ]
}

proptest::proptest! {
    /// The families counted as endpoints come, move, change and go are
    /// those a look at every address finds.
    #[test]
    fn counted_families_are_those_of_every_address(ops in proptest::collection::vec(op(), 1..60)) {
        let mut e = Endpoints::for_node("n0");
        for op in ops {
            match op {
                Op::Set { pod, node, addrs, app: a } => {
                    let name = format!("p{pod}");
                    let mut w = wep(&format!("n{node}"), &name, "10.0.0.1/32");
                    w.ip_networks.clear();
                    // From a small pool: two endpoints may hold one address.
                    if addrs & 1 != 0 {
                        w.ip_networks.push(format!("10.0.1.{}/32", pod % 4));
                    }
                    if addrs & 2 != 0 {
                        w.ip_networks.push(format!("fd00::{}/128", pod % 4));
                    }
                    e.set(&format!("ns/{name}.eth0"), Some((w, app(&a.to_string()))));
                }
                Op::Remove(pod) => {
                    e.set(&format!("ns/p{pod}.eth0"), None);
                }
                Op::Pod { pod, app: a } => {
                    e.set_pod(&format!("ns/p{pod}"), a.map(|a| app(&format!("pod{a}"))));
                }
            }
            proptest::prop_assert_eq!(e.families(), Families::of(&e.for_compile()));
            let mut held = [0; 2];
            for a in e.groups.values().flat_map(|g| g.addrs.iter()) {
                held[usize::from(a.is_ipv6())] += 1;
            }
            proptest::prop_assert_eq!(e.grouped, held);
        }
        e.compact();
        proptest::prop_assert_eq!(e.families(), Families::of(&e.for_compile()));
    }
}
