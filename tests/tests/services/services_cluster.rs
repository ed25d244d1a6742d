//! Services inside a three-node lab, applied with `tartan-lab ctl apply`
//! as a user would, with real TCP and UDP traffic (acceptance 1, 3, 5, 6
//! of issue 7, and the lab's allocation):
//!
//! - allocation: a ClusterIP from the lab's range; a NodePort already taken
//!   is refused with the holder named, and nothing of that file is written;
//!   a deleted Service's NodePort, or one given up by a change of type, is
//!   free again; a ClusterIP Service turned ExternalName loses the address
//!   its file still names (as the API server prepares an update);
//! - ClusterIP from a pod on every node reaches the endpoints on every
//!   node, TCP and UDP, spread across them;
//! - sessionAffinity ClientIP: one client, one endpoint; the affinity
//!   entry carries the Service's timeout and is gone after it;
//! - hairpin: a pod reaches itself through its Service; headless and
//!   ExternalName Services are not in any node's table (the headless one
//!   still has its EndpointSlice);
//! - no endpoints: TCP refused at once, UDP gets port unreachable;
//! - an endpoint terminating gets no new connections while an established
//!   one to it keeps working; with only terminating endpoints left they
//!   still serve; with none the Service refuses; a pod relabelled into
//!   the selector (`ctl label pod`) becomes its endpoint.
//!
//! All of it on etcd and on the Kubernetes datastore.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::svcprobe::{Outcome, Proto, Stream, ask, ask_many, poll, svc_table};
use tartan_tests::Datastore;
use tartan_tests::services::*;

#[test]
fn services_in_the_cluster() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    services_in_the_cluster_on(Datastore::Etcd, "sc");
}

/// The same on the Kubernetes datastore: the lab allocates ClusterIPs
/// and NodePorts and keeps EndpointSlices through the API server
/// stand-in as the cluster admin (as the API server's own controllers
/// would), felix reads them as the node agent's service account.
#[test]
fn services_in_the_cluster_on_kubernetes() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    services_in_the_cluster_on(Datastore::Kubernetes, "sk");
}

fn services_in_the_cluster_on(datastore: Datastore, prefix: &str) {
    let t0 = Instant::now();
    let lab = up_on(prefix, 3, datastore);
    let (clients, mut servers) = pods(&lab);
    eprintln!("lab and pods up in {:?}", t0.elapsed());

    allocation(&lab);
    let web = cluster_ip(&lab, "web");
    spread(&lab, &clients, web);
    eprintln!("spread done at {:?}", t0.elapsed());
    affinity(&lab, &clients);
    eprintln!("affinity done at {:?}", t0.elapsed());
    servers.push(hairpin_and_headless(&lab));
    eprintln!("hairpin and headless done at {:?}", t0.elapsed());
    no_endpoints(&lab, &clients);
    eprintln!("no endpoints done at {:?}", t0.elapsed());
    servers.extend(draining(&lab, &clients[0]));
    eprintln!("all done in {:?}", t0.elapsed());
}

/// A server `web-N` (app=web) and a client `default/cl-N` on each node;
/// the clients' network namespaces and the servers.
fn pods(lab: &LabCli) -> (Vec<String>, Vec<tartan_lab::cluster::svcprobe::NameServers>) {
    let mut servers = vec![];
    let mut clients = vec![];
    for i in 1..=3 {
        let node = format!("node-{i}");
        servers.push(server_pod(lab, &format!("web-{i}"), &node, "app=web"));
        clients.push(client_pod(lab, &format!("default/cl-{i}"), &node));
    }
    (clients, servers)
}

