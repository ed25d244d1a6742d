//! First start against the in-memory store: no pool → the ConfigMap's
//! pools (or the defaults without one); a pool → nothing, ever; a bad
//! ConfigMap → an error and nothing written, until it is fixed.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use tartan_api::resources::ippool::EncapMode;
use tartan_api::resources::{IpPool, IpPoolSpec, TARTAN_NAMESPACE};
use tartan_api::store::Datastore;
use tartan_api::store::connect::Checked;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::typed::TypedStore;

use super::{FirstStart, FirstStartError, Outcome};

fn store() -> Arc<dyn Datastore> {
    Arc::new(Checked(Box::new(MemoryStore::new())))
}

async fn config_map(s: &Arc<dyn Datastore>, kv: &[(&str, &str)]) {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("tartan-config".into());
    cm.metadata.namespace = Some(TARTAN_NAMESPACE.into());
    cm.data = Some(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    s.create_typed(&cm).await.unwrap();
}

async fn pools(s: &Arc<dyn Datastore>) -> Vec<IpPool> {
    s.list_typed::<IpPool>(None).await.unwrap().0
}

#[tokio::test]
async fn an_empty_store_gets_the_config_maps_pools_once() {
    let s = store();
    config_map(
        &s,
        &[
            ("ipv4-pool-cidr", "192.168.0.0/16"),
            ("ipv6-pool-cidr", "fd00:10:244::/56"),
            ("encapsulation", "VXLAN"),
            ("nat-outgoing", "false"),
        ],
    )
    .await;
    let mut f = FirstStart::new(TARTAN_NAMESPACE);
    let out = f.pass(&*s).await.unwrap();
    assert_eq!(
        out,
        Outcome::Created(vec!["default-ipv4".into(), "default-ipv6".into()])
    );
    assert!(f.settled());
    let p = pools(&s).await;
    assert_eq!(p.len(), 2);
    let v4 = p.iter().find(|p| p.spec.cidr == "192.168.0.0/16").unwrap();
    assert_eq!(v4.spec.vxlan_mode, EncapMode::Always);
    assert!(!v4.spec.nat_outgoing);
    let v6 = p
        .iter()
        .find(|p| p.spec.cidr == "fd00:10:244::/56")
        .unwrap();
    assert_eq!(v6.spec.vxlan_mode, EncapMode::Never);
    // The operator deletes them: this process does not bring them back.
    for name in ["default-ipv4", "default-ipv6"] {
        s.delete_typed::<IpPool>(None, name, None).await.unwrap();
    }
    assert_eq!(f.pass(&*s).await.unwrap(), Outcome::Settled);
    assert!(pools(&s).await.is_empty());
}

#[tokio::test]
async fn without_the_config_map_the_defaults_make_the_pool() {
    let s = store();
    let mut f = FirstStart::new(TARTAN_NAMESPACE);
    let out = f.pass(&*s).await.unwrap();
    assert_eq!(out, Outcome::Created(vec!["default-ipv4".into()]));
    let p = pools(&s).await;
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].spec.cidr, "10.244.0.0/16");
    assert_eq!(p[0].spec.vxlan_mode, EncapMode::CrossSubnet);
    assert!(p[0].spec.nat_outgoing);
}

#[tokio::test]
async fn an_existing_pool_means_nothing_is_read_or_written() {
    let s = store();
    // A ConfigMap that would be refused: not even read while a pool exists.
    config_map(&s, &[("ipv4-pool-cidr", "not a cidr")]).await;
    let mut mine = IpPoolSpec::new("10.50.0.0/16");
    mine.block_size = Some(24);
    s.create_typed(&IpPool::new("mine", mine.clone()))
        .await
        .unwrap();
    let mut f = FirstStart::new(TARTAN_NAMESPACE);
    assert_eq!(f.pass(&*s).await.unwrap(), Outcome::PoolsExist(1));
    assert!(f.settled());
    let p = pools(&s).await;
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].spec, mine, "the operator's pool is not edited");
    // Deleted later: still nothing.
    s.delete_typed::<IpPool>(None, "mine", None).await.unwrap();
    assert_eq!(f.pass(&*s).await.unwrap(), Outcome::Settled);
    assert!(pools(&s).await.is_empty());
}

#[tokio::test]
async fn a_bad_config_map_writes_nothing_until_fixed() {
    let s = store();
    // The IPv4 pool alone would be fine: nothing is half-created.
    config_map(
        &s,
        &[
            ("ipv4-pool-cidr", "10.244.0.0/16"),
            ("ipv6-pool-cidr", "fd00::1/56"),
        ],
    )
    .await;
    let mut f = FirstStart::new(TARTAN_NAMESPACE);
    for _ in 0..2 {
        let Err(FirstStartError::Config(e)) = f.pass(&*s).await else {
            panic!("the ConfigMap is invalid");
        };
        assert_eq!(e.problems.len(), 1, "{e}");
        assert_eq!(e.problems[0].0, "ipv6-pool-cidr");
        assert!(e.to_string().contains("has host bits set"), "{e}");
        assert!(!f.settled());
        assert!(pools(&s).await.is_empty());
    }
    let mut cm: ConfigMap = s
        .get_typed(Some(TARTAN_NAMESPACE), "tartan-config")
        .await
        .unwrap();
    cm.data
        .as_mut()
        .unwrap()
        .insert("ipv6-pool-cidr".into(), "fd00::/56".into());
    s.update_typed(&cm).await.unwrap();
    let out = f.pass(&*s).await.unwrap();
    assert_eq!(
        out,
        Outcome::Created(vec!["default-ipv4".into(), "default-ipv6".into()])
    );
}

#[tokio::test]
async fn a_pool_the_api_server_would_refuse_is_a_config_error() {
    let s = store();
    config_map(&s, &[("ipv4-pool-cidr", "10.0.0.0/28")]).await;
    let mut f = FirstStart::new(TARTAN_NAMESPACE);
    let Err(FirstStartError::Config(e)) = f.pass(&*s).await else {
        panic!("a /28 cannot hold a /26 block");
    };
    assert!(e.to_string().contains("spec.blockSize"), "{e}");
    assert!(pools(&s).await.is_empty());
}

#[tokio::test]
async fn empty_cidrs_create_nothing_and_say_so() {
    let s = store();
    config_map(&s, &[("ipv4-pool-cidr", "")]).await;
    let mut f = FirstStart::new(TARTAN_NAMESPACE);
    assert_eq!(f.pass(&*s).await.unwrap(), Outcome::NoneConfigured);
    assert!(f.settled() && pools(&s).await.is_empty());
}

#[tokio::test]
async fn an_unreachable_store_is_retried() {
    let mem = MemoryStore::new();
    mem.set_unavailable(true);
    let s: Arc<dyn Datastore> = Arc::new(Checked(Box::new(mem)));
    let mut f = FirstStart::new(TARTAN_NAMESPACE);
    assert!(matches!(f.pass(&*s).await, Err(FirstStartError::Store(_))));
    assert!(!f.settled());
}
