//! TOML → [`Config`]: the file's own shape (serde), then the checks that
//! span several keys. Every error names the key and line.
use super::filters;
use super::model::{Announce, Config, GracefulRestart, Neighbor};
use crate::model::community::{parse_community, parse_large_community};
use crate::model::{Family, NextHopMode};
use ipnet::IpNet;
use serde::Deserialize;
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use toml::Spanned;

#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    router_id: Ipv4Addr,
    asn: Spanned<u32>,
    cluster_id: Option<Ipv4Addr>,
    #[serde(default)]
    listen: RawListen,
    #[serde(default)]
    kernel: RawKernel,
    #[serde(default)]
    graceful_restart: RawGracefulRestart,
    connect_retry: Option<Spanned<u64>>,
    #[serde(default)]
    neighbor: Vec<RawNeighbor>,
    #[serde(default)]
    announce: Vec<RawAnnounce>,
    #[serde(default)]
    filter: Vec<filters::RawFilter>,
    /// RFC 8212: an eBGP neighbor without import (export) filters accepts
    /// (is sent) no routes. False restores the older accept-all default.
    #[serde(default = "yes")]
    ebgp_requires_policy: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawListen {
    #[serde(default = "default_listen_addresses")]
    addresses: Vec<IpAddr>,
    #[serde(default = "default_port")]
    port: u16,
}

impl Default for RawListen {
    fn default() -> Self {
        RawListen {
            addresses: default_listen_addresses(),
            port: default_port(),
        }
    }
}

fn default_listen_addresses() -> Vec<IpAddr> {
    vec![IpAddr::V6(Ipv6Addr::UNSPECIFIED)]
}

fn default_port() -> u16 {
    179
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    #[serde(default = "yes")]
    install: bool,
}

