//! IPAM against the in-memory store, which has the same compare-and-swap
//! semantics as etcd. The etcd runs are in the lab's tests.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tartan_api::resources::{
    AffinityState, BlockAffinity, IpPool, IpPoolSpec, IpReservation, IpReservationSpec, IpamBlock,
    IpamHandle,
};
use tartan_api::store::connect::Checked;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::typed::TypedStore;

use super::*;

fn store() -> Arc<dyn Datastore> {
    // Checked: every IPAM write must also pass validation.
    Arc::new(Checked(Box::new(MemoryStore::new())))
}

async fn add_pool(s: &Arc<dyn Datastore>, name: &str, cidr: &str, block: Option<u8>) {
    let mut spec = IpPoolSpec::new(cidr);
    spec.block_size = block;
    s.create_typed(&IpPool::new(name, spec)).await.unwrap();
}

fn ipam(s: &Arc<dyn Datastore>, node: &str) -> Ipam {
    Ipam::new(s.clone(), IpamConfig::new(node))
}

fn attrs() -> BTreeMap<String, String> {
    BTreeMap::new()
}

async fn blocks(s: &Arc<dyn Datastore>) -> Vec<IpamBlock> {
    s.list_typed::<IpamBlock>(None).await.unwrap().0
}

/// The handles that hold an address in some block.
async fn holders_left(s: &Arc<dyn Datastore>) -> HashSet<String> {
    blocks(s)
        .await
        .iter()
        .flat_map(|b| block::holders(&b.spec, &b.spec.network().unwrap()).into_keys())
        .collect()
}

#[tokio::test]
async fn same_handle_same_address_and_distinct_otherwise() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/16", None).await;
    let i = ipam(&s, "n1");
    let a = i.assign("net.c1", &attrs()).await.unwrap();
    let again = i.assign("net.c1", &attrs()).await.unwrap();
    let b = i.assign("net.c2", &attrs()).await.unwrap();
    assert_eq!(a, again);
    assert_ne!(a, b);
    // The pool's first address is never handed out.
    assert_eq!(a[0].to_string(), "10.10.0.1/32");
    let bl = blocks(&s).await;
    assert_eq!(bl.len(), 1);
    assert_eq!(bl[0].spec.affinity.as_deref(), Some("host:n1"));
    let h: IpamHandle = s.get_typed(None, "net.c1").await.unwrap();
    assert_eq!(h.spec.block.get("10.10.0.0/26"), Some(&1));
    let aff: BlockAffinity = s.get_typed(None, "n1.10-10-0-0-26").await.unwrap();
    assert_eq!(aff.spec.state, AffinityState::Confirmed);
}

#[tokio::test]
async fn dual_stack_gives_one_of_each() {
    let s = store();
    add_pool(&s, "v4", "10.10.0.0/16", None).await;
    add_pool(&s, "v6", "fd00:10::/64", None).await;
    let got = ipam(&s, "n1").assign("net.c1", &attrs()).await.unwrap();
    let text: Vec<String> = got.iter().map(|n| n.to_string()).collect();
    assert_eq!(text, ["10.10.0.1/32", "fd00:10::1/128"]);
}

#[tokio::test]
async fn a_required_family_without_pool_fails_and_leaves_nothing() {
    let s = store();
    add_pool(&s, "v4", "10.10.0.0/16", None).await;
    let mut cfg = IpamConfig::new("n1");
    cfg.assign_ipv6 = Some(true);
    let e = Ipam::new(s.clone(), cfg)
        .assign("net.c1", &attrs())
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("no IPv6 pool applies to node n1"),
        "{e}"
    );
    assert!(blocks(&s).await.iter().all(|b| block::in_use(&b.spec) == 0));
}

