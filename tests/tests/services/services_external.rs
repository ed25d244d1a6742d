//! Services from outside the cluster (acceptance 2 and 4 of issue 7): a
//! host on the lab's underlay, in its own namespace, reaches
//!
//! - a NodePort Service (TCP and UDP) through every node's address, also
//!   the node without an endpoint (externalTrafficPolicy Cluster: every
//!   connection masqueraded, as kube-proxy does, also to an endpoint on
//!   the node reached);
//! - a LoadBalancer Service's ingress IP, given by the lab from its LB
//!   range, through a static route via a node. (Through a BIRD router
//!   that learned it over BGP: `services_bgp.rs`.)
//! - externalTrafficPolicy Local: through the node with the endpoint the
//!   server sees the host's own address, by NodePort and by LB IP; through
//!   a node without one the connection times out (dropped, not refused);
//!   from a pod on that node, and from the node itself, it is served by
//!   the cluster-wide endpoint (the policy governs external clients only).

use std::net::Ipv4Addr;
use std::time::Instant;

use tartan_lab::cluster::svcprobe::{Outcome, OutsideHost, Proto, ask, ask_many};
use tartan_tests::services::*;

/// `ip route VERB TO/32 via VIA` on the outside host.
fn route_via(host: &OutsideHost, verb: &str, to: Ipv4Addr, via: Ipv4Addr) {
    let (to, via) = (format!("{to}/32"), via.to_string());
    host.netns.ip(&["route", verb, &to, "via", &via]).unwrap();
}

