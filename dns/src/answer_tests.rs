//! One test per record type and per negative answer. Names follow the
//! upstream DNS e2e tests (test/e2e/network/dns.go): namespace `dns-8123`,
//! the headless `dns-test-service`, the ClusterIP `test-service-2`, pods
//! `dns-querier-1`/`dns-querier-2`, the ExternalName `dns-test-service-3`.

use std::net::IpAddr;

use hickory_proto::op::{Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::*;
use crate::model::{ServiceRec, SliceRec};
use crate::records::Records;

pub(crate) const NS: &str = "dns-8123";

pub(crate) fn service(name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .unwrap()
}

pub(crate) fn slice(
    name: &str,
    svc: &str,
    family: &str,
    endpoints: serde_json::Value,
) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"kubernetes.io/service-name": svc}},
        "addressType": family,
        "endpoints": endpoints,
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
    }))
    .unwrap()
}

pub(crate) fn add_service(r: &mut Records, s: &Service) {
    let key = (NS.to_string(), s.metadata.name.clone().unwrap());
    r.set_service(&key, ServiceRec::from_service(s));
}

pub(crate) fn add_slice(r: &mut Records, s: &EndpointSlice) {
    let key = (NS.to_string(), s.metadata.name.clone().unwrap());
    r.set_slice(&key, SliceRec::from_slice(s));
}

