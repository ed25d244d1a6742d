//! Three nodes, each running tartan-bgpd from the datastore and
//! tartan-felix: the node-to-node mesh comes up from Node objects, each
//! node learns the others' blocks with the node as next hop, and pods on
//! different nodes reach each other with no encapsulation.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use tartan_api::store::typed::TypedStore;
use tartan_lab::TempDir;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::wait_for;

#[test]
fn three_node_mesh_routes_pods_across_nodes() {
    let lab = CniLab::new(3).unwrap();
    lab.add_pool("default", "10.87.0.0/16", None).unwrap();
    for i in 0..3 {
        lab.add_node_object(i).unwrap();
    }
    let dir = TempDir::new("mesh").unwrap();
    let daemons: Vec<_> = (0..3)
        .map(|i| lab.start_node_daemons(i, &dir).unwrap())
        .collect();
    // A pod on each node.
    let pods: Vec<_> = (0..3)
        .map(|i| lab.add_pod_on(i, &format!("p{i}")).unwrap())
        .collect();
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

    // A node removed from the cluster: the others drop its session and its
    // block's route at once (no waiting for the hold time).
    lab.rt
        .block_on(lab.store.delete_typed::<Node>(None, "node-3", None))
        .unwrap();
    for i in 0..2 {
        let ns = &lab.underlay.node(i).netns;
        wait_for("node-3's block withdrawn", Duration::from_secs(5), || {
            let r = ns.ip(&["route", "show", "proto", "201"]).ok()?;
            (!r.contains(&blocks[2])).then_some(())
        })
        .unwrap_or_else(|e| panic!("node-{}: {e}", i + 1));
    }
    // node-1 and node-2 still reach each other.
    assert!(pods[0].0.exec("ping", &["-c1", "-W2", &pods[1].2]).is_ok());
    for (i, (_, call, _)) in pods.iter().enumerate() {
        lab.plain(i).del(call, None).unwrap();
    }
}
