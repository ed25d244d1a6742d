//! What felix is told at startup: which node it runs on, how often it
//! checks the kernel, where it serves its health endpoints, and whether it
//! implements Services, and whether it keeps the CNI plugins' token fresh.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    pub node: String,
    /// How often the kernel is compared with the desired state even when
    /// nothing changed.
    pub resync: Duration,
    /// How long an unexpected route of ours is left alone (a pod being
    /// wired whose record has not arrived yet).
    pub grace: Duration,
    /// Where /livez, /readyz and /metrics are served; `None`: nowhere.
    pub health: Option<std::net::SocketAddr>,
    /// Where the Service proxy's /healthz and /livez are served (10256,
    /// as kube-proxy); `None`: nowhere.
    pub proxy_health: Option<std::net::SocketAddr>,
    /// Whether felix is the Service proxy (Services and EndpointSlices
    /// watched, `ip tartan-svc` written). Off when kube-proxy does it: then
    /// neither is watched, a service table left by an earlier felix is
    /// removed, and the proxy health port is not served.
    pub services: bool,
    /// Keep the CNI plugins' kubeconfig and token fresh
    /// ([`crate::cnitoken`]); `None`: something else writes it.
    pub cni_token: Option<crate::cnitoken::CniToken>,
    /// Ports always let into and out of this node's host endpoints
    /// (`--failsafe-inbound-host-ports`, `--failsafe-outbound-host-ports`).
    pub failsafe_in: Vec<tartan_policy::compile::host::FailsafePort>,
    pub failsafe_out: Vec<tartan_policy::compile::host::FailsafePort>,
}
