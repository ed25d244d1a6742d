//! What every command needs: the call, its configuration, the node, the
//! datastore and IPAM; and how their errors become CNI errors.

use std::sync::Arc;
use std::time::Duration;

use tartan_api::store::{Datastore, StoreError, connect};

use crate::ipam::{DEFAULT_COOLDOWN, Ipam, IpamConfig, IpamError};
use crate::spec::{CniError, Invocation, NetConf, error::code};
use crate::wire::WireError;

pub struct Context {
    pub inv: Invocation,
    pub conf: NetConf,
    pub node: String,
    pub store: Arc<dyn Datastore>,
    pub ipam: Ipam,
    /// The datastore as the node's local files are named for it.
    files: String,
}

impl Context {
    pub async fn open(inv: Invocation, conf: NetConf) -> Result<Context, CniError> {
        let node = match conf.nodename() {
            Some(n) => n.to_string(),
            None => nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .filter(|h| !h.is_empty())
                .ok_or_else(|| {
                    CniError::new(
                        code::INVALID_CONFIG,
                        "no nodename in the configuration and the host name is unreadable",
                    )
                })?,
        };
        // The name becomes part of object names and of a lock file's path.
        tartan_api::resources::common::dns_subdomain(&node)
            .map_err(|e| CniError::new(code::INVALID_CONFIG, format!("node name: {e}")))?;
        let ipam_conf = conf.ipam.clone().unwrap_or_default();
        if !ipam_conf.plugin_type.is_empty() && ipam_conf.plugin_type != "tartan-ipam" {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!(
                    "ipam type {:?} is not supported; tartan allocates with tartan-ipam",
                    ipam_conf.plugin_type
                ),
            ));
        }
        let spec = conf.datastore()?;
        if let Some(k) = &conf.kubeconfig {
            // SAFETY: the plugin runs on a single-threaded runtime and
            // nothing else reads the environment concurrently.
            unsafe { std::env::set_var("KUBECONFIG", k) };
        }
        let files = super::lock::store_identity(spec, conf.kubeconfig.as_deref());
        let store = connect(spec, Some(conf.datastore_timeout()))
            .await
            .map_err(store_error)?;
        let ipam = Ipam::new(
            store.clone(),
            IpamConfig {
                node: node.clone(),
                ipv4_pools: ipam_conf.ipv4_pools.clone(),
                ipv6_pools: ipam_conf.ipv6_pools.clone(),
                assign_ipv4: ipam_conf.assign_ipv4,
                assign_ipv6: ipam_conf.assign_ipv6,
                strict_affinity: ipam_conf.strict_affinity,
                cooldown: ipam_conf
                    .release_cooldown_seconds
                    .map_or(DEFAULT_COOLDOWN, Duration::from_secs),
                remember: Some(super::lock::node_file(&node, &files, "blocks")),
            },
        );
        Ok(Context {
            inv,
            conf,
            node,
            store,
            ipam,
            files,
        })
    }

    /// A context over `store`, for tests: nothing to connect to.
    #[cfg(test)]
    pub fn for_tests(
        inv: Invocation,
        conf: NetConf,
        node: &str,
        store: Arc<dyn Datastore>,
    ) -> Self {
        Context {
            inv,
            conf,
            node: node.to_string(),
            ipam: Ipam::new(store.clone(), IpamConfig::new(node)),
            store,
            files: "test".into(),
        }
    }

    /// This node's IPAM lock, held until dropped.
    pub async fn ipam_lock(&self) -> super::lock::NodeLock {
        super::lock::take(&self.node, &self.files, self.conf.datastore_timeout() * 2).await
    }

    /// This attachment's IPAM handle.
    pub fn handle(&self) -> String {
        self.conf.handle(&self.inv.container_id)
    }
}

pub fn store_error(e: StoreError) -> CniError {
    let c = if e.is_transient() {
        code::TRY_AGAIN
    } else {
        code::DATASTORE
    };
    CniError::new(c, format!("datastore: {e}"))
}

pub fn ipam_error(e: IpamError) -> CniError {
    match e {
        IpamError::Store(s) => store_error(s),
        IpamError::Exhausted { .. } | IpamError::NoPool { .. } => {
            CniError::new(code::POOL_EXHAUSTED, e.to_string())
        }
        IpamError::Contention { .. } => CniError::new(code::TRY_AGAIN, e.to_string()),
        IpamError::Config(_) => CniError::new(code::INVALID_CONFIG, e.to_string()),
        IpamError::Corrupt(_) => CniError::new(code::DATASTORE, e.to_string()),
    }
}

pub fn wire_error(e: WireError) -> CniError {
    if e.is_missing_netns() {
        return CniError::new(code::UNKNOWN_CONTAINER, e.to_string());
    }
    if matches!(e, WireError::NotNetns { .. }) {
        return CniError::new(code::INVALID_ENV, format!("CNI_NETNS: {e}"));
    }
    CniError::new(code::WIRING, e.to_string())
}