fn allocation(lab: &LabCli) {
    let out = apply_ok(
        lab,
        &service_yaml(
            "web",
            "{selector: {app: web}, \
             ports: [{name: http, port: 80, targetPort: http}, \
                     {name: dns, port: 53, targetPort: 8053, protocol: UDP}]}",
        ),
    );
    assert!(out.contains("service/web created"), "{out}");
    let ip = cluster_ip(lab, "web");
    assert!(
        "10.96.0.0/16"
            .parse::<ipnet::Ipv4Net>()
            .unwrap()
            .contains(&ip),
        "{ip}"
    );
    // The slice names the pods' named port.
    let slices = lab.ok(&["ctl", "get", "endpointslices", "-o", "json"]);
    assert!(slices.contains("\"port\": 8080"), "{slices}");

    apply_ok(
        lab,
        &service_yaml(
            "np-a",
            "{type: NodePort, ports: [{port: 80, nodePort: 30080}]}",
        ),
    );
    let (code, out, err) = apply(
        lab,
        &[
            service_yaml("np-b", "{type: NodePort, ports: [{port: 80}]}"),
            service_yaml(
                "np-c",
                "{type: NodePort, ports: [{port: 80, nodePort: 30080}]}",
            ),
        ]
        .concat(),
    );
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("Service default/np-c: spec.ports[0].nodePort: 30080 is already allocated to Service default/np-a"),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    let (code, _, err) = lab.run(&["ctl", "get", "service", "np-b"]);
    assert_ne!(code, 0, "np-b was written although its file was refused");
    assert!(err.contains("not found"), "{err}");
    lab.ok(&["ctl", "delete", "service", "np-a"]);
    // Deleted, np-a's port is free again; turned ClusterIP, np-d's too.
    apply_ok(
        lab,
        &service_yaml(
            "np-d",
            "{type: NodePort, ports: [{port: 80, nodePort: 30080}]}",
        ),
    );
    apply_ok(
        lab,
        &service_yaml("np-d", "{type: ClusterIP, ports: [{port: 80}]}"),
    );
    apply_ok(
        lab,
        &service_yaml(
            "np-e",
            "{type: NodePort, ports: [{port: 80, nodePort: 30080}]}",
        ),
    );
    lab.ok(&["ctl", "delete", "service", "np-d", "np-e"]);
    external_name_update(lab);
}

/// A ClusterIP Service turned ExternalName by a file that still names its
/// address (an edited `get -o yaml`): the address is dropped, as the API
/// server drops what the new type no longer allows and the update left
/// unchanged, and is free again; another address in that file is refused.
fn external_name_update(lab: &LabCli) {
    apply_ok(lab, &service_yaml("to-ext", "{ports: [{port: 80}]}"));
    let ip = cluster_ip(lab, "to-ext");
    let ext = |ip: Ipv4Addr| {
        service_yaml(
            "to-ext",
            &format!(
                "{{type: ExternalName, externalName: db.example.com, \
                 clusterIP: {ip}, clusterIPs: [{ip}], ports: [{{port: 80}}]}}"
            ),
        )
    };
    let other = Ipv4Addr::from(u32::from(ip) ^ 1);
    let (code, out, err) = apply(lab, &ext(other));
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(cluster_ip(lab, "to-ext"), ip, "changed although refused");

    apply_ok(lab, &ext(ip));
    let s = service(lab, "to-ext");
    assert_eq!(s["spec"]["type"], "ExternalName", "{s}");
    assert!(s["spec"].get("clusterIP").is_none(), "{s}");
    assert!(s["spec"].get("clusterIPs").is_none(), "{s}");
    apply_ok(
        lab,
        &service_yaml(
            "takes-ip",
            &format!("{{clusterIP: {ip}, ports: [{{port: 80}}]}}"),
        ),
    );
    assert_eq!(cluster_ip(lab, "takes-ip"), ip);
    lab.ok(&["ctl", "delete", "service", "to-ext", "takes-ip"]);
}

fn spread(lab: &LabCli, clients: &[String], web: Ipv4Addr) {
    for c in clients {
        wait_served(lab, c, web, 80, Proto::Tcp);
        wait_served(lab, c, web, 53, Proto::Udp);
    }
    let all: BTreeSet<String> = (1..=3).map(|i| format!("web-{i}")).collect();
    for (proto, port) in [(Proto::Tcp, 80), (Proto::Udp, 53)] {
        let res = ask_many(clients, 30, web, port, proto, ASK_WAIT);
        for (c, outcomes) in clients.iter().zip(&res) {
            let t = tally(outcomes);
            eprintln!("{proto:?} from {c}: {t:?}");
            assert!(
                outcomes.iter().all(|o| o.server().is_some()),
                "{proto:?} from {c}: {t:?}"
            );
            assert_eq!(servers_of(outcomes), all, "{proto:?} from {c}: {t:?}");
        }
    }
}

