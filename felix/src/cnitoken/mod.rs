//! The CNI plugins' credentials. The plugins run as their own service
//! account (`tartan-cni`), which no pod mounts: felix, the node agent,
//! requests its tokens (TokenRequest, bound to felix's own Pod when the
//! downward API names it) and writes the kubeconfig the plugins read,
//! atomically and readable by root only, renewing it at 80 % of each
//! token's lifetime and retrying with backoff when a request fails.
//! [`schedule`] holds the pure parts (when to renew, the kubeconfig's
//! text), [`refresh`] the loop that talks to the API server and writes.

pub mod refresh;
pub mod schedule;

use std::path::PathBuf;

/// What felix needs to keep the plugins' kubeconfig fresh.
#[derive(Debug, Clone)]
pub struct CniToken {
    /// The kubeconfig the plugins read (the conflist names it), e.g.
    /// /host/etc/cni/net.d/tartan-kubeconfig in felix's container.
    pub kubeconfig: PathBuf,
    /// The plugins' service account: namespace and name.
    pub namespace: String,
    pub service_account: String,
    /// The lifetime asked for (`spec.expirationSeconds`; the API server
    /// may give less).
    pub seconds: i64,
    /// felix's Pod (name, UID), to bind the tokens to: they die with it.
    pub pod: Option<(String, Option<String>)>,
    /// The plugins' network configuration, which the init container
    /// leaves beside it as `<conflist>.pending`: moved into place only
    /// once the kubeconfig has a token, so that the runtime (which calls
    /// the node's network ready when a conflist appears) never runs a
    /// plugin without credentials.
    pub conflist: Option<PathBuf>,
}
