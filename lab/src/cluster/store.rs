//! The lab's own handle on its datastore, where it stands in for the
//! kubelet and the control plane (Nodes, Pods, Namespaces, ClusterIPs,
//! EndpointSlices, the DNS Service): etcd directly, or on the Kubernetes
//! datastore the stand-in as the cluster admin, through the kubeconfig
//! the stand-in wrote (never the caller's own `KUBECONFIG`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tartan_api::store::connect::Checked;
use tartan_api::store::kube::KubeStore;
use tartan_api::store::retry::Retrying;
use tartan_api::store::{Datastore, connect};

use super::apiserver::{Identity, kubeconfig};
use super::state::LabState;

/// Opens lab `st`'s datastore, retrying an unreachable one for
/// `give_up_after`.
pub async fn open(st: &LabState, give_up_after: Duration) -> Result<Arc<dyn Datastore>> {
    let Some(path) = kubeconfig(st, Identity::Admin) else {
        return connect(&st.datastore, Some(give_up_after))
            .await
            .with_context(|| format!("open the lab's datastore {}", st.datastore));
    };
    let text = kube::config::Kubeconfig::read_from(&path)
        .with_context(|| format!("read {}", path.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(text, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("use {}", path.display()))?;
    // The stand-in is on the lab's bridge: no proxy is in between.
    config.proxy_url = None;
    let client = kube::Client::try_from(config).context("a client of the lab's API server")?;
    let store = KubeStore::from_client(client);
    Ok(Arc::new(Retrying::new(
        Checked(Box::new(store)),
        Some(give_up_after),
    )))
}
