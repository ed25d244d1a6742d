//! Choosing and opening a datastore from one string, as the daemons and
//! `tartanctl` take it (`--datastore`, `TARTAN_DATASTORE`):
//! `etcd://HOST:PORT[,HOST:PORT…]`, `kubernetes`, or `memory` (an empty
//! in-process store, for tests and trying things out).
//!
//! Every store opened here validates Tartan objects before writing them
//! (etcd has no API server to do it) and retries transient failures.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::retry::Retrying;
use super::{
    Datastore, DynamicObject, ListPage, Listing, Narrow, ObjectKey, RawEvent, Result, StoreError,
    WatchScope,
};
use crate::kind::Kind;

/// A parsed `--datastore` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    /// Client endpoints, `host:port` each.
    Etcd(Vec<String>),
    Kubernetes,
    Memory,
}

impl FromStr for StoreSpec {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self> {
        let bad = |why: &str| {
            StoreError::BadObject(format!(
                "datastore {s:?}: {why}; expected etcd://HOST:PORT[,HOST:PORT...], kubernetes or memory"
            ))
        };
        let s = s.trim();
        if s == "kubernetes" || s == "k8s" {
            return Ok(StoreSpec::Kubernetes);
        }
        if s == "memory" {
            return Ok(StoreSpec::Memory);
        }
        let Some(rest) = s.strip_prefix("etcd://") else {
            return Err(bad("unknown kind of datastore"));
        };
        let mut endpoints = Vec::new();
        for ep in rest.split(',') {
            let ep = ep.trim().trim_end_matches('/');
            let (host, port) = ep
                .rsplit_once(':')
                .ok_or_else(|| bad(&format!("endpoint {ep:?} has no port")))?;
            if host.is_empty() {
                return Err(bad(&format!("endpoint {ep:?} has no host")));
            }
            port.parse::<u16>().map_err(|_| {
                bad(&format!(
                    "endpoint {ep:?}: port {port:?} is not a number 1-65535"
                ))
            })?;
            endpoints.push(ep.to_string());
        }
        Ok(StoreSpec::Etcd(endpoints))
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSpec::Etcd(eps) => write!(f, "etcd://{}", eps.join(",")),
            StoreSpec::Kubernetes => f.write_str("kubernetes"),
            StoreSpec::Memory => f.write_str("memory"),
        }
    }
}

/// Open the store `spec` names. `give_up_after`: how long calls retry an
/// unreachable store (`None`: for ever, as daemons do).
pub async fn connect(spec: &str, give_up_after: Option<Duration>) -> Result<Arc<dyn Datastore>> {
    let spec: StoreSpec = spec.parse()?;
    let backend: Box<dyn Datastore> = match spec {
        StoreSpec::Etcd(endpoints) => Box::new(super::etcd::EtcdStore::connect(&endpoints).await?),
        StoreSpec::Kubernetes => Box::new(super::kube::KubeStore::connect().await?),
        StoreSpec::Memory => Box::new(super::memory::MemoryStore::new()),
    };
    Ok(Arc::new(Retrying::new(Checked(backend), give_up_after)))
}

/// Validates Tartan objects before they are written, given the API
/// server's defaults first ([`crate::defaults`]; an update of a Service
/// prepared against its stored version then).
pub struct Checked(pub Box<dyn Datastore>);

fn admit(obj: &mut DynamicObject, stored: Option<&DynamicObject>) -> Result<()> {
    crate::validate::admit(obj, stored).map_err(|e| StoreError::Invalid(e.to_string()))
}