fn affinity(lab: &LabCli, clients: &[String]) {
    apply_ok(
        lab,
        &service_yaml(
            "sticky",
            "{selector: {app: web}, sessionAffinity: ClientIP, \
             sessionAffinityConfig: {clientIP: {timeoutSeconds: 2}}, \
             ports: [{port: 80, targetPort: 8080}]}",
        ),
    );
    let vip = cluster_ip(lab, "sticky");
    for c in clients {
        wait_served(lab, c, vip, 80, Proto::Tcp);
    }
    // Sticky per client: the first pick, then 19 more at once.
    for c in clients {
        let (first, _) = ask(c, vip, 80, Proto::Tcp, ASK_WAIT);
        let first = first.server().expect("answered").to_string();
        let rest = ask_many(std::slice::from_ref(c), 19, vip, 80, Proto::Tcp, ASK_WAIT);
        let t = tally(&rest[0]);
        assert_eq!(
            t.get(&first),
            Some(&19),
            "from {c}: first {first}, then {t:?}"
        );
    }
    // The entry of cl-1 on node-1 with the Service's timeout, and gone
    // once the timeout has passed without traffic.
    let st = lab_state(lab);
    let cl1 = pod_ip(lab, "default/cl-1");
    let key = format!("{cl1} . {vip} . tcp . 80");
    let table = svc_table(&st, "node-1").unwrap();
    let entry = table
        .lines()
        .find(|l| l.contains(&key))
        .unwrap_or_else(|| panic!("no affinity entry {key}:\n{table}"));
    assert!(entry.contains("timeout 2s"), "{entry}");
    std::thread::sleep(Duration::from_millis(2600));
    let table = svc_table(&st, "node-1").unwrap();
    assert!(
        !table.contains(&key),
        "the affinity entry outlived its 2 s:\n{table}"
    );
    // And it sticks again afterwards.
    let (first, _) = ask(&clients[0], vip, 80, Proto::Tcp, ASK_WAIT);
    let first = first.server().expect("answered").to_string();
    let rest = ask_many(&clients[..1], 9, vip, 80, Proto::Tcp, ASK_WAIT);
    assert_eq!(
        tally(&rest[0]).get(&first),
        Some(&9),
        "{:?}",
        tally(&rest[0])
    );
}