impl Default for RawKernel {
    fn default() -> Self {
        RawKernel { install: true }
    }
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawGracefulRestart {
    restart_time: Option<Spanned<u16>>,
    stale_routes_time: Option<u64>,
    selection_deferral_time: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNeighbor {
    address: Spanned<IpAddr>,
    asn: u32,
    port: Option<u16>,
    description: Option<String>,
    #[serde(default)]
    passive: bool,
    password: Option<Spanned<String>>,
    #[serde(default)]
    ttl_security: bool,
    multihop: Option<Spanned<u8>>,
    #[serde(default)]
    route_reflector_client: bool,
    hold_time: Option<Spanned<u16>>,
    #[serde(default = "yes")]
    graceful_restart: bool,
    max_restart_time: Option<Spanned<u16>>,
    max_prefix: Option<Spanned<u32>>,
    families: Option<Spanned<Vec<Spanned<String>>>>,
    /// `"auto"`, `"self"` or `"keep"`.
    next_hop: Option<Spanned<String>>,
    /// The older spelling of `next_hop = "self"`.
    next_hop_self: Option<Spanned<bool>>,
    #[serde(default = "yes")]
    export: bool,
    local_address: Option<IpAddr>,
    /// Names of `[[filter]]` tables, tried in order.
    #[serde(default)]
    import_filters: Vec<Spanned<String>>,
    #[serde(default)]
    export_filters: Vec<Spanned<String>>,
    /// `{ min_rx = "300ms", min_tx = "300ms", multiplier = 3 }`.
    bfd: Option<Spanned<RawBfd>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBfd {
    min_rx: Option<String>,
    min_tx: Option<String>,
    multiplier: Option<u8>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnnounce {
    prefix: Spanned<String>,
    #[serde(default)]
    communities: Vec<Spanned<String>>,
    #[serde(default)]
    large_communities: Vec<Spanned<String>>,
    next_hop: Option<IpAddr>,
}

/// Parses and checks a whole file. `file` only labels the errors.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let err_at = |offset: usize, message: String| ConfigError {
        file: file.to_string(),
        line: line_of(text, offset),
        message,
    };
    let raw: RawConfig = toml::from_str(text).map_err(|e| {
        let offset = e.span().map(|s| s.start).unwrap_or(0);
        // serde names the expected type, not always the key: quote the line.
        let line = text[..offset.min(text.len())]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .to_string()
            + text[offset.min(text.len())..]
                .split('\n')
                .next()
                .unwrap_or("");
        err_at(
            offset,
            format!("in `{}`: {}", line.trim(), e.message().trim()),
        )
    })?;

    let asn = *raw.asn.get_ref();
    if asn == 0 || asn == 23456 {
        return Err(err_at(
            raw.asn.span().start,
            format!("asn = {asn} is reserved; use 1-4294967295 other than 23456 (AS_TRANS)"),
        ));
    }
    if raw.router_id.is_unspecified() {
        return Err(err_at(0, "router_id must not be 0.0.0.0".into()));
    }
    let connect_retry = match raw.connect_retry {
        Some(s) if *s.get_ref() == 0 => {
            return Err(err_at(
                s.span().start,
                "connect_retry must be at least 1 second".into(),
            ));
        }
        Some(s) => Duration::from_secs(*s.get_ref()),
        None => Duration::from_secs(5),
    };
    let restart_time = match raw.graceful_restart.restart_time {
        Some(s) if *s.get_ref() > 4095 => {
            return Err(err_at(
                s.span().start,
                format!(
                    "graceful_restart.restart_time = {} does not fit the 12-bit field; use 0-4095 seconds",
                    s.get_ref()
                ),
            ));
        }
        Some(s) => *s.get_ref(),
        None => 120,
    };

    let stale_routes_time =
        Duration::from_secs(raw.graceful_restart.stale_routes_time.unwrap_or(300));
    let selection_deferral = match &raw.graceful_restart.selection_deferral_time {
        Some(t) if Duration::from_secs(*t.get_ref()) >= stale_routes_time => {
            return Err(err_at(
                t.span().start,
                format!(
                    "graceful_restart.selection_deferral_time = {} must be shorter than stale_routes_time = {}: peers that wait as long for our routes after a restart must have them first",
                    t.get_ref(),
                    stale_routes_time.as_secs()
                ),
            ));
        }
        Some(t) => Duration::from_secs(*t.get_ref()),
        None => stale_routes_time / 2,
    };

    let filters = filters::read(raw.filter).map_err(|(at, m)| err_at(at, m))?;
    let mut seen = HashSet::new();
    let mut neighbors = Vec::with_capacity(raw.neighbor.len());
    for n in raw.neighbor {
        let address = *n.address.get_ref();
        let at = n.address.span().start;
        if !seen.insert(address) {
            return Err(err_at(at, format!("neighbor {address} is listed twice")));
        }
        if address.is_unspecified() || address.is_multicast() {
            return Err(err_at(
                at,
                format!("neighbor address {address} is not a unicast address"),
            ));
        }
        if n.asn == 0 || n.asn == 23456 {
            return Err(err_at(
                at,
                format!("neighbor {address}: asn = {} is reserved", n.asn),
            ));
        }
        let hold_time = match n.hold_time {
            Some(h) if matches!(h.get_ref(), 1 | 2) => {
                return Err(err_at(
                    h.span().start,
                    format!(
                        "neighbor {address}: hold_time must be 0 or at least 3 seconds (RFC 4271 4.2)"
                    ),
                ));
            }
            Some(h) => *h.get_ref(),
            None => 90,
        };
        let bfd = match n.bfd {
            None => None,
            Some(b) => {
                let at = b.span().start;
                let b = b.into_inner();
                let spec = tartan_api::resources::BfdSpec {
                    min_rx: b.min_rx,
                    min_tx: b.min_tx,
                    multiplier: b.multiplier,
                };
                let t = spec
                    .timers()
                    .map_err(|e| err_at(at, format!("neighbor {address}: bfd: {e}")))?;
                Some(crate::bfd::SessionConfig {
                    desired_min_tx: t.min_tx,
                    required_min_rx: t.min_rx,
                    detect_mult: t.multiplier,
                })
            }
        };
        let ibgp = n.asn == asn;
        let multihop = match n.multihop {
            Some(m) if *m.get_ref() == 0 => {
                return Err(err_at(
                    m.span().start,
                    format!("neighbor {address}: multihop must be 1-255"),
                ));
            }
            Some(m) => *m.get_ref(),
            None if ibgp => 255,
            None => 1,
        };
        if let Some(p) = &n.password
            && (p.get_ref().is_empty() || p.get_ref().len() > 80)
        {
            return Err(err_at(
                p.span().start,
                format!("neighbor {address}: password must be 1-80 bytes (TCP MD5 key limit)"),
            ));
        }
        if let Some(m) = &n.max_prefix
            && *m.get_ref() == 0
        {
            return Err(err_at(
                m.span().start,
                format!("neighbor {address}: max_prefix must be at least 1"),
            ));
        }
        let families = match n.families {
            None => vec![match address {
                IpAddr::V4(_) => Family::Ipv4Unicast,
                IpAddr::V6(_) => Family::Ipv6Unicast,
            }],
            Some(list) => {
                let mut fams = Vec::new();
                for f in list.get_ref() {
                    let fam: Family = f.get_ref().parse().map_err(|e: String| {
                        err_at(f.span().start, format!("neighbor {address}: {e}"))
                    })?;
                    if !fams.contains(&fam) {
                        fams.push(fam);
                    }
                }
                if fams.is_empty() {
                    return Err(err_at(
                        list.span().start,
                        format!("neighbor {address}: families must not be empty"),
                    ));
                }
                fams
            }
        };
        if let Some(t) = &n.max_restart_time
            && *t.get_ref() > 4095
        {
            return Err(err_at(
                t.span().start,
                format!(
                    "neighbor {address}: max_restart_time is at most 4095 seconds (a 12-bit field)"
                ),
            ));
        }
        let next_hop = match (n.next_hop, n.next_hop_self) {
            (Some(_), Some(old)) => {
                return Err(err_at(
                    old.span().start,
                    format!("neighbor {address}: give next_hop or next_hop_self, not both"),
                ));
            }
            (None, Some(old)) if *old.get_ref() => NextHopMode::SelfAddress,
            (None, _) => NextHopMode::Auto,
            (Some(mode), None) => match mode.get_ref().as_str() {
                "auto" => NextHopMode::Auto,
                "self" => NextHopMode::SelfAddress,
                "keep" => NextHopMode::Keep,
                other => {
                    return Err(err_at(
                        mode.span().start,
                        format!(
                            "neighbor {address}: next_hop {other:?} is not one of \"auto\", \"self\", \"keep\""
                        ),
                    ));
                }
            },
        };
        let mut peer_filters =
            filters::for_neighbor(&filters, &n.import_filters, &n.export_filters)
                .map_err(|(at, m)| err_at(at, format!("neighbor {address}: {m}")))?;
        if !ibgp && raw.ebgp_requires_policy {
            filters::require_policy(
                address,
                &mut peer_filters,
                n.import_filters.is_empty(),
                // A receive-only neighbor is sent nothing anyway.
                n.export && n.export_filters.is_empty(),
            );
        }
        if n.route_reflector_client && !ibgp {
            return Err(err_at(
                at,
                format!(
                    "neighbor {address}: route_reflector_client needs an iBGP neighbor (asn = {asn})"
                ),
            ));
        }
        neighbors.push(Neighbor {
            address,
            port: n.port.unwrap_or(179),
            asn: n.asn,
            description: n.description,
            passive: n.passive,
            password: n.password.map(|p| p.into_inner()),
            ttl_security: n.ttl_security,
            multihop,
            route_reflector_client: n.route_reflector_client,
            hold_time,
            graceful_restart: n.graceful_restart,
            max_restart_time: n.max_restart_time.map(|t| t.into_inner()),
            restart_time: None,
            max_prefix: n.max_prefix.map(|m| m.into_inner()),
            families,
            next_hop,
            filters: std::sync::Arc::new(peer_filters),
            export: n.export,
            local_address: n.local_address,
            bfd,
        });
    }

    let mut announce = Vec::with_capacity(raw.announce.len());
    let mut seen_prefixes = HashSet::new();
    for a in raw.announce {
        let at = a.prefix.span().start;
        let text_prefix = a.prefix.get_ref();
        let prefix: IpNet = text_prefix.parse().map_err(|_| {
            err_at(
                at,
                format!("announce prefix {text_prefix:?} is not a CIDR prefix like 10.0.0.0/24"),
            )
        })?;
        if prefix.trunc() != prefix {
            return Err(err_at(
                at,
                format!(
                    "announce prefix {prefix} has host bits set; did you mean {}?",
                    prefix.trunc()
                ),
            ));
        }
        if !seen_prefixes.insert(prefix) {
            return Err(err_at(
                at,
                format!("announce prefix {prefix} is listed twice"),
            ));
        }
        let communities = a
            .communities
            .iter()
            .map(|c| parse_community(c.get_ref()).map_err(|e| err_at(c.span().start, e)))
            .collect::<Result<Vec<_>, _>>()?;
        let large_communities = a
            .large_communities
            .iter()
            .map(|c| parse_large_community(c.get_ref()).map_err(|e| err_at(c.span().start, e)))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(nh) = a.next_hop
            && nh.is_ipv4() != prefix.addr().is_ipv4()
        {
            return Err(err_at(
                at,
                format!("announce {prefix}: next_hop {nh} is of the other address family"),
            ));
        }
        announce.push(Announce {
            prefix,
            communities,
            large_communities,
            next_hop: a.next_hop,
        });
    }

    Ok(Config {
        router_id: raw.router_id,
        asn,
        cluster_id: raw.cluster_id.unwrap_or(raw.router_id),
        listen: raw
            .listen
            .addresses
            .iter()
            .map(|a| SocketAddr::new(*a, raw.listen.port))
            .collect(),
        kernel_install: raw.kernel.install,
        kernel_exclude: vec![],
        graceful_restart: GracefulRestart {
            restart_time,
            stale_routes_time,
            selection_deferral,
        },
        connect_retry,
        neighbors,
        announce,
        log_level: None,
    })
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
