//! The whole service table written over the one in the kernel (felix
//! restarted with other Services, a rebuild after drift) against the real
//! `nft` and kernel: in place (chains and rules by `nft`, the elements
//! replaced in one netlink transaction, what is no longer needed
//! removed), and the result is the table a fresh write makes.

use std::process::Command;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tartan_felix::dataplane::nft::Written;
use tartan_felix::dataplane::services::ServiceProxy;
use tartan_felix::dataplane::svc_whole::Whole;
use tartan_felix::services::{self, ServiceInfo, SliceInfo};

mod common;
use common::in_new_netns;

fn nft(args: &[&str]) {
    let out = Command::new("nft").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn service(name: &str, spec: serde_json::Value, status: serde_json::Value) -> ServiceInfo {
    let s: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "x"}, "spec": spec, "status": status
    }))
    .unwrap();
    ServiceInfo::<std::net::Ipv4Addr>::from_service(&s)
        .unwrap()
        .unwrap()
}

fn slice(svc: &str, ips: &[&str]) -> SliceInfo {
    let eps: Vec<_> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "nodeName": "n1"}))
        .collect();
    let s: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": format!("{svc}-1"), "namespace": "x",
                     "labels": {services::SERVICE_NAME_LABEL: svc}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}], "endpoints": eps}))
    .unwrap();
    SliceInfo::from_slice(&s, "n1").unwrap()
}

/// The Services of generation `g` (0 or 1): different endpoint counts,
/// affinity timeouts, source ranges, Services and hairpin addresses, so
/// that chains, affinity sets and elements all differ.
fn feed(p: &mut ServiceProxy, g: usize) {
    let timeout = [30, 60][g];
    let web_eps: &[&[&str]] = &[
        &["10.0.0.5", "10.0.1.5", "10.0.2.5", "10.0.3.5", "10.0.4.5"],
        &["10.0.0.5", "10.0.1.9"],
    ];
    p.index.set_service(
        "x/web",
        Some(service(
            "web",
            json!({"clusterIP": "10.96.0.10", "type": "NodePort", "sessionAffinity": "ClientIP",
                   "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": timeout}},
                   "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}),
            json!({}),
        )),
    );
    p.index.set_slice("x/web-1", Some(slice("web", web_eps[g])));
    let ranges = [
        json!(["198.51.100.0/24"]),
        json!(["203.0.113.7/32", "192.0.2.128/25"]),
    ];
    p.index.set_service(
        "x/lb",
        Some(service(
            "lb",
            json!({"clusterIP": "10.96.0.11", "type": "LoadBalancer", "externalTrafficPolicy": "Local",
                   "loadBalancerSourceRanges": ranges[g],
                   "ports": [{"name": "http", "port": 80, "nodePort": 30081}]}),
            json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
        )),
    );
    p.index
        .set_slice("x/lb-1", Some(slice("lb", &["10.0.1.7"])));
    // A Service only in the first generation, one only in the second.
    let only = ["x/old", "x/new"][g];
    let ip = ["10.96.0.12", "10.96.0.13"][g];
    p.index.set_service(
        only,
        Some(service(
            "only",
            json!({"clusterIP": ip, "ports": [{"port": 81}]}),
            json!({}),
        )),
    );
    p.index.set_local_pods([["10.0.0.5", "10.0.0.6"][g]
        .parse::<std::net::Ipv4Addr>()
        .unwrap()]);
}

/// The service table as the kernel lists it: elements sorted, handles
/// and chain order left out.
fn listing() -> Vec<String> {
    let mut out: Vec<String> = common::normalized_table("ip", "tartan-svc")
        .iter()
        .map(|o| o.to_string())
        .collect();
    // Rules keep their order within a chain: sort stably by chain only.
    out.sort_by_key(|o| {
        let v: serde_json::Value = serde_json::from_str(o).unwrap();
        match v.get("rule") {
            Some(r) => format!("rule {}", r["chain"]),
            None => o.clone(),
        }
    });
    out
}

