//! The speaker's configuration for one node, from the objects. Pure.
//!
//! - Mesh (BGPConfiguration `nodeToNodeMeshEnabled`, default on): iBGP with
//!   every other node that has a BGP address.
//! - Route reflectors: nodes with `tartan.dev/route-reflector-cluster-id`.
//!   With the mesh off, a reflector peers with the other reflectors and
//!   takes every other node as a client; other nodes peer with the
//!   reflectors.
//! - BGPPeer objects that select this node (`node`, `nodeSelector`, or all):
//!   a router at `peerIP`, or the nodes `peerSelector` picks. And, as
//!   Calico's reverse peering, the other end of such a peering when it is
//!   this node: a node `peerSelector` picks (or whose address and AS are
//!   `peerIP` and `asNumber`) peers with every node the BGPPeer's `node` /
//!   `nodeSelector` selects, with the BGPPeer's settings.
//! - Export: after a peer's own filters, only the cluster's addresses
//!   ([`super::export_scope`]); a node is no transit between its peers.
//! - Announced: the blocks affine to this node (not those of pools with
//!   `disableBGPExport`), and /32s (/128s) of addresses this node's pods
//!   borrowed from other nodes' blocks.
//! - Services: every node announces the ranges of BGPConfiguration
//!   `serviceClusterIPs`, `serviceExternalIPs` and
//!   `serviceLoadBalancerIPs`; a node with a local endpoint of a Service
//!   with `externalTrafficPolicy: Local` also announces its external IPs
//!   and LoadBalancer IPs inside those ranges as /32 (/128) (see
//!   [`super::services`]). Like the blocks, they are local routes: sent to
//!   peers, never put in this node's kernel; and nothing learned inside a
//!   service range goes into the kernel either (felix implements Service
//!   addresses, bgpd only announces them).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tartan_api::resources::bgpconfiguration::{ConfigScope, DEFAULT_AS_NUMBER};
use tartan_api::resources::bgppeer::{NextHopMode as ApiNextHopMode, SourceAddress};
use tartan_api::resources::common::parse_duration;
use tartan_api::resources::{
    BgpConfigurationSpec, BgpFilterSpec, BgpPeerSpec, IpPoolSpec, IpamBlockSpec, NodeBgp,
    WorkloadEndpointSpec,
};
use tartan_api::resources::{SecretSource, TARTAN_NAMESPACE};
use tartan_api::selector::Selector;
use tracing::warn;

use super::announce::{OwnAddresses, ServiceRanges, announcements, kernel_exclude};
use super::export_scope::{self, scoped};
use super::nodes::NodeView;
use super::services::ServiceIps;
use crate::config::{Config, GracefulRestart, Neighbor};
use crate::filter::{PeerFilters, peer_filters};
use crate::model::{Family, NextHopMode};
use std::sync::Arc;

/// Everything the configuration depends on.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub node: String,
    /// Shared with the follower's view: a rebuild copies no Node.
    pub nodes: Vec<Arc<NodeView>>,
    /// BGPConfiguration objects by name.
    pub configs: BTreeMap<String, BgpConfigurationSpec>,
    /// BGPPeer objects by name.
    pub peers: BTreeMap<String, BgpPeerSpec>,
    /// BGPFilter objects by name.
    pub filters: BTreeMap<String, BgpFilterSpec>,
    pub pools: Vec<IpPoolSpec>,
    pub blocks: Vec<IpamBlockSpec>,
    pub endpoints: Vec<WorkloadEndpointSpec>,
    /// Secrets in Tartan's namespace: name → key → value.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
    /// Services with `externalTrafficPolicy: Local` that have a usable
    /// endpoint on this node, by `namespace/name`.
    pub services: BTreeMap<String, ServiceIps>,
}

/// A BGP password from a Secret in Tartan's namespace; why not, if not.
fn password(src: &SecretSource, inp: &Inputs) -> Result<String, String> {
    let r = &src.secret_key_ref;
    let secret = inp
        .secrets
        .get(&r.name)
        .ok_or_else(|| format!("Secret {TARTAN_NAMESPACE}/{} not found", r.name))?;
    let v = secret.get(&r.key).ok_or_else(|| {
        format!(
            "Secret {TARTAN_NAMESPACE}/{} has no key {:?} (or its value is not UTF-8)",
            r.name, r.key
        )
    })?;
    // TCP MD5 keys (RFC 2385) are 1 to 80 bytes on Linux.
    if v.is_empty() || v.len() > 80 {
        return Err(format!(
            "Secret {TARTAN_NAMESPACE}/{} key {:?} is {} bytes; a TCP MD5 password has 1 to 80",
            r.name,
            r.key,
            v.len()
        ));
    }
    Ok(v.clone())
}

