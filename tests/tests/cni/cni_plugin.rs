//! The `tartan` CNI plugin against the specification, with a real etcd and
//! real namespaces: result fields, error codes, CHECK, STATUS, GC, DEL;
//! chaining with the reference plugins; pings in and out of a pod.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use tartan_api::resources::{IpamBlock, IpamHandle, WorkloadEndpoint};
use tartan_api::store::typed::TypedStore;
use tartan_lab::cni::{Call, Reply, exec, tartan_bin_dir};
use tartan_lab::cnilab::{CniLab, NETWORK};

fn tartan() -> std::path::PathBuf {
    tartan_bin_dir().join("tartan")
}

/// Run `tartan` with exactly `env` (plus PATH) and `stdin`.
fn raw(lab: &CniLab, node: usize, env: &[(&str, &str)], stdin: &str) -> Reply {
    let mut full: Vec<(&str, Option<String>)> = [
        "CNI_COMMAND",
        "CNI_CONTAINERID",
        "CNI_NETNS",
        "CNI_IFNAME",
        "CNI_ARGS",
        "CNI_PATH",
    ]
    .iter()
    .map(|k| (*k, None))
    .collect();
    for (k, v) in env {
        full.retain(|(x, _)| x != k);
        full.push((k, Some(v.to_string())));
    }
    exec(
        &tartan(),
        Some(lab.underlay.node(node).netns.name()),
        &full,
        stdin.as_bytes(),
    )
    .unwrap()
}

fn held(lab: &CniLab, handle: &str) -> Vec<String> {
    let blocks: Vec<IpamBlock> = lab.rt.block_on(lab.store.list_typed(None)).unwrap().0;
    let mut out = Vec::new();
    for b in blocks {
        let net = b.spec.network().unwrap();
        for (h, addrs) in tartan_cni::ipam::block::holders(&b.spec, &net) {
            if h == handle {
                out.extend(addrs.iter().map(|a| a.to_string()));
            }
        }
    }
    out
}

fn weps(lab: &CniLab) -> Vec<WorkloadEndpoint> {
    lab.rt.block_on(lab.store.list_typed(None)).unwrap().0
}

fn handle(call: &Call) -> String {
    format!("{NETWORK}.{}", call.container_id)
}

fn pod_address(result: &Value) -> String {
    let a = result["ips"][0]["address"].as_str().unwrap();
    a.split('/').next().unwrap().to_string()
}

fn ping(ns: &str, addr: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", ns, "ping", "-c1", "-W2", addr])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn node_links(lab: &CniLab, i: usize) -> String {
    lab.underlay
        .node(i)
        .netns
        .ip(&["-o", "link", "show"])
        .unwrap()
}

#[test]
fn add_check_del_and_the_result_in_every_version() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.77.0.0/16");
    for version in ["0.4.0", "1.0.0", "1.1.0"] {
        let rt = lab.runtime(
            0,
            CniLab::conflist(version, vec![lab.tartan_entry(0, json!({}))]),
        );
        let (pod, call) = lab
            .pod("default", &format!("p{}", version.replace('.', "")))
            .unwrap();
        let r = rt
            .add(&call)
            .unwrap_or_else(|e| panic!("{version}: {e}\n{}", lab.log()));
        assert_eq!(r["cniVersion"], version);
        let ifs = r["interfaces"].as_array().unwrap();
        assert_eq!(ifs.len(), 2, "{r}");
        let host = ifs[0]["name"].as_str().unwrap();
        assert!(host.starts_with("tar") && host.len() <= 15, "{host}");
        assert!(ifs[0].get("sandbox").is_none());
        assert_eq!(ifs[0]["mac"], "ee:ee:ee:ee:ee:ee");
        assert_eq!(ifs[1]["name"], "eth0");
        assert_eq!(
            ifs[1]["sandbox"].as_str().unwrap(),
            call.netns.as_ref().unwrap().display().to_string()
        );
        assert_eq!(ifs[1]["mac"].as_str().unwrap().len(), 17);
        let ip = &r["ips"][0];
        assert!(ip["address"].as_str().unwrap().starts_with("10.77."), "{r}");
        assert!(ip["address"].as_str().unwrap().ends_with("/32"), "{r}");
        assert_eq!(ip["interface"], 1);
        assert_eq!(ip.get("version").is_some(), version == "0.4.0", "{r}");
        assert_eq!(r["routes"][0]["dst"], "0.0.0.0/0");
        assert_eq!(r["routes"][0]["gw"], "169.254.1.1");

        // The datastore: the allocation under its handle and the record.
        assert_eq!(held(&lab, &handle(&call)), [pod_address(&r)]);
        let w: Vec<_> = weps(&lab)
            .into_iter()
            .filter(|w| w.spec.container_id == call.container_id)
            .collect();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].spec.node, "node-1");
        assert_eq!(w[0].spec.interface_name, host);
        assert_eq!(w[0].spec.ip_networks, [ip["address"].as_str().unwrap()]);

        rt.check(&call, &r).unwrap();
        // The same ADD again (a retry) gets the same address.
        rt.del(&call, Some(&r)).unwrap();
        rt.del(&call, Some(&r)).unwrap();
        rt.del(&call, None).unwrap();
        assert!(held(&lab, &handle(&call)).is_empty());
        assert!(!node_links(&lab, 0).contains(host));
        drop(pod);
    }
    assert!(weps(&lab).is_empty());
}

