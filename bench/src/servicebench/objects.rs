//! The generated Services and EndpointSlices: names, ClusterIPs and
//! endpoints from each Service's index, as felix's `ServiceInfo` /
//! `SliceInfo` and as Kubernetes objects, and the measured Service.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use anyhow::Result;
use serde_json::json;
use tartan_felix::dataplane::services::ServiceProxy;
use tartan_felix::services::{
    EndpointInfo, PortInfo, SERVICE_NAME_LABEL, ServiceInfo, SliceInfo, TCP,
};

/// The benchmarked node; endpoints are on `node-2` … `node-10`.
pub const NODE: &str = "node-1";
pub(super) const SERVICE_PORT: u16 = 80;
pub(super) const TARGET_PORT: u16 = 8080;
/// The measured Service, its client and its endpoints (one server pod
/// with one address per endpoint).
pub(super) const MEASURED_KEY: &str = "bench/echo";
pub(super) const MEASURED_SLICE: &str = "bench/echo-x7k2q";
pub(super) const MEASURED_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
pub(super) const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 2);
pub(super) const CLIENT_IFACE: &str = "tarsvcli";
pub(super) const SERVER_IFACE: &str = "tarsvsrv";

pub(super) fn offset(base: Ipv4Addr, n: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(base) + n as u32)
}

pub(super) fn server_addr(j: usize) -> Ipv4Addr {
    offset(Ipv4Addr::new(10, 244, 1, 2), j)
}

pub(super) fn namespace(i: usize) -> String {
    format!("team-{:02}", i % 50)
}

pub(super) fn service_name(i: usize) -> String {
    format!("svc-{i:05}")
}

pub fn service_key(i: usize) -> String {
    format!("{}/{}", namespace(i), service_name(i))
}

pub(super) fn slice_name(i: usize) -> String {
    format!("{}-{:05x}", service_name(i), (i * 7919) % 0xfffff)
}

pub(super) fn slice_key(i: usize) -> String {
    format!("{}/{}", namespace(i), slice_name(i))
}

/// Synthetic Service `i`: ClusterIP 10.97.0.0 + i + 1.
pub(super) fn cluster_ip(i: usize) -> Ipv4Addr {
    offset(Ipv4Addr::new(10, 97, 0, 0), i + 1)
}

/// Endpoint `j` of synthetic Service `i`, and its node.
pub(super) fn endpoint(i: usize, j: usize, per: usize) -> (Ipv4Addr, String) {
    let g = i * per + j;
    (
        offset(Ipv4Addr::new(10, 128, 0, 0), g + 2),
        format!("node-{}", 2 + g % 9),
    )
}

pub(super) fn service_info(ip: Ipv4Addr) -> ServiceInfo {
    ServiceInfo {
        cluster_ips: vec![ip],
        external: vec![],
        source_ranges: None,
        lb_ips: vec![],
        ports: vec![PortInfo {
            name: "http".into(),
            protocol: TCP,
            port: SERVICE_PORT,
            node_port: None,
        }],
        affinity: None,
        external_local: false,
        internal_local: false,
        health_port: None,
    }
}

pub(super) fn slice_info(service: &str, eps: &[(Ipv4Addr, String)]) -> SliceInfo {
    SliceInfo {
        service: service.to_string(),
        ports: BTreeMap::from([("http".to_string(), (TCP, TARGET_PORT))]),
        endpoints: eps
            .iter()
            .map(|(a, n)| EndpointInfo {
                addr: *a,
                local: n == NODE,
                ready: true,
                serving: true,
                terminating: false,
                zones: Box::default(),
                node_hint: tartan_felix::services::NodeHint::None,
            })
            .collect(),
    }
}

/// One Service and its slice, as felix's index takes them.
pub struct Item {
    pub key: String,
    pub service: ServiceInfo,
    pub slice_key: String,
    pub slice: SliceInfo,
}

/// Synthetic Services `0..n`.
pub fn synthetic(n: usize, per: usize) -> Vec<Item> {
    (0..n)
        .map(|i| {
            let eps: Vec<_> = (0..per).map(|j| endpoint(i, j, per)).collect();
            Item {
                key: service_key(i),
                service: service_info(cluster_ip(i)),
                slice_key: slice_key(i),
                slice: slice_info(&service_key(i), &eps),
            }
        })
        .collect()
}

/// The measured Service: its endpoints are the server pod's addresses,
/// on this node.
pub(super) fn measured(per: usize) -> Item {
    let eps: Vec<_> = (0..per)
        .map(|j| (server_addr(j), NODE.to_string()))
        .collect();
    Item {
        key: MEASURED_KEY.into(),
        service: service_info(MEASURED_IP),
        slice_key: MEASURED_SLICE.into(),
        slice: slice_info(MEASURED_KEY, &eps),
    }
}

pub(super) fn feed(proxy: &mut ServiceProxy, items: Vec<Item>) {
    for it in items {
        proxy.index.set_service(&it.key, Some(it.service));
        proxy.index.set_slice(&it.slice_key, Some(it.slice));
    }
}

pub fn k8s_service(i: usize) -> Result<k8s_openapi::api::core::v1::Service> {
    let ip = cluster_ip(i).to_string();
    Ok(serde_json::from_value(json!({
        "metadata": {"namespace": namespace(i), "name": service_name(i)},
        "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                 "selector": {"app": service_name(i)},
                 "ports": [{"name": "http", "protocol": "TCP", "port": SERVICE_PORT,
                            "targetPort": TARGET_PORT}]}
    }))?)
}

pub fn k8s_slice(i: usize, per: usize) -> Result<k8s_openapi::api::discovery::v1::EndpointSlice> {
    let eps: Vec<_> = (0..per)
        .map(|j| {
            let (a, n) = endpoint(i, j, per);
            json!({"addresses": [a.to_string()], "nodeName": n,
                   "conditions": {"ready": true, "serving": true, "terminating": false}})
        })
        .collect();
    Ok(serde_json::from_value(json!({
        "metadata": {"namespace": namespace(i), "name": slice_name(i),
                     "labels": {SERVICE_NAME_LABEL: service_name(i)}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": TARGET_PORT}],
        "endpoints": eps
    }))?)
}