/// Why no configuration could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("node {0} has no Node object")]
    NoNode(String),
    #[error("node {node} has no BGP IPv4 address (annotation tartan.dev/bgp-ipv4-address)")]
    NoAddress { node: String },
    #[error("node {node}: {why}")]
    BadNode { node: String, why: String },
}

struct Peer<'a> {
    name: &'a str,
    bgp: NodeBgp,
    /// Its labels, copied out only when a BGPPeer has a peerSelector to
    /// match (a rebuild at 5,000 nodes copied every node's otherwise).
    labels: Option<BTreeMap<String, String>>,
}

fn node_name(n: &NodeView) -> &str {
    &n.name
}

/// The cluster's settings with this node's overrides.
fn settings(inp: &Inputs) -> BgpConfigurationSpec {
    let mut base = BgpConfigurationSpec::default();
    let mut over = None;
    for (name, c) in &inp.configs {
        match ConfigScope::of(name) {
            ConfigScope::Cluster => base = c.clone(),
            ConfigScope::Node(n) if n == inp.node => over = Some(c.clone()),
            _ => {}
        }
    }
    match over {
        Some(o) => base.overlay(&o),
        None => base,
    }
}

fn selects(sel: Option<&str>, labels: &BTreeMap<String, String>, what: &str) -> bool {
    match sel.map(Selector::parse) {
        None => true,
        Some(Ok(s)) => s.matches(labels),
        Some(Err(e)) => {
            warn!(error = %e, "{what}: selector does not parse; it selects nothing");
            false
        }
    }
}

