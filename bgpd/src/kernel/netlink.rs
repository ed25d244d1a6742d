//! [`Kernel`]: one rtnetlink connection and the route operations on it.
use super::RTPROT_TARTAN;
use super::error::KernelError;
use super::message::{self, Dumped};
use super::route::KernelRoute;
use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::AddressFamily;
use std::collections::HashMap;
use tracing::debug;

/// A handle over one rtnetlink connection, whose I/O runs as a task on the
/// tokio runtime that called [`Kernel::connect`]. The socket belongs to the
/// network namespace of the thread that opened it.
#[derive(Debug)]
pub struct Kernel {
    pub(super) handle: rtnetlink::Handle,
    conn: tokio::task::JoinHandle<()>,
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.conn.abort();
    }
}

/// What the main table held at one moment, as far as bgpd cares.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// The protocol of the route at bgpd's key (table, prefix, TOS 0,
    /// bgpd's metric), per prefix.
    pub holders: HashMap<IpNet, u8>,
    /// Tartan's routes, at any metric.
    pub own: HashMap<IpNet, KernelRoute>,
}

impl Snapshot {
    fn add(&mut self, d: Dumped) {
        if d.holds_our_key() {
            let slot = self.holders.entry(d.prefix).or_insert(d.protocol);
            // A foreign route wins over a Tartan one at the same key
            // (possible with `ip route append`), so that it is refused.
            if d.protocol != RTPROT_TARTAN {
                *slot = d.protocol;
            }
        }
        if d.is_own() {
            self.own.insert(d.prefix, d.into_route());
        }
    }
}

impl Kernel {
    /// Opens the netlink socket and spawns its connection task. Strict
    /// checking lets the kernel filter dumps by table and protocol; kernels
    /// before 4.20 lack it, and then the filtering is done here.
    pub async fn connect() -> Result<Kernel, KernelError> {
        let (conn, handle, _) = match rtnetlink::new_connection_with_strict_check() {
            Ok(c) => c,
            Err(e) => {
                debug!(error = %e, "netlink strict checking unavailable");
                rtnetlink::new_connection().map_err(KernelError::Connect)?
            }
        };
        let conn = tokio::spawn(conn);
        Ok(Kernel { handle, conn })
    }

    /// Tartan's routes (protocol 201) in the main table, IPv4 and IPv6,
    /// multipath routes as one route with several next hops.
    pub async fn list_own(&self) -> Result<Vec<KernelRoute>, KernelError> {
        let mut out = Vec::new();
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let routes = self.dump(family, Some(RTPROT_TARTAN)).await?;
            out.extend(
                routes
                    .into_iter()
                    .filter(Dumped::is_own)
                    .map(Dumped::into_route),
            );
        }
        Ok(out)
    }

    /// Installs `route` as a protocol-201 route, replacing an older Tartan
    /// route for the prefix. Refuses ([`KernelError::Foreign`]) when a route
    /// of another protocol holds the same key. Costs one dump of the
    /// family's main table; [`super::KernelSync`] does one per batch instead.
    pub async fn replace(&self, route: &KernelRoute) -> Result<(), KernelError> {
        let snap = self.snapshot(&[message::family_of(&route.prefix)]).await?;
        self.write(route, snap.holders.get(&route.prefix).copied())
            .await
    }

    /// Deletes the Tartan route for `prefix`, if there is one. Routes of
    /// other protocols are never touched: the kernel matches the protocol.
    pub async fn delete(&self, prefix: IpNet) -> Result<(), KernelError> {
        let prefix = prefix.trunc();
        match self
            .handle
            .route()
            .del(message::del_route(&prefix))
            .execute()
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => match KernelError::from_netlink("delete", prefix, e) {
                KernelError::Refused { errno, .. }
                    if errno == libc::ESRCH || errno == libc::ENOENT =>
                {
                    debug!(%prefix, "no Tartan route to delete");
                    Ok(())
                }
                other => Err(other),
            },
        }
    }

    /// Installs `route` given who held its key at the last look:
    /// `Some(201)` replaces, `None` creates exclusively (so that a foreign
    /// route that appeared since is noticed, not overwritten), anything
    /// else is refused.
    pub(crate) async fn write(
        &self,
        route: &KernelRoute,
        holder: Option<u8>,
    ) -> Result<(), KernelError> {
        match holder {
            Some(RTPROT_TARTAN) => self.send_new(route, true).await,
            Some(protocol) => Err(KernelError::Foreign {
                prefix: route.prefix,
                protocol,
            }),
            None => match self.send_new(route, false).await {
                Err(KernelError::Refused { errno, .. }) if errno == libc::EEXIST => {
                    // Someone created the key since the dump: look once more.
                    let family = message::family_of(&route.prefix);
                    let snap = self.snapshot(&[family]).await?;
                    match snap.holders.get(&route.prefix) {
                        Some(&RTPROT_TARTAN) => self.send_new(route, true).await,
                        Some(&protocol) => Err(KernelError::Foreign {
                            prefix: route.prefix,
                            protocol,
                        }),
                        None => self.send_new(route, false).await,
                    }
                }
                other => other,
            },
        }
    }

    async fn send_new(&self, route: &KernelRoute, replace: bool) -> Result<(), KernelError> {
        let msg = message::new_route(route)?;
        let req = self.handle.route().add(msg);
        let req = if replace { req.replace() } else { req };
        req.execute()
            .await
            .map_err(|e| KernelError::from_netlink("install", route.prefix, e))
    }

    /// The main tables of `families`: who holds bgpd's key for each
    /// prefix, and Tartan's own routes.
    pub(crate) async fn snapshot(
        &self,
        families: &[AddressFamily],
    ) -> Result<Snapshot, KernelError> {
        let mut snap = Snapshot::default();
        for family in families {
            for d in self.dump(*family, None).await? {
                snap.add(d);
            }
        }
        Ok(snap)
    }

    /// Main-table routes of one family, only of `protocol` if given.
    pub(crate) async fn dump(
        &self,
        family: AddressFamily,
        protocol: Option<u8>,
    ) -> Result<Vec<Dumped>, KernelError> {
        let req = message::dump_request(family, protocol);
        let mut stream = self.handle.route().get(req).execute();
        let mut out = Vec::new();
        loop {
            let msg = match stream.try_next().await {
                Ok(Some(msg)) => msg,
                Ok(None) => break,
                Err(rtnetlink::Error::NetlinkError(m)) if m.raw_code() != 0 => {
                    return Err(KernelError::Dump {
                        errno: m.raw_code().abs(),
                    });
                }
                Err(e) => {
                    return Err(KernelError::Transport {
                        op: "route dump",
                        detail: e.to_string(),
                    });
                }
            };
            if let Some(d) = message::decode(&msg)
                && protocol.is_none_or(|p| p == d.protocol)
            {
                out.push(d);
            }
        }
        Ok(out)
    }
}