#[tokio::test]
async fn second_family_exhausted_undoes_the_first() {
    let s = store();
    add_pool(&s, "v4", "10.10.0.0/16", None).await;
    // A /127 pool whose two addresses are both reserved: nothing to give.
    add_pool(&s, "v6", "fd00::/127", Some(127)).await;
    s.create_typed(&IpReservation::new(
        "both",
        IpReservationSpec {
            reserved_cidrs: vec!["fd00::/127".into()],
        },
    ))
    .await
    .unwrap();
    let e = ipam(&s, "n1").assign("net.c1", &attrs()).await.unwrap_err();
    assert!(
        matches!(
            e,
            IpamError::Exhausted {
                family: Family::V6,
                ..
            }
        ),
        "{e}"
    );
    assert!(blocks(&s).await.iter().all(|b| block::in_use(&b.spec) == 0));
}

#[tokio::test]
async fn reservations_are_never_handed_out() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/28", Some(28)).await;
    s.create_typed(&IpReservation::new(
        "r",
        IpReservationSpec {
            reserved_cidrs: vec!["10.10.0.1".into(), "10.10.0.4/30".into()],
        },
    ))
    .await
    .unwrap();
    let i = ipam(&s, "n1");
    let mut got = Vec::new();
    for n in 0..9 {
        got.push(
            i.assign(&format!("net.c{n}"), &attrs()).await.unwrap()[0]
                .addr()
                .to_string(),
        );
    }
    assert_eq!(
        got,
        [
            "10.10.0.2",
            "10.10.0.3",
            "10.10.0.8",
            "10.10.0.9",
            "10.10.0.10",
            "10.10.0.11",
            "10.10.0.12",
            "10.10.0.13",
            "10.10.0.14"
        ]
    );
    let e = i.assign("net.full", &attrs()).await.unwrap_err();
    assert!(
        e.to_string()
            .starts_with("no free IPv4 address for node n1 in p (10.10.0.0/28)"),
        "{e}"
    );
}

/// A pool of one address gives it (it has no network or broadcast
/// address to keep), then is exhausted.
#[tokio::test]
async fn a_single_address_pool_gives_its_address() {
    let s = store();
    add_pool(&s, "one", "10.245.0.0/32", Some(32)).await;
    let i = ipam(&s, "n1");
    let a = i.assign("net.c1", &attrs()).await.unwrap();
    assert_eq!(a[0].to_string(), "10.245.0.0/32");
    assert!(matches!(
        i.assign("net.c2", &attrs()).await,
        Err(IpamError::Exhausted { .. })
    ));
    assert_eq!(i.release("net.c1").await.unwrap().len(), 1);
}

#[tokio::test]
async fn exhaustion_cooldown_and_recovery() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/29", Some(29)).await;
    // The clock is the wall clock in whole seconds: an hour of cooldown
    // cannot run out during the test, and a node configured with none reads
    // the same release as already cooled (the arithmetic on injected times
    // is tested in block.rs).
    let mut cfg = IpamConfig::new("n1");
    cfg.cooldown = Duration::from_secs(3600);
    let i = Ipam::new(s.clone(), cfg);
    for n in 0..6 {
        i.assign(&format!("net.c{n}"), &attrs()).await.unwrap();
    }
    assert!(matches!(
        i.assign("net.more", &attrs()).await,
        Err(IpamError::Exhausted { .. })
    ));
    let released = i.release("net.c2").await.unwrap();
    assert_eq!(released.len(), 1);
    // Cooling down: still exhausted, and the error says why.
    let e = i.assign("net.more", &attrs()).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("1 released address(es) are cooling down"),
        "{e}"
    );
    assert!(matches!(
        i.check_room().await,
        Err(IpamError::Exhausted { .. })
    ));
    let mut cfg = IpamConfig::new("n1");
    cfg.cooldown = Duration::ZERO;
    let cooled = Ipam::new(s.clone(), cfg);
    cooled.check_room().await.unwrap();
    let got = cooled.assign("net.more", &attrs()).await.unwrap();
    assert_eq!(got[0].addr(), released[0]);
}