#[test]
fn services_from_outside() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t0 = Instant::now();
    let lab = up("sx", 3);
    let _servers = ext_and_local_servers(&lab);
    apply_ok(
        &lab,
        &[
            service_yaml(
                "np",
                "{type: NodePort, selector: {app: ext}, \
                 ports: [{name: http, port: 80, targetPort: http}, \
                         {name: dns, port: 53, targetPort: 8053, protocol: UDP}]}",
            ),
            service_yaml(
                "lb",
                "{type: LoadBalancer, selector: {app: ext}, ports: [{port: 80, targetPort: 8080}]}",
            ),
            service_yaml(
                "loc",
                "{type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: loc}, \
                 ports: [{port: 80, targetPort: 8080}]}",
            ),
        ]
        .concat(),
    );
    let st = lab_state(&lab);
    let host = OutsideHost::attach(&st, 200).unwrap();
    let hostns = vec![host.name().to_string()];
    let node_addr: Vec<Ipv4Addr> = st.nodes.iter().map(|n| n.address).collect();
    let node_port = |svc: &str, i: usize| -> u16 {
        service(&lab, svc)["spec"]["ports"][i]["nodePort"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or_else(|| panic!("{svc} has no nodePort: {}", service(&lab, svc)))
    };
    let (np_tcp, np_udp) = (node_port("np", 0), node_port("np", 1));
    assert!((30000..=32767).contains(&np_tcp) && np_tcp != np_udp);
    eprintln!("lab, pods and Services up in {:?}", t0.elapsed());

    // NodePort through every node, also node-3 which has no endpoint.
    // With `externalTrafficPolicy: Cluster` every connection is
    // masqueraded, as kube-proxy does: the server never sees the host's
    // address, also when the endpoint is on the node the host reached.
    let host_addr = host.address.to_string();
    let masqueraded = |r: &[Outcome]| {
        r.iter().all(|o| match o {
            Outcome::Answer { client, .. } => *client != host_addr,
            _ => false,
        })
    };
    for (i, a) in node_addr.iter().enumerate() {
        wait_served(&lab, host.name(), *a, np_tcp, Proto::Tcp);
        for (proto, port) in [(Proto::Tcp, np_tcp), (Proto::Udp, np_udp)] {
            let r = ask_many(&hostns, 12, *a, port, proto, ASK_WAIT);
            let t = tally(&r[0]);
            eprintln!("NodePort {proto:?} via node-{} ({a}:{port}): {t:?}", i + 1);
            assert!(r[0].iter().all(|o| o.server().is_some()), "{t:?}");
            assert!(masqueraded(&r[0]), "not masqueraded: {:?}", r[0]);
        }
    }

    // The LoadBalancer IP, routed by the host via node-3.
    let lb = lb_ip(&lab, "lb");
    let lbnet: ipnet::Ipv4Net = st.lb_cidr.parse().unwrap();
    assert!(lbnet.contains(&lb), "{lb} outside {lbnet}");
    route_via(&host, "add", lb, node_addr[2]);
    wait_served(&lab, host.name(), lb, 80, Proto::Tcp);
    let r = ask_many(&hostns, 12, lb, 80, Proto::Tcp, ASK_WAIT);
    assert!(
        r[0].iter().all(|o| o.server().is_some()),
        "{:?}",
        tally(&r[0])
    );
    eprintln!("LB IP {lb} via node-3: {:?}", tally(&r[0]));
    // Via node-1, where e-1 is: masqueraded too.
    route_via(&host, "replace", lb, node_addr[0]);
    let mut local_seen = false;
    for _ in 0..10 {
        let r = ask_many(&hostns, 12, lb, 80, Proto::Tcp, ASK_WAIT);
        assert!(masqueraded(&r[0]), "not masqueraded: {:?}", r[0]);
        local_seen |= servers_of(&r[0]).contains("e-1");
        if local_seen {
            break;
        }
    }
    assert!(local_seen, "e-1 (on node-1) never answered");

    // externalTrafficPolicy Local: l-1 is on node-1 only.
    let me = host.address.to_string();
    let np_loc = node_port("loc", 0);
    wait_served(&lab, host.name(), node_addr[0], np_loc, Proto::Tcp);
    let (o, _) = ask(host.name(), node_addr[0], np_loc, Proto::Tcp, ASK_WAIT);
    assert_eq!(
        o,
        Outcome::Answer {
            server: "l-1".into(),
            client: me.clone()
        },
        "Local NodePort via node-1 keeps the client's address"
    );
    for i in [1, 2] {
        let (o, took) = ask(host.name(), node_addr[i], np_loc, Proto::Tcp, ASK_WAIT);
        assert_eq!(
            o,
            Outcome::TimedOut,
            "Local NodePort via node-{} (no endpoint) must drop, after {took:?}",
            i + 1
        );
    }
    let loc = lb_ip(&lab, "loc");
    route_via(&host, "add", loc, node_addr[0]);
    wait_served(&lab, host.name(), loc, 80, Proto::Tcp);
    let (o, _) = ask(host.name(), loc, 80, Proto::Tcp, ASK_WAIT);
    assert_eq!(
        o,
        Outcome::Answer {
            server: "l-1".into(),
            client: me
        },
        "Local LB IP via node-1"
    );
    route_via(&host, "replace", loc, node_addr[1]);
    let (o, _) = ask(host.name(), loc, 80, Proto::Tcp, ASK_WAIT);
    assert_eq!(
        o,
        Outcome::TimedOut,
        "Local LB IP via node-2 (no endpoint) must drop"
    );

    // The traffic policy governs external clients only (issue 24, point
    // 4): a pod on node-2, which has no endpoint of `loc`, reaches its LB
    // IP and node-2's own NodePort, and so does node-2 itself; each gets
    // the cluster-wide endpoint as kube-proxy short-circuits them.
    let pod_on_2 = pod_netns(&lab, "default/e-2");
    let node_2 = st.nodes[1].netns.clone();
    for (from, who) in [(&pod_on_2, "pod e-2 on node-2"), (&node_2, "node-2 itself")] {
        for (to, port, what) in [(loc, 80, "LB IP"), (node_addr[1], np_loc, "NodePort")] {
            let (o, took) = ask(from, to, port, Proto::Tcp, ASK_WAIT);
            assert_eq!(
                o.server(),
                Some("l-1"),
                "{who} → Local {what} {to}:{port}: {o:?} after {took:?}"
            );
        }
    }
    eprintln!("all done in {:?}", t0.elapsed());
}
