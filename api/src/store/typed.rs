//! Typed access: the `tartan.dev/v1` resources and the Kubernetes kinds as
//! their Rust types, over any [`Datastore`].

use async_trait::async_trait;

use super::{Datastore, DynamicObject, Narrow, ObjectKey, Result, StoreError};
use crate::kind::Kind;

pub use super::resource::Resource;

/// The object in its dynamic (stored) shape, with apiVersion and kind set.
pub fn to_dynamic<T: Resource>(r: &T) -> Result<DynamicObject> {
    let mut v =
        serde_json::to_value(r).map_err(|e| StoreError::BadObject(format!("{}: {e}", T::KIND)))?;
    if let Some(map) = v.as_object_mut() {
        map.insert("apiVersion".into(), T::KIND.api_version().into());
        map.insert("kind".into(), T::KIND.info().name.into());
    }
    super::shape::from_value(v).map_err(|e| StoreError::BadObject(format!("{}: {e}", T::KIND)))
}

/// The typed object; an error names the object when its stored shape does
/// not fit the type (a hand-edited etcd value, say).
/// A placeholder for a stored value that is not an object at all (see
/// [`super::readable`]) is refused with its reason.
pub fn from_dynamic<T: Resource>(o: DynamicObject) -> Result<T> {
    let name = match &o.metadata.namespace {
        Some(ns) if T::KIND.info().namespaced => {
            format!("{ns}/{}", o.metadata.name.as_deref().unwrap_or(""))
        }
        _ => o.metadata.name.clone().unwrap_or_default(),
    };
    if let Some(why) = super::placeholder::placeholder_reason(&o) {
        return Err(StoreError::BadObject(format!(
            "stored {} {name:?} does not parse: {why}",
            T::KIND
        )));
    }
    // The kinds people write are held to the write path's rules on read as
    // well: a CRD schema cannot say all of them (a selector's grammar, a
    // per-node configuration's name), and `kubectl apply` stores what it
    // lets through. Kubernetes' own kinds are not (a newer API server may
    // send fields this version does not know), except NetworkPolicy: read
    // leniently, a misspelt field (`form` for `from`) is dropped and the
    // rule it narrowed allows everything; read strictly, the policy is
    // unreadable and isolates what it selects.
    if read_checked(T::KIND)
        && let Err(e) = crate::validate::validate(&o)
    {
        return Err(StoreError::BadObject(format!("stored {e}")));
    }
    let v = super::shape::to_value(o).map_err(|e| StoreError::BadObject(e.to_string()))?;
    serde_path_to_error::deserialize(v).map_err(|e| {
        let (field, why) = crate::validate::strict::parse_problem(&e, "");
        StoreError::BadObject(format!(
            "stored {} {name:?} does not parse: {field}: {why}",
            T::KIND
        ))
    })
}

/// The kinds a person writes, checked on read as on write (Kubernetes'
/// NetworkPolicy among them, see [`from_dynamic`]). IPAM records
/// and WorkloadEndpoints are written by Tartan alone, through the write
/// path, and read on the CNI's hot path.
fn read_checked(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::IpPool
            | Kind::IpReservation
            | Kind::LoadBalancerIpPool
            | Kind::BgpConfiguration
            | Kind::BgpPeer
            | Kind::BgpFilter
            | Kind::NetworkPolicy
            | Kind::GlobalNetworkPolicy
            | Kind::NetworkSet
            | Kind::GlobalNetworkSet
            | Kind::HostEndpoint
            | Kind::KubeNetworkPolicy
    )
}

/// Typed versions of the [`Datastore`] calls.
#[async_trait]
pub trait TypedStore {
    async fn get_typed<T: Resource>(&self, namespace: Option<&str>, name: &str) -> Result<T>;
    async fn list_typed<T: Resource>(&self, namespace: Option<&str>) -> Result<(Vec<T>, String)>;
    /// [`Datastore::list_narrow`], typed.
    async fn list_narrow_typed<T: Resource>(
        &self,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Vec<T>>;
    async fn create_typed<T: Resource>(&self, r: &T) -> Result<T>;
    async fn update_typed<T: Resource>(&self, r: &T) -> Result<T>;
    async fn delete_typed<T: Resource>(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<()>;
}

#[async_trait]
impl<S: Datastore + ?Sized> TypedStore for S {
    async fn get_typed<T: Resource>(&self, namespace: Option<&str>, name: &str) -> Result<T> {
        from_dynamic(self.get(&ObjectKey::new(T::KIND, namespace, name)).await?)
    }

    async fn list_typed<T: Resource>(&self, namespace: Option<&str>) -> Result<(Vec<T>, String)> {
        let l = self.list(T::KIND, namespace).await?;
        let items = l
            .items
            .into_iter()
            .map(from_dynamic)
            .collect::<Result<Vec<T>>>()?;
        Ok((items, l.revision))
    }

    async fn list_narrow_typed<T: Resource>(
        &self,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Vec<T>> {
        let l = self.list_narrow(T::KIND, namespace, narrow).await?;
        l.items.into_iter().map(from_dynamic).collect()
    }

    async fn create_typed<T: Resource>(&self, r: &T) -> Result<T> {
        from_dynamic(self.create(to_dynamic(r)?).await?)
    }

    async fn update_typed<T: Resource>(&self, r: &T) -> Result<T> {
        from_dynamic(self.update(to_dynamic(r)?).await?)
    }

    async fn delete_typed<T: Resource>(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<()> {
        self.delete(&ObjectKey::new(T::KIND, namespace, name), resource_version)
            .await
    }
}

macro_rules! kube_kind {
    ($ty:ty, $kind:ident) => {
        impl Resource for $ty {
            const KIND: Kind = Kind::$kind;
        }
    };
}

kube_kind!(k8s_openapi::api::core::v1::Node, Node);
kube_kind!(k8s_openapi::api::core::v1::Namespace, Namespace);
kube_kind!(k8s_openapi::api::core::v1::Pod, Pod);
kube_kind!(k8s_openapi::api::core::v1::Service, Service);
kube_kind!(k8s_openapi::api::core::v1::Secret, Secret);
kube_kind!(k8s_openapi::api::coordination::v1::Lease, Lease);
kube_kind!(k8s_openapi::api::core::v1::ConfigMap, ConfigMap);
kube_kind!(k8s_openapi::api::core::v1::ServiceAccount, ServiceAccount);
kube_kind!(
    k8s_openapi::api::discovery::v1::EndpointSlice,
    EndpointSlice
);
kube_kind!(
    k8s_openapi::api::networking::v1::NetworkPolicy,
    KubeNetworkPolicy
);
