//! Services as kube-proxy's e2e suite expects them, in a two-node lab
//! (issue 24):
//!
//! - a Service labelled `service.kubernetes.io/service-proxy-name` (any
//!   value) or `service.kubernetes.io/headless` is not proxied: its
//!   ClusterIP is in no node's table and does not answer, while the same
//!   Service unlabelled does;
//! - `internalTrafficPolicy: Local` on a node whose only local endpoint is
//!   terminating (a ready one elsewhere): the node uses its local
//!   terminating endpoint (KEP-1669), where it would otherwise drop;
//! - a LoadBalancer Service with `externalTrafficPolicy: Local` gets a
//!   `healthCheckNodePort`; `curl` on it answers 200 with the Service and
//!   one local endpoint on the node that has it, 503 on the other;
//! - every node serves the proxy's own `/healthz` and `/livez` on 10256,
//!   200 with when the Service table was last made right;
//! - `trafficDistribution: PreferClose` with the nodes in two zones: the
//!   lab's controller writes zone hints, and a client on node-1 reaches
//!   only the endpoint in node-1's zone; without it, both endpoints.

use std::time::Duration;

use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::svcprobe::{Proto, ask, poll, svc_table};
use tartan_tests::services::*;

#[test]
fn services_as_kube_proxy_e2e_expects() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = up("ke", 2);
    let _servers = [
        server_pod(&lab, "lw-1", "node-2", "app=lw"),
        server_pod(&lab, "t-1", "node-1", "app=itp"),
        server_pod(&lab, "t-2", "node-2", "app=itp"),
        server_pod(&lab, "h-1", "node-2", "app=hc"),
        server_pod(&lab, "z-1", "node-1", "app=near"),
        server_pod(&lab, "z-2", "node-2", "app=near"),
    ];
    let client = client_pod(&lab, "default/c-1", "node-1");
    labelled_services_are_not_proxied(&lab, &client);
    local_terminating_fallback(&lab, &client);
    health_check_node_port(&lab);
    proxy_health(&lab);
    traffic_distribution(&lab, &client);
}

/// Node `node` labelled `topology.kubernetes.io/zone: zone` (read and
/// written again, as the agents may write its annotations meanwhile).
fn zone_node(lab: &LabCli, node: &str, zone: &str) {
    for _ in 0..5 {
        let mut n: serde_json::Value =
            serde_json::from_str(&lab.ok(&["ctl", "get", "node", node, "-o", "json"])).unwrap();
        n["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone.into();
        if apply(lab, &n.to_string()).0 == 0 {
            return;
        }
    }
    panic!("could not label {node}");
}

fn traffic_distribution(lab: &LabCli, client: &str) {
    zone_node(lab, "node-1", "zone-a");
    zone_node(lab, "node-2", "zone-b");
    let spec = |extra: &str| {
        format!("{{selector: {{app: near}}, {extra}ports: [{{port: 80, targetPort: http}}]}}")
    };
    apply_ok(
        lab,
        &service_yaml("near", &spec("trafficDistribution: PreferClose, ")),
    );
    let vip = cluster_ip(lab, "near");
    wait_served(lab, client, vip, 80, Proto::Tcp);
    // The slice's endpoints, once they satisfy `want`.
    let endpoints_when = |want: &dyn Fn(&[serde_json::Value]) -> bool| {
        poll(Duration::from_secs(10), || {
            let v: serde_json::Value =
                serde_json::from_str(&lab.ok(&["ctl", "get", "endpointslices", "-o", "json"]))
                    .ok()?;
            let eps: Vec<serde_json::Value> = v["items"]
                .as_array()?
                .iter()
                .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "near")
                .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
                .collect();
            want(&eps).then_some(eps)
        })
    };
    let hinted = endpoints_when(&|eps| {
        eps.len() == 2
            && eps
                .iter()
                .all(|e| e["hints"]["forZones"][0]["name"] == e["zone"])
    });
    assert!(
        hinted.is_some(),
        "the slice never carried zone hints\n{}",
        dump(lab)
    );
    // Give felix a moment to apply the slice: then every request from
    // node-1 goes to z-1, in node-1's zone (by chance, 1 in 4,096).
    std::thread::sleep(Duration::from_millis(1000));
    for i in 0..12 {
        let (o, _) = ask(client, vip, 80, Proto::Tcp, ASK_WAIT);
        assert_eq!(o.server(), Some("z-1"), "request {i}: {o:?}\n{}", dump(lab));
    }
    // node-2 moved to zone-a (its Node written again): the slice follows,
    // and z-2, now in node-1's zone, is reached too.
    zone_node(lab, "node-2", "zone-a");
    let both = poll(Duration::from_secs(10), || {
        (ask(client, vip, 80, Proto::Tcp, ASK_WAIT).0.server() == Some("z-2")).then_some(())
    });
    assert!(
        both.is_some(),
        "z-2 never reached once node-2 was in zone-a\n{}",
        dump(lab)
    );
    // Without the distribution the hints go.
    apply_ok(lab, &service_yaml("near", &spec("")));
    let bare = endpoints_when(&|eps| eps.len() == 2 && eps.iter().all(|e| e["hints"].is_null()));
    assert!(bare.is_some(), "the hints stayed\n{}", dump(lab));
}