#[tokio::test]
async fn nodes_claim_their_own_blocks_then_borrow() {
    let s = store();
    // Two /30 blocks; the edges leave 3 addresses in each.
    add_pool(&s, "p", "10.10.0.0/29", Some(30)).await;
    let n1 = ipam(&s, "n1");
    let n2 = ipam(&s, "n2");
    let a = n1.assign("net.a", &attrs()).await.unwrap()[0];
    let b = n2.assign("net.b", &attrs()).await.unwrap()[0];
    assert!("10.10.0.0/30".parse::<IpNet>().unwrap().contains(&a));
    assert!("10.10.0.4/30".parse::<IpNet>().unwrap().contains(&b));
    // n1 fills its block, then borrows from n2's.
    let mut got = HashSet::new();
    for n in 0..4 {
        got.insert(n1.assign(&format!("net.x{n}"), &attrs()).await.unwrap()[0]);
    }
    assert_eq!(got.len(), 4);
    assert!(
        got.iter()
            .any(|g| "10.10.0.4/30".parse::<IpNet>().unwrap().contains(g))
    );
    // Strict affinity: no borrowing.
    let mut cfg = IpamConfig::new("n3");
    cfg.strict_affinity = true;
    let e = Ipam::new(s.clone(), cfg)
        .assign("net.s", &attrs())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("strict affinity"), "{e}");
}

