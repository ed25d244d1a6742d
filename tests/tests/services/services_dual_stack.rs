//! Dual-stack Services in a `tartan-lab up --dual-stack` cluster, as a
//! dual-stack Kubernetes cluster's API server and EndpointSlice
//! controller give them:
//!
//! - a RequireDualStack NodePort Service gets an IPv4 and an IPv6
//!   ClusterIP (the IPv6 one from the lab's IPv6 service range), one set
//!   of NodePorts, and an IPv6 EndpointSlice beside the IPv4 one, with the
//!   pods' IPv6 addresses;
//! - a Service downgraded to SingleStack loses its IPv6 ClusterIP and its
//!   IPv6 slice; upgraded again it gets an IPv6 ClusterIP back;
//! - a dual-stack LoadBalancer Service gets an IPv6 ingress address from
//!   the lab's pool beside its IPv4 one;
//! - from a pod on a third node, the IPv6 ClusterIP reaches the pods on
//!   the other two (TCP and UDP), and so does the NodePort on node-1's
//!   IPv6 address (felix's IPv6 Services).
//!
//! On etcd and on the Kubernetes datastore.

use std::collections::BTreeSet;
use std::net::Ipv6Addr;
use std::time::Duration;

use serde_json::Value;
use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::svcprobe::{NameServers, Proto, ask, poll};
use tartan_tests::Datastore;
use tartan_tests::services::*;

const WEB: &str = "{type: NodePort, ipFamilyPolicy: RequireDualStack, selector: {app: web}, \
     ports: [{name: http, port: 80, targetPort: http}, \
             {name: dns, port: 53, targetPort: 8053, protocol: UDP}]}";

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The addresses of the Service's slices of `family`, sorted.
fn slice_addresses(lab: &LabCli, svc: &str, family: &str) -> Vec<String> {
    let mut out: Vec<String> = slices_of(lab, svc)
        .iter()
        .filter(|s| s["addressType"] == family)
        .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
        .flat_map(|e| strings(&e["addresses"]))
        .collect();
    out.sort();
    out
}

#[test]
fn dual_stack_services_in_a_dual_stack_lab() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    dual_stack_services_on(Datastore::Etcd, "s6");
}

/// The same through the API server stand-in, the lab's Service control
/// plane writing as the cluster admin and felix reading as the node
/// agent.
#[test]
fn dual_stack_services_in_a_dual_stack_lab_on_kubernetes() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    dual_stack_services_on(Datastore::Kubernetes, "k6");
}

