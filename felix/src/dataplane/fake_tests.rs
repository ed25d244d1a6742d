//! felix's tables rendered into tartan-nft's in-memory fake backend, no
//! root needed: one NetworkPolicy through the policy compiler and a small
//! Service table through the service proxy's rendering, each written
//! whole and then changed by difference, as the drivers write them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;
use tartan_nft::backend::Backend;
use tartan_nft::backend::fake::Fake;
use tartan_policy::compile::{
    self, Endpoint, NAMESPACE_NAME_LABEL, NamedPort, NamespaceLabels, Ruleset,
};

use super::nft::Table;
use crate::services::render::SvcNft;
use crate::services::{SERVICE_NAME_LABEL, ServiceInfo, SliceInfo, desired};

fn written<T: Table>(t: &T) -> Fake {
    let mut f = Fake::new();
    f.commit(&t.full()).expect("the whole table applies");
    f
}

/// `old` written whole, then the difference to `new`: the same ruleset
/// as `new` written whole.
fn assert_difference_reaches<T: Table>(old: &T, new: &T) {
    let mut f = written(old);
    f.commit(&T::diff(old, new).expect("a difference"))
        .expect("the difference applies");
    assert_eq!(f.list(), written(new).list());
}

fn endpoint(pod: &str, ip: &str, iface: &str) -> Endpoint {
    Endpoint {
        namespace: "x".into(),
        labels: BTreeMap::from([("pod".to_string(), pod.to_string())]).into(),
        addrs: vec![ip.parse().unwrap()],
        ports: [NamedPort {
            name: "http".into(),
            protocol: 6,
            port: 80,
        }]
        .into(),
        interface: Some(iface.into()),
    }
}

fn policy_ruleset(client: &str) -> Ruleset {
    let np: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "x"},
        "spec": {"podSelector": {"matchLabels": {"pod": "web"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "client"}}}],
                "ports": [{"protocol": "TCP", "port": 80}]}]}
    }))
    .unwrap();
    let p =
        tartan_policy::ir::from_kubernetes(&tartan_policy::k8s::from_network_policy(&np).unwrap());
    let eps = [
        endpoint("web", "10.0.0.1", "tarweb"),
        endpoint(client, "10.0.0.2", "tarcli"),
    ];
    let ns: NamespaceLabels = BTreeMap::from([(
        "x".to_string(),
        BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), "x".to_string())]),
    )]);
    compile::compile([&p], &eps, &[], &ns)
}

#[test]
fn a_network_policy_lands_in_the_fake_as_the_driver_writes_it() {
    let rs = policy_ruleset("client");
    let f = written(&rs);
    let t = f.table("inet", "tartan").expect("the policy table");
    // The fixed base chains: established first, pods' egress and ingress
    // each sent to their endpoint's chain; a pod's spoofed source dropped
    // in prerouting, before all of it.
    let forward = f.rules("inet", "tartan", "forward").unwrap();
    assert_eq!(forward.len(), 4, "{forward:?}");
    assert!(forward[0].ends_with("accept"), "{forward:?}");
    assert!(forward[3].contains("jump from_endpoint"), "{forward:?}");
    let pre = f.rules("inet", "tartan", "prerouting").unwrap();
    assert_eq!(
        pre,
        ["meta iifname == tar* meta iifname != tartan* fib saddr . iif oif == false drop"]
    );
    // The selected pod's interface goes to a profile chain that allows
    // the client's address on TCP 80 and ends with a drop.
    let to = f.elements("inet", "tartan", "to_endpoint").unwrap();
    let target = to["tarweb"].clone().expect("a verdict");
    let chain = target.strip_prefix("goto ").expect("a goto");
    let rules = f.rules("inet", "tartan", chain).expect("the profile chain");
    assert!(!rules.is_empty());
    let client_in_a_set = t
        .sets
        .values()
        .any(|s| s.elements.keys().any(|k| k.contains("10.0.0.2")));
    assert!(client_in_a_set, "{}", f.list());
    // A pod relabelled out of the policy: the difference applied to the
    // written table gives what a full write of the new ruleset gives.
    assert_difference_reaches(&rs, &policy_ruleset("other"));
}

fn web_table(endpoints: &[&str]) -> SvcNft {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "x"},
        "spec": {"clusterIP": "10.96.0.10", "type": "NodePort",
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]},
        "status": {}
    }))
    .unwrap();
    let eps: Vec<_> = endpoints
        .iter()
        .map(|ip| {
            json!({"addresses": [ip], "nodeName": "n1",
            "conditions": {"ready": true, "serving": true, "terminating": false}})
        })
        .collect();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "x", "labels": {SERVICE_NAME_LABEL: "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": eps
    }))
    .unwrap();
    let services = BTreeMap::from([(
        "x/web".to_string(),
        ServiceInfo::from_service(&svc).unwrap().unwrap(),
    )]);
    let slices = BTreeMap::from([(
        "x/web-1".to_string(),
        SliceInfo::from_slice(&slice, "n1").unwrap(),
    )]);
    SvcNft::from_table(&desired(&services, &slices, "", BTreeSet::new()))
}

#[test]
fn a_service_table_lands_in_the_fake_as_the_proxy_writes_it() {
    let one = web_table(&["10.244.0.5"]);
    let f = written(&one);
    // The ClusterIP and the NodePort each pick among one endpoint, whose
    // address and port the DNAT maps give.
    let frontends = f.elements("ip", "tartan-svc", "frontends").unwrap();
    assert_eq!(frontends.len(), 1, "{}", f.list());
    assert!(
        frontends.contains_key("10.96.0.10 . 6 . 80"),
        "{frontends:?}"
    );
    let node_ports = f.elements("ip", "tartan-svc", "node_ports").unwrap();
    assert!(node_ports.contains_key("6 . 30080"), "{node_ports:?}");
    let addrs = f.elements("ip", "tartan-svc", "fe_addr").unwrap();
    assert_eq!(addrs.values().flatten().collect::<Vec<_>>(), ["10.244.0.5"]);
    let ports = f.elements("ip", "tartan-svc", "fe_port").unwrap();
    assert_eq!(ports.values().flatten().collect::<Vec<_>>(), ["8080"]);
    // The base chains hook where kube-proxy's do.
    let t = f.table("ip", "tartan-svc").unwrap();
    let prerouting = t.chains.get("prerouting").expect("prerouting");
    assert!(
        prerouting
            .hook
            .as_deref()
            .unwrap_or("")
            .contains("hook prerouting"),
        "{prerouting:?}"
    );
    // A second endpoint: the difference reaches the full table.
    assert_difference_reaches(&one, &web_table(&["10.244.0.5", "10.244.0.6"]));
    assert_difference_reaches(&web_table(&["10.244.0.5", "10.244.0.6"]), &one);
}
