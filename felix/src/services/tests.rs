use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::render::{MAX_AFFINITY_ENDPOINTS, STANDING_PICKERS, SvcNft, diff, full};
use super::*;

fn service(spec: serde_json::Value, status: serde_json::Value) -> ServiceInfo {
    let s: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "x"}, "spec": spec, "status": status
    }))
    .unwrap();
    ServiceInfo::<Ipv4Addr>::from_service(&s).unwrap().unwrap()
}

fn slice(endpoints: serde_json::Value) -> SliceInfo {
    let s: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "x", "labels": {SERVICE_NAME_LABEL: "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints
    }))
    .unwrap();
    SliceInfo::from_slice(&s, "n1").unwrap()
}

fn ep(ip: &str, node: &str, ready: bool, terminating: bool) -> serde_json::Value {
    json!({"addresses": [ip], "nodeName": node,
           "conditions": {"ready": ready, "serving": true, "terminating": terminating}})
}

fn table(svc: ServiceInfo, sl: Option<SliceInfo>) -> ServiceTable {
    let services = BTreeMap::from([("x/web".to_string(), svc)]);
    let slices: BTreeMap<String, SliceInfo> =
        sl.into_iter().map(|s| ("x/web-1".to_string(), s)).collect();
    desired(&services, &slices, "", BTreeSet::new())
}

fn backends(d: &Dispatch) -> Vec<String> {
    match d {
        Dispatch::Backends { backends, .. } => backends
            .iter()
            .map(|b| format!("{}:{}", b.addr, b.port))
            .collect(),
        other => vec![format!("{other:?}")],
    }
}

const CIP: &str = "10.96.0.10";

