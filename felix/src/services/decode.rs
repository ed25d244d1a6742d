//! Watched Services and EndpointSlices decoded into the proxy's records
//! ([`ServiceHalves`], [`Slice`]): the object is read and dropped at
//! once, so the index keeps only what the dataplane uses.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tartan_api::store::DynamicObject;
use tartan_api::store::typed::from_dynamic;

use super::{ServiceHalves, Slice};

/// A Service as the proxy keeps it: `Err` when it does not read,
/// `Ok(None)` for one the proxy leaves alone.
pub fn read_service(o: DynamicObject) -> Result<Option<ServiceHalves>, String> {
    let s: Service = from_dynamic(o).map_err(|e| e.to_string())?;
    ServiceHalves::from_service(&s)
}

/// An EndpointSlice as the proxy of `node` keeps it (see [`read_service`]).
pub fn read_slice(o: DynamicObject, node: &str) -> Result<Option<Slice>, String> {
    let s: EndpointSlice = from_dynamic(o).map_err(|e| e.to_string())?;
    Ok(Slice::from_slice(&s, node))
}

/// [`read_service`], unreadable as absent.
pub fn service(o: DynamicObject) -> Option<ServiceHalves> {
    read_service(o).ok().flatten()
}

/// [`read_slice`], unreadable as absent.
pub fn slice(o: DynamicObject, node: &str) -> Option<Slice> {
    read_slice(o, node).ok().flatten()
}
