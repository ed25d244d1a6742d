//! Accepts BGP connections and hands each to its neighbor's task; a
//! connection from an address that is not a neighbor is closed at once.
use crate::net::{bind_listener, set_md5};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::{Arc, RwLock};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{info, warn};

/// Where accepted connections go, by the peer's address.
pub type Routes = Arc<RwLock<HashMap<IpAddr, mpsc::Sender<TcpStream>>>>;

pub struct Listeners {
    sockets: Vec<Arc<TcpListener>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Listeners {
    pub fn bind(addrs: &[SocketAddr], routes: Routes) -> std::io::Result<Listeners> {
        let mut sockets = Vec::new();
        let mut tasks = Vec::new();
        for addr in addrs {
            let l = Arc::new(bind_listener(*addr).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
            })?);
            info!(%addr, "listening for BGP connections");
            sockets.push(l.clone());
            let routes = routes.clone();
            tasks.push(tokio::spawn(accept_loop(l, routes)));
        }
        Ok(Listeners { sockets, tasks })
    }

    /// Installs or removes a neighbor's TCP MD5 key on every listening
    /// socket, so that its SYNs are accepted (RFC 2385).
    pub fn set_md5(&self, peer: IpAddr, key: Option<&str>) {
        for l in &self.sockets {
            let is_v4_socket = l.local_addr().map(|a| a.is_ipv4()).unwrap_or(false);
            if is_v4_socket && peer.is_ipv6() {
                continue;
            }
            if let Err(e) = set_md5(l.as_fd(), peer, key.map(str::as_bytes)) {
                // Removing a key that was never set fails harmlessly.
                if key.is_some() {
                    warn!(%peer, error = %e, "cannot set TCP MD5 key on listening socket");
                }
            }
        }
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn accept_loop(listener: Arc<TcpListener>, routes: Routes) {
    loop {
        let (stream, from) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let ip = from.ip().to_canonical();
        let target = routes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ip)
            .cloned();
        match target {
            Some(tx) => {
                if tx.try_send(stream).is_err() {
                    warn!(peer = %ip, "neighbor busy; connection dropped");
                }
            }
            None => info!(peer = %ip, "connection from an address that is not a neighbor; closed"),
        }
    }
}