pub fn build(inp: &Inputs) -> Result<Config, BuildError> {
    let me = inp
        .nodes
        .iter()
        .find(|n| node_name(n) == inp.node)
        .ok_or_else(|| BuildError::NoNode(inp.node.clone()))?;
    let my = me.bgp.clone().map_err(|e| BuildError::BadNode {
        node: inp.node.clone(),
        why: e.to_string(),
    })?;
    let my_net = my.ipv4_address.ok_or_else(|| BuildError::NoAddress {
        node: inp.node.clone(),
    })?;
    let my_ip = my_net.addr();
    let my_labels = me.labels();
    let s = settings(inp);
    let ranges = ServiceRanges::of(&s);
    let scope = export_scope::scope(&inp.pools, &ranges);
    let cluster_as = s.as_number.unwrap_or(DEFAULT_AS_NUMBER);
    let asn = my.as_number.unwrap_or(cluster_as);
    let port = s.effective_listen_port();
    let mesh = s.effective_node_to_node_mesh();
    let restart = s.graceful_restart_seconds().unwrap_or(120).min(4095) as u16;
    // Node-to-node sessions (the mesh, and the implicit ones with route
    // reflectors) use nodeMeshPassword. Unresolvable: no such sessions
    // (they would fail against nodes that have it), and the log says why.
    let node_password = match s.node_mesh_password.as_ref().map(|p| password(p, inp)) {
        None => Ok(None),
        Some(Ok(p)) => Ok(Some(p)),
        Some(Err(why)) => {
            warn!(%why, "nodeMeshPassword unresolvable; no node-to-node sessions");
            Err(())
        }
    };
    // nodeMeshBFD: unreadable (validation keeps it out) means no
    // node-to-node sessions rather than sessions without the detection
    // the operator asked for.
    let node_bfd = match s.node_mesh_bfd.as_ref().map(|b| b.timers()) {
        None => Ok(None),
        Some(Ok(t)) => Ok(Some(bfd_config(t))),
        Some(Err(why)) => {
            warn!(%why, "nodeMeshBFD unreadable; no node-to-node sessions");
            Err(())
        }
    };

    let my_v6 = my.ipv6_address.map(|a| a.addr());
    let me = Me {
        labels: &my_labels,
        v4: my_ip,
        v6: my_v6,
        asn,
        cluster_as,
        port,
    };
    // The other nodes with a usable BGP address; their labels when a
    // selector of another node's BGPPeer must be matched against them.
    let selecting = inp.peers.values().any(|p| {
        p.peer_selector.is_some()
            || (p.node_selector.is_some()
                && p.peer_ip
                    .as_deref()
                    .and_then(peer_ip)
                    .is_some_and(|(a, _)| me.is(a)))
    });
    let others: Vec<Peer> = inp
        .nodes
        .iter()
        .filter(|n| node_name(n) != inp.node)
        .filter_map(|n| {
            let bgp = match &n.bgp {
                Ok(b) => b.clone(),
                Err(e) => {
                    warn!(node = node_name(n), error = %e, "node's BGP settings unreadable; not peering with it");
                    return None;
                }
            };
            bgp.ipv4_address?;
            Some(Peer {
                name: node_name(n),
                bgp,
                labels: selecting.then(|| n.labels()),
            })
        })
        .collect();

    let mut neighbors: BTreeMap<IpAddr, Neighbor> = BTreeMap::new();
    let mut add = |ns: Vec<Neighbor>| {
        for n in ns {
            neighbors.entry(n.address).or_insert(n);
        }
    };
    // Node-to-node neighbors with the mesh password; none without it.
    let with_node_password = |ns: Vec<Neighbor>| -> Vec<Neighbor> {
        let (Ok(pw), Ok(bfd)) = (&node_password, &node_bfd) else {
            return vec![];
        };
        ns.into_iter()
            .map(|mut n| {
                n.password = pw.clone();
                n.bfd = *bfd;
                n
            })
            .collect()
    };
    // A node's sessions: over IPv4 for IPv4 blocks, and over IPv6 for IPv6
    // blocks when both nodes have an IPv6 address.
    let node_neighbor = |p: &Peer, rr_client: bool, why: &str| -> Vec<Neighbor> {
        let addr = IpAddr::V4(
            p.bgp
                .ipv4_address
                .map(|a| a.addr())
                .unwrap_or(Ipv4Addr::UNSPECIFIED),
        );
        let peer_as = p.bgp.as_number.unwrap_or(cluster_as);
        let one = |addr: IpAddr, local: IpAddr| {
            neighbor(
                addr,
                port,
                peer_as,
                asn,
                format!("{why} {}", p.name),
                rr_client,
                Some(local),
            )
        };
        let mut out = vec![one(addr, IpAddr::V4(my_ip))];
        if let (Some(mine), Some(theirs)) = (my_v6, p.bgp.ipv6_address) {
            out.push(one(IpAddr::V6(theirs.addr()), IpAddr::V6(mine)));
        }
        out
    };
    let i_am_rr = my.route_reflector_cluster_id.is_some();
    if mesh {
        for p in &others {
            add(with_node_password(node_neighbor(p, false, "mesh")));
        }
    } else {
        for p in &others {
            let they_rr = p.bgp.route_reflector_cluster_id.is_some();
            match (i_am_rr, they_rr) {
                (true, true) => add(with_node_password(node_neighbor(p, false, "reflector"))),
                (true, false) => add(with_node_password(node_neighbor(p, true, "client"))),
                (false, true) => add(with_node_password(node_neighbor(p, false, "reflector"))),
                (false, false) => {}
            }
        }
    }
    let mut reversed = Vec::new();
    for (name, bp) in &inp.peers {
        let for_me = match (&bp.node, &bp.node_selector) {
            (Some(n), _) => *n == inp.node,
            (None, sel) => selects(
                sel.as_deref(),
                &my_labels,
                &format!("BGPPeer {name} nodeSelector"),
            ),
        };
        let reverse = reverse_of(name, bp, &me, &others);
        if !for_me && reverse.is_empty() {
            continue;
        }
        let pw = match bp.password.as_ref().map(|p| password(p, inp)) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err(why)) => {
                warn!(peer = %name, %why, "BGPPeer password unresolvable; not peering");
                continue;
            }
        };
        let next_hop = match bp.next_hop_mode {
            ApiNextHopMode::Auto => NextHopMode::Auto,
            ApiNextHopMode::SelfAddress => NextHopMode::SelfAddress,
            ApiNextHopMode::Keep => NextHopMode::Keep,
        };
        let filters = match peer_filters(&bp.filters, &inp.filters) {
            Ok(f) => Arc::new(scoped(&f, &scope)),
            Err(why) => {
                warn!(peer = %name, %why, "BGPPeer filters unusable; not peering");
                continue;
            }
        };
        let max_restart_time = match bp.max_restart_time.as_deref().map(parse_duration) {
            None => None,
            Some(Ok(t)) => Some(t.as_secs().min(4095) as u16),
            Some(Err(why)) => {
                warn!(peer = %name, %why, "BGPPeer maxRestartTime unreadable; not peering");
                continue;
            }
        };
        let bfd = match bp.bfd.as_ref().map(|b| b.timers()) {
            None => None,
            Some(Ok(t)) => Some(bfd_config(t)),
            Some(Err(why)) => {
                warn!(peer = %name, %why, "BGPPeer bfd unreadable; not peering");
                continue;
            }
        };
        let source_address = bp.source_address;
        let ttl_security = bp.ttl_security_hops();
        // For peerIP and peerSelector sessions alike.
        let configure = |mut n: Neighbor| -> Neighbor {
            // RFC 5082: accept packets from at most that many hops away.
            if let Some(hops) = ttl_security {
                n.ttl_security = true;
                n.multihop = hops;
            }
            n.bfd = bfd;
            n.password = pw.clone();
            n.next_hop = next_hop;
            // As Calico: the restart time announced to this peer.
            n.restart_time = max_restart_time;
            n.filters = filters.clone();
            if source_address == SourceAddress::None {
                // The kernel picks the source address of the connection.
                n.local_address = None;
            }
            n
        };
        let mut add = |n: Neighbor| add(vec![configure(n)]);
        for (p, family) in &reverse {
            let rr_client = i_am_rr && p.bgp.route_reflector_cluster_id.is_none();
            for n in node_neighbor(p, rr_client, &format!("BGPPeer {name} (reverse)")) {
                if family.is_none_or(|v6| n.address.is_ipv6() == v6) {
                    reversed.push(configure(n));
                }
            }
        }
        if !for_me {
            continue;
        }
        if let Some(ip) = &bp.peer_ip {
            let Some((addr, given_port)) = peer_ip(ip) else {
                warn!(peer = %name, peer_ip = %ip, "peerIP does not parse; not peering");
                continue;
            };
            // A node's address without a port: that node listens where
            // the cluster's nodes do, not necessarily on 179.
            let is_node = others.iter().any(|o| {
                o.bgp.ipv4_address.map(|a| IpAddr::V4(a.addr())) == Some(addr)
                    || o.bgp.ipv6_address.map(|a| IpAddr::V6(a.addr())) == Some(addr)
            });
            let p = given_port.unwrap_or(if is_node { port } else { 179 });
            let peer_as = bp.as_number.unwrap_or(asn);
            let n = neighbor(
                addr,
                p,
                peer_as,
                asn,
                format!("BGPPeer {name}"),
                false,
                match addr {
                    IpAddr::V4(_) => Some(IpAddr::V4(my_ip)),
                    IpAddr::V6(_) => my_v6.map(IpAddr::V6),
                },
            );
            add(n);
        } else if let Some(sel) = &bp.peer_selector {
            for p in &others {
                if selects(
                    Some(sel),
                    p.labels.as_ref().unwrap_or(&BTreeMap::new()),
                    &format!("BGPPeer {name} peerSelector"),
                ) {
                    let rr_client = i_am_rr && p.bgp.route_reflector_cluster_id.is_none();
                    for n in node_neighbor(p, rr_client, &format!("BGPPeer {name}")) {
                        add(n);
                    }
                }
            }
        }
    }

    // As Calico: a peering a BGPPeer makes from this node wins over the
    // far end of another's.
    add(reversed);
    // Peers without filters of their own share one copy of the scope.
    let scope_only = Arc::new(scoped(&PeerFilters::default(), &scope));
    let neighbors = neighbors
        .into_values()
        .map(|mut n| {
            if n.filters.is_empty() {
                n.filters = scope_only.clone();
            }
            n
        })
        .collect();
    Ok(Config {
        router_id: my_ip,
        asn,
        cluster_id: my.route_reflector_cluster_id.unwrap_or(my_ip),
        listen: std::iter::once(IpAddr::V4(my_ip))
            .chain(my_v6.map(IpAddr::V6))
            .map(|a| SocketAddr::new(a, port))
            .collect(),
        kernel_install: true,
        kernel_exclude: kernel_exclude(&inp.pools, &ranges),
        graceful_restart: GracefulRestart {
            restart_time: restart,
            stale_routes_time: Duration::from_secs(u64::from(restart).max(1)),
            // Half of it: the other nodes, as helpers, keep our routes for
            // the whole of it from their session's start.
            selection_deferral: Duration::from_secs(u64::from(restart).max(1)) / 2,
        },
        connect_retry: Duration::from_secs(2),
        neighbors,
        log_level: s.log_severity_screen.map(|l| l.filter()),
        announce: announcements(
            &OwnAddresses {
                node: &inp.node,
                pools: &inp.pools,
                blocks: &inp.blocks,
                endpoints: &inp.endpoints,
                services: &inp.services,
            },
            &ranges,
        ),
    })
}