#[test]
fn error_codes_for_bad_calls() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.78.0.0/16");
    let (pod, call) = lab.pod("default", "p").unwrap();
    let netns = call.netns.as_ref().unwrap().display().to_string();
    let conf = json!({"cniVersion": "1.1.0", "name": NETWORK})
        .as_object()
        .unwrap()
        .clone()
        .into_iter()
        .chain(lab.tartan_entry(0, json!({})).as_object().unwrap().clone())
        .collect::<serde_json::Map<_, _>>();
    let conf = Value::Object(conf).to_string();
    let add_env = |drop_key: &str| -> Vec<(&str, String)> {
        [
            ("CNI_COMMAND", "ADD".to_string()),
            ("CNI_CONTAINERID", call.container_id.clone()),
            ("CNI_NETNS", netns.clone()),
            ("CNI_IFNAME", "eth0".to_string()),
            ("CNI_PATH", "/usr/lib/cni".to_string()),
        ]
        .into_iter()
        .filter(|(k, _)| *k != drop_key)
        .collect()
    };
    let call_with = |env: Vec<(&str, String)>, stdin: &str| {
        let e: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        raw(&lab, 0, &e, stdin)
    };

    // VERSION needs nothing but the command.
    let v = call_with(
        vec![("CNI_COMMAND", "VERSION".into())],
        r#"{"cniVersion":"1.0.0"}"#,
    );
    assert!(v.success, "{v:?}");
    let supported: Vec<&str> = v.json["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    for want in ["0.4.0", "1.0.0", "1.1.0"] {
        assert!(supported.contains(&want), "{supported:?}");
    }

    // A missing variable: code 4, named.
    for k in ["CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"] {
        let r = call_with(add_env(k), &conf);
        assert!(!r.success);
        assert_eq!(r.code(), Some(4), "{k}: {r:?}");
        assert!(r.msg().contains(k), "{k}: {}", r.msg());
    }
    // Undecodable configuration: 6. Invalid: 7. Unsupported version: 1.
    let r = call_with(add_env(""), "{\"cniVersion\": ");
    assert_eq!(r.code(), Some(6), "{r:?}");
    let r = call_with(add_env(""), r#"{"cniVersion":"1.0.0","type":"tartan"}"#);
    assert_eq!(r.code(), Some(7), "{r:?}");
    let old = conf.replace("\"1.1.0\"", "\"0.2.0\"");
    let r = call_with(add_env(""), &old);
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(r.msg().contains("0.2.0"), "{}", r.msg());

    // A namespace that does not exist: container unknown (3), nothing kept.
    let mut gone = add_env("CNI_NETNS");
    gone.push(("CNI_NETNS", "/run/netns/tartan-no-such-ns".into()));
    let r = call_with(gone, &conf);
    assert_eq!(r.code(), Some(3), "{r:?}");
    assert!(held(&lab, &handle(&call)).is_empty());

    // CHECK of a container never added: 3.
    let rt = lab.plain(0);
    let fake = json!({"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":netns}],
                       "ips":[{"address":"10.78.0.9/32","interface":0}]});
    let e = rt.check(&call, &fake).unwrap_err().to_string();
    assert!(e.contains("code Some(3)"), "{e}");

    // An interface name already taken in the pod: an error, nothing kept.
    pod.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
    ])
    .unwrap();
    let e = rt.add(&call).unwrap_err().to_string();
    assert!(e.contains("eth0"), "{e}");
    assert!(
        held(&lab, &handle(&call)).is_empty(),
        "address kept after a failed ADD"
    );
    assert!(
        !node_links(&lab, 0).contains("tar"),
        "host veth kept after a failed ADD"
    );
}

