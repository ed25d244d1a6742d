//! The datastore follower with Services and EndpointSlices (in-memory
//! store, no root): a Local-policy Service's host route follows its local
//! endpoint, and EndpointSlice churn that changes nothing this node
//! announces sends no configuration. With many Services the figures of a
//! full sync and of one endpoint change are printed (not timed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use prometheus_client::metrics::histogram::Histogram;
use serde_json::json;
use tartan_api::resources::{BgpConfiguration, BgpConfigurationSpec};
use tartan_api::store::Datastore;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::typed::TypedStore;
use tartan_bgpd::config::Config;
use tartan_bgpd::datastore::follow::{follow, follow_recording};
use tokio::sync::mpsc;

const LB: &str = "198.51.100.7";

fn node(name: &str, ip: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name,
        "annotations": {"tartan.dev/bgp-ipv4-address": format!("{ip}/24")}}}))
    .unwrap()
}

fn ranges() -> BgpConfiguration {
    let spec: BgpConfigurationSpec = serde_json::from_value(json!({
        "serviceClusterIPs": [{"cidr": "10.96.0.0/12"}],
        "serviceExternalIPs": [{"cidr": "203.0.113.0/24"}],
        "serviceLoadBalancerIPs": [{"cidr": "198.51.100.0/24"}],
    }))
    .unwrap();
    BgpConfiguration::new("default", spec)
}

fn service(name: &str, policy: &str, ingress: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
            "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ingress}]}},
    }))
    .unwrap()
}

fn slice(name: &str, svc: &str, nodes: &[&str]) -> EndpointSlice {
    let eps: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            json!({"addresses": [format!("10.244.{}.{}", k / 250, k % 250 + 1)],
                "nodeName": n, "conditions": {"ready": true}})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default",
            "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": eps,
    }))
    .unwrap()
}

fn hosts(c: &Config) -> Vec<String> {
    c.announce
        .iter()
        .map(|a| a.prefix.to_string())
        .filter(|p| p.ends_with("/32"))
        .collect()
}

async fn next(rx: &mut mpsc::Receiver<Config>, within: Duration) -> Option<Config> {
    tokio::time::timeout(within, rx.recv()).await.ok().flatten()
}

async fn base(store: &Arc<dyn Datastore>) {
    for (n, ip) in [("n1", "10.0.0.1"), ("n2", "10.0.0.2"), ("n3", "10.0.0.3")] {
        store.create_typed(&node(n, ip)).await.unwrap();
    }
    store.create_typed(&ranges()).await.unwrap();
}

#[tokio::test]
async fn the_host_route_follows_the_local_endpoint_and_churn_elsewhere_sends_nothing() {
    let store: Arc<dyn Datastore> = Arc::new(MemoryStore::new());
    base(&store).await;
    store
        .create_typed(&service("web", "Local", LB))
        .await
        .unwrap();
    let mut web = store
        .create_typed(&slice("web-a", "web", &["n2"]))
        .await
        .unwrap();
    // A Cluster-policy Service whose endpoints churn everywhere.
    store
        .create_typed(&service("api", "Cluster", "198.51.100.8"))
        .await
        .unwrap();
    let mut api = store
        .create_typed(&slice("api-a", "api", &["n1", "n2"]))
        .await
        .unwrap();

    let (tx, mut rx) = mpsc::channel(8);
    let builds = Histogram::new([0.001, 1.0]);
    let f = tokio::spawn(follow_recording(
        store.clone(),
        "n1".into(),
        tx,
        Some(builds.clone()),
    ));
    let first = next(&mut rx, Duration::from_secs(5))
        .await
        .expect("a first config");
    let built = count(&builds);
    assert!(built >= 1, "the first configuration's build was not timed");
    let all: Vec<String> = first
        .announce
        .iter()
        .map(|a| a.prefix.to_string())
        .collect();
    assert_eq!(all, ["10.96.0.0/12", "198.51.100.0/24", "203.0.113.0/24"]);

    // Churn: the Cluster Service's endpoints move around, the Local
    // Service's endpoint moves between other nodes. Nothing is sent.
    for k in 0..100 {
        let nodes: &[&str] = if k % 2 == 0 { &["n1"] } else { &["n2", "n3"] };
        let mut s = slice("api-a", "api", nodes);
        s.metadata.resource_version = api.metadata.resource_version.clone();
        api = store.update_typed(&s).await.unwrap();
        let mut s = slice("web-a", "web", &[if k % 2 == 0 { "n3" } else { "n2" }]);
        s.metadata.resource_version = web.metadata.resource_version.clone();
        web = store.update_typed(&s).await.unwrap();
    }
    assert!(
        next(&mut rx, Duration::from_millis(500)).await.is_none(),
        "churn that changes nothing here sent a configuration"
    );
    assert_eq!(
        count(&builds),
        built,
        "churn that changes nothing here rebuilt the configuration"
    );

    // The endpoint comes to n1: the host route is announced.
    let t = Instant::now();
    let mut s = slice("web-a", "web", &["n1"]);
    s.metadata.resource_version = web.metadata.resource_version.clone();
    store.update_typed(&s).await.unwrap();
    let c = next(&mut rx, Duration::from_secs(5))
        .await
        .expect("a config");
    eprintln!("endpoint here -> configuration: {:?}", t.elapsed());
    assert!(count(&builds) > built, "the rebuild was not timed");
    assert_eq!(hosts(&c), [format!("{LB}/32")]);
    // The last one goes: withdrawn.
    store
        .delete_typed::<EndpointSlice>(Some("default"), "web-a", None)
        .await
        .unwrap();
    let c = next(&mut rx, Duration::from_secs(5))
        .await
        .expect("a config");
    assert!(hosts(&c).is_empty(), "{:?}", hosts(&c));
    f.abort();
}