fn neighbor(
    address: IpAddr,
    port: u16,
    peer_as: u32,
    my_as: u32,
    description: String,
    route_reflector_client: bool,
    local: Option<IpAddr>,
) -> Neighbor {
    let ibgp = peer_as == my_as;
    Neighbor {
        address,
        port,
        asn: peer_as,
        description: Some(description),
        passive: false,
        password: None,
        ttl_security: false,
        multihop: if ibgp { 255 } else { 1 },
        route_reflector_client,
        // Short: a node that dies is noticed within 9 s (3 keepalives).
        hold_time: 9,
        graceful_restart: true,
        max_restart_time: None,
        restart_time: None,
        max_prefix: None,
        families: vec![match address {
            IpAddr::V4(_) => Family::Ipv4Unicast,
            IpAddr::V6(_) => Family::Ipv6Unicast,
        }],
        next_hop: NextHopMode::Auto,
        filters: Arc::default(),
        export: true,
        local_address: local,
        bfd: None,
    }
}

/// The session timers of an API BFD spec.
fn bfd_config(t: tartan_api::resources::BfdTimers) -> crate::bfd::SessionConfig {
    crate::bfd::SessionConfig {
        desired_min_tx: t.min_tx,
        required_min_rx: t.min_rx,
        detect_mult: t.multiplier,
    }
}