#[test]
fn check_notices_what_was_changed_by_hand() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.79.0.0/16");
    let rt = lab.plain(0);
    let (pod, call) = lab.pod("default", "p").unwrap();
    let r = rt.add(&call).unwrap();
    rt.check(&call, &r).unwrap();
    // The pod's interface is not where prevResult puts it.
    let mut elsewhere = r.clone();
    for i in elsewhere["interfaces"].as_array_mut().unwrap() {
        if i.get("sandbox").is_some() {
            i["sandbox"] = json!("/run/netns/somewhere-else");
        }
    }
    let e = rt.check(&call, &elsewhere).unwrap_err().to_string();
    assert!(e.contains("somewhere-else"), "{e}");
    // Its MAC changed by hand.
    pod.ip(&["link", "set", "eth0", "address", "02:00:00:00:00:01"])
        .unwrap();
    let e = rt.check(&call, &r).unwrap_err().to_string();
    assert!(e.contains("02:00:00:00:00:01"), "{e}");
    // A prevResult that lists no MAC (or one in another form) has none
    // compared.
    for listed in [None, Some("02-00-00-00-00-09")] {
        let mut other = r.clone();
        for i in other["interfaces"].as_array_mut().unwrap() {
            match listed {
                None => {
                    i.as_object_mut().unwrap().remove("mac");
                }
                Some(m) => i["mac"] = json!(m),
            }
        }
        rt.check(&call, &other).unwrap();
    }
    let mac = r["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i.get("sandbox").is_some())
        .unwrap()["mac"]
        .as_str()
        .unwrap()
        .to_string();
    pod.ip(&["link", "set", "eth0", "address", &mac]).unwrap();
    rt.check(&call, &r).unwrap();
    let addr = r["ips"][0]["address"].as_str().unwrap().to_string();
    pod.ip(&["addr", "del", &addr, "dev", "eth0"]).unwrap();
    let e = rt.check(&call, &r).unwrap_err().to_string();
    assert!(e.contains(&addr), "{e}");
    // A prevResult that disagrees with IPAM.
    let mut wrong = r.clone();
    wrong["ips"][0]["address"] = json!("10.79.200.200/32");
    let e = rt.check(&call, &wrong).unwrap_err().to_string();
    assert!(e.contains("IPAM holds"), "{e}");
    rt.del(&call, Some(&r)).unwrap();
}

#[test]
fn a_second_add_of_the_same_attachment_fails_and_leaves_the_first_whole() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.81.0.0/16");
    let rt = lab.plain(0);
    let (_pod, call) = lab.pod("default", "twice").unwrap();
    let r = rt.add(&call).unwrap();
    let addr = pod_address(&r);
    // The runtime asks again for the same container and interface.
    let e = rt.add(&call).unwrap_err().to_string();
    assert!(e.contains("already exists"), "{e}");
    // The first attachment is as it was: its address, its record, its
    // interface.
    assert_eq!(held(&lab, &handle(&call)), vec![addr.clone()]);
    assert_eq!(weps(&lab).len(), 1);
    rt.check(&call, &r).unwrap();
    rt.del(&call, Some(&r)).unwrap();
    assert!(held(&lab, &handle(&call)).is_empty());
}