/// The cluster of the e2e test.
pub(crate) fn cluster() -> Records {
    let mut r = Records::new();
    r.set_namespace(NS, true);
    r.set_namespace("default", true);
    let k: Service = serde_json::from_value(json!({
        "metadata": {"name": "kubernetes", "namespace": "default"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443}]},
    }))
    .unwrap();
    r.set_service(
        &("default".into(), "kubernetes".into()),
        ServiceRec::from_service(&k),
    );
    add_service(
        &mut r,
        &service(
            "dns-test-service",
            json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    add_slice(
        &mut r,
        &slice(
            "dns-test-service-abc",
            "dns-test-service",
            "IPv4",
            json!([
                {"addresses": ["10.244.1.10"], "hostname": "dns-querier-1", "conditions": {"ready": true}},
                {"addresses": ["10.244.2.20"], "conditions": {"ready": true}},
                {"addresses": ["10.244.3.30"], "hostname": "dns-querier-3", "conditions": {"ready": false}},
            ]),
        ),
    );
    add_service(
        &mut r,
        &service(
            "test-service-2",
            json!({"clusterIP": "10.96.10.20", "clusterIPs": ["10.96.10.20", "fd00:96::14"],
                   "ports": [{"name": "http", "port": 80}, {"port": 81}]}),
        ),
    );
    add_service(
        &mut r,
        &service(
            "dns-test-service-3",
            json!({"type": "ExternalName", "externalName": "foo.example.com"}),
        ),
    );
    r
}

pub(crate) fn zone() -> Zone {
    Zone::new("cluster.local", 5, 5).unwrap()
}

fn ask(r: &Records, name: &str, t: RecordType) -> Answer {
    answer(
        r,
        &zone(),
        &Query::query(Name::from_ascii(name).unwrap(), t),
    )
    .expect("ours")
}

fn data(a: &Answer) -> Vec<String> {
    a.answers.iter().map(|r| r.data.to_string()).collect()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn a_record_of_a_cluster_ip_service() {
    let r = cluster();
    let a = ask(&r, "kubernetes.default.svc.cluster.local.", RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NoError);
    assert_eq!(data(&a), vec!["10.96.0.1"]);
    assert_eq!(a.answers[0].ttl, 5);
    assert!(a.authorities.is_empty());
}

#[test]
fn dual_stack_service_has_a_and_aaaa() {
    let r = cluster();
    let n = format!("test-service-2.{NS}.svc.cluster.local.");
    assert_eq!(data(&ask(&r, &n, RecordType::A)), vec!["10.96.10.20"]);
    assert_eq!(data(&ask(&r, &n, RecordType::AAAA)), vec!["fd00:96::14"]);
    assert_eq!(ask(&r, &n, RecordType::ANY).answers.len(), 2);
}

#[test]
fn headless_service_answers_ready_endpoints_only() {
    let r = cluster();
    let n = format!("dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(
        data(&ask(&r, &n, RecordType::A)),
        vec!["10.244.1.10", "10.244.2.20"]
    );
}

#[test]
fn publish_not_ready_addresses_includes_unready_endpoints() {
    let mut r = cluster();
    add_service(
        &mut r,
        &service(
            "dns-test-service",
            json!({"clusterIP": "None", "publishNotReadyAddresses": true,
                   "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    let n = format!("dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(
        data(&ask(&r, &n, RecordType::A)),
        vec!["10.244.1.10", "10.244.2.20", "10.244.3.30"]
    );
    let host = format!("dns-querier-3.dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(data(&ask(&r, &host, RecordType::A)), vec!["10.244.3.30"]);
}

#[test]
fn endpoint_hostname_record() {
    let r = cluster();
    let n = format!("dns-querier-1.dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(data(&ask(&r, &n, RecordType::A)), vec!["10.244.1.10"]);
    // Without a hostname, the dashed address names it.
    let n = format!("10-244-2-20.dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(data(&ask(&r, &n, RecordType::A)), vec!["10.244.2.20"]);
    // An unready endpoint has no name.
    let n = format!("dns-querier-3.dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(ask(&r, &n, RecordType::A).rcode, ResponseCode::NXDomain);
}

#[test]
fn names_are_case_insensitive() {
    let r = cluster();
    let a = ask(&r, "Kubernetes.DEFAULT.svc.Cluster.Local.", RecordType::A);
    assert_eq!(data(&a), vec!["10.96.0.1"]);
    assert_eq!(
        a.answers[0].name.to_ascii(),
        "Kubernetes.DEFAULT.svc.Cluster.Local."
    );
}

#[test]
fn external_name_is_a_cname_for_every_type() {
    let r = cluster();
    let n = format!("dns-test-service-3.{NS}.svc.cluster.local.");
    for t in [RecordType::A, RecordType::AAAA, RecordType::CNAME] {
        let a = ask(&r, &n, t);
        assert_eq!(a.rcode, ResponseCode::NoError);
        assert_eq!(data(&a), vec!["foo.example.com."], "{t}");
        assert_eq!(a.answers[0].record_type(), RecordType::CNAME);
    }
}

#[test]
fn srv_for_a_named_port_of_a_cluster_ip_service() {
    let r = cluster();
    let n = format!("_http._tcp.test-service-2.{NS}.svc.cluster.local.");
    let a = ask(&r, &n, RecordType::SRV);
    assert_eq!(
        data(&a),
        vec![format!("0 100 80 test-service-2.{NS}.svc.cluster.local.")]
    );
    // The target's addresses come along.
    let extra: Vec<_> = a.additionals.iter().map(|r| r.data.to_string()).collect();
    assert_eq!(extra, vec!["10.96.10.20", "fd00:96::14"]);
    // Unnamed ports have none; another protocol is no name.
    let n = format!("_http._udp.test-service-2.{NS}.svc.cluster.local.");
    assert_eq!(ask(&r, &n, RecordType::SRV).rcode, ResponseCode::NXDomain);
}

#[test]
fn srv_of_a_headless_service_names_each_endpoint() {
    let r = cluster();
    let n = format!("_http._tcp.dns-test-service.{NS}.svc.cluster.local.");
    let a = ask(&r, &n, RecordType::SRV);
    assert_eq!(
        data(&a),
        vec![
            format!("0 100 8080 dns-querier-1.dns-test-service.{NS}.svc.cluster.local."),
            format!("0 100 8080 10-244-2-20.dns-test-service.{NS}.svc.cluster.local."),
        ]
    );
    assert_eq!(a.additionals.len(), 2);
}

#[test]
fn ptr_for_cluster_ip_and_endpoint_addresses() {
    let r = cluster();
    let a = ask(&r, "20.10.96.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(
        data(&a),
        vec![format!("test-service-2.{NS}.svc.cluster.local.")]
    );
    let a = ask(&r, "10.1.244.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(
        data(&a),
        vec![format!(
            "dns-querier-1.dns-test-service.{NS}.svc.cluster.local."
        )]
    );
    let v6 = "4.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6.arpa.";
    assert_eq!(
        data(&ask(&r, v6, RecordType::PTR)),
        vec![format!("test-service-2.{NS}.svc.cluster.local.")]
    );
    // An address we do not know is not ours (forwarded).
    let q = Query::query(
        Name::from_ascii("9.9.9.9.in-addr.arpa.").unwrap(),
        RecordType::PTR,
    );
    assert!(answer(&r, &zone(), &q).is_none());
}

#[test]
fn reverse_names_parse_strictly() {
    let n = |s: &str| reverse_address(&Name::from_ascii(s).unwrap());
    assert_eq!(n("4.3.2.1.in-addr.arpa."), Some(ip("1.2.3.4")));
    assert_eq!(n("04.3.2.1.in-addr.arpa."), None);
    assert_eq!(n("3.2.1.in-addr.arpa."), None);
    assert_eq!(n("256.3.2.1.in-addr.arpa."), None);
    assert_eq!(n("example.com."), None);
}

#[test]
fn dns_version_txt() {
    let r = cluster();
    let a = ask(&r, "dns-version.cluster.local.", RecordType::TXT);
    assert_eq!(data(&a), vec!["1.1.0"]);
}

#[test]
fn pod_a_record_by_dashed_address() {
    let r = cluster();
    let a = ask(
        &r,
        &format!("10-244-1-10.{NS}.pod.cluster.local."),
        RecordType::A,
    );
    assert_eq!(data(&a), vec!["10.244.1.10"]);
    let a = ask(&r, "10-244-1-10.nowhere.pod.cluster.local.", RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NXDomain);
}

#[test]
fn nxdomain_carries_the_soa() {
    let r = cluster();
    for n in [
        format!("nothing.{NS}.svc.cluster.local."),
        "web.nonexistent.svc.cluster.local.".to_string(),
        "foo.cluster.local.".to_string(),
        format!("a.b.c.d.test-service-2.{NS}.svc.cluster.local."),
    ] {
        let a = ask(&r, &n, RecordType::A);
        assert_eq!(a.rcode, ResponseCode::NXDomain, "{n}");
        assert!(a.answers.is_empty());
        assert_eq!(a.authorities.len(), 1);
        let soa = &a.authorities[0];
        assert_eq!(soa.record_type(), RecordType::SOA);
        assert_eq!(soa.name.to_ascii(), "cluster.local.");
        let RData::SOA(s) = &soa.data else { panic!() };
        assert_eq!(s.minimum, 5);
    }
}

#[test]
fn nodata_for_a_name_without_the_type() {
    let r = cluster();
    for (n, t) in [
        (
            "kubernetes.default.svc.cluster.local.".to_string(),
            RecordType::AAAA,
        ),
        (
            "kubernetes.default.svc.cluster.local.".to_string(),
            RecordType::TXT,
        ),
        (format!("{NS}.svc.cluster.local."), RecordType::A),
        ("svc.cluster.local.".to_string(), RecordType::A),
        (
            format!("_tcp.test-service-2.{NS}.svc.cluster.local."),
            RecordType::SRV,
        ),
        ("dns-version.cluster.local.".to_string(), RecordType::A),
    ] {
        let a = ask(&r, &n, t);
        assert_eq!(a.rcode, ResponseCode::NoError, "{n} {t}");
        assert!(a.answers.is_empty(), "{n} {t}");
        assert_eq!(a.authorities[0].record_type(), RecordType::SOA, "{n} {t}");
    }
}

#[test]
fn soa_at_the_apex_and_configurable_ttls() {
    let r = cluster();
    let z = Zone::new("cluster.local.", 30, 7).unwrap();
    let q = Query::query(Name::from_ascii("cluster.local.").unwrap(), RecordType::SOA);
    let a = answer(&r, &z, &q).unwrap();
    assert_eq!(a.answers.len(), 1);
    assert_eq!(a.answers[0].ttl, 30);
    let q = Query::query(Name::from_ascii("x.cluster.local.").unwrap(), RecordType::A);
    let a = answer(&r, &z, &q).unwrap();
    assert_eq!(a.authorities[0].ttl, 7);
}

#[test]
fn other_names_are_not_ours_and_other_classes_refused() {
    let r = cluster();
    let q = Query::query(Name::from_ascii("example.com.").unwrap(), RecordType::A);
    assert!(answer(&r, &zone(), &q).is_none());
    let mut q = Query::query(
        Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
        RecordType::A,
    );
    q.set_query_class(DNSClass::CH);
    assert_eq!(
        answer(&r, &zone(), &q).unwrap().rcode,
        ResponseCode::Refused
    );
}

#[test]
fn service_deleted_is_gone_and_unallocated_cluster_ip_has_no_name() {
    let mut r = cluster();
    r.set_service(&(NS.into(), "test-service-2".into()), None);
    let n = format!("test-service-2.{NS}.svc.cluster.local.");
    assert_eq!(ask(&r, &n, RecordType::A).rcode, ResponseCode::NXDomain);
    assert!(r.ptr(ip("10.96.10.20")).is_none());
    add_service(
        &mut r,
        &service("pending", json!({"ports": [{"port": 80}]})),
    );
    let n = format!("pending.{NS}.svc.cluster.local.");
    assert_eq!(ask(&r, &n, RecordType::A).rcode, ResponseCode::NXDomain);
}

#[test]
fn a_headless_service_without_ready_endpoints_is_nxdomain() {
    let mut r = cluster();
    // No slice at all.
    add_service(
        &mut r,
        &service(
            "empty",
            json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    // A slice whose only endpoint is not ready.
    add_service(
        &mut r,
        &service(
            "unready",
            json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    add_slice(
        &mut r,
        &slice(
            "unready-1",
            "unready",
            "IPv4",
            json!([{"addresses": ["10.244.9.9"], "conditions": {"ready": false}}]),
        ),
    );
    for svc in ["empty", "unready"] {
        for (n, t) in [
            (format!("{svc}.{NS}.svc.cluster.local."), RecordType::A),
            (format!("{svc}.{NS}.svc.cluster.local."), RecordType::AAAA),
            (
                format!("_http._tcp.{svc}.{NS}.svc.cluster.local."),
                RecordType::SRV,
            ),
            (
                format!("_tcp.{svc}.{NS}.svc.cluster.local."),
                RecordType::SRV,
            ),
        ] {
            let a = ask(&r, &n, t);
            assert_eq!(a.rcode, ResponseCode::NXDomain, "{n} {t}");
            assert_eq!(a.authorities[0].record_type(), RecordType::SOA);
        }
    }
    // Its unready endpoint counts once the Service publishes it.
    add_service(
        &mut r,
        &service(
            "unready",
            json!({"clusterIP": "None", "publishNotReadyAddresses": true,
                   "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    let n = format!("unready.{NS}.svc.cluster.local.");
    assert_eq!(data(&ask(&r, &n, RecordType::A)), vec!["10.244.9.9"]);
}

#[test]
fn the_tolerate_unready_annotation_makes_unready_endpoints_ready() {
    let mut r = cluster();
    let mut s = service(
        "dns-test-service",
        json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
    );
    s.metadata.annotations = Some(
        [(
            crate::model::TOLERATE_UNREADY.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    add_service(&mut r, &s);
    let n = format!("dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(
        data(&ask(&r, &n, RecordType::A)),
        vec!["10.244.1.10", "10.244.2.20", "10.244.3.30"]
    );
    // Any other value is not `true`.
    s.metadata.annotations = Some(
        [(
            crate::model::TOLERATE_UNREADY.to_string(),
            "yes".to_string(),
        )]
        .into(),
    );
    add_service(&mut r, &s);
    assert_eq!(ask(&r, &n, RecordType::A).answers.len(), 2);
}

#[test]
fn cluster_ips_none_without_cluster_ip_is_headless() {
    let mut r = cluster();
    add_service(
        &mut r,
        &service(
            "dns-test-service",
            json!({"clusterIPs": ["None"], "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    let n = format!("dns-test-service.{NS}.svc.cluster.local.");
    assert_eq!(
        data(&ask(&r, &n, RecordType::A)),
        vec!["10.244.1.10", "10.244.2.20"]
    );
}

#[test]
fn an_external_name_inside_the_zone_is_followed() {
    let mut r = cluster();
    add_service(
        &mut r,
        &service(
            "alias",
            json!({"type": "ExternalName",
                   "externalName": format!("test-service-2.{NS}.svc.cluster.local")}),
        ),
    );
    let n = format!("alias.{NS}.svc.cluster.local.");
    let target = format!("test-service-2.{NS}.svc.cluster.local.");
    let a = ask(&r, &n, RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NoError);
    assert_eq!(data(&a), vec![target.clone(), "10.96.10.20".to_string()]);
    assert_eq!(a.answers[1].name.to_ascii(), target);
    assert!(a.authorities.is_empty());
    assert_eq!(a.follow, None);
    assert_eq!(data(&ask(&r, &n, RecordType::AAAA))[1], "fd00:96::14");
    // Asked for the CNAME itself: not followed.
    assert_eq!(data(&ask(&r, &n, RecordType::CNAME)), vec![target.clone()]);
    // The target exists without the type: NODATA after the CNAME.
    let a = ask(&r, &n, RecordType::TXT);
    assert_eq!(a.rcode, ResponseCode::NoError);
    assert_eq!(data(&a), vec![target]);
    assert_eq!(a.authorities[0].record_type(), RecordType::SOA);
    // A target that does not exist: the CNAME, and NXDOMAIN for it.
    add_service(
        &mut r,
        &service(
            "dangling",
            json!({"type": "ExternalName", "externalName": format!("gone.{NS}.svc.cluster.local")}),
        ),
    );
    let a = ask(
        &r,
        &format!("dangling.{NS}.svc.cluster.local."),
        RecordType::A,
    );
    assert_eq!(a.rcode, ResponseCode::NXDomain);
    assert_eq!(a.answers.len(), 1);
    assert_eq!(a.authorities[0].record_type(), RecordType::SOA);
}

/// The cluster with ExternalName Services `ping` and `pong` naming each
/// other.
pub(crate) fn ping_pong() -> Records {
    let mut r = cluster();
    for (me, other) in [("ping", "pong"), ("pong", "ping")] {
        add_service(
            &mut r,
            &service(
                me,
                json!({"type": "ExternalName",
                       "externalName": format!("{other}.{NS}.svc.cluster.local")}),
            ),
        );
    }
    r
}

#[test]
fn external_names_in_a_loop_are_cut() {
    let r = ping_pong();
    // The loop is an error, and its chain comes once: ping → pong, then
    // pong → ping, which closes it.
    let a = ask(&r, &format!("Ping.{NS}.svc.cluster.local."), RecordType::A);
    assert_eq!(a.rcode, ResponseCode::ServFail);
    assert_eq!(
        data(&a),
        vec![
            format!("pong.{NS}.svc.cluster.local."),
            format!("ping.{NS}.svc.cluster.local."),
        ]
    );
    assert!(a.authorities.is_empty());
    assert_eq!(a.follow, None);
}

#[test]
fn a_long_chain_without_a_loop_is_cut_at_its_limit() {
    let mut r = cluster();
    for i in 0..MAX_CHAIN + 2 {
        add_service(
            &mut r,
            &service(
                &format!("hop-{i}"),
                json!({"type": "ExternalName",
                       "externalName": format!("hop-{}.{NS}.svc.cluster.local", i + 1)}),
            ),
        );
    }
    let a = ask(&r, &format!("hop-0.{NS}.svc.cluster.local."), RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NoError);
    assert_eq!(a.answers.len(), MAX_CHAIN);
    assert_eq!(a.follow, None);
}

#[test]
fn a_target_on_several_ports_has_its_addresses_added_once() {
    let mut r = cluster();
    // Mid-rollout: a second slice gives the same endpoint another number
    // for the port `http`.
    let mut rolled = slice(
        "dns-test-service-def",
        "dns-test-service",
        "IPv4",
        json!([{"addresses": ["10.244.1.10"], "hostname": "dns-querier-1",
                "conditions": {"ready": true}}]),
    );
    rolled.ports.as_mut().unwrap()[0].port = Some(9090);
    add_slice(&mut r, &rolled);
    let n = format!("_http._tcp.dns-test-service.{NS}.svc.cluster.local.");
    let a = ask(&r, &n, RecordType::SRV);
    let querier = format!("dns-querier-1.dns-test-service.{NS}.svc.cluster.local.");
    let srv: Vec<String> = data(&a)
        .into_iter()
        .filter(|d| d.ends_with(&querier))
        .collect();
    assert_eq!(srv.len(), 2, "{:?}", data(&a));
    let of_querier = a
        .additionals
        .iter()
        .filter(|r| r.name.to_string() == querier)
        .count();
    assert_eq!(of_querier, 1, "{:?}", a.additionals);
}

#[test]
fn an_external_name_outside_the_zone_is_left_to_the_forwarder() {
    let r = cluster();
    let n = format!("dns-test-service-3.{NS}.svc.cluster.local.");
    let a = ask(&r, &n, RecordType::A);
    assert_eq!(data(&a), vec!["foo.example.com."]);
    assert_eq!(
        a.follow,
        Some(Name::from_ascii("foo.example.com.").unwrap())
    );
    assert!(a.authorities.is_empty());
    assert_eq!(ask(&r, &n, RecordType::CNAME).follow, None);
}

#[test]
fn a_wildcard_name_is_not_the_apex() {
    let r = cluster();
    for t in [RecordType::A, RecordType::SOA, RecordType::NS] {
        let a = ask(&r, "*.cluster.local.", t);
        assert_eq!(a.rcode, ResponseCode::NXDomain, "{t}");
        assert!(a.answers.is_empty(), "{t}");
    }
    let a = ask(&r, &format!("*.{NS}.svc.cluster.local."), RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NXDomain);
}

#[test]
fn endpoints_named_by_dashed_ipv6_addresses_starting_with_a_dash() {
    let mut r = cluster();
    add_service(
        &mut r,
        &service(
            "six",
            json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    add_slice(
        &mut r,
        &slice(
            "six-1",
            "six",
            "IPv6",
            json!([
                {"addresses": ["::5"], "conditions": {"ready": true}},
                {"addresses": ["fd00::7"], "conditions": {"ready": true}},
            ]),
        ),
    );
    let a = ask(
        &r,
        &format!("_http._tcp.six.{NS}.svc.cluster.local."),
        RecordType::SRV,
    );
    // The first label of each target, as sent (text escapes the dash).
    let first = |r: &hickory_proto::rr::Record| match &r.data {
        RData::SRV(s) => String::from_utf8_lossy(s.target.iter().next().unwrap()).to_string(),
        RData::PTR(p) => String::from_utf8_lossy(p.0.iter().next().unwrap()).to_string(),
        other => panic!("{other:?}"),
    };
    let firsts: Vec<String> = a.answers.iter().map(first).collect();
    assert_eq!(firsts, vec!["--5", "fd00--7"]);
    let q = Query::query(
        Name::from_labels(
            ["--5", "six", NS, "svc", "cluster", "local"]
                .iter()
                .map(|l| l.as_bytes()),
        )
        .unwrap(),
        RecordType::AAAA,
    );
    let a = answer(&r, &zone(), &q).unwrap();
    assert_eq!(data(&a), vec!["::5"]);
    // Its reverse name is kept too.
    let v6 = "5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.";
    let a = ask(&r, v6, RecordType::PTR);
    assert_eq!(a.answers.iter().map(first).collect::<Vec<_>>(), vec!["--5"]);
}

#[test]
fn a_reverse_name_without_the_type_carries_its_zones_soa() {
    let r = cluster();
    let a = ask(&r, "20.10.96.10.in-addr.arpa.", RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NoError);
    assert!(a.answers.is_empty());
    assert_eq!(a.authorities.len(), 1);
    assert_eq!(a.authorities[0].record_type(), RecordType::SOA);
    assert_eq!(a.authorities[0].name.to_ascii(), "in-addr.arpa.");
    let v6 = "4.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6.arpa.";
    let a = ask(&r, v6, RecordType::TXT);
    assert_eq!(a.authorities[0].name.to_ascii(), "ip6.arpa.");
}

#[test]
fn the_apex_names_its_name_server_and_that_name_has_the_dns_services_address() {
    let mut r = cluster();
    let a = ask(&r, "cluster.local.", RecordType::NS);
    assert_eq!(data(&a), vec!["ns.dns.cluster.local."]);
    // Before the DNS Service exists the name has no address (NODATA).
    let a = ask(&r, "ns.dns.cluster.local.", RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NoError);
    assert!(a.answers.is_empty());
    r.set_namespace("kube-system", true);
    let dns: Service = serde_json::from_value(json!({
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
    }))
    .unwrap();
    r.set_service(
        &("kube-system".into(), "kube-dns".into()),
        ServiceRec::from_service(&dns),
    );
    assert_eq!(
        data(&ask(&r, "ns.dns.cluster.local.", RecordType::A)),
        vec!["10.96.0.10"]
    );
    // The apex's SOA is still its only SOA.
    assert_eq!(ask(&r, "cluster.local.", RecordType::SOA).answers.len(), 1);
}

#[test]
fn the_empty_non_terminal_above_the_name_server_is_nodata() {
    // `ns.dns.<zone>` exists, so `dns.<zone>` does too, without records:
    // NODATA with the SOA, not NXDOMAIN (RFC 4592 2.2.2, RFC 8020 2).
    let r = cluster();
    for t in [RecordType::A, RecordType::AAAA, RecordType::TXT] {
        let a = ask(&r, "DNS.cluster.local.", t);
        assert_eq!(a.rcode, ResponseCode::NoError, "{t}");
        assert!(a.answers.is_empty(), "{t}");
        assert_eq!(a.authorities[0].record_type(), RecordType::SOA, "{t}");
    }
    // Other names beside it stay NXDOMAIN.
    let a = ask(&r, "x.dns.cluster.local.", RecordType::A);
    assert_eq!(a.rcode, ResponseCode::NXDomain);
}