#[tokio::test]
async fn a_hundred_concurrent_assigns_get_distinct_addresses() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/16", None).await;
    let mut tasks = Vec::new();
    for n in 0..100 {
        let s = s.clone();
        let node = format!("n{}", n % 3);
        tasks.push(tokio::spawn(async move {
            let i = Ipam::new(s, IpamConfig::new(&node));
            (
                node,
                i.assign(&format!("net.c{n}"), &attrs()).await.unwrap()[0],
            )
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        let (node, a) = t.await.unwrap();
        assert!(seen.insert(a), "{a} handed out twice");
        // Every address lies in a block affine to its node.
        let bl = blocks(&s).await;
        let owner = bl
            .iter()
            .find(|b| b.spec.network().unwrap().contains(&a))
            .unwrap();
        assert_eq!(owner.spec.affine_node(), Some(node.as_str()));
    }
    // 34 addresses per node need one /26 each: no node over-claimed.
    assert_eq!(blocks(&s).await.len(), 3);
}

#[tokio::test]
async fn gc_releases_what_is_not_kept_and_repairs_affinity() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/16", None).await;
    let i = ipam(&s, "n1");
    for c in ["a", "b", "c"] {
        i.assign(&format!("net.{c}"), &attrs()).await.unwrap();
    }
    i.assign("other.d", &attrs()).await.unwrap();
    // A claim whose affinity record was lost in a crash.
    s.delete_typed::<BlockAffinity>(None, "n1.10-10-0-0-26", None)
        .await
        .unwrap();
    let out = i.gc("net.", |h| h == "net.b").await.unwrap();
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let gone: Vec<&String> = out.released.keys().collect();
    assert_eq!(gone, ["net.a", "net.c"]);
    let left = holders_left(&s).await;
    assert_eq!(
        left,
        HashSet::from(["net.b".to_string(), "other.d".to_string()])
    );
    assert!(s.get_typed::<IpamHandle>(None, "net.a").await.is_err());
    s.get_typed::<BlockAffinity>(None, "n1.10-10-0-0-26")
        .await
        .unwrap();
}

/// A store whose deletes of one object fail as if the store were away.
struct FailsToDelete {
    inner: Arc<dyn Datastore>,
    name: String,
}

#[async_trait::async_trait]
impl Datastore for FailsToDelete {
    async fn get(
        &self,
        key: &tartan_api::store::ObjectKey,
    ) -> tartan_api::store::Result<tartan_api::store::DynamicObject> {
        self.inner.get(key).await
    }
    async fn list(
        &self,
        kind: tartan_api::kind::Kind,
        namespace: Option<&str>,
    ) -> tartan_api::store::Result<tartan_api::store::Listing> {
        self.inner.list(kind, namespace).await
    }
    async fn create(
        &self,
        obj: tartan_api::store::DynamicObject,
    ) -> tartan_api::store::Result<tartan_api::store::DynamicObject> {
        self.inner.create(obj).await
    }
    async fn update(
        &self,
        obj: tartan_api::store::DynamicObject,
    ) -> tartan_api::store::Result<tartan_api::store::DynamicObject> {
        self.inner.update(obj).await
    }
    async fn delete(
        &self,
        key: &tartan_api::store::ObjectKey,
        resource_version: Option<&str>,
    ) -> tartan_api::store::Result<()> {
        if key.name == self.name {
            return Err(tartan_api::store::StoreError::Unavailable(
                "injected".into(),
            ));
        }
        self.inner.delete(key, resource_version).await
    }
    async fn watch_raw(
        &self,
        scope: &tartan_api::store::WatchScope,
        revision: &str,
    ) -> tartan_api::store::Result<
        futures::stream::BoxStream<'static, tartan_api::store::Result<tartan_api::store::RawEvent>>,
    > {
        self.inner.watch_raw(scope, revision).await
    }
    fn describe(&self) -> String {
        "fails-to-delete".into()
    }
}

#[tokio::test]
async fn gc_goes_on_past_what_it_cannot_remove() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/16", None).await;
    let i = ipam(&s, "n1");
    for c in ["a", "b", "c"] {
        i.assign(&format!("net.{c}"), &attrs()).await.unwrap();
    }
    // The first handle's record cannot be deleted.
    let failing: Arc<dyn Datastore> = Arc::new(FailsToDelete {
        inner: s.clone(),
        name: handle_object_name("net.a"),
    });
    let out = ipam(&failing, "n1").gc("net.", |_| false).await.unwrap();
    assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
    assert!(out.errors[0].is_transient());
    // Every address went back, and the other handles were removed.
    assert!(holders_left(&s).await.is_empty());
    let gone: Vec<&String> = out.released.keys().collect();
    assert_eq!(gone, ["net.a", "net.b", "net.c"]);
    for c in ["b", "c"] {
        assert!(
            s.get_typed::<IpamHandle>(None, &handle_object_name(&format!("net.{c}")))
                .await
                .is_err()
        );
    }
    // The one left is removed by the next GC, once the store lets it.
    ipam(&s, "n1").gc("net.", |_| false).await.unwrap();
    assert!(
        s.get_typed::<IpamHandle>(None, &handle_object_name("net.a"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn gc_on_one_node_leaves_other_nodes_allocations() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/16", None).await;
    let on = |node: &str| BTreeMap::from([("node".to_string(), node.to_string())]);
    let n1 = ipam(&s, "n1");
    let n2 = ipam(&s, "n2");
    n1.assign("net.a", &on("n1")).await.unwrap();
    n2.assign("net.b", &on("n2")).await.unwrap();
    // A container ID with dots in it, kept by the runtime of n2.
    n2.assign("net.pod.1", &on("n2")).await.unwrap();
    // n2's runtime holds nothing but pod.1: n1's allocation is not its own.
    let out = n2
        .gc("net.", |h| h.strip_prefix("net.") == Some("pod.1"))
        .await
        .unwrap();
    let gone: Vec<&String> = out.released.keys().collect();
    assert_eq!(gone, ["net.b"]);
    let left = holders_left(&s).await;
    assert_eq!(
        left,
        HashSet::from(["net.a".to_string(), "net.pod.1".to_string()])
    );
    s.get_typed::<IpamHandle>(None, "net.a").await.unwrap();
    assert!(s.get_typed::<IpamHandle>(None, "net.b").await.is_err());
}

#[tokio::test]
async fn release_by_address() {
    let s = store();
    add_pool(&s, "p", "10.10.0.0/16", None).await;
    let i = ipam(&s, "n1");
    let a = i.assign("net.a", &attrs()).await.unwrap()[0].addr();
    assert_eq!(
        i.release_address(a).await.unwrap().as_deref(),
        Some("net.a")
    );
    assert_eq!(i.release_address(a).await.unwrap(), None);
    assert!(s.get_typed::<IpamHandle>(None, "net.a").await.is_err());
    // Releasing an unknown handle succeeds.
    assert!(i.release("net.nobody").await.unwrap().is_empty());
}

#[test]
fn handle_names() {
    assert_eq!(
        handle_object_name("k8s-pod-network.abc123"),
        "k8s-pod-network.abc123"
    );
    let odd = handle_object_name("My_Net.ABC");
    assert!(odd.starts_with("h-") && odd.len() == 42, "{odd}");
    assert_eq!(odd, handle_object_name("My_Net.ABC"));
}

#[tokio::test]
async fn pools_follow_their_node_selector() {
    use k8s_openapi::api::core::v1::Node;
    let s = store();
    let mut spec = IpPoolSpec::new("10.20.0.0/16");
    spec.node_selector = "zone == 'east'".into();
    s.create_typed(&IpPool::new("east", spec)).await.unwrap();
    let mut spec = IpPoolSpec::new("10.30.0.0/16");
    spec.node_selector = "zone == 'west'".into();
    s.create_typed(&IpPool::new("west", spec)).await.unwrap();
    let mut node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "labels": {"zone": "west"}}
    }))
    .unwrap();
    node = s.create_typed(&node).await.unwrap();
    let i = ipam(&s, "n1");
    let a = i.assign("net.a", &attrs()).await.unwrap()[0];
    assert!(
        "10.30.0.0/16".parse::<IpNet>().unwrap().contains(&a.addr()),
        "{a}"
    );
    // Relabelled: the next address comes from the other pool.
    node.metadata.labels = Some([("zone".to_string(), "east".to_string())].into());
    s.update_typed(&node).await.unwrap();
    let b = i.assign("net.b", &attrs()).await.unwrap()[0];
    assert!(
        "10.20.0.0/16".parse::<IpNet>().unwrap().contains(&b.addr()),
        "{b}"
    );
    // A node with no Node object matches neither; the error says why.
    let e = ipam(&s, "n2").assign("net.c", &attrs()).await.unwrap_err();
    assert!(e.to_string().contains("does not select this node"), "{e}");
}