fn dual_stack_services_on(datastore: Datastore, prefix: &str) {
    let (lab, out) = tartan_tests::lab_up_on(prefix, datastore, &["--nodes", "3", "--dual-stack"]);
    assert!(
        out.contains("ClusterIPs from 10.96.0.0/16 and fd00:10:96::/112"),
        "{out}"
    );
    let mut servers: Vec<NameServers> = vec![];
    let mut v6_pods = vec![];
    let mut v4_pods = vec![];
    for (name, node) in [("web-1", "node-1"), ("web-2", "node-2")] {
        let p = format!("default/{name}");
        pod_with_ports(&lab, &p, node, "app=web", "http=8080/TCP,dns=8053/UDP");
        servers.push(NameServers::start_dual(&pod_netns(&lab, &p), name, &[HTTP], &[DNS]).unwrap());
        v6_pods.push(pod_ip6(&lab, &p));
        v4_pods.push(pod_ip(&lab, &p));
    }
    v6_pods.sort();
    v4_pods.sort();
    assert!(v6_pods.iter().all(|a| a.contains(':')), "{v6_pods:?}");
    let client = client_pod(&lab, "default/cl-3", "node-3");

    // Allocation: one ClusterIP per family, one set of NodePorts.
    apply_ok(&lab, &service_yaml("web", WEB));
    let s = service(&lab, "web");
    assert_eq!(strings(&s["spec"]["ipFamilies"]), ["IPv4", "IPv6"], "{s}");
    let ips = strings(&s["spec"]["clusterIPs"]);
    assert_eq!(ips.len(), 2, "{s}");
    assert_eq!(s["spec"]["clusterIP"], ips[0].as_str());
    let v6: Ipv6Addr = ips[1].parse().unwrap();
    let range: ipnet::Ipv6Net = "fd00:10:96::/112".parse().unwrap();
    assert!(range.contains(&v6), "{v6} not in {range}");
    let node_port = s["spec"]["ports"][0]["nodePort"].as_u64().unwrap() as u16;
    assert!((30000..=32767).contains(&node_port), "{s}");

    // EndpointSlices per family, with the pods' addresses of each.
    assert_eq!(slice_addresses(&lab, "web", "IPv6"), v6_pods);
    assert_eq!(slice_addresses(&lab, "web", "IPv4"), v4_pods);

    // Downgraded, a Service gives back its IPv6 address and slice; an
    // upgrade brings both back.
    let spec = |policy: &str| {
        format!(
            "{{ipFamilyPolicy: {policy}, selector: {{app: web}}, ports: [{{port: 80, targetPort: 8080}}]}}"
        )
    };
    apply_ok(&lab, &service_yaml("flip", &spec("PreferDualStack")));
    let first = strings(&service(&lab, "flip")["spec"]["clusterIPs"]);
    assert_eq!(first.len(), 2);
    assert_eq!(slice_addresses(&lab, "flip", "IPv6"), v6_pods);
    apply_ok(&lab, &service_yaml("flip", &spec("SingleStack")));
    let s = service(&lab, "flip");
    assert_eq!(strings(&s["spec"]["clusterIPs"]), [first[0].clone()], "{s}");
    assert_eq!(strings(&s["spec"]["ipFamilies"]), ["IPv4"], "{s}");
    assert!(slice_addresses(&lab, "flip", "IPv6").is_empty());
    assert!(
        slices_of(&lab, "flip")
            .iter()
            .all(|s| s["addressType"] == "IPv4"),
        "the IPv6 slice stayed"
    );
    apply_ok(&lab, &service_yaml("flip", &spec("RequireDualStack")));
    let again = strings(&service(&lab, "flip")["spec"]["clusterIPs"]);
    assert_eq!(again.len(), 2);
    assert_eq!(again[0], first[0], "the primary ClusterIP is kept");
    lab.ok(&["ctl", "delete", "service", "flip"]);

    // A dual-stack LoadBalancer gets an ingress address of each family
    // from the lab's pool (tartan-controllers).
    apply_ok(
        &lab,
        &service_yaml(
            "lb",
            "{type: LoadBalancer, ipFamilyPolicy: RequireDualStack, ports: [{port: 80}]}",
        ),
    );
    let ingress = poll(Duration::from_secs(20), || {
        let s = service(&lab, "lb");
        let ips: Vec<String> = s["status"]["loadBalancer"]["ingress"]
            .as_array()?
            .iter()
            .filter_map(|i| i["ip"].as_str().map(String::from))
            .collect();
        (ips.len() == 2).then_some(ips)
    })
    .expect("no ingress address of each family");
    let lb6: ipnet::Ipv6Net = "fd00:10:97::/120".parse().unwrap();
    assert!(
        ingress
            .iter()
            .any(|a| a.parse::<Ipv6Addr>().is_ok_and(|a| lb6.contains(&a))),
        "{ingress:?}"
    );
    lab.ok(&["ctl", "delete", "service", "lb"]);

    // Traffic: the IPv6 ClusterIP from a pod on node-3 reaches both
    // endpoints, TCP and UDP; the NodePort answers on node-1's IPv6
    // address. This needs felix's IPv6 Services.
    wait_served(&lab, &client, v6, 80, Proto::Tcp);
    wait_served(&lab, &client, v6, 53, Proto::Udp);
    let mut seen = BTreeSet::new();
    for _ in 0..40 {
        if let Some(s) = ask(&client, v6, 80, Proto::Tcp, ASK_WAIT).0.server() {
            seen.insert(s.to_string());
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from(["web-1".to_string(), "web-2".to_string()]),
        "\n{}",
        dump6(&lab)
    );
    let node1 = lab_state(&lab).nodes[0]
        .address6
        .expect("a dual-stack node has an IPv6 address");
    wait_served(&lab, &client, node1, node_port, Proto::Tcp);
    let (o, _) = ask(
        &client,
        node1,
        node_port,
        Proto::Tcp,
        Duration::from_secs(2),
    );
    assert!(o.server().is_some(), "{o:?}");
    drop(servers);
}