#[test]
fn status_and_gc() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = CniLab::new(1).unwrap();
    let rt = lab.plain(0);
    // No pool: not available (50).
    let e = rt.status().unwrap_err().to_string();
    assert!(
        e.contains("code Some(50)") && e.contains("no IPv4 pool"),
        "{e}"
    );
    // A pool of 4 addresses, 2 usable (its edges are never handed out).
    lab.add_pool("tiny", "10.80.0.0/30", Some(30)).unwrap();
    rt.status().unwrap();
    let mut pods = Vec::new();
    for n in 0..2 {
        let (ns, call) = lab.pod("default", &format!("p{n}")).unwrap();
        let r = rt.add(&call).unwrap();
        pods.push((ns, call, r));
    }
    let e = rt.status().unwrap_err().to_string();
    assert!(
        e.contains("code Some(50)") && e.contains("no free IPv4 address"),
        "{e}"
    );

    // GC keeps what the runtime still holds and releases the rest.
    let keep = (pods[0].1.container_id.clone(), "eth0".to_string());
    rt.gc(std::slice::from_ref(&keep)).unwrap();
    assert_eq!(held(&lab, &handle(&pods[0].1)).len(), 1);
    assert!(held(&lab, &handle(&pods[1].1)).is_empty());
    let names: Vec<String> = weps(&lab)
        .iter()
        .map(|w| w.spec.container_id.clone())
        .collect();
    assert_eq!(names, std::slice::from_ref(&keep.0));
    let handles: Vec<IpamHandle> = lab.rt.block_on(lab.store.list_typed(None)).unwrap().0;
    assert_eq!(handles.len(), 1);
    rt.status().unwrap();

    // The datastore gone: not available, within the configured timeout.
    let unreachable = tartan_tests::runtime_with(
        &lab,
        0,
        json!({"datastoreTimeoutSeconds": 2, "datastore": "etcd://10.255.255.1:2379"}),
        json!({}),
    );
    let t = std::time::Instant::now();
    let e = unreachable.status().unwrap_err().to_string();
    assert!(
        e.contains("code Some(50)") || e.contains("code Some(11)"),
        "{e}"
    );
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    for (_, call, r) in &pods {
        rt.del(call, Some(r)).unwrap();
    }
}

#[test]
fn pings_in_and_out_and_nothing_left_after_del() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.81.0.0/16");
    lab.add_pool("default-v6", "fd00:81::/64", None).unwrap();
    let rt = tartan_tests::runtime_with(&lab, 0, json!({"mtu": 1400}), json!({}));
    let (pod, call) = lab.pod("default", "p").unwrap();
    let r = rt.add(&call).unwrap();
    let addr = pod_address(&r);
    let addr6 = r["ips"][1]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    assert!(addr6.starts_with("fd00:81::"), "{r}");
    assert_eq!(r["routes"][1]["gw"], "fe80::ecee:eeff:feee:eeee");
    let node = lab.underlay.node(0);
    node.netns
        .ip(&["-6", "addr", "add", "fd00:99::1/128", "dev", "lo"])
        .unwrap();
    assert!(ping(node.netns.name(), &addr), "node -> pod\n{}", lab.log());
    assert!(ping(pod.name(), &node.address.to_string()), "pod -> node");
    assert!(ping(node.netns.name(), &addr6), "node -> pod over IPv6");
    assert!(ping(pod.name(), "fd00:99::1"), "pod -> node over IPv6");
    rt.check(&call, &r).unwrap();
    // The MTU from the configuration, on both ends and in the result.
    assert!(
        pod.ip(&["link", "show", "eth0"])
            .unwrap()
            .contains("mtu 1400")
    );
    let host = r["interfaces"][0]["name"].as_str().unwrap();
    assert!(
        node.netns
            .ip(&["link", "show", host])
            .unwrap()
            .contains("mtu 1400")
    );
    assert_eq!(r["interfaces"][1]["mtu"], 1400);
    let routes = node.netns.ip(&["route", "show", "proto", "202"]).unwrap();
    assert!(routes.contains(&addr), "{routes}");
    rt.del(&call, Some(&r)).unwrap();
    rt.del(&call, Some(&r)).unwrap();
    let routes = node.netns.ip(&["route", "show", "proto", "202"]).unwrap();
    assert!(routes.trim().is_empty(), "{routes}");
    assert!(!node_links(&lab, 0).contains("tar"));
    assert!(
        pod.ip(&["-o", "link", "show", "eth0"]).is_err(),
        "eth0 left in the pod"
    );
    assert!(!ping(node.netns.name(), &addr));
    // DEL after the pod's namespace is gone, as a runtime may call it.
    drop(pod);
    rt.del(&call, None).unwrap();
}