fn web(extra: serde_json::Value) -> serde_json::Value {
    let mut spec = json!({
        "clusterIP": CIP, "type": "NodePort",
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

#[test]
fn ready_endpoints_first_terminating_only_without_them() {
    let svc = service(web(json!({})), json!({}));
    let t = table(
        svc.clone(),
        Some(slice(json!([
            ep("10.244.0.5", "n1", true, false),
            ep("10.244.1.5", "n2", true, false),
            ep("10.244.1.6", "n2", false, true)
        ]))),
    );
    let fe = (CIP.parse().unwrap(), TCP, 80);
    assert_eq!(
        backends(&t.frontends[&fe]),
        ["10.244.0.5:8080", "10.244.1.5:8080"]
    );
    assert_eq!(t.node_ports[&(TCP, 30080)], t.frontends[&fe]);
    let t = table(
        svc.clone(),
        Some(slice(json!([ep("10.244.1.6", "n2", false, true)]))),
    );
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.1.6:8080"]);
    // Not ready and not serving: none left, the Service refuses.
    let t = table(
        svc.clone(),
        Some(slice(json!([ep("10.244.1.7", "n2", false, false)]))),
    );
    assert_eq!(t.frontends[&fe], Dispatch::Reject);
    let t = table(svc, None);
    assert_eq!(t.node_ports[&(TCP, 30080)], Dispatch::Reject);
}

#[test]
fn local_traffic_policies_keep_to_this_node_or_drop() {
    let eps = json!([ep("10.244.1.5", "n2", true, false)]);
    let svc = service(
        web(json!({"externalTrafficPolicy": "Local", "type": "LoadBalancer"})),
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
    );
    let t = table(svc, Some(slice(eps.clone())));
    // The ClusterIP reaches every endpoint; the LoadBalancer IP and the
    // NodePort only local ones, and there are none on n1.
    assert_eq!(
        backends(&t.frontends[&(CIP.parse().unwrap(), TCP, 80)]),
        ["10.244.1.5:8080"]
    );
    assert_eq!(
        t.frontends[&("192.0.2.10".parse().unwrap(), TCP, 80)],
        Dispatch::Drop
    );
    assert_eq!(t.node_ports[&(TCP, 30080)], Dispatch::Drop);
    let svc = service(web(json!({"internalTrafficPolicy": "Local"})), json!({}));
    let t = table(svc, Some(slice(eps)));
    assert_eq!(
        t.frontends[&(CIP.parse().unwrap(), TCP, 80)],
        Dispatch::Drop
    );
}

#[test]
fn inside_clients_of_a_local_external_frontend_reach_every_endpoint() {
    // A LoadBalancer with `externalTrafficPolicy: Local`, one endpoint on
    // n2 and a terminating one on n1: external clients of n1 get n1's
    // terminating endpoint; n1's pods and n1 itself get the cluster-wide
    // choice (the ready endpoint on n2), as kube-proxy short-circuits them.
    let lb = "192.0.2.10";
    let svc = service(
        web(
            json!({"externalTrafficPolicy": "Local", "type": "LoadBalancer",
                   "externalIPs": ["198.51.100.4"]}),
        ),
        json!({"loadBalancer": {"ingress": [{"ip": lb}]}}),
    );
    let eps = json!([
        ep("10.244.1.5", "n2", true, false),
        ep("10.244.0.9", "n1", false, true)
    ]);
    let t = table(svc.clone(), Some(slice(eps)));
    let fe = (lb.parse().unwrap(), TCP, 80);
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.0.9:8080"]);
    assert_eq!(backends(&t.frontends_in[&fe]), ["10.244.1.5:8080"]);
    let ext = ("198.51.100.4".parse().unwrap(), TCP, 80);
    assert_eq!(backends(&t.frontends_in[&ext]), ["10.244.1.5:8080"]);
    assert_eq!(
        backends(&t.node_ports_in[&(TCP, 30080)]),
        ["10.244.1.5:8080"]
    );
    // The ClusterIP is not an external frontend.
    assert!(
        !t.frontends_in
            .contains_key(&(CIP.parse().unwrap(), TCP, 80))
    );

    // In the table: the inside picker's slots start at INSIDE_SLOTS in
    // the shared slot maps, and its chain is its own.
    let nft = SvcNft::from_table(&t);
    let p = nft.frontends_in[&fe];
    assert!(p.inside);
    assert_eq!(p.chain(), "fe_1_in");
    assert_ne!(p.id(), nft.frontends[&fe].id());
    let slot = nft.fe_slots[&(fe, render::INSIDE_SLOTS)];
    assert_eq!(slot.addr.to_string(), "10.244.1.5");
    assert_eq!(nft.fe_slots[&(fe, 0)].addr.to_string(), "10.244.0.9");
    let doc = full(&nft).to_string();
    assert!(doc.contains(r#""name":"frontends_in""#), "{doc}");
    assert!(doc.contains(r#""offset":16777216"#), "{doc}");

    // No endpoint at all: refused for every client, nothing inside.
    let t = table(svc.clone(), None);
    assert!(t.frontends_in.is_empty() && t.node_ports_in.is_empty());
    assert_eq!(t.frontends[&fe], Dispatch::Reject);
    // `Cluster` policy: one path for every client.
    let svc = service(
        web(json!({"type": "LoadBalancer"})),
        json!({"loadBalancer": {"ingress": [{"ip": lb}]}}),
    );
    let t = table(
        svc,
        Some(slice(json!([ep("10.244.1.5", "n2", true, false)]))),
    );
    assert!(t.frontends_in.is_empty() && t.node_ports_in.is_empty());
}

#[test]
fn local_policies_fall_back_to_this_nodes_terminating_endpoints() {
    // n1's only endpoint is terminating while n2 has a ready one: cluster
    // traffic goes to the ready one, local traffic on n1 to its own
    // terminating one (the fallback is decided after filtering by node).
    let eps = json!([
        ep("10.244.0.5", "n1", false, true),
        ep("10.244.1.5", "n2", true, false)
    ]);
    let svc = service(
        web(
            json!({"internalTrafficPolicy": "Local", "externalTrafficPolicy": "Local",
                   "type": "LoadBalancer"}),
        ),
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
    );
    let t = table(svc, Some(slice(eps)));
    assert_eq!(
        backends(&t.frontends[&(CIP.parse().unwrap(), TCP, 80)]),
        ["10.244.0.5:8080"]
    );
    assert_eq!(
        backends(&t.frontends[&("192.0.2.10".parse().unwrap(), TCP, 80)]),
        ["10.244.0.5:8080"]
    );
    assert_eq!(backends(&t.node_ports[&(TCP, 30080)]), ["10.244.0.5:8080"]);
    // Without a local policy the ready endpoint elsewhere wins.
    let svc = service(web(json!({})), json!({}));
    let t = table(
        svc,
        Some(slice(json!([
            ep("10.244.0.5", "n1", false, true),
            ep("10.244.1.5", "n2", true, false)
        ]))),
    );
    assert_eq!(
        backends(&t.frontends[&(CIP.parse().unwrap(), TCP, 80)]),
        ["10.244.1.5:8080"]
    );
}

#[test]
fn labelled_for_another_proxy_or_headless_is_not_proxied() {
    let labelled = |labels: serde_json::Value| -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "x", "labels": labels},
            "spec": web(json!({}))
        }))
        .unwrap()
    };
    for labels in [
        json!({SERVICE_PROXY_NAME_LABEL: "foo-bar"}),
        json!({SERVICE_PROXY_NAME_LABEL: ""}),
        json!({HEADLESS_LABEL: ""}),
        json!({"app": "web", HEADLESS_LABEL: "true"}),
    ] {
        assert!(
            ServiceInfo::<Ipv4Addr>::from_service(&labelled(labels.clone()))
                .unwrap()
                .is_none(),
            "{labels} is proxied"
        );
    }
    // Other labels leave it proxied.
    assert!(
        ServiceInfo::<Ipv4Addr>::from_service(&labelled(json!({"app": "web"})))
            .unwrap()
            .is_some()
    );
}

#[test]
fn headless_external_name_and_cluster_ip_only() {
    let s: Service = serde_json::from_value(json!({
        "metadata": {"name": "h"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}
    }))
    .unwrap();
    assert!(ServiceInfo::<Ipv4Addr>::from_service(&s).unwrap().is_none());
    let s: Service = serde_json::from_value(json!({
        "metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "example.org"}
    }))
    .unwrap();
    assert!(ServiceInfo::<Ipv4Addr>::from_service(&s).unwrap().is_none());
    // A ClusterIP Service's nodePort (left over from a type change) is not
    // opened.
    let svc = service(web(json!({"type": "ClusterIP"})), json!({}));
    assert!(svc.ports[0].node_port.is_none());
    let svc = service(
        web(json!({"sessionAffinity": "ClientIP", "externalIPs": ["192.0.2.7", "2001:db8::1"]})),
        json!({}),
    );
    assert_eq!(svc.affinity, Some(10_800));
    assert_eq!(svc.external, ["192.0.2.7".parse::<Ipv4Addr>().unwrap()]);
}

#[test]
fn one_endpoint_more_changes_elements_only() {
    let svc = service(web(json!({})), json!({}));
    let one = SvcNft::from_table(&table(
        svc.clone(),
        Some(slice(json!([ep("10.244.0.5", "n1", true, false)]))),
    ));
    let two = SvcNft::from_table(&table(
        svc.clone(),
        Some(slice(json!([
            ep("10.244.0.5", "n1", true, false),
            ep("10.244.0.6", "n1", true, false)
        ]))),
    ));
    assert_eq!(one.pickers.len(), 2, "{:?}", one.pickers);
    let d = diff(&one, &two).unwrap();
    let text = d.to_string();
    // The frontends repointed to the standing picking chains for two
    // endpoints, the second slot's address and port added: elements only,
    // no chain made or removed. The NodePort (`externalTrafficPolicy:
    // Cluster`) picks with the masquerading chain (bit 29 in its id, its
    // slots from MASQ_SLOTS).
    let masq = 1u32 << 29;
    assert!(
        text.contains(r#"[[{"concat":["10.96.0.10",6,80]},2]]"#)
            && text.contains(&format!(r#"[[{{"concat":[6,30080]}},{}]]"#, masq | 2))
            && text.contains(&format!(
                r#"{{"concat":[6,30080,{}]}}"#,
                render::MASQ_SLOTS + 1
            )),
        "{text}"
    );
    assert!(text.contains("10.244.0.6"), "{text}");
    assert!(!text.contains("\"chain\""), "{text}");
    // Beyond the standing ones a picking chain comes and goes with use.
    let wide = |n: usize| {
        let eps: Vec<_> = (0..n)
            .map(|i| ep(&format!("10.244.1.{i}"), "n1", true, false))
            .collect();
        SvcNft::from_table(&table(svc.clone(), Some(slice(json!(eps)))))
    };
    let many = STANDING_PICKERS as usize + 1;
    let text = diff(&two, &wide(many)).unwrap().to_string();
    assert!(
        text.contains(&format!("\"fe_{many}\"")) && text.contains("\"chain\""),
        "{text}"
    );
    assert!(
        text.contains(r#""name":"fe_pickers""#),
        "the chain's id entered: {text}"
    );
    let text = diff(&wide(many), &two).unwrap().to_string();
    assert!(text.contains("\"delete\":{\"chain\""), "{text}");
    assert!(
        text.contains(r#""name":"fe_pickers""#),
        "the chain's id removed: {text}"
    );
    assert!(
        full(&two)
            .to_string()
            .contains(&format!("fe_{STANDING_PICKERS}"))
    );
    assert!(diff(&two, &two).is_none());
    let f = full(&two).to_string();
    assert!(f.contains("\"map\":\"verdict\""), "{f}");
}

fn many(n: usize, eps: usize) -> (BTreeMap<String, ServiceInfo>, BTreeMap<String, SliceInfo>) {
    let mut services = BTreeMap::new();
    let mut slices = BTreeMap::new();
    for i in 0..n {
        let ip = Ipv4Addr::from(0x0a60_0000u32 + i as u32);
        services.insert(
            format!("ns/s{i}"),
            ServiceInfo {
                cluster_ips: vec![ip],
                external: vec![],
                source_ranges: None,
                lb_ips: vec![],
                ports: vec![PortInfo {
                    name: "http".into(),
                    protocol: TCP,
                    port: 80,
                    node_port: None,
                }],
                affinity: (i % 7 == 0).then_some(60),
                external_local: false,
                internal_local: false,
                health_port: None,
            },
        );
        let endpoints = (0..eps + i % 3)
            .map(|j| EndpointInfo {
                addr: Ipv4Addr::from(0x0af4_0000u32 + (i * 16 + j) as u32),
                local: false,
                ready: true,
                serving: true,
                terminating: false,
                zones: Box::default(),
                node_hint: NodeHint::None,
            })
            .collect();
        slices.insert(
            format!("ns/s{i}-1"),
            SliceInfo {
                service: format!("ns/s{i}"),
                ports: [("http".to_string(), (TCP, 8080))].into(),
                endpoints,
            },
        );
    }
    (services, slices)
}

/// An index of `services` and `slices` for node `n1`, its table written
/// whole (the first write is).
fn written_index(
    services: &BTreeMap<String, ServiceInfo>,
    slices: &BTreeMap<String, SliceInfo>,
) -> super::index::ServiceIndex {
    let mut ix = super::index::ServiceIndex::new("n1");
    for (k, v) in services {
        ix.set_service(k, Some(v.clone()));
    }
    for (k, v) in slices {
        ix.set_slice(k, Some(v.clone()));
    }
    ix.update();
    ix.family_mut::<Ipv4Addr>().written_whole();
    ix
}

#[test]
fn the_index_changes_only_the_changed_service_and_equals_a_fresh_computation() {
    let (services, mut slices) = many(50, 2);
    let mut ix = written_index(&services, &slices);
    let fresh = SvcNft::from_table(&desired(&services, &slices, "", BTreeSet::new()));
    assert_eq!(*ix.table(), fresh);
    assert!(ix.consistent());
    // One endpoint more for one Service: the patch names its frontend only.
    let s = slices.get_mut("ns/s10-1").unwrap();
    let mut e = s.endpoints[0].clone();
    e.addr = "10.250.0.1".parse().unwrap();
    s.endpoints.push(e);
    assert!(ix.set_slice("ns/s10-1", Some(s.clone())));
    assert!(
        !ix.set_slice("ns/s10-1", Some(s.clone())),
        "the same again changes nothing"
    );
    ix.update();
    let patch = ix
        .family_mut::<Ipv4Addr>()
        .take_patch()
        .unwrap()
        .to_string();
    assert!(patch.contains("10.250.0.1"), "{patch}");
    assert!(patch.contains("10.96.0.10"), "{patch}");
    assert!(
        !patch.contains("10.96.0.11\""),
        "another Service touched: {patch}"
    );
    let fresh = SvcNft::from_table(&desired(&services, &slices, "", BTreeSet::new()));
    assert_eq!(*ix.table(), fresh);
    assert_eq!(ix.recomputed(), fresh);
    // A Service gone: its elements leave, and chains only nobody uses.
    ix.set_service("ns/s10", None::<ServiceInfo>);
    ix.update();
    let patch = ix.family_mut::<Ipv4Addr>().take_patch().unwrap();
    let text = patch.to_string();
    assert!(text.contains("\"delete\""), "{text}");
    let mut services = services;
    services.remove("ns/s10");
    let fresh = SvcNft::from_table(&desired(&services, &slices, "", BTreeSet::new()));
    assert_eq!(*ix.table(), fresh);
    assert!(ix.family_mut::<Ipv4Addr>().take_patch().is_none());
    assert!(ix.consistent());
    // Two Services claiming one frontend: decided by the whole table.
    let mut twin = services["ns/s11"].clone();
    twin.cluster_ips = services["ns/s12"].cluster_ips.clone();
    ix.set_service("ns/s11", Some(twin));
    ix.update();
    assert_eq!(ix.consistent(), ix.recomputed() == *ix.table());
}

#[test]
fn picker_ids_are_distinct_per_chain() {
    use super::render::{Kind, Picker};
    let mut seen = BTreeMap::new();
    for kind in [Kind::Frontend, Kind::NodePort] {
        for count in [1, 2, 31, 32, 33, 4095, 8191, (1 << 24) - 1] {
            for affinity in [
                None,
                Some(1),
                Some(10),
                Some(10_800),
                Some(65_536),
                Some(MAX_AFFINITY_SECONDS),
            ] {
                // With affinity at most MAX_AFFINITY_ENDPOINTS (the rest
                // are capped away before a picker is chosen).
                if affinity.is_some() && count > MAX_AFFINITY_ENDPOINTS as u32 {
                    continue;
                }
                for (inside, masq) in [(false, false), (true, false), (false, true)] {
                    let p = Picker {
                        kind,
                        count,
                        affinity,
                        inside,
                        masq,
                    };
                    // One id per chain of a kind (the two kinds have their own maps).
                    if let Some(other) = seen.insert((kind, p.id()), p.chain()) {
                        panic!("{} and {other} share id {:#x}", p.chain(), p.id());
                    }
                    // Its slots stay in their own range.
                    let last = p.first_slot() + p.count - 1;
                    assert_eq!(
                        last & !(render::INSIDE_SLOTS - 1),
                        p.first_slot(),
                        "{}",
                        p.chain()
                    );
                }
            }
        }
    }
}

#[test]
fn the_index_follows_a_slice_moving_between_services_and_several_changes_in_one_update() {
    use super::index::ServiceIndex;
    let (mut services, mut slices) = many(20, 3);
    let mut ix = written_index(&services, &slices);
    let check = |ix: &mut ServiceIndex,
                 services: &BTreeMap<String, ServiceInfo>,
                 slices: &BTreeMap<String, SliceInfo>| {
        ix.update();
        let fresh = SvcNft::from_table(&desired(services, slices, "", BTreeSet::new()));
        assert_eq!(*ix.table(), fresh);
        assert!(ix.consistent());
    };
    // s3's slice now serves s4; in the same update s4 changes port and
    // s5 goes and comes back as it was.
    let moved = slices.get_mut("ns/s3-1").unwrap();
    moved.service = "ns/s4".into();
    let moved = moved.clone();
    assert!(ix.set_slice("ns/s3-1", Some(moved)));
    let s4 = services.get_mut("ns/s4").unwrap();
    s4.ports[0].port = 8443;
    assert!(ix.set_service("ns/s4", Some(s4.clone())));
    let s5 = services["ns/s5"].clone();
    assert!(ix.set_service("ns/s5", None::<ServiceInfo>));
    assert!(ix.set_service("ns/s5", Some(s5)));
    check(&mut ix, &services, &slices);
    let patch = ix
        .family_mut::<Ipv4Addr>()
        .take_patch()
        .unwrap()
        .to_string();
    assert!(patch.contains("8443"), "{patch}");
    // s5 came back as it was: the patch does not touch its address.
    assert!(!patch.contains("10.96.0.5\""), "{patch}");
    // The moved slice's Service gone, then the slice itself.
    services.remove("ns/s4");
    assert!(ix.set_service("ns/s4", None::<ServiceInfo>));
    check(&mut ix, &services, &slices);
    slices.remove("ns/s3-1");
    assert!(ix.set_slice("ns/s3-1", None::<SliceInfo>));
    assert!(
        !ix.set_slice("ns/s3-1", None::<SliceInfo>),
        "gone twice changes nothing"
    );
    check(&mut ix, &services, &slices);
    // Started over: the same table.
    let before = ix.table().clone();
    ix.rebuild();
    assert_eq!(*ix.table(), before);
}

fn slice_with(ports: serde_json::Value, endpoints: serde_json::Value) -> SliceInfo {
    let s: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "x", "labels": {SERVICE_NAME_LABEL: "web"}},
        "addressType": "IPv4", "ports": ports, "endpoints": endpoints
    }))
    .unwrap();
    SliceInfo::from_slice(&s, "n1").unwrap()
}

#[test]
fn unset_conditions_read_as_kube_proxy_reads_them() {
    // kube-proxy: unset `ready` and `serving` are true, unset
    // `terminating` false.
    let svc = service(web(json!({})), json!({}));
    let fe = (CIP.parse().unwrap(), TCP, 80);
    let ports = json!([{"name": "http", "port": 8080}]);
    // Not ready, terminating, `serving` left out: serving while
    // terminating, the fallback when none is ready.
    let sl = slice_with(
        ports.clone(),
        json!([{"addresses": ["10.244.1.6"], "nodeName": "n2",
                "conditions": {"ready": false, "terminating": true}}]),
    );
    assert!(sl.endpoints[0].serving);
    let t = table(svc.clone(), Some(sl));
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.1.6:8080"]);
    // No conditions at all: ready.
    let sl = slice_with(ports, json!([{"addresses": ["10.244.1.7"]}]));
    let e = &sl.endpoints[0];
    assert!(e.ready && e.serving && !e.terminating);
    let t = table(svc, Some(sl));
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.1.7:8080"]);
}

#[test]
fn only_the_first_address_of_an_endpoint_is_used() {
    let svc = service(web(json!({})), json!({}));
    let fe = (CIP.parse().unwrap(), TCP, 80);
    let t = table(
        svc,
        Some(slice_with(
            json!([{"name": "http", "port": 8080}]),
            json!([
                {"addresses": ["10.244.0.5", "10.244.0.6"]},
                // A first address felix cannot use: the endpoint is
                // skipped, not served by its second address.
                {"addresses": ["fd00::7", "10.244.0.7"]},
                {"addresses": []}
            ]),
        )),
    );
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.0.5:8080"]);
}

#[test]
fn slice_ports_without_a_name_or_a_port_number_are_ignored() {
    // An unnamed Service port (its name reads as "") matches a slice port
    // named "", not one with no name at all.
    let svc = service(
        json!({"clusterIP": CIP, "ports": [{"port": 80, "targetPort": 8080}]}),
        json!({}),
    );
    let fe = (CIP.parse().unwrap(), TCP, 80);
    let eps = json!([{"addresses": ["10.244.0.5"]}]);
    let served = |ports: serde_json::Value| {
        let sl = slice_with(ports, eps.clone());
        backends(&table(svc.clone(), Some(sl)).frontends[&fe])
    };
    assert_eq!(
        served(json!([{"name": "", "port": 8080}])),
        ["10.244.0.5:8080"]
    );
    assert_eq!(served(json!([{"port": 8080}])), ["Reject"]);
    assert_eq!(served(json!([{"name": null, "port": 8080}])), ["Reject"]);
    assert_eq!(served(json!([{"name": "", "port": 0}])), ["Reject"]);
    assert_eq!(served(json!([{"name": ""}])), ["Reject"]);
}

#[test]
fn only_vip_mode_load_balancer_ingress_ips_are_frontends() {
    let svc = service(
        web(json!({"type": "LoadBalancer", "loadBalancerSourceRanges": ["10.0.0.0/8"]})),
        json!({"loadBalancer": {"ingress": [
            {"ip": "192.0.2.10"},
            {"ip": "192.0.2.11", "ipMode": "VIP"},
            {"ip": "192.0.2.12", "ipMode": "Proxy"}
        ]}}),
    );
    let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    assert_eq!(svc.lb_ips, [ip("192.0.2.10"), ip("192.0.2.11")]);
    let t = table(svc, None);
    assert!(t.frontends.contains_key(&(ip("192.0.2.11"), TCP, 80)));
    assert!(!t.frontends.contains_key(&(ip("192.0.2.12"), TCP, 80)));
    assert!(!t.source_ranges.contains_key(&(ip("192.0.2.12"), TCP, 80)));
}

/// The rules `t` writes into `chain`, as nft JSON.
fn rules_of(t: &SvcNft, chain: &str) -> Vec<serde_json::Value> {
    let j = full(t).to_json();
    j["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.get("add").and_then(|a| a.get("rule")))
        .filter(|r| r["chain"] == chain)
        .map(|r| r["expr"].clone())
        .collect()
}

#[test]
fn the_refusals_of_the_filter_chains_are_for_new_connections_only() {
    // A reply to the node's own connection from local port 30080 (a
    // NodePort without endpoints) must not be refused: kube-proxy checks
    // `ct state new` only.
    let t = SvcNft::from_table(&table(service(web(json!({})), json!({})), None));
    assert!(t.reject_np.contains(&(TCP, 30080)));
    let ct_new = json!({"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}});
    for chain in [
        "filter_input",
        "filter_forward",
        "filter_output",
        "filter_prerouting",
        "filter_output_ranges",
    ] {
        let rules = rules_of(&t, chain);
        assert!(!rules.is_empty(), "{chain}");
        for r in rules {
            let text = r.to_string();
            assert!(
                ["@reject_", "@drop_", "@cluster_ips", "@lb_limited"]
                    .iter()
                    .any(|s| text.contains(s)),
                "{chain}: {text}"
            );
            assert_eq!(r[0], ct_new, "{chain}: {text}");
        }
    }
}

#[test]
fn a_cluster_ip_refuses_new_connections_to_the_ports_it_does_not_declare() {
    let svc = service(web(json!({})), json!({}));
    let t = SvcNft::from_table(&table(
        svc.clone(),
        Some(slice(json!([ep("10.244.0.5", "n1", true, false)]))),
    ));
    let cip: Ipv4Addr = CIP.parse().unwrap();
    assert_eq!(t.cluster_ips, BTreeSet::from([cip]));
    // Forwarded (from pods) and the node's own, after DNAT: still to the
    // ClusterIP means an undeclared port. TCP reset, ICMP otherwise.
    for chain in ["filter_forward", "filter_output"] {
        let rules: Vec<serde_json::Value> = rules_of(&t, chain)
            .into_iter()
            .filter(|r| r.to_string().contains("@cluster_ips"))
            .collect();
        assert_eq!(rules.len(), 2, "{chain}: {rules:?}");
        let new = json!({"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}});
        let to_cip = json!({"match": {"op": "==", "right": "@cluster_ips",
            "left": {"payload": {"protocol": "ip", "field": "daddr"}}}});
        for r in &rules {
            assert_eq!((&r[0], &r[1]), (&new, &to_cip), "{chain}: {r}");
        }
        assert_eq!(rules[0][3], json!({"reject": {"type": "tcp reset"}}));
        assert_eq!(
            rules[1][3],
            json!({"reject": {"type": "icmp", "expr": "port-unreachable"}})
        );
    }
    let input: Vec<String> = rules_of(&t, "filter_input")
        .iter()
        .map(|r| r.to_string())
        .collect();
    assert!(
        !input.iter().any(|r| r.contains("@cluster_ips")),
        "{input:?}"
    );
    // Written whole: the set with its element.
    let f = full(&t).to_string();
    assert!(f.contains(r#""name":"cluster_ips""#), "{f}");
    assert!(
        f.contains(r#""elem":["10.96.0.10"],"family":"ip","name":"cluster_ips""#),
        "{f}"
    );
}

/// The index recomputed, checked consistent, and the patch it made.
fn patched(ix: &mut super::index::ServiceIndex) -> String {
    ix.update();
    assert!(ix.consistent());
    ix.family_mut::<Ipv4Addr>()
        .take_patch()
        .unwrap()
        .to_string()
}

#[test]
fn the_index_keeps_the_cluster_ips_set_in_its_patches() {
    let mut ix = super::index::ServiceIndex::new("n1");
    ix.update();
    ix.family_mut::<Ipv4Addr>().written_whole();
    let svc = service(web(json!({})), json!({}));
    assert!(ix.set_service("x/web", Some(svc)));
    let p = patched(&mut ix);
    assert!(
        p.contains(
            r#"{"add":{"element":{"elem":["10.96.0.10"],"family":"ip","name":"cluster_ips""#
        ),
        "{p}"
    );
    // Another port: the set is as it was.
    let two = service(
        web(
            json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080},
                             {"name": "alt", "port": 81}]}),
        ),
        json!({}),
    );
    assert!(ix.set_service("x/web", Some(two)));
    let p = patched(&mut ix);
    assert!(!p.contains("cluster_ips"), "{p}");
    // Gone: out of the set.
    assert!(ix.set_service("x/web", None::<ServiceInfo>));
    assert!(ix.update().cluster_ips.is_empty());
    assert!(ix.consistent());
    let p = ix
        .family_mut::<Ipv4Addr>()
        .take_patch()
        .unwrap()
        .to_string();
    assert!(
        p.contains(
            r#"{"delete":{"element":{"elem":["10.96.0.10"],"family":"ip","name":"cluster_ips""#
        ),
        "{p}"
    );
}

#[test]
fn a_load_balancer_with_a_source_range_that_does_not_parse_is_unreadable() {
    let read = |ranges: serde_json::Value| {
        let s: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "x"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10",
                     "ports": [{"port": 80}], "loadBalancerSourceRanges": ranges},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
        }))
        .unwrap();
        ServiceInfo::<Ipv4Addr>::from_service(&s).map(|i| i.unwrap().source_ranges)
    };
    let net = |s: &str| s.parse::<ipnet::Ipv4Net>().unwrap();
    // Skipping what does not parse left no range, and so no limit: the
    // LoadBalancer was open to every client.
    for bad in [
        json!(["not a network"]),
        json!(["10.0.0.0/33", "not a network"]),
        json!(["10.0.0.0/8", "10.0.0.0/33"]),
        json!(["10.0.0.1"]),
    ] {
        let got = read(bad.clone());
        assert!(got.is_err(), "{bad} read as {got:?}");
    }
    assert_eq!(
        read(json!(["10.0.0.0/8", "oops"])).unwrap_err(),
        r#"spec.loadBalancerSourceRanges[1]: "oops" is not a network (CIDR)"#
    );
    // What does parse: spaces trimmed, host bits cleared, IPv6 networks
    // (which limit no IPv4 client) passed over.
    assert_eq!(
        read(json!([" 10.1.2.3/16 ", "2001:db8::/32"])).unwrap(),
        Some(vec![net("10.1.0.0/16")])
    );
    assert_eq!(read(json!([])).unwrap(), None);
    // IPv6 networks only: a limit that no IPv4 client passes, not none.
    assert_eq!(read(json!(["2001:db8::/32"])).unwrap(), Some(vec![]));
    // Left over on a Service of another type, they are not applied.
    let s: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "x"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.10",
                 "ports": [{"port": 80}], "loadBalancerSourceRanges": ["oops"]}
    }))
    .unwrap();
    assert!(ServiceInfo::<Ipv4Addr>::from_service(&s).unwrap().is_some());
}

