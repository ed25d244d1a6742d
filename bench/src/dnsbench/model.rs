//! What the DNS benchmark runs with and measures: its options, the names
//! and addresses it makes up, the servers' ports, and the figures.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct DnsBenchOptions {
    pub services: usize,
    /// Ready endpoints per Service (in its EndpointSlice).
    pub endpoints: usize,
    /// External names, answered by the upstream and then from cache.
    pub external: usize,
    /// Seconds per dnsperf run.
    pub seconds: u64,
    /// Rounds (medians reported).
    pub runs: usize,
    /// dnsperf client sockets.
    pub clients: usize,
    /// Queries per second of the latency runs.
    pub latency_qps: u32,
}

impl Default for DnsBenchOptions {
    fn default() -> Self {
        DnsBenchOptions {
            services: 10_000,
            endpoints: 10,
            external: 1_000,
            seconds: 5,
            runs: 3,
            clients: 4,
            latency_qps: 5_000,
        }
    }
}

pub(super) const NAMESPACES: usize = 50;
pub(super) const SERVERS: [&str; 3] = ["tartan-dns", "dnsmasq", "unbound"];
pub(super) const SETS: [&str; 2] = ["cluster", "external"];
pub(super) const UPSTREAM_PORT: u16 = 5300;
pub(super) const HEALTH: &str = "127.0.0.1:9153";

pub(super) fn port_of(server: &str) -> u16 {
    match server {
        "tartan-dns" => 5301,
        "dnsmasq" => 5302,
        _ => 5303,
    }
}

pub(super) fn service_name(i: usize) -> String {
    format!("svc-{i:05}")
}

pub(super) fn namespace(i: usize) -> String {
    format!("ns-{:02}", i % NAMESPACES)
}

pub(super) fn fqdn(i: usize) -> String {
    format!("{}.{}.svc.cluster.local", service_name(i), namespace(i))
}

pub(super) fn cluster_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0a64_0000 + i as u32 + 1)
}

pub(super) fn external_name(j: usize) -> String {
    format!("ext-{j:05}.example.test")
}

pub(super) fn external_ip(j: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0ac8_0000 + j as u32 + 1)
}

#[derive(Debug, Clone, Default)]
pub struct Run {
    pub qps: f64,
    /// Share of queries answered NOERROR with the run's own count.
    pub answered: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Default)]
pub struct DnsBenchResult {
    /// (server, name set) → one run per round.
    pub runs: BTreeMap<(String, String), Vec<Run>>,
    pub fill: Duration,
    /// From tartan-dns's start to every Service in its records.
    pub load: Duration,
    /// Resident memory (KiB): tartan-dns loaded, before any query; after
    /// the runs; its peak. dnsmasq and unbound after the runs.
    pub tartan_loaded_kib: u64,
    pub tartan_after_kib: u64,
    pub tartan_peak_kib: u64,
    pub dnsmasq_after_kib: u64,
    pub unbound_after_kib: u64,
    pub versions: BTreeMap<String, String>,
}