fn proxy_health(lab: &LabCli) {
    let st = lab_state(lab);
    for node in ["node-1", "node-2"] {
        let addr = st.node(node).unwrap().address;
        for path in ["healthz", "livez"] {
            let url = format!("http://{addr}:10256/{path}");
            let got = poll(Duration::from_secs(10), || {
                curl(lab, &url).filter(|(c, _)| *c == 200)
            });
            let Some((_, body)) = got else {
                panic!("{url} ({node}) never answered 200: {:?}", curl(lab, &url));
            };
            assert!(body["lastUpdated"].is_string(), "{body}");
            assert!(body["currentTime"].is_string(), "{body}");
        }
    }
}

/// `curl` from pod `default/c-1`: status code and body.
fn curl(lab: &LabCli, url: &str) -> Option<(u16, serde_json::Value)> {
    let (code, out, _) = lab.run(&[
        "exec",
        "default/c-1",
        "--",
        "curl",
        "-s",
        "-m",
        "2",
        "-w",
        "\n%{http_code}",
        url,
    ]);
    if code != 0 {
        return None;
    }
    let (body, status) = out.trim().rsplit_once('\n')?;
    Some((status.parse().ok()?, serde_json::from_str(body).ok()?))
}

fn health_check_node_port(lab: &LabCli) {
    apply_ok(
        lab,
        &service_yaml(
            "hc",
            "{type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: hc}, \
             ports: [{port: 80, targetPort: http}]}",
        ),
    );
    let port = service(lab, "hc")["spec"]["healthCheckNodePort"]
        .as_u64()
        .expect("a healthCheckNodePort");
    assert!((30000..=32767).contains(&port), "{port}");
    let st = lab_state(lab);
    for (node, code, local) in [("node-2", 200, 1), ("node-1", 503, 0)] {
        let addr = st.node(node).unwrap().address;
        let url = format!("http://{addr}:{port}/healthz");
        let got = poll(Duration::from_secs(10), || {
            curl(lab, &url).filter(|(c, _)| *c == code)
        });
        let Some((_, body)) = got else {
            panic!(
                "{url} ({node}) never answered {code}: {:?}",
                curl(lab, &url)
            );
        };
        assert_eq!(body["service"]["namespace"], "default", "{body}");
        assert_eq!(body["service"]["name"], "hc", "{body}");
        assert_eq!(body["localEndpoints"], local, "{body}");
    }
}

fn labelled_services_are_not_proxied(lab: &LabCli, client: &str) {
    apply_ok(
        lab,
        &[
            service_yaml(
                "plain",
                "{selector: {app: lw}, ports: [{port: 80, targetPort: http}]}",
            ),
            labelled_service_yaml(
                "other-proxy",
                "{service.kubernetes.io/service-proxy-name: foo-bar}",
                "{selector: {app: lw}, ports: [{port: 80, targetPort: http}]}",
            ),
            labelled_service_yaml(
                "labelled-headless",
                "{service.kubernetes.io/headless: ''}",
                "{selector: {app: lw}, ports: [{port: 80, targetPort: http}]}",
            ),
        ]
        .concat(),
    );
    let plain = cluster_ip(lab, "plain");
    // Once the plain one answers, felix has seen all three.
    wait_served(lab, client, plain, 80, Proto::Tcp);
    let st = lab_state(lab);
    for name in ["other-proxy", "labelled-headless"] {
        let vip = cluster_ip(lab, name);
        for n in &st.nodes {
            let table = svc_table(&st, &n.name).unwrap();
            assert!(
                !table.contains(&vip.to_string()),
                "{name} ({vip}) is in {}'s table:\n{table}",
                n.name
            );
        }
        let (o, _) = ask(client, vip, 80, Proto::Tcp, ASK_WAIT);
        assert!(o.server().is_none(), "{name} ({vip}) answered: {o:?}");
    }
}

fn local_terminating_fallback(lab: &LabCli, client: &str) {
    apply_ok(
        lab,
        &service_yaml(
            "itp",
            "{selector: {app: itp}, internalTrafficPolicy: Local, \
             ports: [{port: 80, targetPort: http}]}",
        ),
    );
    let vip = cluster_ip(lab, "itp");
    wait_served(lab, client, vip, 80, Proto::Tcp);
    assert_eq!(
        ask(client, vip, 80, Proto::Tcp, ASK_WAIT).0.server(),
        Some("t-1")
    );
    // node-1's only endpoint terminates while node-2's stays ready: node-1
    // still sends its clients to its own, terminating, endpoint.
    lab.ok(&["pod", "terminate", "default/t-1"]);
    let slice_terminating = poll(Duration::from_secs(10), || {
        let v: serde_json::Value =
            serde_json::from_str(&lab.ok(&["ctl", "get", "endpointslices", "-o", "json"])).ok()?;
        v["items"]
            .as_array()?
            .iter()
            .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "itp")
            .flat_map(|s| s["endpoints"].as_array().cloned().unwrap_or_default())
            .any(|e| e["conditions"]["terminating"] == true)
            .then_some(())
    });
    assert!(slice_terminating.is_some(), "t-1 never shown terminating");
    // Give felix a moment to apply the slice, then every request must
    // reach t-1 (before KEP-1669's per-node fallback they were dropped).
    std::thread::sleep(Duration::from_millis(1000));
    for i in 0..10 {
        let (o, _) = ask(client, vip, 80, Proto::Tcp, ASK_WAIT);
        assert_eq!(o.server(), Some("t-1"), "request {i}: {o:?}\n{}", dump(lab));
    }
}