#[test]
fn a_load_balancer_limited_to_ipv6_networks_admits_no_ipv4_client() {
    // The list limits; none of it is IPv4: the IPv4 ingress IP is closed
    // to new connections, not open to all.
    let svc = service(
        web(json!({"type": "LoadBalancer", "loadBalancerSourceRanges": ["2001:db8::/32"]})),
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
    );
    let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    let t = table(svc, None);
    assert_eq!(
        t.source_ranges.get(&(ip("192.0.2.10"), TCP, 80)),
        Some(&vec![]),
        "limited, with no network allowed"
    );
    let n = SvcNft::from_table(&t);
    assert!(n.lb_limited.contains(&(ip("192.0.2.10"), TCP, 80)));
    assert!(n.lb_allowed.iter().all(|(fe, _)| fe.0 != ip("192.0.2.10")));
}

/// An endpoint on `node` with topology hints for `zones` (and for `nodes`
/// when given).
fn hinted(ip: &str, node: &str, zones: &[&str], nodes: Option<&[&str]>) -> serde_json::Value {
    let mut e = ep(ip, node, true, false);
    e["hints"] = json!({"forZones": zones.iter().map(|z| json!({"name": z})).collect::<Vec<_>>()});
    if let Some(nodes) = nodes {
        e["hints"]["forNodes"] = nodes.iter().map(|n| json!({"name": n})).collect();
    }
    e
}

