//! Health-check node ports, as kube-proxy serves them: for every
//! LoadBalancer Service with `externalTrafficPolicy: Local` and a
//! `healthCheckNodePort`, the node answers HTTP on that port with 200 and
//! `{"service":{"namespace":..,"name":..},"localEndpoints":N,...}` while it
//! has ready local endpoints and its Service proxy is healthy (its table
//! synced lately), and 503 otherwise, so that a load balancer sends
//! traffic only to nodes that can serve it. Only ready endpoints count: a
//! node whose local endpoints are all terminating fails the check and is
//! drained (KEP-1669). As kube-proxy, the answer carries the count in the
//! header `X-Load-Balancing-Endpoint-Weight`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tracing::{info, warn};

use super::{Family, ServiceInfo, SliceInfo};
use crate::health::ProxyHealth;

/// What one health-check port says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub namespace: String,
    pub name: String,
    /// Ready endpoints of the Service on this node (distinct addresses).
    pub local_endpoints: usize,
}

impl Target {
    /// The status and body kube-proxy gives, its proxy `healthy` or not.
    pub fn answer(&self, healthy: bool) -> (u16, String) {
        let body = json!({
            "service": {"namespace": self.namespace, "name": self.name},
            "localEndpoints": self.local_endpoints,
            "serviceProxyHealthy": healthy,
        });
        let code = if self.local_endpoints > 0 && healthy {
            200
        } else {
            503
        };
        (code, body.to_string())
    }
}

/// Port → target, for the node the slices were read for. `services` by
/// `namespace/name`.
pub fn targets<A: Family>(
    services: &BTreeMap<String, ServiceInfo<A>>,
    slices: &BTreeMap<String, SliceInfo<A>>,
) -> BTreeMap<u16, Target> {
    let mut out = BTreeMap::new();
    for (key, svc) in services {
        let Some(port) = svc.health_port else {
            continue;
        };
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key.as_str()));
        let local: BTreeSet<A> = slices
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

type Shared = (Arc<Mutex<Target>>, ProxyHealth);

struct Listener {
    target: Arc<Mutex<Target>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The listeners of this node, kept to the targets given to `sync`.
pub struct HealthChecks {
    listeners: HashMap<u16, Listener>,
    proxy: ProxyHealth,
}

async fn answer(State((t, proxy)): State<Shared>) -> Response {
    let target = t.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let (code, body) = target.answer(proxy.healthy());
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (
                header::HeaderName::from_static("x-load-balancing-endpoint-weight"),
                target.local_endpoints.to_string(),
            ),
        ],
        body,
    )
        .into_response()
}

impl HealthChecks {
    /// No listener yet; each answers with `proxy`'s health.
    pub fn new(proxy: ProxyHealth) -> HealthChecks {
        HealthChecks {
            listeners: HashMap::new(),
            proxy,
        }
    }

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
            let shared = Arc::new(Mutex::new(target));
            let app = Router::new()
                .fallback(answer)
                .with_state((shared.clone(), self.proxy.clone()));
            // Answered from the serving thread, also while a pass runs.
            let task = crate::serving::spawn(async move {
                match bind_dual(port) {
                    Ok(l) => {
                        let addr = l.local_addr().ok();
                        info!(?addr, "health-check node port open");
                        if let Err(e) = axum::serve(l, app).await {
                            warn!(port, error = %e, "health-check node port failed");
                        }
                    }
                    Err(e) => warn!(port, error = %e, "health-check node port not opened"),
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

/// A listener on `port` of both families: `[::]` taking IPv4 too
/// (`IPV6_V6ONLY` off), as kube-proxy's health-check node ports answer
/// on every address of the node. Where the host has IPv6 off, IPv4
/// alone, logged.
fn bind_dual(port: u16) -> std::io::Result<tokio::net::TcpListener> {
    let v6 = || -> std::io::Result<tokio::net::TcpListener> {
        let s = tokio::net::TcpSocket::new_v6()?;
        nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::Ipv6V6Only, &false)?;
        s.set_reuseaddr(true)?;
        s.bind(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)))?;
        s.listen(1024)
    };
    match v6() {
        Ok(l) => Ok(l),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL | libc::EPROTONOSUPPORT)
            ) =>
        {
            info!(port, error = %e, "IPv6 unavailable on this host: the health-check node port listens on IPv4 only");
            let s = tokio::net::TcpSocket::new_v4()?;
            s.set_reuseaddr(true)?;
            s.bind(SocketAddr::from(([0, 0, 0, 0], port)))?;
            s.listen(1024)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One listener answers IPv4 and IPv6 clients (an IPv6 LoadBalancer
    /// with `externalTrafficPolicy: Local` checks the node over IPv6).
    #[tokio::test]
    async fn a_health_check_port_listens_on_both_families() {
        let l = bind_dual(0).unwrap();
        let addr = l.local_addr().unwrap();
        if addr.is_ipv4() {
            eprintln!("skipped: IPv6 off on this host");
            return;
        }
        let accept = tokio::spawn(async move {
            for _ in 0..2 {
                l.accept().await.unwrap();
            }
        });
        for to in ["127.0.0.1", "::1"] {
            let to = SocketAddr::new(to.parse().unwrap(), addr.port());
            tokio::net::TcpStream::connect(to)
                .await
                .unwrap_or_else(|e| panic!("{to}: {e}"));
        }
        accept.await.unwrap();
    }

    /// A slice's endpoint as the proxy of `me` reads it.
    fn ep(ip: &str, node: &str, ready: bool, me: &str) -> super::super::EndpointInfo {
        super::super::EndpointInfo {
            addr: ip.parse().unwrap(),
            local: node == me,
            ready,
            serving: true,
            terminating: !ready,
            zones: Box::default(),
            node_hint: super::super::NodeHint::None,
        }
    }

    #[test]
    fn local_ready_endpoints_counted_per_node() {
        let svc = ServiceInfo {
            cluster_ips: vec![],
            external: vec![],
            source_ranges: None,
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
        let (code, body) = t[&31000].answer(true);
        assert_eq!(code, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["service"]["namespace"], "x");
        assert_eq!(v["service"]["name"], "web");
        assert_eq!(v["localEndpoints"], 2);
        // n2's only endpoint is terminating: it fails the check.
        let t = targets(&services, &slices("n2"));
        assert_eq!(t[&31000].answer(true).0, 503);
        assert_eq!(targets(&services, &slices("n3"))[&31000].local_endpoints, 0);
    }

    #[test]
    fn an_unhealthy_proxy_fails_the_check_whatever_its_endpoints() {
        let t = Target {
            namespace: "x".into(),
            name: "web".into(),
            local_endpoints: 2,
        };
        let (code, body) = t.answer(false);
        assert_eq!(code, 503);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["serviceProxyHealthy"], false);
        assert_eq!(v["localEndpoints"], 2);
        // A proxy never synced is not healthy; one just synced is.
        let p = ProxyHealth::new(std::time::Duration::from_secs(60));
        assert!(!p.healthy());
        p.synced();
        assert!(p.healthy());
    }
}
