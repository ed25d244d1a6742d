//! eBGP to a "top-of-rack" router: a BIRD namespace on the underlay, peered
//! with every node through one BGPPeer object. BIRD learns every node's
//! block; a host behind BIRD reaches the pods, and the pods reach it. The
//! sessions carry a TCP MD5 password taken from a Secret.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use tartan_api::resources::{BgpPeer, BgpPeerSpec, SecretKeyRef, SecretSource, TARTAN_NAMESPACE};
use tartan_api::store::typed::TypedStore;
use tartan_lab::TempDir;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::{Netns, veth, wait_for};
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route};

#[test]
fn a_tor_router_learns_every_block_and_its_hosts_reach_pods() {
    // node-1 and node-2 are cluster nodes; the third namespace is the ToR.
    let lab = CniLab::new(3).unwrap();
    lab.add_pool("default", "10.88.0.0/16", None).unwrap();
    let tor = &lab.underlay.node(2);
    let tor_ip = tor.address;
    for i in 0..2 {
        lab.add_node_object(i).unwrap();
    }
    // The sessions are signed (TCP MD5): the password is in a Secret in
    // Tartan's namespace, the BGPPeer refers to it.
    let mut secret = Secret::default();
    secret.metadata.name = Some("bgp-tor".into());
    secret.metadata.namespace = Some(TARTAN_NAMESPACE.into());
    secret.data = Some(BTreeMap::from([(
        "password".to_string(),
        ByteString(b"rack-7-key".to_vec()),
    )]));
    lab.rt.block_on(lab.store.create_typed(&secret)).unwrap();
    let mut peer = BgpPeerSpec::new(&tor_ip.to_string(), 65000);
    peer.password = Some(SecretSource {
        secret_key_ref: SecretKeyRef {
            name: "bgp-tor".into(),
            key: "password".into(),
        },
    });
    lab.rt
        .block_on(lab.store.create_typed(&BgpPeer::new("tor", peer)))
        .unwrap();

    // The ToR: BIRD in AS 65000, installing what it learns, announcing the
    // network of the hosts behind it (198.51.100.0/24, routed to a host
    // reached over a link of its own).
    let host = Netns::new("torh").unwrap();
    veth(&tor.netns, &["192.0.2.1/24"], &host, &["192.0.2.2/24"]).unwrap();
    host.ip(&["addr", "add", "198.51.100.2/32", "dev", "lo"])
        .unwrap();
    host.ip(&["route", "add", "default", "via", "192.0.2.1"])
        .unwrap();
    tor.netns
        .ip(&["route", "add", "198.51.100.0/24", "via", "192.0.2.2"])
        .unwrap();
    tor.netns
        .exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"])
        .unwrap();
    let mut cfg = BgpConfig::new(tor_ip, 65000)
        .kernel(true)
        .route(Route::new("198.51.100.0/24"));
    for i in 0..2 {
        cfg = cfg.neighbor(
            Neighbor::new(IpAddr::V4(lab.underlay.node(i).address), 64512).password("rack-7-key"),
        );
    }
    let bird = Bird::start(&tor.netns, cfg).unwrap();

    let dir = TempDir::new("tor").unwrap();
    let daemons: Vec<_> = (0..2)
        .map(|i| lab.start_node_daemons(i, &dir).unwrap())
        .collect();
    let pods: Vec<_> = (0..2)
        .map(|i| lab.add_pod_on(i, &format!("p{i}")).unwrap())
        .collect();
    bird.wait_established(Duration::from_secs(30)).unwrap();
    // Each block arrives from both nodes (each re-advertises what it
    // learned over the mesh, with itself as next hop: Tartan does not yet
    // keep a third-party next hop on a shared subnet), so BIRD's best path
    // may go through either node; both are one hop from the ToR.
    let nodes: Vec<IpAddr> = (0..2)
        .map(|i| IpAddr::V4(lab.underlay.node(i).address))
        .collect();
    for block in ["10.88.0.0/26", "10.88.0.64/26"] {
        let r = bird
            .wait_route(block, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}\n{}", daemons[0].0.log_tail(20)));
        assert!(
            r.next_hop().is_some_and(|h| nodes.contains(&h)),
            "{block}: {r:?}"
        );
    }
    // The host behind the ToR reaches both pods, and they reach it.
    let mut failures = BTreeMap::new();
    for (pod_ns, _, addr) in &pods {
        let there = wait_for("host -> pod", Duration::from_secs(10), || {
            host.exec("ping", &["-c1", "-W1", "-I", "198.51.100.2", addr])
                .ok()
        });
        if there.is_err() {
            failures.insert(addr.clone(), "host -> pod");
        }
        let back = wait_for("pod -> host", Duration::from_secs(10), || {
            pod_ns.exec("ping", &["-c1", "-W1", "198.51.100.2"]).ok()
        });
        if back.is_err() {
            failures.insert(addr.clone(), "pod -> host");
        }
    }
    assert!(
        failures.is_empty(),
        "{failures:?}\nnode-1 routes:\n{}\nToR routes:\n{}",
        lab.underlay
            .node(0)
            .netns
            .ip(&["route"])
            .unwrap_or_default(),
        tor.netns.ip(&["route"]).unwrap_or_default()
    );
}
