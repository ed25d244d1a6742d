//! The lab's default pools. On etcd the lab writes the IPPools itself; on
//! the Kubernetes datastore it writes what an operator installs, the
//! ConfigMap `tartan-system/tartan-config` (docs/install.md), and waits
//! for tartan-controllers' first start to create the pools from it. The
//! mapping from `up`'s options to the ConfigMap is pure ([`config_data`]).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use serde_json::json;
use tartan_api::mtu::{Encapsulation, Family, encapsulated_mtu};
use tartan_api::resources::ippool::EncapMode;
use tartan_api::resources::{IpPool, IpPoolSpec, LoadBalancerIpPool, LoadBalancerIpPoolSpec};
use tartan_api::store::typed::{Resource, TypedStore};
use tartan_api::store::{Datastore, StoreError};
use tartan_api::tartan_config::{
    CONFIG_MAP, DEFAULT_IPV4_POOL, DEFAULT_IPV6_POOL, ENCAPSULATION, IPV4_POOL_CIDR,
    IPV6_POOL_CIDR, MTU, NAT_OUTGOING, PoolEncapsulation, TartanConfig,
};

use super::state::{DEFAULT_POOL, DEFAULT_POOL6};
use super::up_options::UpOptions;

/// Where the ConfigMap (and the controllers' Lease) live.
pub const SYSTEM_NAMESPACE: &str = "tartan-system";

/// The Namespaces a cluster has before anything is installed, and the
/// one deploy/ makes.
pub const NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", SYSTEM_NAMESPACE];

/// The `encapsulation` key's value for `up`'s modes (one of them Never).
pub fn encapsulation(vxlan: EncapMode, ipip: EncapMode) -> PoolEncapsulation {
    match (vxlan, ipip) {
        (EncapMode::Always, _) => PoolEncapsulation::Vxlan,
        (EncapMode::CrossSubnet, _) => PoolEncapsulation::VxlanCrossSubnet,
        (_, EncapMode::Always) => PoolEncapsulation::Ipip,
        (_, EncapMode::CrossSubnet) => PoolEncapsulation::IpipCrossSubnet,
        _ => PoolEncapsulation::None,
    }
}

/// `tartan-config`'s data for `o`: the pools the etcd lab writes (no
/// natOutgoing), and the pods' MTU the lab's conflists carry (`mtu`).
pub fn config_data(o: &UpOptions, mtu: Option<u32>) -> BTreeMap<String, String> {
    let mut d = BTreeMap::new();
    d.insert(IPV4_POOL_CIDR.to_string(), DEFAULT_POOL.to_string());
    if o.dual_stack {
        d.insert(IPV6_POOL_CIDR.to_string(), DEFAULT_POOL6.to_string());
    }
    d.insert(
        ENCAPSULATION.to_string(),
        encapsulation(o.vxlan_mode, o.ipip_mode).to_string(),
    );
    d.insert(NAT_OUTGOING.to_string(), "false".to_string());
    if let Some(m) = mtu {
        d.insert(MTU.to_string(), m.to_string());
    }
    d
}

