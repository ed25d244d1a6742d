//! First start end to end: the `tartan-controllers` binary, on an etcd
//! holding nothing but the ConfigMap `tartan-system/tartan-config`,
//! creates the default IPPools from it; started again after the operator
//! deleted one and edited the other, it leaves them as they are.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use tartan_api::resources::ippool::EncapMode;
use tartan_api::resources::{IpPool, TARTAN_NAMESPACE};
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, connect};
use tartan_lab::etcd::EtcdCluster;
use tartan_lab::process::Daemon;

fn controllers(etcd: &EtcdCluster, id: &str) -> Daemon {
    let mut cmd = tartan_tests::bins::controllers_command(&etcd.datastore_spec(), id);
    cmd.args(["--loadbalancer-interval-ms", "200"]);
    Daemon::start(id, cmd).unwrap()
}

/// Waits (up to 60 s, the store's own pace) until `done` holds.
fn until(what: &str, d: &Daemon, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not after 60 s; log:\n{}",
            d.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_default_pools_come_from_the_config_map_once() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    if !std::path::Path::new(&tartan_lab::etcd::etcd_binary()).is_file() {
        eprintln!(
            "skipped: no etcd at {} (Debian's etcd-server)",
            tartan_lab::etcd::etcd_binary()
        );
        return;
    }
    let etcd = EtcdCluster::single().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store: Arc<dyn Datastore> = rt
        .block_on(connect(
            &etcd.datastore_spec(),
            Some(Duration::from_secs(10)),
        ))
        .unwrap();
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "tartan-config", "namespace": TARTAN_NAMESPACE},
        "data": {
            "ipv4-pool-cidr": "10.77.0.0/16",
            "ipv6-pool-cidr": "fd00:77::/56",
            "encapsulation": "IPIPCrossSubnet",
            "mtu": "auto"
        }
    }))
    .unwrap();
    rt.block_on(store.create_typed(&cm)).unwrap();
    let pools = || rt.block_on(store.list_typed::<IpPool>(None)).unwrap().0;

    let first = controllers(&etcd, "first-start-1");
    until("two default pools", &first, || pools().len() == 2);
    let p = pools();
    let v4 = p
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("default-ipv4"))
        .unwrap();
    assert_eq!(v4.spec.cidr, "10.77.0.0/16");
    assert_eq!(v4.spec.ipip_mode, EncapMode::CrossSubnet);
    assert!(v4.spec.nat_outgoing);
    let v6 = p
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("default-ipv6"))
        .unwrap();
    assert_eq!(v6.spec.cidr, "fd00:77::/56");
    drop(first);

    // The operator's turn: one pool gone, the other disabled.
    rt.block_on(store.delete_typed::<IpPool>(None, "default-ipv6", None))
        .unwrap();
    let mut v4 = pools().pop().unwrap();
    v4.spec.disabled = true;
    rt.block_on(store.update_typed(&v4)).unwrap();
    let second = controllers(&etcd, "first-start-2");
    until("the second start to see the pool", &second, || {
        second
            .log()
            .contains("IPPools exist; no default pool is created")
    });
    let p = pools();
    assert_eq!(p.len(), 1, "the deleted pool stays deleted");
    assert!(p[0].spec.disabled, "the edit stands");
}