#[tokio::test]
async fn overlapping_pools_never_give_one_address_twice() {
    // Two pools over the same addresses with other block sizes (written
    // past tartanctl's overlap check): a block of one is claimed; the
    // other pool's block around it must not be claimed over it.
    let s = store();
    add_pool(&s, "a", "10.40.0.0/16", Some(26)).await;
    add_pool(&s, "b", "10.40.0.0/16", Some(24)).await;
    let from = |node: &str, pool: &str| {
        let mut cfg = IpamConfig::new(node);
        cfg.ipv4_pools = vec![pool.to_string()];
        cfg.strict_affinity = true;
        Ipam::new(s.clone(), cfg)
    };
    let a = from("n1", "a").assign("net.a", &attrs()).await.unwrap()[0];
    let b = from("n2", "b").assign("net.b", &attrs()).await.unwrap()[0];
    assert_eq!(a.to_string(), "10.40.0.1/32");
    assert_ne!(a, b, "one address given to two pods");
    let nets: Vec<IpNet> = blocks(&s)
        .await
        .iter()
        .map(|b| b.spec.network().unwrap())
        .collect();
    for (i, x) in nets.iter().enumerate() {
        for y in &nets[i + 1..] {
            assert!(
                !x.contains(y) && !y.contains(x),
                "blocks {x} and {y} overlap"
            );
        }
    }
    // And the other way round: a /26 inside an existing /24 is taken too.
    let c = from("n3", "a").assign("net.c", &attrs()).await.unwrap()[0];
    assert!(![a, b].contains(&c), "{c}");
    assert!(
        !"10.40.1.0/24".parse::<IpNet>().unwrap().contains(&c.addr()),
        "{c} is in n2's /24"
    );
}

#[test]
fn taken_blocks_overlap_inside_around_and_exactly() {
    let taken: pools::Taken = ["10.0.1.0/24", "10.0.8.0/26", "fd00::/120"]
        .iter()
        .map(|n| n.parse().unwrap())
        .collect();
    let over = |n: &str| taken.overlaps(&n.parse().unwrap());
    for n in [
        "10.0.1.0/24",
        "10.0.1.64/26",
        "10.0.0.0/16",
        "10.0.8.0/24",
        "fd00::/64",
        "fd00::40/122",
    ] {
        assert!(over(n), "{n}");
    }
    for n in [
        "10.0.0.0/24",
        "10.0.2.0/24",
        "10.0.8.64/26",
        "fd00::100/120",
        "11.0.0.0/8",
    ] {
        assert!(!over(n), "{n}");
    }
}