fn fresh(g: usize) -> Vec<String> {
    in_new_netns(move || {
        let mut p = ServiceProxy::new("n1");
        feed(&mut p, g);
        assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
        assert_eq!(p.v4.last_whole, Some(Whole::Fresh));
        listing()
    })
}

#[test]
fn a_table_written_over_another_in_place_is_the_fresh_one() {
    let over = in_new_netns(|| {
        let mut first = ServiceProxy::new("n1");
        feed(&mut first, 0);
        assert!(matches!(first.sync(false).unwrap(), Written::Full(_)));
        // A chain of an older felix, and a set: removed by the rewrite.
        nft(&["add", "chain", "ip", "tartan-svc", "leftover"]);
        nft(&[
            "add",
            "set",
            "ip",
            "tartan-svc",
            "leftover_set",
            "{ type ipv4_addr; }",
        ]);
        // felix restarted, with the Services of generation 1.
        let mut second = ServiceProxy::new("n1");
        feed(&mut second, 1);
        assert!(matches!(second.sync(false).unwrap(), Written::Full(_)));
        assert_eq!(second.v4.last_whole, Some(Whole::InPlace));
        assert_eq!(
            second.sync(true).unwrap(),
            Written::Nothing,
            "the drift check finds the table it wrote"
        );
        listing()
    });
    let text = over.join("\n");
    for gone in [
        "leftover",
        "fe_5_a30",
        "aff_4",
        "10.96.0.12",
        "198.51.100.0",
        "10.0.4.5",
    ] {
        assert!(!text.contains(gone), "{gone} is still there: {text}");
    }
    for kept in ["fe_2_a60", "10.96.0.13", "203.0.113.7", "10.0.1.9"] {
        assert!(text.contains(kept), "{kept} missing: {text}");
    }
    assert_eq!(over, fresh(1));
}

#[test]
fn a_table_that_cannot_be_updated_in_place_is_replaced_whole() {
    let over = in_new_netns(|| {
        // A set felix declares, there with another type.
        nft(&["add", "table", "ip", "tartan-svc"]);
        nft(&[
            "add",
            "set",
            "ip",
            "tartan-svc",
            "hairpin",
            "{ type ipv4_addr; }",
        ]);
        let mut p = ServiceProxy::new("n1");
        feed(&mut p, 0);
        assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
        assert_eq!(p.v4.last_whole, Some(Whole::Replaced));
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        listing()
    });
    assert_eq!(over, fresh(0));
}

#[test]
fn a_burst_of_services_is_written_whole_and_a_single_change_as_a_patch() {
    in_new_netns(|| {
        let mut p = ServiceProxy::new("n1");
        feed(&mut p, 0);
        assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
        // A store filled while felix runs: 600 Services in one pass. Their
        // patch would be built whole in memory; the table is written
        // whole instead (in place, over the kernel's).
        for i in 0..600u32 {
            let ip = format!("10.97.{}.{}", i / 250, i % 250 + 1);
            p.index.set_service(
                &format!("x/burst-{i}"),
                Some(service(
                    &format!("burst-{i}"),
                    json!({"clusterIP": ip, "ports": [{"name": "http", "port": 80}]}),
                    json!({}),
                )),
            );
            p.index.set_slice(
                &format!("x/burst-{i}-1"),
                Some(slice(&format!("burst-{i}"), &["10.0.3.9"])),
            );
        }
        assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
        assert_eq!(p.v4.last_whole, Some(Whole::InPlace));
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        // One more Service: a patch.
        p.index.set_service(
            "x/one-more",
            Some(service(
                "one-more",
                json!({"clusterIP": "10.97.9.9", "ports": [{"port": 82}]}),
                json!({}),
            )),
        );
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        let text = listing().join("\n");
        for present in ["10.97.0.1", "10.97.2.100", "10.97.9.9"] {
            assert!(text.contains(present), "{present} missing");
        }
    });
}
