//! The BGPNodeStatus publisher against the in-memory datastore: it writes
//! this node's report, reads nothing but its own Node and report (no
//! listing, whatever the cluster's size), and deletes its report once its
//! Node goes. Other nodes' reports are not its business (tartan-controllers
//! deletes those of nodes that are gone).

use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use tartan_api::bgp::*;
use tartan_api::resources::{BgpNodeStatus, BgpNodeStatusSpec};
use tartan_api::store::Datastore;
use tartan_api::store::typed::TypedStore;

use crate::control::{ControlSource, SourceUnavailable};
use crate::datastore::publish::publish_recording;
use crate::model::Family;

/// A speaker with one Established iBGP session.
struct Speaker;

impl ControlSource for Speaker {
    async fn peers(&self) -> Result<Vec<PeerStatus>, SourceUnavailable> {
        Ok(vec![PeerStatus {
            address: "192.0.2.2".parse().unwrap(),
            port: Some(179),
            asn: 64512,
            local_asn: 64512,
            kind: PeerKind::Ibgp,
            state: SessionState::Established,
            uptime_seconds: Some(5),
            router_id: None,
            hold_time: None,
            families: vec![],
            prefixes: PrefixCounts {
                received: 4,
                accepted: 4,
                advertised: 1,
            },
            last_error: None,
            messages: MessageCounts::default(),
            graceful_restart: None,
            rr_client: false,
            description: None,
            bfd: None,
        }])
    }
    async fn routes(
        &self,
        _: Option<Family>,
        _: Option<IpNet>,
    ) -> Result<Vec<RouteEntry>, SourceUnavailable> {
        Ok(vec![])
    }
    async fn status(&self) -> Result<SpeakerStatus, SourceUnavailable> {
        Ok(SpeakerStatus {
            router_id: "192.0.2.1".parse().unwrap(),
            asn: 64512,
            peers: 1,
            established_peers: 1,
            routes: Default::default(),
            kernel: Default::default(),
            started_at: 0,
            uptime_seconds: 0,
            version: "test".into(),
            restart: None,
        })
    }
    async fn drain(&self, _: Option<Duration>) -> Result<DrainStatus, SourceUnavailable> {
        Err(SourceUnavailable("not in this test".into()))
    }
}

fn node(name: &str) -> Node {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap()
}

/// Polls `f` every 50 ms for up to 10 s.
async fn eventually<F: Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 10 s");
}

async fn names(store: &Arc<dyn Datastore>) -> Vec<String> {
    let (r, _) = store.list_typed::<BgpNodeStatus>(None).await.unwrap();
    let mut v: Vec<String> = r.into_iter().filter_map(|r| r.metadata.name).collect();
    v.sort();
    v
}

#[tokio::test]
async fn writes_the_report_reading_only_its_own_objects() {
    let recording = Arc::new(tartan_api::store::recording::Recording::new(false));
    let store: Arc<dyn Datastore> = recording.clone();
    store.create_typed(&node("node-a")).await.unwrap();
    // A report left by a node that no longer exists.
    let old = BgpNodeStatusSpec {
        node: "node-gone".into(),
        updated: 1,
        refresh_seconds: 30,
        router_id: "192.0.2.9".into(),
        asn: 64512,
        sessions: vec![],
    };
    store
        .create_typed(&BgpNodeStatus::new("node-gone", old))
        .await
        .unwrap();
    let metrics = crate::control::Metrics::new();
    let task = tokio::spawn(publish_recording(
        store.clone(),
        "node-a".into(),
        Speaker,
        Duration::from_secs(1),
        Some(metrics.durations().status_write.clone()),
    ));
    eventually("node-a reported", || {
        let s = store.clone();
        async move { names(&s).await == ["node-a", "node-gone"] }
    })
    .await;
    // Two refresh periods: what it read, besides what this test lists.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let reads: Vec<_> = recording
        .take_reads()
        .into_iter()
        .filter(|c| c.call != "list" || c.kind != tartan_api::Kind::BgpNodeStatus)
        .collect();
    assert!(
        reads
            .iter()
            .all(|c| c.call == "get" && c.names.iter().all(|n| n == "node-a")),
        "the publisher read more than its own objects: {reads:?}"
    );
    assert!(reads.iter().any(|c| c.kind == tartan_api::Kind::Node));
    let writes: u64 = metrics
        .encode()
        .lines()
        .find_map(|l| {
            l.strip_prefix("tartan_bgp_status_write_duration_seconds_count ")?
                .parse()
                .ok()
        })
        .unwrap();
    assert!(writes >= 1, "the report's write was not timed");
    let r: BgpNodeStatus = store.get_typed(None, "node-a").await.unwrap();
    assert_eq!(r.spec.refresh_seconds, 1);
    assert_eq!(r.spec.sessions.len(), 1);
    assert_eq!(r.spec.sessions[0].state, SessionState::Established);
    assert_eq!(r.spec.sessions[0].prefixes_received, 4);

    // node-a leaves the cluster: its own report goes and is not written
    // again; node-gone's is left to the controllers.
    store
        .delete_typed::<Node>(None, "node-a", None)
        .await
        .unwrap();
    eventually("node-a's report gone", || {
        let s = store.clone();
        async move { names(&s).await == ["node-gone"] }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(names(&store).await, ["node-gone"]);
    task.abort();
}