/// A `peerIP`: its address, and its port when it gives one.
fn peer_ip(ip: &str) -> Option<(IpAddr, Option<u16>)> {
    tartan_api::resources::bgppeer::peer_ip_and_port(ip).ok()
}

impl Me<'_> {
    /// Whether `addr` is one of this node's BGP addresses.
    fn is(&self, addr: IpAddr) -> bool {
        addr == IpAddr::V4(self.v4) || self.v6.is_some_and(|v| addr == IpAddr::V6(v))
    }
}

/// What decides whether this node is the far end of a BGPPeer.
struct Me<'a> {
    labels: &'a BTreeMap<String, String>,
    v4: Ipv4Addr,
    v6: Option<std::net::Ipv6Addr>,
    asn: u32,
    cluster_as: u32,
    port: u16,
}

/// The nodes this node peers with because BGPPeer `bp` names this node as
/// its remote end (Calico's reverse peering), each with the one family to
/// peer over (`Some(true)`: IPv6 only) or both (`None`): a node
/// `peerSelector` picks peers over both; a node named by `peerIP` (its
/// address, its AS as `asNumber` or the cluster's, its port if given)
/// over that address's family.
fn reverse_of<'p, 'a>(
    name: &str,
    bp: &BgpPeerSpec,
    me: &Me<'_>,
    others: &'p [Peer<'a>],
) -> Vec<(&'p Peer<'a>, Option<bool>)> {
    let family = if let Some(sel) = &bp.peer_selector {
        if !selects(
            Some(sel),
            me.labels,
            &format!("BGPPeer {name} peerSelector"),
        ) {
            return vec![];
        }
        None
    } else if let Some((addr, port)) = bp.peer_ip.as_deref().and_then(peer_ip) {
        let same_as = bp.as_number.unwrap_or(me.cluster_as) == me.asn;
        if !me.is(addr) || !same_as || port.is_some_and(|p| p != me.port) {
            return vec![];
        }
        Some(addr.is_ipv6())
    } else {
        return vec![];
    };
    let empty = BTreeMap::new();
    others
        .iter()
        .filter(|p| match (&bp.node, &bp.node_selector) {
            (Some(n), _) => n == p.name,
            (None, sel) => selects(
                sel.as_deref(),
                p.labels.as_ref().unwrap_or(&empty),
                &format!("BGPPeer {name} nodeSelector"),
            ),
        })
        .map(|p| (p, family))
        .collect()
}
