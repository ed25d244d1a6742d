//! Prometheus metrics, all named `tartan_dns_*`.

use std::borrow::Cow;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Static names where they are known, so counting a query allocates
/// nothing.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueryLabels {
    /// The question's type (`A`, `SRV`, …, `TYPE65280`; `none` for no
    /// question).
    pub qtype: Cow<'static, str>,
    /// The answer's rcode (`NOERROR`, `NXDOMAIN`, …).
    pub rcode: Cow<'static, str>,
    /// `udp` or `tcp`.
    pub transport: &'static str,
}

pub struct Metrics {
    pub registry: Registry,
    pub queries: Family<QueryLabels, Counter>,
    pub truncated: Counter,
    pub rate_limited: Counter,
    pub cache_hits: Counter,
    pub cache_misses: Counter,
    pub coalesced: Counter,
    pub upstream_errors: Counter,
    pub upstream_seconds: Histogram,
    pub services: Gauge,
    pub endpoint_slices: Gauge,
    /// Time a UDP query answered by its receiving thread spends on it,
    /// from its receipt to its answer's send, by thread (what the server
    /// itself adds; the rest of a client's wait is the network and the
    /// scheduler).
    pub udp_answer_seconds: Family<UdpThread, Histogram, fn() -> Histogram>,
}

/// A UDP receiving thread, by its index (`dns-udp-N`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UdpThread {
    pub thread: u32,
}

/// 5 µs to 41 ms: a hit of the reply cache takes a few µs, a preempted
/// thread milliseconds.
fn answer_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_005, 2.0, 14))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        tartan_api::build_info::register(&mut root, "tartan-dns");
        let registry = root.sub_registry_with_prefix("tartan_dns");
        let m = Metrics {
            registry: Registry::default(),
            queries: Family::default(),
            truncated: Counter::default(),
            rate_limited: Counter::default(),
            cache_hits: Counter::default(),
            cache_misses: Counter::default(),
            coalesced: Counter::default(),
            upstream_errors: Counter::default(),
            upstream_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            services: Gauge::default(),
            endpoint_slices: Gauge::default(),
            udp_answer_seconds: Family::new_with_constructor(answer_histogram),
        };
        registry.register(
            "udp_answer_duration_seconds",
            "Time a UDP query spent on its receiving thread, from its receipt to its answer's send",
            m.udp_answer_seconds.clone(),
        );
        registry.register(
            "queries",
            "Questions answered, by type, rcode and transport",
            m.queries.clone(),
        );
        registry.register(
            "truncated",
            "UDP answers cut to the header (TC set) because they did not fit",
            m.truncated.clone(),
        );
        registry.register(
            "rate_limited",
            "Queries dropped because their client exceeded its rate",
            m.rate_limited.clone(),
        );
        registry.register(
            "cache_hits",
            "Forwarded questions answered from the cache",
            m.cache_hits.clone(),
        );
        registry.register(
            "cache_misses",
            "Forwarded questions not in the cache",
            m.cache_misses.clone(),
        );
        registry.register(
            "coalesced",
            "Forwarded questions that waited for an identical one already asked",
            m.coalesced.clone(),
        );
        registry.register(
            "upstream_errors",
            "Upstream exchanges that failed or timed out",
            m.upstream_errors.clone(),
        );
        registry.register(
            "upstream_duration_seconds",
            "Time an upstream took to answer (or to fail)",
            m.upstream_seconds.clone(),
        );
        registry.register("services", "Services held", m.services.clone());
        registry.register(
            "endpoint_slices",
            "EndpointSlices held",
            m.endpoint_slices.clone(),
        );
        Metrics {
            registry: root,
            ..m
        }
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