fn table_in(zone: &str, svc: ServiceInfo, sl: SliceInfo) -> ServiceTable {
    let services = BTreeMap::from([("x/web".to_string(), svc)]);
    let slices = BTreeMap::from([("x/web-1".to_string(), sl)]);
    desired(&services, &slices, zone, BTreeSet::new())
}

#[test]
fn zone_hints_keep_cluster_traffic_in_the_nodes_zone() {
    let svc = service(
        web(json!({"type": "LoadBalancer", "trafficDistribution": "PreferClose"})),
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
    );
    let eps = json!([
        hinted("10.244.0.5", "n1", &["a"], None),
        hinted("10.244.1.5", "n2", &["a"], None),
        hinted("10.244.2.5", "n3", &["b"], None),
        // Not ready: its hint (or lack of one) does not count.
        ep("10.244.2.6", "n3", false, false)
    ]);
    let fe = (CIP.parse().unwrap(), TCP, 80);
    let lb = ("192.0.2.10".parse().unwrap(), TCP, 80);
    let t = table_in("a", svc.clone(), slice(eps.clone()));
    // The ClusterIP, the LoadBalancer IP and the NodePort alike.
    for d in [
        &t.frontends[&fe],
        &t.frontends[&lb],
        &t.node_ports[&(TCP, 30080)],
    ] {
        assert_eq!(backends(d), ["10.244.0.5:8080", "10.244.1.5:8080"]);
    }
    let t = table_in("b", svc.clone(), slice(eps.clone()));
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.2.5:8080"]);
    // A zone no endpoint is hinted for, or no zone label: every endpoint.
    for zone in ["c", ""] {
        let t = table_in(zone, svc.clone(), slice(eps.clone()));
        assert_eq!(backends(&t.frontends[&fe]).len(), 3, "{zone:?}");
    }
    // One ready endpoint without a hint: the hints are not followed.
    let mut partly = eps.clone();
    partly
        .as_array_mut()
        .unwrap()
        .push(ep("10.244.3.5", "n4", true, false));
    let t = table_in("b", svc.clone(), slice(partly));
    assert_eq!(backends(&t.frontends[&fe]).len(), 4);
    // The Local traffic policies choose among this node's endpoints, hints
    // or not: n1's endpoint only, though n1 is in zone b here.
    let local = service(
        web(
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                   "internalTrafficPolicy": "Local"}),
        ),
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
    );
    let t = table_in("b", local, slice(eps));
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.0.5:8080"]);
    assert_eq!(backends(&t.frontends[&lb]), ["10.244.0.5:8080"]);
    // Inside clients of the Local LoadBalancer IP go cluster-wide: by the
    // hints, to zone b's endpoint.
    assert_eq!(backends(&t.frontends_in[&lb]), ["10.244.2.5:8080"]);
}

