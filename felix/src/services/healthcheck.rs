//! Health-check node ports, as kube-proxy serves them: for every
//! LoadBalancer Service with `externalTrafficPolicy: Local` and a
//! `healthCheckNodePort`, the node answers HTTP on that port with 200 and
//! `{"service":{"namespace":..,"name":..},"localEndpoints":N,...}` while it
//! has ready local endpoints, and 503 with N = 0 when it has none, so that
//! a load balancer sends traffic only to nodes that can serve it. Only
//! ready endpoints count: a node whose local endpoints are all terminating
//! fails the check and is drained (KEP-1669).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tracing::{info, warn};

use super::{ServiceInfo, SliceInfo};

/// What one health-check port says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub namespace: String,
    pub name: String,
    /// Ready endpoints of the Service on this node (distinct addresses).
    pub local_endpoints: usize,
}

impl Target {
    /// The status and body kube-proxy gives.
    pub fn answer(&self) -> (u16, String) {
        let body = json!({
            "service": {"namespace": self.namespace, "name": self.name},
            "localEndpoints": self.local_endpoints,
            "serviceProxyHealthy": true,
        });
        let code = if self.local_endpoints > 0 { 200 } else { 503 };
        (code, body.to_string())
    }
}

/// Port → target, for the node the slices were read for. `services` by
/// `namespace/name`.
pub fn targets(
    services: &BTreeMap<String, ServiceInfo>,
    slices: &BTreeMap<String, SliceInfo>,
) -> BTreeMap<u16, Target> {
    let mut out = BTreeMap::new();
    for (key, svc) in services {
        let Some(port) = svc.health_port else {
            continue;
        };
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key.as_str()));
        let local: BTreeSet<Ipv4Addr> = slices
            .values()
            .filter(|s| s.service == *key)
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.ready && e.local)
            .map(|e| e.addr)
            .collect();
        out.insert(
            port,
            Target {
                namespace: namespace.to_string(),
                name: name.to_string(),
                local_endpoints: local.len(),
            },
        );
    }
    out
}

type Shared = Arc<Mutex<Target>>;

struct Listener {
    target: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The listeners of this node, kept to the targets given to `sync`.
#[derive(Default)]
pub struct HealthChecks {
    listeners: HashMap<u16, Listener>,
}

async fn answer(State(t): State<Shared>) -> Response {
    let (code, body) = t.lock().unwrap_or_else(|e| e.into_inner()).answer();
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

impl HealthChecks {
    /// Opens a listener for each new port, updates the answers of the
    /// others and closes those no longer wanted. The listeners run on
    /// felix's serving thread ([`crate::serving`]).
    pub fn sync(&mut self, want: BTreeMap<u16, Target>) {
        self.listeners.retain(|port, _| want.contains_key(port));
        for (port, target) in want {
            if let Some(l) = self.listeners.get(&port) {
                *l.target.lock().unwrap_or_else(|e| e.into_inner()) = target;
                continue;
            }
            let shared: Shared = Arc::new(Mutex::new(target));
            let app = Router::new().fallback(answer).with_state(shared.clone());
            let addr = SocketAddr::from(([0, 0, 0, 0], port));
            // Answered from the serving thread, also while a pass runs.
            let task = crate::serving::spawn(async move {
                match tokio::net::TcpListener::bind(addr).await {
                    Ok(l) => {
                        info!(%addr, "health-check node port open");
                        if let Err(e) = axum::serve(l, app).await {
                            warn!(%addr, error = %e, "health-check node port failed");
                        }
                    }
                    Err(e) => warn!(%addr, error = %e, "health-check node port not opened"),
                }
            });
            self.listeners.insert(
                port,
                Listener {
                    target: shared,
                    task,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slice's endpoint as the proxy of `me` reads it.
    fn ep(ip: &str, node: &str, ready: bool, me: &str) -> super::super::EndpointInfo {
        super::super::EndpointInfo {
            addr: ip.parse().unwrap(),
            local: node == me,
            ready,
            serving: true,
            terminating: !ready,
        }
    }

    #[test]
    fn local_ready_endpoints_counted_per_node() {
        let svc = ServiceInfo {
            cluster_ips: vec![],
            external: vec![],
            source_ranges: vec![],
            lb_ips: vec![],
            ports: vec![],
            affinity: None,
            external_local: true,
            internal_local: false,
            health_port: Some(31000),
        };
        let services = BTreeMap::from([("x/web".to_string(), svc)]);
        // The slice as each node's proxy reads it.
        let slices = |me: &str| {
            let slice = SliceInfo {
                service: "x/web".into(),
                ports: BTreeMap::new(),
                endpoints: vec![
                    ep("10.244.0.5", "n1", true, me),
                    ep("10.244.0.6", "n1", true, me),
                    ep("10.244.1.5", "n2", false, me),
                ],
            };
            BTreeMap::from([("x/web-1".to_string(), slice)])
        };
        let t = targets(&services, &slices("n1"));
        assert_eq!(t[&31000].local_endpoints, 2);
        let (code, body) = t[&31000].answer();
        assert_eq!(code, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["service"]["namespace"], "x");
        assert_eq!(v["service"]["name"], "web");
        assert_eq!(v["localEndpoints"], 2);
        // n2's only endpoint is terminating: it fails the check.
        let t = targets(&services, &slices("n2"));
        assert_eq!(t[&31000].answer().0, 503);
        assert_eq!(targets(&services, &slices("n3"))[&31000].local_endpoints, 0);
    }
}
