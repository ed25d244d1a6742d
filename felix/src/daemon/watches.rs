//! The watches felix follows: every kind the calculation reads, each
//! watched across all namespaces, and which of them have delivered
//! everything that existed.

use std::sync::Arc;

use tartan_api::Kind;
use tartan_api::store::watch::{Watch, WatchEvent, watch};
use tartan_api::store::{Datastore, WatchScope};

/// One watch per kind felix reads.
pub(super) struct Watches {
    pub(super) endpoints: Watch,
    pub(super) pools: Watch,
    pub(super) blocks: Watch,
    pub(super) nodes: Watch,
    pub(super) pods: Watch,
    pub(super) namespaces: Watch,
    pub(super) service_accounts: Watch,
    pub(super) kube_policies: Watch,
    pub(super) tartan_policies: Watch,
    pub(super) global_policies: Watch,
    pub(super) net_sets: Watch,
    pub(super) global_net_sets: Watch,
    pub(super) host_endpoints: Watch,
    /// `None` when felix is not the Service proxy.
    pub(super) services: Option<Watch>,
    pub(super) slices: Option<Watch>,
}

impl Watches {
    /// Watch every kind felix reads in `store`, all namespaces; Services
    /// and EndpointSlices only when felix implements Services.
    pub(super) fn open(store: &Arc<dyn Datastore>, services: bool) -> Watches {
        let all = |kind| {
            watch(
                store.clone(),
                WatchScope {
                    kind,
                    namespace: None,
                    // Of a Node, felix reads the annotations only.
                    metadata_only: kind == Kind::Node,
                },
            )
        };
        Watches {
            // felix holds every endpoint and Pod by key: the record is its
            // own (see `fold::Sweep`), not a second copy in the watch.
            endpoints: all(Kind::WorkloadEndpoint).unrecorded(),
            pools: all(Kind::IpPool),
            blocks: all(Kind::IpamBlock),
            nodes: all(Kind::Node),
            pods: all(Kind::Pod).unrecorded(),
            namespaces: all(Kind::Namespace),
            service_accounts: all(Kind::ServiceAccount),
            kube_policies: all(Kind::KubeNetworkPolicy),
            tartan_policies: all(Kind::NetworkPolicy),
            global_policies: all(Kind::GlobalNetworkPolicy),
            net_sets: all(Kind::NetworkSet),
            global_net_sets: all(Kind::GlobalNetworkSet),
            host_endpoints: all(Kind::HostEndpoint),
            services: services.then(|| all(Kind::Service)),
            slices: services.then(|| all(Kind::EndpointSlice)),
        }
    }
}

/// The next event of a watch that may not be open; never, when it is not.
pub(super) async fn next_of(w: &mut Option<Watch>) -> WatchEvent {
    match w {
        Some(w) => w.next().await,
        None => std::future::pending().await,
    }
}

/// Which watches have delivered everything that existed.
#[derive(Debug, Default)]
pub(super) struct Synced {
    pub(super) endpoints: bool,
    pub(super) blocks: bool,
    pub(super) pools: bool,
    pub(super) nodes: bool,
    /// Pods, namespaces, the three policy kinds, the two network set
    /// kinds, ServiceAccounts and HostEndpoints.
    pub(super) policy: [bool; 9],
    /// Services and EndpointSlices.
    pub(super) services: [bool; 2],
}

impl Synced {
    /// Routes and tunnels can be computed: endpoints, blocks, pools and
    /// nodes are all known.
    pub(super) fn routing_ready(&self) -> bool {
        self.endpoints && self.blocks && self.pools && self.nodes
    }

    /// Everything the policy table is computed from is known.
    pub(super) fn policy_ready(&self) -> bool {
        self.policy.iter().all(|s| *s)
    }

    /// Everything the service table is computed from is known.
    pub(super) fn services_ready(&self) -> bool {
        self.services.iter().all(|s| *s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::store::memory::MemoryStore;

    #[tokio::test]
    async fn endpoints_and_pods_are_watched_without_a_second_record() {
        let mem = MemoryStore::new();
        let wep = serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "WorkloadEndpoint",
            "metadata": {"name": "p.eth0", "namespace": "ns"},
            "spec": {"node": "n1", "pod": "p", "containerID": "c", "endpoint": "eth0",
                     "interfaceName": "tarp", "ipNetworks": ["10.0.0.1/32"]}
        });
        mem.create(serde_json::from_value(wep).unwrap())
            .await
            .unwrap();
        let store: Arc<dyn Datastore> = Arc::new(mem);
        let mut w = Watches::open(&store, false);
        let mut seen = Vec::new();
        loop {
            let ev = w.endpoints.next().await;
            let synced = matches!(ev, WatchEvent::Synced { .. });
            seen.push(ev);
            if synced {
                break;
            }
        }
        assert!(matches!(seen[0], WatchEvent::Relisting), "{seen:?}");
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!(w.endpoints.remembered(), 0);
        assert!(matches!(w.pods.next().await, WatchEvent::Relisting));
        // The kinds felix keeps only part of keep their record.
        assert!(matches!(w.nodes.next().await, WatchEvent::Synced { .. }));
    }
}