/// The reference plugins from Debian run after `tartan` in one conflist,
/// fed its result: portmap's mapping carries a real TCP connection.
#[test]
fn chained_with_portmap_bandwidth_and_tuning() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    for p in ["portmap", "bandwidth", "tuning"] {
        if !Path::new("/usr/lib/cni").join(p).exists() {
            panic!("/usr/lib/cni/{p} is missing: install containernetworking-plugins");
        }
    }
    let lab = tartan_tests::cni_lab(2, "10.82.0.0/16");
    // The node forwards (felix's job later; the lab does it here).
    lab.underlay
        .node(0)
        .netns
        .exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"])
        .unwrap();
    // Reference plugins speak CNI up to 1.0.0.
    let conflist = CniLab::conflist(
        "1.0.0",
        vec![
            lab.tartan_entry(0, json!({})),
            json!({"type": "portmap", "capabilities": {"portMappings": true}, "snat": true}),
            json!({"type": "bandwidth", "capabilities": {"bandwidth": true}}),
            json!({"type": "tuning", "sysctl": {"net.core.somaxconn": "1000"}}),
        ],
    );
    // The node is IPv4-only: its PATH has iptables but no ip6tables.
    // Debian's portmap (1.1.1) otherwise fails every CHECK, looking for its
    // IPv4 rules among ip6tables' (containernetworking/plugins#819, fixed
    // upstream after that release).
    let bin = tartan_lab::TempDir::new("v4only").unwrap();
    for tool in ["iptables", "iptables-save", "iptables-restore"] {
        std::os::unix::fs::symlink(Path::new("/usr/sbin").join(tool), bin.join(tool)).unwrap();
    }
    let mut rt = lab.runtime(0, conflist);
    rt.env.push((
        "PATH".into(),
        format!("{}:/usr/bin:/bin", bin.path().display()),
    ));
    let (pod, mut call) = lab.pod("default", "web").unwrap();
    call.capability_args.insert(
        "portMappings".into(),
        json!([{"hostPort": 18080, "containerPort": 8080, "protocol": "tcp"}]),
    );
    call.capability_args.insert(
        "bandwidth".into(),
        json!({"ingressRate": 100_000_000, "ingressBurst": 10_000_000,
               "egressRate": 100_000_000, "egressBurst": 10_000_000}),
    );
    let r = rt
        .add(&call)
        .unwrap_or_else(|e| panic!("{e}\n{}", lab.log()));
    // tuning's sysctl is in the pod; bandwidth shaped the host end.
    let somaxconn = pod.exec("sysctl", &["-n", "net.core.somaxconn"]).unwrap();
    assert_eq!(somaxconn.trim(), "1000");
    let host = r["interfaces"][0]["name"].as_str().unwrap();
    let qdisc = lab.underlay.node(0).netns.ip(&["-o", "link"]).unwrap();
    assert!(qdisc.contains(host), "{qdisc}");
    let tc = Command::new("ip")
        .args([
            "netns",
            "exec",
            lab.underlay.node(0).netns.name(),
            "tc",
            "qdisc",
            "show",
            "dev",
            host,
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&tc.stdout).contains("tbf"),
        "{tc:?}"
    );
    rt.check(&call, &r).unwrap();

    // A server in the pod; a client on the other node dials node-1:18080.
    let mut server = pod
        .command("socat")
        .args([
            "-T5",
            "TCP-LISTEN:8080,reuseaddr,fork",
            "SYSTEM:echo hello-from-pod",
        ])
        .spawn()
        .unwrap();
    let target = format!(
        "TCP:{}:18080,connect-timeout=3",
        lab.underlay.node(0).address
    );
    let reply = tartan_lab::netns::wait_for("portmap", std::time::Duration::from_secs(10), || {
        let out = lab
            .underlay
            .node(1)
            .netns
            .command("socat")
            .args(["-T3", "-", &target])
            .stdin(std::process::Stdio::null())
            .output()
            .ok()?;
        let s = String::from_utf8_lossy(&out.stdout).to_string();
        s.contains("hello-from-pod").then_some(s)
    });
    let _ = server.kill();
    let _ = server.wait();
    reply.unwrap();

    rt.del(&call, Some(&r)).unwrap();
    let nat = lab
        .underlay
        .node(0)
        .netns
        .exec("iptables-save", &["-t", "nat"])
        .unwrap();
    assert!(!nat.contains("18080"), "portmap left its rule:\n{nat}");
    assert!(held(&lab, &handle(&call)).is_empty());
    drop(pod);
}

