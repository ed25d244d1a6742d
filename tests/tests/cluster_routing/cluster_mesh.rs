//! Three nodes, each running tartan-bgpd from the datastore and
//! tartan-felix: the node-to-node mesh comes up from Node objects, each
//! node learns the others' blocks with the node as next hop, and pods on
//! different nodes reach each other with no encapsulation (counted on the
//! wire). A node that goes silent loses its routes within the hold time;
//! one deleted loses them at once; a pod on a new block is reached.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::IpPool;
use tartan_api::store::typed::TypedStore;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::wait_for;
use tartan_lab::wire::WireCounters;

/// Waits up to `secs` seconds on node-1 and node-2 until bgpd's routes
/// (`ip route show proto 201`) hold `block` (`present`) or not; fails
/// with `what` and the node.
fn wait_first_two(lab: &CniLab, block: &str, present: bool, what: &str, secs: u64) {
    for i in 0..2 {
        let ns = &lab.underlay.node(i).netns;
        wait_for(what, Duration::from_secs(secs), || {
            let r = ns.ip(&["route", "show", "proto", "201"]).ok()?;
            (r.contains(block) == present).then_some(())
        })
        .unwrap_or_else(|e| panic!("node-{}: {e}", i + 1));
    }
}

#[test]
fn three_node_mesh_routes_pods_across_nodes() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(3, "10.87.0.0/16");
    for i in 0..3 {
        lab.add_node_object(i).unwrap();
    }
    let (_dir, daemons, pods) = tartan_tests::daemons_and_a_pod_each(&lab, 3, "mesh");
    // Each node learns the other two blocks over BGP, via the owning node.
    let blocks: Vec<String> = (0..3).map(|i| format!("10.87.0.{}/26", i * 64)).collect();
    for (i, (bgpd, felix)) in daemons.iter().enumerate() {
        let ns = &lab.underlay.node(i).netns;
        for j in (0..3).filter(|j| *j != i) {
            // `ip route show proto 201` lists only bgpd's routes.
            let want = format!(
                "{} via {} dev eth0",
                blocks[j],
                lab.underlay.node(j).address
            );
            wait_for(&want, Duration::from_secs(30), || {
                let r = ns.ip(&["route", "show", "proto", "201"]).ok()?;
                r.contains(&want).then_some(())
            })
            .unwrap_or_else(|e| {
                panic!(
                    "node-{}: {e}\nroutes:\n{}\nbgpd:\n{}\nfelix:\n{}",
                    i + 1,
                    ns.ip(&["route"]).unwrap_or_default(),
                    bgpd.log_tail(30),
                    felix.log_tail(10)
                )
            });
        }
    }
    // Every pod reaches every other pod.
    let mut failures = BTreeMap::new();
    for (from, (ns, _, _)) in pods.iter().enumerate() {
        for (to, (_, _, addr)) in pods.iter().enumerate() {
            if from == to {
                continue;
            }
            let ok = wait_for("ping", Duration::from_secs(5), || {
                ns.exec("ping", &["-c1", "-W1", addr]).ok()
            })
            .is_ok();
            if !ok {
                failures.insert((from, to), addr.clone());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "pod pairs that cannot reach each other: {failures:?}"
    );

    // No encapsulation on the wire: what node-1 sends to node-2's pod
    // leaves its underlay interface as a plain packet to the pod.
    let n1 = lab.underlay.node(0);
    let wire = WireCounters::install(
        n1.netns.name(),
        "postrouting",
        Some(&n1.ifname),
        "10.87.0.0/16",
    )
    .unwrap();
    let before = wire.read().unwrap();
    pods[0]
        .0
        .exec("ping", &["-c5", "-i0.2", "-W2", &pods[1].2])
        .unwrap();
    let seen = wire.read().unwrap() - before;
    assert!(
        seen.vxlan == 0 && seen.plain >= 5,
        "native routing expected on the wire: {seen:?}"
    );

    // node-3 vanishes from the network without a word (its link goes
    // silent): the others drop its block when the 9 s hold time expires.
    let n3 = lab.underlay.node(2);
    n3.netns.ip(&["link", "set", &n3.ifname, "down"]).unwrap();
    let cut = std::time::Instant::now();
    wait_first_two(&lab, &blocks[2], false, "node-3's block withdrawn", 15);
    let gone = cut.elapsed();
    assert!(
        gone <= Duration::from_secs(12),
        "withdrawn after {gone:?}: more than the hold time"
    );
    // Back on the wire: the sessions and the route return.
    n3.netns.ip(&["link", "set", &n3.ifname, "up"]).unwrap();
    n3.netns
        .ip(&[
            "route",
            "replace",
            "default",
            "via",
            &lab.underlay.gateway.to_string(),
        ])
        .unwrap();
    wait_first_two(&lab, &blocks[2], true, "node-3's block back", 30);

    // A node removed from the cluster: the others drop its session and its
    // block's route at once (no waiting for the hold time).
    lab.rt
        .block_on(lab.store.delete_typed::<Node>(None, "node-3", None))
        .unwrap();
    wait_first_two(&lab, &blocks[2], false, "node-3's block withdrawn", 5);
    // node-1 and node-2 still reach each other.
    assert!(pods[0].0.exec("ping", &["-c1", "-W2", &pods[1].2]).is_ok());

    // A pod on a new block: the first pool closed to new blocks, a second
    // one opened; node-2's next pod gets a block of it, and node-1 learns
    // the block and reaches the pod.
    let mut first: IpPool = lab
        .rt
        .block_on(lab.store.get_typed(None, "default"))
        .unwrap();
    first.spec.disabled = true;
    lab.rt.block_on(lab.store.update_typed(&first)).unwrap();
    lab.add_pool("second", "10.88.0.0/16", None).unwrap();
    let fresh = lab.add_pod_on(1, "fresh").unwrap();
    assert!(fresh.2.starts_with("10.88.0."), "{}", fresh.2);
    wait_for(
        "node-1 reaches the pod on the new block",
        Duration::from_secs(10),
        || pods[0].0.exec("ping", &["-c1", "-W1", &fresh.2]).ok(),
    )
    .unwrap();
    lab.plain(1).del(&fresh.1, None).unwrap();
    for (i, (_, call, _)) in pods.iter().enumerate() {
        lab.plain(i).del(call, None).unwrap();
    }
}