#[test]
fn node_hints_keep_cluster_traffic_on_the_node_then_the_zone() {
    let svc = service(
        web(json!({"trafficDistribution": "PreferSameNode"})),
        json!({}),
    );
    let fe = (CIP.parse().unwrap(), TCP, 80);
    let eps = json!([
        hinted("10.244.0.5", "n1", &["a"], Some(&["n1"])),
        hinted("10.244.1.5", "n2", &["a"], Some(&["n2"])),
        hinted("10.244.2.5", "n3", &["b"], Some(&["n3"]))
    ]);
    // n1 (the node the slice was read for) has an endpoint: that one.
    let t = table_in("a", svc.clone(), slice(eps));
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.0.5:8080"]);
    // None on n1: the zone hints, then.
    let eps = json!([
        hinted("10.244.1.5", "n2", &["a"], Some(&["n2"])),
        hinted("10.244.2.5", "n3", &["b"], Some(&["n3"]))
    ]);
    let t = table_in("a", svc.clone(), slice(eps));
    assert_eq!(backends(&t.frontends[&fe]), ["10.244.1.5:8080"]);
}

#[test]
fn the_index_computes_every_service_again_when_the_nodes_zone_changes() {
    let mut ix = super::index::ServiceIndex::new("n1");
    let svc = service(
        web(json!({"trafficDistribution": "PreferClose"})),
        json!({}),
    );
    assert!(ix.set_service("x/web", Some(svc.clone())));
    let eps = json!([
        hinted("10.244.1.5", "n2", &["a"], None),
        hinted("10.244.2.5", "n3", &["b"], None)
    ]);
    assert!(ix.set_slice("x/web-1", Some(slice(eps.clone()))));
    ix.update();
    ix.family_mut::<Ipv4Addr>().written_whole();
    let fresh = |zone: &str| SvcNft::from_table(&table_in(zone, svc.clone(), slice(eps.clone())));
    assert_eq!(ix.table(), &fresh(""));
    assert!(ix.set_zone("a"));
    let p = patched(&mut ix);
    assert!(!p.is_empty());
    assert_eq!(ix.table(), &fresh("a"));
    assert_ne!(fresh("a"), fresh(""));
    // The same zone again changes nothing.
    assert!(!ix.set_zone("a"));
    ix.update();
    assert!(ix.family_mut::<Ipv4Addr>().take_patch().is_none());
    assert!(ix.set_zone("b"));
    patched(&mut ix);
    assert_eq!(ix.table(), &fresh("b"));
    assert!(ix.consistent());
}

