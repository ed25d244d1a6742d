//! The Kubernetes kinds Tartan stores (on an etcd fleet Tartan is their API
//! server): each is decoded strictly into its k8s-openapi type, then checked
//! with the API server's rules for the fields Tartan and its users rely on.//!
//! The checks of each kind are in a file of their own; [`fields`] holds
//! the checks several kinds share.

mod config_map;
mod endpoint_slice;
mod fields;
mod network_policy;
mod node;
mod pod;
mod secret;
mod service;
mod service_update;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Node, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::strict::decode;
use crate::kind::Kind;
use crate::resources::common::Problems;

pub(crate) use fields::label_map;
pub use service_update::drop_type_dependent_fields;

/// Every problem with a Kubernetes object in its stored shape (metadata
/// names are checked by the caller).
pub fn problems(kind: Kind, v: &Value) -> Vec<(String, String)> {
    let mut p = Problems::default();
    match kind {
        Kind::Namespace => {
            typed::<Namespace>(v, &mut p);
        }
        Kind::Node => {
            if let Some(n) = typed::<Node>(v, &mut p) {
                node::check(&n, &mut p);
            }
        }
        Kind::Pod => {
            if let Some(pod) = typed::<Pod>(v, &mut p) {
                pod::check(&pod, &mut p);
            }
        }
        Kind::Service => {
            if let Some(s) = typed::<Service>(v, &mut p) {
                service::check(&s, &mut p);
            }
        }
        Kind::EndpointSlice => {
            if let Some(s) = typed::<EndpointSlice>(v, &mut p) {
                endpoint_slice::check(&s, &mut p);
            }
        }
        Kind::Secret => {
            if let Some(s) = typed::<Secret>(v, &mut p) {
                secret::check(&s, &mut p);
            }
        }
        Kind::KubeNetworkPolicy => {
            if let Some(np) = typed::<NetworkPolicy>(v, &mut p) {
                network_policy::check(&np, &mut p);
            }
        }
        Kind::Lease => {
            typed::<Lease>(v, &mut p);
        }
        Kind::ServiceAccount => {
            typed::<ServiceAccount>(v, &mut p);
        }
        Kind::ConfigMap => {
            if let Some(c) = typed::<ConfigMap>(v, &mut p) {
                config_map::check(&c, &mut p);
            }
        }
        _ => {}
    }
    p.0
}

/// Decodes `v` as `T`, refusing unknown fields; a decoding problem is the
/// only one reported, as nothing after it can be trusted.
fn typed<T: DeserializeOwned + Serialize>(v: &Value, p: &mut Problems) -> Option<T> {
    match decode::<T>(v, "") {
        Ok(t) => Some(t),
        Err(problem) => {
            p.0.push(problem);
            None
        }
    }
}