fn hairpin_and_headless(lab: &LabCli) -> tartan_lab::cluster::svcprobe::NameServers {
    let me = server_pod(lab, "me", "node-2", "app=self");
    apply_ok(
        lab,
        &[
            service_yaml(
                "self",
                "{selector: {app: self}, ports: [{port: 80, targetPort: http}]}",
            ),
            service_yaml(
                "hl",
                "{clusterIP: None, selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}",
            ),
            service_yaml("ext", "{type: ExternalName, externalName: example.org}"),
        ]
        .concat(),
    );
    let vip = cluster_ip(lab, "self");
    let me_ns = pod_netns(lab, "default/me");
    wait_served(lab, &me_ns, vip, 80, Proto::Tcp);
    let (o, _) = ask(&me_ns, vip, 80, Proto::Tcp, ASK_WAIT);
    assert_eq!(o.server(), Some("me"), "hairpin: {o:?}");

    // The headless Service has its slice (the lab keeps it) …
    let slices: serde_json::Value =
        serde_json::from_str(&lab.ok(&["ctl", "get", "endpointslices", "-o", "json"])).unwrap();
    let hl = slices["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == "hl")
        .unwrap_or_else(|| panic!("no slice for the headless Service: {slices}"));
    assert_eq!(hl["endpoints"].as_array().unwrap().len(), 3, "{hl}");
    // … but no node's table knows it: the service addresses in each table
    // are exactly the ClusterIPs of the other Services (in every
    // namespace: the lab's kube-system/kube-dns is one).
    assert_eq!(service(lab, "hl")["spec"]["clusterIP"], "None");
    let svcs: serde_json::Value =
        serde_json::from_str(&lab.ok(&["ctl", "get", "services", "-A", "-o", "json"])).unwrap();
    let want: BTreeSet<String> = svcs["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str())
        .filter(|ip| *ip != "None")
        .map(String::from)
        .collect();
    let st = lab_state(lab);
    let range: ipnet::Ipv4Net = "10.96.0.0/16".parse().unwrap();
    for n in &st.nodes {
        let table = svc_table(&st, &n.name).unwrap();
        let seen: BTreeSet<String> = table
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|w| w.parse::<Ipv4Addr>().ok())
            .filter(|a| range.contains(a))
            .map(|a| a.to_string())
            .collect();
        assert_eq!(seen, want, "{}:\n{table}", n.name);
    }
    me
}

fn no_endpoints(lab: &LabCli, clients: &[String]) {
    apply_ok(
        lab,
        &service_yaml(
            "none",
            "{selector: {app: nothing}, \
             ports: [{name: t, port: 80, targetPort: 8080}, \
                     {name: u, port: 53, targetPort: 8053, protocol: UDP}]}",
        ),
    );
    let vip = cluster_ip(lab, "none");
    let st = lab_state(lab);
    // Wait until every node refuses it.
    for n in &st.nodes {
        let ok = poll(Duration::from_secs(10), || {
            let t = svc_table(&st, &n.name).ok()?;
            let reject = t
                .split("set reject_fe")
                .nth(1)?
                .split('}')
                .next()?
                .to_string();
            reject.contains(&vip.to_string()).then_some(())
        });
        assert!(
            ok.is_some(),
            "{}: no reject for {vip}\n{}",
            n.name,
            dump(lab)
        );
    }
    for c in clients {
        let (o, took) = ask(c, vip, 80, Proto::Tcp, ASK_WAIT);
        assert_eq!(o, Outcome::Refused, "TCP from {c}");
        assert!(
            took < Duration::from_millis(500),
            "TCP refusal took {took:?}"
        );
        let (o, took) = ask(c, vip, 53, Proto::Udp, ASK_WAIT);
        assert_eq!(
            o,
            Outcome::Refused,
            "UDP from {c}: port unreachable expected"
        );
        assert!(
            took < Duration::from_millis(500),
            "UDP refusal took {took:?}"
        );
    }
}

fn draining(lab: &LabCli, client: &str) -> Vec<tartan_lab::cluster::svcprobe::NameServers> {
    let s = vec![
        server_pod(lab, "d-1", "node-2", "app=drain"),
        server_pod(lab, "d-2", "node-3", "app=drain"),
    ];
    apply_ok(
        lab,
        &service_yaml(
            "drain",
            "{selector: {app: drain}, ports: [{port: 80, targetPort: http}]}",
        ),
    );
    let vip = cluster_ip(lab, "drain");
    wait_served(lab, client, vip, 80, Proto::Tcp);
    let both: BTreeSet<String> = ["d-1".to_string(), "d-2".to_string()].into();
    assert_eq!(
        servers_of(&ask_many(&[client.to_string()], 20, vip, 80, Proto::Tcp, ASK_WAIT)[0]),
        both
    );
    let mut stream = Stream::open(client, vip, 80).unwrap();
    stream.echo(b"before").unwrap();
    let gone = stream.server.clone();
    let other = if gone == "d-1" { "d-2" } else { "d-1" };
    lab.ok(&["pod", "terminate", &format!("default/{gone}")]);
    let moved = poll(Duration::from_secs(10), || {
        let r = ask_many(&[client.to_string()], 10, vip, 80, Proto::Tcp, ASK_WAIT);
        (tally(&r[0]).get(other) == Some(&10)).then_some(())
    });
    assert!(
        moved.is_some(),
        "{gone} still gets new connections\n{}",
        dump(lab)
    );
    let r = ask_many(&[client.to_string()], 20, vip, 80, Proto::Tcp, ASK_WAIT);
    assert_eq!(tally(&r[0]).get(other), Some(&20), "{:?}", tally(&r[0]));
    stream
        .echo(b"still there")
        .unwrap_or_else(|e| panic!("the connection to terminating {gone} broke: {e:#}"));

    // Both terminating: they still serve, as nothing ready is left.
    lab.ok(&["pod", "terminate", &format!("default/{other}")]);
    std::thread::sleep(Duration::from_millis(500));
    let r = ask_many(&[client.to_string()], 20, vip, 80, Proto::Tcp, ASK_WAIT);
    assert!(
        r[0].iter().all(|o| o.server().is_some()),
        "terminating endpoints should serve when none is ready: {:?}",
        tally(&r[0])
    );
    stream.echo(b"and still").unwrap();

    // Deleted: refused.
    lab.ok(&["pod", "del", "default/d-1"]);
    lab.ok(&["pod", "del", "default/d-2"]);
    let refused = poll(Duration::from_secs(10), || {
        (ask(client, vip, 80, Proto::Tcp, ASK_WAIT).0 == Outcome::Refused).then_some(())
    });
    assert!(
        refused.is_some(),
        "not refused after the pods went\n{}",
        dump(lab)
    );

    // A pod relabelled into the selector becomes its endpoint.
    lab.ok(&["ctl", "label", "pod", "me", "app=drain", "--overwrite"]);
    wait_served(lab, client, vip, 80, Proto::Tcp);
    assert_eq!(
        ask(client, vip, 80, Proto::Tcp, ASK_WAIT).0.server(),
        Some("me")
    );
    s
}
