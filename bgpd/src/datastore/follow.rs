//! Follow the datastore: watch every kind the configuration depends on,
//! rebuild after each burst of changes, and hand on a configuration only
//! when it differs from the last one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use tartan_api::Kind;
use tartan_api::resources::{
    BgpConfiguration, BgpPeer, IpPool, IpamBlock, TARTAN_NAMESPACE, WorkloadEndpoint,
};
use tartan_api::store::typed::{Resource, from_dynamic};
use tartan_api::store::watch::{WatchEvent, watch};
use tartan_api::store::{Datastore, DynamicObject, WatchScope};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::build::{Inputs, build};
use crate::config::Config;

const KINDS: [Kind; 7] = [
    Kind::Node,
    Kind::BgpConfiguration,
    Kind::BgpPeer,
    Kind::IpPool,
    Kind::IpamBlock,
    Kind::WorkloadEndpoint,
    Kind::Secret,
];

/// Secrets are read in Tartan's namespace only; every other kind
/// cluster-wide.
fn namespace_of(kind: Kind) -> Option<String> {
    (kind == Kind::Secret).then(|| TARTAN_NAMESPACE.to_string())
}

/// A Secret's keys as text (`stringData` over `data`); keys whose value is
/// not UTF-8 are left out.
fn secret_values(s: &Secret) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in s.data.iter().flatten() {
        if let Ok(text) = String::from_utf8(v.0.clone()) {
            out.insert(k.clone(), text);
        }
    }
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// The objects seen, per kind, by `namespace/name`.
#[derive(Default)]
struct Seen {
    objects: BTreeMap<Kind, BTreeMap<String, DynamicObject>>,
    synced: BTreeMap<Kind, bool>,
}

fn key(o: &DynamicObject) -> String {
    format!(
        "{}/{}",
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or("")
    )
}

impl Seen {
    fn apply(&mut self, kind: Kind, ev: WatchEvent) {
        let m = self.objects.entry(kind).or_default();
        match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                m.insert(key(&o), o);
            }
            WatchEvent::Deleted(o) => {
                m.remove(&key(&o));
            }
            WatchEvent::Synced { .. } => {
                self.synced.insert(kind, true);
            }
        }
    }

    fn all_synced(&self) -> bool {
        KINDS.iter().all(|k| self.synced.get(k) == Some(&true))
    }

    fn typed<T: Resource>(&self) -> Vec<(String, T)> {
        self.objects
            .get(&T::KIND)
            .into_iter()
            .flatten()
            .filter_map(|(k, o)| match from_dynamic::<T>(o.clone()) {
                Ok(t) => Some((k.clone(), t)),
                Err(e) => {
                    warn!(object = %k, error = %e, "unreadable object ignored");
                    None
                }
            })
            .collect()
    }

    fn inputs(&self, node: &str) -> Inputs {
        let name = |k: &str| k.rsplit('/').next().unwrap_or("").to_string();
        Inputs {
            node: node.to_string(),
            nodes: self
                .typed::<k8s_openapi::api::core::v1::Node>()
                .into_iter()
                .map(|(_, n)| n)
                .collect(),
            configs: self
                .typed::<BgpConfiguration>()
                .into_iter()
                .map(|(k, c)| (name(&k), c.spec))
                .collect(),
            peers: self
                .typed::<BgpPeer>()
                .into_iter()
                .map(|(k, p)| (name(&k), p.spec))
                .collect(),
            pools: self
                .typed::<IpPool>()
                .into_iter()
                .map(|(_, p)| p.spec)
                .collect(),
            blocks: self
                .typed::<IpamBlock>()
                .into_iter()
                .map(|(_, b)| b.spec)
                .collect(),
            endpoints: self
                .typed::<WorkloadEndpoint>()
                .into_iter()
                .map(|(_, w)| w.spec)
                .collect(),
            secrets: self
                .typed::<Secret>()
                .into_iter()
                .map(|(k, s)| (name(&k), secret_values(&s)))
                .collect(),
        }
    }
}

/// Follow the store for `node`, sending each new configuration. Runs until
/// the receiver is dropped.
pub async fn follow(store: Arc<dyn Datastore>, node: String, out: mpsc::Sender<Config>) {
    let (tx, mut rx) = mpsc::channel::<(Kind, WatchEvent)>(1024);
    let mut tasks = Vec::new();
    for kind in KINDS {
        let store = store.clone();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            let mut w = watch(
                store,
                WatchScope {
                    kind,
                    namespace: namespace_of(kind),
                },
            );
            loop {
                let ev = w.next().await;
                if tx.send((kind, ev)).await.is_err() {
                    return;
                }
            }
        }));
    }
    drop(tx);
    let mut seen = Seen::default();
    let mut last: Option<Config> = None;
    let mut last_error: Option<String> = None;
    loop {
        let Some((kind, ev)) = rx.recv().await else {
            break;
        };
        seen.apply(kind, ev);
        // Take the rest of a burst before rebuilding.
        loop {
            match tokio::time::timeout(Duration::from_millis(2), rx.recv()).await {
                Ok(Some((k, e))) => seen.apply(k, e),
                Ok(None) => break,
                Err(_) => break,
            }
        }
        if !seen.all_synced() {
            continue;
        }
        match build(&seen.inputs(&node)) {
            Ok(cfg) => {
                last_error = None;
                if last.as_ref() != Some(&cfg) {
                    info!(
                        neighbors = cfg.neighbors.len(),
                        announce = cfg.announce.len(),
                        "configuration from the datastore"
                    );
                    last = Some(cfg.clone());
                    if out.send(cfg).await.is_err() {
                        break;
                    }
                }
            }
            Err(e) => {
                let text = e.to_string();
                if last_error.as_deref() != Some(text.as_str()) {
                    warn!(error = %text, "no configuration yet; waiting for the datastore to change");
                    last_error = Some(text);
                }
            }
        }
    }
    for t in tasks {
        t.abort();
    }
}
