//! The objects a netpol case changes in the datastore: Kubernetes
//! NetworkPolicies, Tartan NetworkPolicies and GlobalNetworkPolicies,
//! NetworkSets and GlobalNetworkSets, ServiceAccounts, and the labels of
//! Namespaces and Pods.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy as KubeNetworkPolicy;
use serde_json::{Value, json};
use tartan_api::resources::{
    GlobalNetworkPolicy, GlobalNetworkSet, NetworkPolicy as TartanNetworkPolicy, NetworkSet,
};
use tartan_api::store::StoreError;
use tartan_api::store::typed::{Resource, TypedStore};

use super::NAMESPACES;
use super::cluster::NetpolCluster;

/// The label every Namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// How often a read-modify-write is retried when the object changed
/// meanwhile.
const CONFLICT_RETRIES: usize = 10;

/// A Kubernetes `networking.k8s.io/v1` NetworkPolicy `ns/name` with `spec`.
pub fn k8s_policy(ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// A Tartan `tartan.dev/v1` NetworkPolicy `ns/name` with `spec`.
pub fn tartan_policy(ns: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "tartan.dev/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    })
}

/// A Tartan `tartan.dev/v1` GlobalNetworkPolicy `name` with `spec`.
pub fn global_policy(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "tartan.dev/v1",
        "kind": "GlobalNetworkPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// A NetworkSet `ns/name` (or, with `ns` `None`, a GlobalNetworkSet
/// `name`) with `labels` and `nets`.
pub fn network_set(ns: Option<&str>, name: &str, labels: Value, nets: &[String]) -> Value {
    let mut o = json!({
        "apiVersion": "tartan.dev/v1",
        "kind": if ns.is_some() { "NetworkSet" } else { "GlobalNetworkSet" },
        "metadata": {"name": name, "labels": labels},
        "spec": {"nets": nets},
    });
    if let Some(ns) = ns {
        o["metadata"]["namespace"] = ns.into();
    }
    o
}

impl NetpolCluster {
    /// Creates or replaces the ServiceAccount `ns/name` with `labels`.
    pub fn apply_service_account(&self, ns: &str, name: &str, labels: Value) -> Result<()> {
        self.upsert::<ServiceAccount>(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
        }))
    }

    /// Creates or replaces a NetworkSet (with metadata.namespace) or a
    /// GlobalNetworkSet (without), given as JSON.
    pub fn apply_network_set(&self, set: Value) -> Result<()> {
        if set["metadata"]["namespace"].is_string() {
            self.upsert::<NetworkSet>(set)
        } else {
            self.upsert::<GlobalNetworkSet>(set)
        }
    }

    /// Creates `object` (JSON of a `T`), or replaces the object of that
    /// name.
    fn upsert<T: Resource>(&self, mut object: Value) -> Result<()> {
        let name = object["metadata"]["name"]
            .as_str()
            .context("the object has no metadata.name")?
            .to_string();
        let ns = object["metadata"]["namespace"].as_str().map(String::from);
        let what = format!(
            "{} {}{name}",
            T::KIND,
            ns.as_deref().map(|n| format!("{n}/")).unwrap_or_default()
        );
        let typed: T = serde_json::from_value(object.clone())
            .with_context(|| format!("{what} does not parse"))?;
        let store = &self.lab.store;
        match self.block_on(store.create_typed(&typed)) {
            Ok(_) => return Ok(()),
            Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(e).with_context(|| format!("create {what}")),
        }
        for _ in 0..CONFLICT_RETRIES {
            let current: T = self
                .block_on(store.get_typed(ns.as_deref(), &name))
                .with_context(|| format!("read {what}"))?;
            let rv = serde_json::to_value(&current)?["metadata"]["resourceVersion"].clone();
            object["metadata"]["resourceVersion"] = rv;
            let typed: T = serde_json::from_value(object.clone())?;
            match self.block_on(store.update_typed(&typed)) {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e).with_context(|| format!("update {what}")),
            }
        }
        bail!("{what} kept changing under the update")
    }

    fn delete<T: Resource>(&self, ns: Option<&str>, name: &str) -> Result<()> {
        match self.block_on(self.lab.store.delete_typed::<T>(ns, name, None)) {
            Ok(()) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("delete {} {ns:?}/{name}", T::KIND)),
        }
    }

    /// Creates or replaces a Kubernetes `networking.k8s.io/v1`
    /// NetworkPolicy given as JSON (metadata.name and metadata.namespace
    /// required).
    pub fn apply_k8s_policy(&self, policy: Value) -> Result<()> {
        if policy["metadata"]["namespace"].as_str().is_none() {
            bail!("a Kubernetes NetworkPolicy needs metadata.namespace");
        }
        self.upsert::<KubeNetworkPolicy>(policy)
    }

    pub fn delete_k8s_policy(&self, ns: &str, name: &str) -> Result<()> {
        self.delete::<KubeNetworkPolicy>(Some(ns), name)
    }

    /// Creates or replaces a Tartan `tartan.dev/v1` NetworkPolicy given as
    /// JSON (metadata.name and metadata.namespace required).
    pub fn apply_tartan_policy(&self, policy: Value) -> Result<()> {
        if policy["metadata"]["namespace"].as_str().is_none() {
            bail!("a Tartan NetworkPolicy needs metadata.namespace");
        }
        self.upsert::<TartanNetworkPolicy>(policy)
    }

    pub fn delete_tartan_policy(&self, ns: &str, name: &str) -> Result<()> {
        self.delete::<TartanNetworkPolicy>(Some(ns), name)
    }

    /// Creates or replaces a Tartan GlobalNetworkPolicy given as JSON.
    pub fn apply_global_policy(&self, policy: Value) -> Result<()> {
        self.upsert::<GlobalNetworkPolicy>(policy)
    }

    pub fn delete_global_policy(&self, name: &str) -> Result<()> {
        self.delete::<GlobalNetworkPolicy>(None, name)
    }

    /// Deletes every policy of the three kinds, and every network set.
    pub fn delete_all_policies(&self) -> Result<()> {
        let store = &self.lab.store;
        let (sets, _) = self.block_on(store.list_typed::<NetworkSet>(None))?;
        for s in sets {
            let ns = s.metadata.namespace.unwrap_or_default();
            self.delete::<NetworkSet>(Some(&ns), &s.metadata.name.unwrap_or_default())?;
        }
        let (sets, _) = self.block_on(store.list_typed::<GlobalNetworkSet>(None))?;
        for s in sets {
            self.delete::<GlobalNetworkSet>(None, &s.metadata.name.unwrap_or_default())?;
        }
        let mut left = 0;
        for ns in NAMESPACES.iter().copied().chain(["default"]) {
            let (k, _) = self.block_on(store.list_typed::<KubeNetworkPolicy>(Some(ns)))?;
            for p in k {
                let name = p.metadata.name.unwrap_or_default();
                self.delete_k8s_policy(ns, &name)?;
            }
            let (t, _) = self.block_on(store.list_typed::<TartanNetworkPolicy>(Some(ns)))?;
            for p in t {
                let name = p.metadata.name.unwrap_or_default();
                self.delete_tartan_policy(ns, &name)?;
            }
        }
        let (g, _) = self.block_on(store.list_typed::<GlobalNetworkPolicy>(None))?;
        for p in g {
            self.delete_global_policy(&p.metadata.name.unwrap_or_default())?;
        }
        left += self
            .block_on(store.list_typed::<KubeNetworkPolicy>(None))?
            .0
            .len();
        left += self
            .block_on(store.list_typed::<TartanNetworkPolicy>(None))?
            .0
            .len();
        left += self
            .block_on(store.list_typed::<GlobalNetworkPolicy>(None))?
            .0
            .len();
        if left > 0 {
            bail!("{left} policies left after deleting them all (in other namespaces?)");
        }
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) labels of the Namespace `ns`.
    pub fn label_namespace(&self, ns: &str, labels: &[(&str, Option<&str>)]) -> Result<()> {
        self.modify::<Namespace>(None, ns, |n| {
            change_labels(
                n.metadata.labels.get_or_insert_with(Default::default),
                labels,
            )
        })
    }

    /// Sets (`Some`) or removes (`None`) labels of the Pod `ns/name`.
    /// (The Pod object: felix takes a pod's labels from it.)
    pub fn label_pod(&self, id: &str, labels: &[(&str, Option<&str>)]) -> Result<()> {
        let (ns, name) = id
            .split_once('/')
            .with_context(|| format!("pod {id:?} is not ns/name"))?;
        self.modify::<Pod>(Some(ns), name, |p| {
            change_labels(
                p.metadata.labels.get_or_insert_with(Default::default),
                labels,
            )
        })
    }

    /// Every Namespace and Pod back to the labels it was created with
    /// (objects already so are not written).
    pub fn restore_labels(&self) -> Result<()> {
        for ns in NAMESPACES {
            let want: BTreeMap<String, String> =
                [(NAMESPACE_NAME_LABEL.to_string(), ns.to_string())].into();
            self.modify::<Namespace>(None, ns, |n| set_if_differs(&mut n.metadata.labels, &want))?;
        }
        for p in self.pods() {
            self.modify::<Pod>(Some(&p.namespace), &p.name, |o| {
                set_if_differs(&mut o.metadata.labels, &p.labels)
            })?;
        }
        Ok(())
    }

    /// Reads an object, lets `f` change it (returning whether it did) and
    /// writes it back, again when someone else wrote it meanwhile.
    fn modify<T: Resource>(
        &self,
        ns: Option<&str>,
        name: &str,
        mut f: impl FnMut(&mut T) -> bool,
    ) -> Result<()> {
        let store = &self.lab.store;
        for _ in 0..CONFLICT_RETRIES {
            let mut o: T = self
                .block_on(store.get_typed(ns, name))
                .with_context(|| format!("read {} {ns:?}/{name}", T::KIND))?;
            if !f(&mut o) {
                return Ok(());
            }
            match self.block_on(store.update_typed(&o)) {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("update {} {ns:?}/{name}", T::KIND));
                }
            }
        }
        bail!("{} {ns:?}/{name} kept changing under the update", T::KIND)
    }
}

/// Applies `changes` to `labels`; whether anything changed.
fn change_labels(labels: &mut BTreeMap<String, String>, changes: &[(&str, Option<&str>)]) -> bool {
    let before = labels.clone();
    for (k, v) in changes {
        match v {
            Some(v) => {
                labels.insert(k.to_string(), v.to_string());
            }
            None => {
                labels.remove(*k);
            }
        }
    }
    *labels != before
}

fn set_if_differs(
    labels: &mut Option<BTreeMap<String, String>>,
    want: &BTreeMap<String, String>,
) -> bool {
    if labels.as_ref() == Some(want) {
        return false;
    }
    *labels = Some(want.clone());
    true
}