#[async_trait]
impl Datastore for Checked {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        self.0.get(key).await
    }

    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
        self.0.list(kind, namespace).await
    }

    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        self.0.list_narrow(kind, namespace, narrow).await
    }

    async fn list_page(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        from: Option<&str>,
        limit: usize,
    ) -> Result<ListPage> {
        self.0.list_page(kind, namespace, from, limit).await
    }

    async fn create(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        admit(&mut obj, None)?;
        self.0.create(obj).await
    }

    async fn update(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        // As the API server prepares an update before it validates it (a
        // Service loses what its old type left behind): every writer,
        // tartanctl or Tartan's API server, gets the same answer.
        let key = ObjectKey::of(&obj)?;
        let stored = if crate::validate::depends_on_stored(key.kind) {
            match self.0.get(&key).await {
                Ok(stored) => Some(stored),
                // Refused by the update itself.
                Err(StoreError::NotFound(_)) => None,
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        admit(&mut obj, stored.as_ref())?;
        self.0.update(obj).await
    }

    async fn update_status(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        admit(&mut obj, None)?;
        self.0.update_status(obj).await
    }

    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()> {
        self.0.delete(key, resource_version).await
    }

    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>> {
        self.0.watch_raw(scope, revision).await
    }

    fn describe(&self) -> String {
        self.0.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn objects_are_stored_with_the_api_servers_defaults() {
        let store = connect("memory", None).await.unwrap();
        let obj = |v: serde_json::Value| -> DynamicObject { serde_json::from_value(v).unwrap() };
        let svc = store
            .create(obj(
                serde_json::json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"type": "NodePort", "ports": [{"port": 80}]}}),
            ))
            .await
            .unwrap();
        let spec = &svc.data["spec"];
        assert_eq!(spec["sessionAffinity"], "None");
        assert_eq!(spec["externalTrafficPolicy"], "Cluster");
        assert_eq!(spec["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["ports"][0]["targetPort"], 80);
        let key = ObjectKey::of(&svc).unwrap();
        assert_eq!(store.get(&key).await.unwrap().data, svc.data, "as stored");
        // On an update too.
        let mut again = obj(serde_json::json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "NodePort", "sessionAffinity": "ClientIP", "ports": [{"port": 80}]}}));
        again.metadata.resource_version = svc.metadata.resource_version.clone();
        let updated = store.update(again).await.unwrap();
        assert_eq!(
            updated.data["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10_800
        );
        let np = store
            .create(obj(
                serde_json::json!({"apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": "default"},
                "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}}),
            ))
            .await
            .unwrap();
        assert_eq!(
            np.data["spec"]["policyTypes"],
            serde_json::json!(["Ingress", "Egress"])
        );
        assert_eq!(np.data["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
    }

    #[tokio::test]
    async fn a_service_update_is_prepared_against_the_stored_one() {
        let store = connect("memory", None).await.unwrap();
        let svc = |spec: serde_json::Value| -> DynamicObject {
            serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"}, "spec": spec}))
            .unwrap()
        };
        let created = store
            .create(svc(
                serde_json::json!({"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}),
            ))
            .await
            .unwrap();
        let alias = |ip: &str| {
            let mut o = svc(serde_json::json!({"type": "ExternalName",
                "externalName": "db.example.com", "clusterIP": ip, "ports": [{"port": 80}]}));
            o.metadata.resource_version = created.metadata.resource_version.clone();
            o
        };
        // A changed address is the user's: refused.
        let e = store.update(alias("10.96.0.11")).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("spec.clusterIPs: Forbidden: may not be set for ExternalName services"),
            "{e}"
        );
        // The stored one, left over: dropped.
        let written = store.update(alias("10.96.0.10")).await.unwrap();
        assert!(
            written.data["spec"].get("clusterIP").is_none(),
            "{written:?}"
        );
        assert_eq!(written.data["spec"]["type"], "ExternalName");
    }

    #[test]
    fn specs_parse() {
        assert_eq!(
            "etcd://127.0.0.1:2379,10.0.0.2:2379"
                .parse::<StoreSpec>()
                .unwrap(),
            StoreSpec::Etcd(vec!["127.0.0.1:2379".into(), "10.0.0.2:2379".into()])
        );
        assert_eq!(
            "etcd://[::1]:2379".parse::<StoreSpec>().unwrap(),
            StoreSpec::Etcd(vec!["[::1]:2379".into()])
        );
        assert_eq!(
            "kubernetes".parse::<StoreSpec>().unwrap(),
            StoreSpec::Kubernetes
        );
        for bad in [
            "",
            "etcd://",
            "etcd://host",
            "etcd://:2379",
            "etcd://h:99999",
            "consul://x:1",
            "http://h:1",
        ] {
            let e = bad.parse::<StoreSpec>().unwrap_err().to_string();
            assert!(e.contains("expected etcd://"), "{bad}: {e}");
        }
    }
}