/// How many observations `h` holds, read from its exposition.
fn count(h: &Histogram) -> u64 {
    let mut r = prometheus_client::registry::Registry::default();
    r.register("b", "builds", h.clone());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("b_count "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a count")
}

/// Figures: a follower for one node of a cluster with `N` Services (a
/// tenth with Local policy), each with a slice of 10 endpoints spread over
/// 100 nodes. Printed, not asserted, except that answers are right.
#[tokio::test]
async fn figures_with_many_services() {
    const N: usize = 5_000;
    let store: Arc<dyn Datastore> = Arc::new(MemoryStore::new());
    base(&store).await;
    let nodes: Vec<String> = (0..100).map(|k| format!("w{k}")).collect();
    let t = Instant::now();
    for k in 0..N {
        let name = format!("s{k}");
        let policy = if k % 10 == 0 { "Local" } else { "Cluster" };
        let ip = format!("198.51.{}.{}", 100 + k / 250 % 4, k % 250 + 1);
        store
            .create_typed(&service(&name, policy, &ip))
            .await
            .unwrap();
        let eps: Vec<&str> = (0..10).map(|e| nodes[(k + e) % 100].as_str()).collect();
        store
            .create_typed(&slice(&format!("{name}-a"), &name, &eps))
            .await
            .unwrap();
    }
    eprintln!("{N} Services and slices written: {:?}", t.elapsed());
    let (tx, mut rx) = mpsc::channel(8);
    let t = Instant::now();
    let f = tokio::spawn(follow(store.clone(), "n1".into(), tx));
    let first = next(&mut rx, Duration::from_secs(60))
        .await
        .expect("config");
    eprintln!("first configuration ({N} Services): {:?}", t.elapsed());
    assert!(hosts(&first).is_empty());
    // Churn on other nodes: 1,000 slice updates, no configuration.
    let t = Instant::now();
    for k in 0..1000 {
        let name = format!("s{}", k * 5 % N);
        let mut cur: EndpointSlice = store
            .get_typed(Some("default"), &format!("{name}-a"))
            .await
            .unwrap();
        let eps: Vec<&str> = (0..10).map(|e| nodes[(k + e * 7) % 100].as_str()).collect();
        let mut s = slice(&format!("{name}-a"), &name, &eps);
        s.metadata.resource_version = cur.metadata.resource_version.take();
        store.update_typed(&s).await.unwrap();
    }
    eprintln!("1,000 slice updates elsewhere written: {:?}", t.elapsed());
    assert!(
        next(&mut rx, Duration::from_millis(300)).await.is_none(),
        "no configuration for churn elsewhere"
    );
    // One endpoint of a Local Service comes here.
    let mut cur: EndpointSlice = store.get_typed(Some("default"), "s0-a").await.unwrap();
    let mut s = slice("s0-a", "s0", &["n1"]);
    s.metadata.resource_version = cur.metadata.resource_version.take();
    let t = Instant::now();
    store.update_typed(&s).await.unwrap();
    let c = next(&mut rx, Duration::from_secs(5)).await.expect("config");
    eprintln!(
        "one local endpoint at {N} Services -> configuration: {:?}",
        t.elapsed()
    );
    assert_eq!(hosts(&c), ["198.51.100.1/32"]);
    f.abort();
}