/// Creates `obj`, keeping one that exists.
async fn create_or_keep<K: Resource>(store: &dyn Datastore, obj: &K) -> Result<()> {
    match store.create_typed(obj).await {
        Ok(_) | Err(StoreError::AlreadyExists(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// On etcd: the default IPPools, written by the lab (kept when they
/// exist).
pub async fn write_pools(store: &dyn Datastore, o: &UpOptions) -> Result<()> {
    if o.dual_stack {
        create_or_keep(
            store,
            &IpPool::new(DEFAULT_IPV6_POOL, IpPoolSpec::new(DEFAULT_POOL6)),
        )
        .await?;
    }
    let mut pool = IpPoolSpec::new(DEFAULT_POOL);
    pool.vxlan_mode = o.vxlan_mode;
    pool.ipip_mode = o.ipip_mode;
    create_or_keep(store, &IpPool::new(DEFAULT_IPV4_POOL, pool)).await
}

/// The LoadBalancerIPPool `up` makes of the lab's LoadBalancer range.
pub const LB_POOL: &str = "lab-lb";

/// The LoadBalancerIPPool [`LB_POOL`] of `lb_cidr`, and of `lb_cidr6` in
/// a dual-stack lab (kept when it exists): tartan-controllers give
/// LoadBalancer Services their addresses from it, one per family of
/// their `ipFamilies`; the lab's `ctl` gives none.
pub async fn write_lb_pool(
    store: &dyn Datastore,
    lb_cidr: &str,
    lb_cidr6: Option<&str>,
) -> Result<()> {
    let mut cidrs = vec![lb_cidr];
    cidrs.extend(lb_cidr6);
    let pool = LoadBalancerIpPool::new(LB_POOL, LoadBalancerIpPoolSpec::new(&cidrs));
    create_or_keep(store, &pool).await
}

/// On the Kubernetes datastore: the cluster's Namespaces and the
/// ConfigMap `tartan-system/tartan-config` for `o`, checked as
/// tartan-controllers will check it.
pub async fn write_config(store: &dyn Datastore, o: &UpOptions, mtu: Option<u32>) -> Result<()> {
    for ns in NAMESPACES {
        let n: Namespace = serde_json::from_value(json!({
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}
        }))?;
        create_or_keep(store, &n).await?;
    }
    let data = config_data(o, mtu);
    if let Err(e) = TartanConfig::parse(&data) {
        bail!("the lab's {CONFIG_MAP} would be refused: {e}");
    }
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CONFIG_MAP, "namespace": SYSTEM_NAMESPACE},
        "data": data
    }))?;
    create_or_keep(store, &cm).await
}

/// On the Kubernetes datastore: waits (up to `limit`) until the default
/// pools the ConfigMap names exist.
pub async fn wait_pools(store: &dyn Datastore, o: &UpOptions, limit: Duration) -> Result<()> {
    let mut want = vec![DEFAULT_IPV4_POOL];
    if o.dual_stack {
        want.push(DEFAULT_IPV6_POOL);
    }
    let deadline = Instant::now() + limit;
    loop {
        let have: Vec<String> = match store.list_typed::<IpPool>(None).await {
            Ok((pools, _)) => pools.into_iter().filter_map(|p| p.metadata.name).collect(),
            Err(_) => vec![],
        };
        if want.iter().all(|w| have.iter().any(|h| h == w)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "tartan-controllers created no pool {want:?} from {SYSTEM_NAMESPACE}/{CONFIG_MAP} within {limit:?} (pools: {have:?})"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The pods' MTU when the pool encapsulates: room for the tunnel's header
/// inside the underlay (the lab's links keep the kernel's 1500), as
/// tartan-install-cni computes it.
pub fn pod_mtu(o: &UpOptions) -> Result<Option<u32>> {
    let tunnel = if o.vxlan_mode != EncapMode::Never {
        Encapsulation::Vxlan
    } else if o.ipip_mode != EncapMode::Never {
        Encapsulation::Ipip
    } else {
        return Ok(None);
    };
    Ok(Some(encapsulated_mtu(1500, tunnel, Family::Ipv4)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(vxlan: EncapMode, ipip: EncapMode, dual: bool) -> UpOptions {
        UpOptions {
            name: "t".into(),
            nodes: 2,
            topology: "mesh".into(),
            vxlan_mode: vxlan,
            ipip_mode: ipip,
            dual_stack: dual,
            service_cidr: None,
            service_cidr6: None,
            lb_cidr: None,
            datastore: Default::default(),
        }
    }

    #[test]
    fn the_config_map_makes_the_pools_the_etcd_lab_writes() {
        use EncapMode::*;
        for (vxlan, ipip, dual) in [
            (Never, Never, false),
            (Always, Never, true),
            (CrossSubnet, Never, false),
            (Never, Always, false),
            (Never, CrossSubnet, false),
        ] {
            let o = opts(vxlan, ipip, dual);
            let cfg = TartanConfig::parse(&config_data(&o, Some(1450))).unwrap();
            let pools = cfg.default_pools();
            assert_eq!(pools.len(), if dual { 2 } else { 1 });
            let v4 = &pools[0].spec;
            assert_eq!(v4.cidr, DEFAULT_POOL);
            assert_eq!((v4.vxlan_mode, v4.ipip_mode), (vxlan, ipip));
            assert!(!v4.nat_outgoing, "the etcd lab's pools do not masquerade");
            if dual {
                assert_eq!(pools[1].spec.cidr, DEFAULT_POOL6);
            }
        }
    }
}
