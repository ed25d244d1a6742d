//! Whatever a runtime sends, reading it never panics: random bytes and
//! flat objects, and valid configurations (IPAM, a prevResult with
//! interfaces and addresses, runtimeConfig) with fields dropped or
//! replaced by JSON of any other type.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::result::{Interface, IpConfig};
use super::{CniResult, Invocation, NetConf};

/// A configuration as a runtime sends it to the second plugin of a chain.
fn example() -> Value {
    json!({
        "cniVersion": "1.1.0",
        "name": "k8s-pod-network",
        "type": "tartan",
        "datastore": "etcd://127.0.0.1:2379",
        "datastoreTimeoutSeconds": 10,
        "kubeconfig": "/etc/cni/net.d/tartan-kubeconfig",
        "nodename": "node-1",
        "mtu": 1450,
        "logFile": "/var/log/tartan/cni.log",
        "logLevel": "info",
        "ipam": {
            "type": "tartan-ipam",
            "ipv4Pools": ["default-ipv4", "10.244.0.0/16"],
            "ipv6Pools": ["fd00::/48"],
            "assignIpv4": true,
            "assignIpv6": false,
            "strictAffinity": false,
            "releaseCooldownSeconds": 10,
            "datastore": "kubernetes",
            "nodename": "node-1"
        },
        "prevResult": {
            "cniVersion": "1.1.0",
            "interfaces": [
                {"name": "cali0", "mac": "aa:bb:cc:dd:ee:ff"},
                {"name": "eth0", "mac": "aa:bb:cc:dd:ee:00", "sandbox": "/run/netns/x", "mtu": 1450}
            ],
            "ips": [
                {"address": "10.244.1.5/32", "gateway": "169.254.1.1", "interface": 1},
                {"address": "fd00::5/128", "interface": 1}
            ],
            "routes": [{"dst": "0.0.0.0/0", "gw": "169.254.1.1"}],
            "dns": {"nameservers": ["10.96.0.10"], "domain": "cluster.local",
                    "search": ["default.svc.cluster.local"], "options": ["ndots:5"]}
        },
        "runtimeConfig": {
            "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            "bandwidth": {"ingressRate": 1000, "egressRate": 1000},
            "ips": ["10.244.1.5/32"],
            "mac": "aa:bb:cc:dd:ee:00"
        },
        "cni.dev/valid-attachments": [{"containerID": "abc", "ifname": "eth0"}]
    })
}

/// Every JSON pointer in `v`, the root first.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                pointers(c, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// JSON of any type, a little nested.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,8}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Drop the value at a pointer (`None`) or put another there.
type Mutation = (prop::sample::Index, Option<Value>);

fn mutate(mut doc: Value, mutations: &[Mutation]) -> Value {
    for (which, replacement) in mutations {
        let mut all = Vec::new();
        pointers(&doc, String::new(), &mut all);
        let at = which.get(&all).clone();
        match replacement {
            Some(v) => {
                if let Some(slot) = doc.pointer_mut(&at) {
                    *slot = v.clone();
                }
            }
            None => {
                let Some((parent, last)) = at.rsplit_once('/') else {
                    continue;
                };
                let last = last.replace("~1", "/").replace("~0", "~");
                match doc.pointer_mut(parent) {
                    Some(Value::Object(m)) => {
                        m.remove(&last);
                    }
                    Some(Value::Array(a)) => {
                        if let Ok(i) = last.parse::<usize>() {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    doc
}

fn ours() -> CniResult {
    CniResult {
        cni_version: String::new(),
        interfaces: vec![Interface {
            name: "eth0".into(),
            mac: "aa:bb:cc:dd:ee:01".into(),
            sandbox: Some("/run/netns/y".into()),
            mtu: Some(1450),
        }],
        ips: vec![IpConfig {
            address: "10.244.1.6/32".into(),
            gateway: None,
            interface: Some(0),
        }],
        ..CniResult::default()
    }
}

/// Everything the plugin reads from a configuration, read.
fn read_all(stdin: &[u8]) {
    let Ok(c) = NetConf::parse(stdin) else {
        return;
    };
    let _ = c.datastore();
    let _ = c.datastore_timeout();
    let _ = c.nodename();
    let _ = c.handle("abc");
    if let Some(prev) = &c.prev_result {
        let _ = CniResult::from_prev(prev);
        let after = ours().after(prev, &c.cni_version);
        let _ = CniResult::from_prev(&after);
    }
}

#[test]
fn the_example_reads_whole() {
    let c = NetConf::parse(example().to_string().as_bytes()).unwrap();
    assert_eq!(c.ipam.as_ref().unwrap().ipv6_pools, ["fd00::/48"]);
    let prev = CniResult::from_prev(c.prev_result.as_ref().unwrap()).unwrap();
    assert_eq!(prev.ips.len(), 2);
    let mut all = Vec::new();
    pointers(&example(), String::new(), &mut all);
    assert!(all.contains(&"/runtimeConfig/portMappings/0/hostPort".to_string()));
    assert!(all.contains(&"/cni.dev~1valid-attachments/0/ifname".to_string()));
}

proptest! {
    #[test]
    fn any_stdin_and_environment(
        stdin in proptest::collection::vec(any::<u8>(), 0..400),
        json in "\\{(\"[a-zA-Z]{1,10}\": ?(\"[ -~]{0,12}\"|[0-9]{1,6}|null|\\[\\]|\\{\\}),? ?){0,6}\\}",
        vars in proptest::collection::vec(("CNI_[A-Z]{2,11}", "[ -~]{0,40}"), 0..8),
    ) {
        let _ = NetConf::parse(&stdin);
        let _ = NetConf::parse(json.as_bytes());
        let _ = Invocation::from_env(vars);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&json) {
            let _ = CniResult::from_prev(&v);
        }
    }

    #[test]
    fn mutated_example_configurations(
        mutations in proptest::collection::vec(
            (any::<prop::sample::Index>(), proptest::option::of(any_json())),
            0..6,
        ),
        version in prop_oneof![Just("0.3.1"), Just("0.4.0"), Just("1.0.0"), Just("1.1.0")],
    ) {
        let mut doc = example();
        doc["cniVersion"] = version.into();
        doc["prevResult"]["cniVersion"] = version.into();
        let doc = mutate(doc, &mutations);
        read_all(doc.to_string().as_bytes());
        // The prevResult on its own, as CHECK and a chained ADD read it.
        if let Some(prev) = doc.get("prevResult") {
            let _ = CniResult::from_prev(prev);
            let _ = ours().after(prev, version);
        }
    }
}