#[test]
fn two_services_sharing_an_external_frontend_with_other_policies_stay_consistent() {
    // `x/a` (Cluster: a masquerading picker, slots from MASQ_SLOTS) and
    // `x/b` (Local: plain slots) claim 192.0.2.50:80. The whole
    // computation decides the winner (`x/b`, the later key); `x/a`'s
    // slots stay behind, unreachable, and the check must not call that
    // drift (it would rewrite the table at every check).
    let svc_of = |ip: &str, local: bool| {
        let mut s = service(
            json!({"clusterIP": ip, "externalIPs": ["192.0.2.50"],
                   "ports": [{"name": "http", "port": 80}]}),
            json!({}),
        );
        s.external_local = local;
        s
    };
    let slice_of = |svc: &str, ips: &[&str]| SliceInfo::<Ipv4Addr> {
        service: format!("x/{svc}"),
        ports: [("http".to_string(), (TCP, 8080))].into(),
        endpoints: ips
            .iter()
            .map(|ip| EndpointInfo {
                addr: ip.parse().unwrap(),
                local: true,
                ready: true,
                serving: true,
                terminating: false,
                zones: Box::default(),
                node_hint: NodeHint::None,
            })
            .collect(),
    };
    let mut ix = super::index::ServiceIndex::new("n1");
    ix.set_service("x/a", Some(svc_of("10.96.0.20", false)));
    ix.set_service("x/b", Some(svc_of("10.96.0.21", true)));
    ix.set_slice("x/a-1", Some(slice_of("a", &["10.244.0.1", "10.244.0.2"])));
    ix.set_slice("x/b-1", Some(slice_of("b", &["10.244.0.3"])));
    ix.update();
    ix.family_mut::<Ipv4Addr>().written_whole();
    let fe = ("192.0.2.50".parse().unwrap(), TCP, 80);
    assert!(!ix.table().frontends[&fe].masq, "x/b (Local) wins");
    assert!(
        ix.table()
            .fe_slots
            .keys()
            .any(|(f, s)| *f == fe && *s >= render::MASQ_SLOTS),
        "x/a's slots are left behind"
    );
    assert!(ix.consistent());
    assert_eq!(ix.recomputed().reachable(), ix.table().reachable());
}

#[test]
fn an_endpoint_in_two_slices_counts_once_for_the_hints() {
    // Mid-update, 10.244.0.5 is in two slices with different hints. The
    // mode and the filter read the same copy (the last): with neither
    // ready endpoint hinted for zone a any more, every endpoint serves,
    // never none.
    let svc = service(
        web(json!({"trafficDistribution": "PreferClose"})),
        json!({}),
    );
    let first = slice(json!([
        hinted("10.244.0.5", "n2", &["a"], None),
        hinted("10.244.0.6", "n3", &["b"], None)
    ]));
    let second = slice(json!([hinted("10.244.0.5", "n2", &["b"], None)]));
    let services = BTreeMap::from([("x/web".to_string(), svc)]);
    let slices = BTreeMap::from([
        ("x/web-1".to_string(), first),
        ("x/web-2".to_string(), second),
    ]);
    let t = desired(&services, &slices, "a", BTreeSet::new());
    assert_eq!(
        backends(&t.frontends[&(CIP.parse().unwrap(), TCP, 80)]),
        ["10.244.0.5:8080", "10.244.0.6:8080"]
    );
}