/// The record carries the Pod's labels and named ports, read from the Pod
/// object in the datastore (etcd here, as on a bare-metal fleet).
#[test]
fn the_record_carries_the_pods_labels_and_named_ports() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.83.0.0/16");
    let pod_obj: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web", "tier": "front"}},
        "spec": {"containers": [{"name": "c", "ports": [
            {"name": "http", "containerPort": 8080},
            {"name": "dns", "containerPort": 53, "protocol": "UDP"},
            {"containerPort": 9000}
        ]}]}
    }))
    .unwrap();
    lab.rt.block_on(lab.store.create_typed(&pod_obj)).unwrap();
    let rt = lab.plain(0);
    let (_pod, call) = lab.pod("shop", "web").unwrap();
    let r = rt.add(&call).unwrap();
    let w: WorkloadEndpoint = lab
        .rt
        .block_on(lab.store.get_typed(Some("shop"), "web.eth0"))
        .unwrap();
    let labels = w.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
    let ports: Vec<(String, String, u16)> = w
        .spec
        .ports
        .iter()
        .map(|p| (p.name.clone(), p.protocol.clone(), p.port))
        .collect();
    assert_eq!(
        ports,
        [
            ("http".into(), "TCP".into(), 8080),
            ("dns".into(), "UDP".into(), 53)
        ]
    );
    assert_eq!(w.spec.mac.as_deref(), r["interfaces"][1]["mac"].as_str());
    // A pod whose object does not exist is still wired, without labels.
    let (_p2, c2) = lab.pod("shop", "ghost").unwrap();
    rt.add(&c2).unwrap();
    let g: WorkloadEndpoint = lab
        .rt
        .block_on(lab.store.get_typed(Some("shop"), "ghost.eth0"))
        .unwrap();
    assert!(g.metadata.labels.unwrap_or_default().is_empty());
}

/// `tartan-ipam` as the IPAM of another main plugin (Debian's macvlan, on
/// the node's underlay interface), which calls it through CNI_PATH with
/// the whole configuration. (ptp assumes a subnet-sized prefix and fails
/// on the /32 addresses Tartan hands out.)
#[test]
fn tartan_ipam_under_another_plugin() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.84.0.0/16");
    let conflist = CniLab::conflist(
        "1.0.0",
        vec![json!({
            "type": "macvlan",
            "master": lab.underlay.node(0).ifname,
            "mode": "bridge",
            "ipam": {
                "type": "tartan-ipam",
                "datastore": lab.etcd.datastore_spec(),
                "nodename": "node-1",
                "releaseCooldownSeconds": 0
            },
            "logFile": lab.log_file().display().to_string()
        })],
    );
    let rt = lab.runtime(0, conflist);
    let (pod, call) = lab.pod("default", "p").unwrap();
    let r = rt
        .add(&call)
        .unwrap_or_else(|e| panic!("{e}\n{}", lab.log()));
    let addr = pod_address(&r);
    assert!(addr.starts_with("10.84."), "{r}");
    assert_eq!(held(&lab, &handle(&call)), std::slice::from_ref(&addr));
    let inside = pod.ip(&["-o", "addr", "show", "eth0"]).unwrap();
    assert!(inside.contains(&addr), "{inside}");
    // CHECK of tartan-ipam itself (macvlan's own CHECK insists on a
    // gateway, which a routed /32 has none of).
    let ipam_check = |prev: &Value| {
        let mut conf = rt.conflist["plugins"][0].clone();
        conf["name"] = json!(NETWORK);
        conf["cniVersion"] = json!("1.0.0");
        conf["prevResult"] = prev.clone();
        exec(
            &tartan_bin_dir().join("tartan-ipam"),
            Some(lab.underlay.node(0).netns.name()),
            &[
                ("CNI_COMMAND", Some("CHECK".into())),
                ("CNI_CONTAINERID", Some(call.container_id.clone())),
                (
                    "CNI_NETNS",
                    call.netns.as_ref().map(|p| p.display().to_string()),
                ),
                ("CNI_IFNAME", Some("eth0".into())),
                ("CNI_PATH", Some("/usr/lib/cni".into())),
            ],
            conf.to_string().as_bytes(),
        )
        .unwrap()
    };
    assert!(ipam_check(&r).success);
    let mut wrong = r.clone();
    wrong["ips"][0]["address"] = json!("10.84.9.9/32");
    let failed = ipam_check(&wrong);
    assert!(
        !failed.success && failed.msg().contains("IPAM holds"),
        "{failed:?}"
    );
    rt.del(&call, Some(&r)).unwrap();
    rt.del(&call, Some(&r)).unwrap();
    assert!(held(&lab, &handle(&call)).is_empty());
}

#[test]
fn a_node_name_that_cannot_name_objects_is_refused() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.85.0.0/16");
    let rt = tartan_tests::runtime_with(&lab, 0, json!({"nodename": "../../etc/x"}), json!({}));
    let (_pod, call) = lab.pod("default", "p").unwrap();
    let e = rt.add(&call).unwrap_err().to_string();
    assert!(e.contains("code Some(7)") && e.contains("node name"), "{e}");
    assert!(held(&lab, &handle(&call)).is_empty());
}
