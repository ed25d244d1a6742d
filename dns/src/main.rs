//! `tartan-dns`: the cluster DNS server.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use tartan_api::logging::LogFormat;
use tartan_dns::answer::Zone;
use tartan_dns::daemon::{Config, start};
use tartan_dns::forward::{ForwardConfig, parse_resolv_conf};
use tartan_dns::limit::LimitConfig;

#[derive(Parser)]
#[command(name = "tartan-dns", version, about = "Tartan's cluster DNS server")]
struct Cli {
    /// The datastore: etcd://HOST:PORT[,…], kubernetes or memory.
    #[arg(long, env = "TARTAN_DATASTORE")]
    datastore: String,
    /// Address for DNS over UDP and TCP.
    #[arg(long, default_value = "0.0.0.0:53")]
    listen: SocketAddr,
    /// Serve /livez, /readyz and /metrics here ("none": nowhere).
    #[arg(long, default_value = "0.0.0.0:9153")]
    health_address: String,
    /// The cluster domain.
    #[arg(long, default_value = "cluster.local")]
    domain: String,
    /// TTL of cluster answers, seconds.
    #[arg(long, default_value_t = 5)]
    ttl: u32,
    /// TTL of negative cluster answers (the SOA minimum), seconds.
    #[arg(long, default_value_t = 5)]
    negative_ttl: u32,
    /// Upstream servers (IP or IP:PORT) for names outside the cluster
    /// domain; when none is given, the nameservers of --resolv-conf.
    #[arg(long = "upstream")]
    upstreams: Vec<String>,
    #[arg(long, default_value = "/etc/resolv.conf")]
    resolv_conf: String,
    /// Milliseconds an upstream is waited for before the next is tried.
    #[arg(long, default_value_t = 2000)]
    upstream_timeout_ms: u64,
    /// Most forwarded answers cached (0: no cache).
    #[arg(long, default_value_t = 10_000)]
    cache_size: usize,
    /// Bounds on how long a forwarded answer is cached, seconds.
    #[arg(long, default_value_t = 0)]
    cache_min_ttl: u32,
    #[arg(long, default_value_t = 300)]
    cache_max_ttl: u32,
    #[arg(long, default_value_t = 30)]
    cache_max_negative_ttl: u32,
    /// Queries per second one client address may send (0: unlimited).
    #[arg(long, default_value_t = 2000.0)]
    client_rate: f64,
    /// Queries one client may send in a burst.
    #[arg(long, default_value_t = 4000.0)]
    client_burst: f64,
    /// Most client addresses tracked by the rate limit.
    #[arg(long, default_value_t = 65_536)]
    max_clients: usize,
    /// Most UDP queries waiting for an upstream at once.
    #[arg(long, default_value_t = 4096)]
    max_inflight: usize,
    /// Most TCP connections at once.
    #[arg(long, default_value_t = 256)]
    max_tcp: usize,
    /// UDP sockets on the listen address, each read by a thread of its own
    /// (0: one per core, at most 4).
    #[arg(long, default_value_t = 0)]
    udp_threads: usize,
    /// Log format (the filter is TARTAN_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TARTAN_LOG_FORMAT")]
    log_format: LogFormat,
}

fn upstream(s: &str) -> Result<SocketAddr> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let ip: std::net::IpAddr = s
        .parse()
        .with_context(|| format!("--upstream {s:?} is not IP or IP:PORT"))?;
    Ok(SocketAddr::new(ip, 53))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tartan_api::logging::init(cli.log_format, "info");
    let upstreams = if cli.upstreams.is_empty() {
        match std::fs::read_to_string(&cli.resolv_conf) {
            Ok(t) => parse_resolv_conf(&t),
            Err(e) => {
                tracing::warn!(path = %cli.resolv_conf, error = %e, "no resolv.conf: names outside the cluster get SERVFAIL");
                vec![]
            }
        }
    } else {
        cli.upstreams
            .iter()
            .map(|s| upstream(s))
            .collect::<Result<_>>()?
    };
    let health = match cli.health_address.as_str() {
        "none" => None,
        a => Some(
            a.parse()
                .with_context(|| format!("--health-address {a:?} is not HOST:PORT"))?,
        ),
    };
    if cli.cache_min_ttl > cli.cache_max_ttl {
        bail!("--cache-min-ttl is above --cache-max-ttl");
    }
    let zone = Zone::new(&cli.domain, cli.ttl, cli.negative_ttl).map_err(anyhow::Error::msg)?;
    let cfg = Config {
        listen: cli.listen,
        health,
        zone,
        forward: ForwardConfig {
            upstreams,
            timeout: Duration::from_millis(cli.upstream_timeout_ms.max(1)),
            cache_size: cli.cache_size,
            min_ttl: cli.cache_min_ttl,
            max_ttl: cli.cache_max_ttl,
            max_negative_ttl: cli.cache_max_negative_ttl.max(cli.cache_min_ttl),
        },
        limit: LimitConfig {
            rate: cli.client_rate,
            burst: cli.client_burst,
            max_clients: cli.max_clients,
        },
        max_inflight: cli.max_inflight.max(1),
        max_tcp: cli.max_tcp.max(1),
        udp_threads: match cli.udp_threads {
            0 => tartan_dns::daemon::default_udp_threads(),
            n => n,
        },
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(tartan_dns::daemon::WORKERS)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let store = tartan_api::store::connect(&cli.datastore, None).await?;
        let running = start(cfg, store).await?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("install SIGTERM handler")?;
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = running.wait() => bail!("a server task ended"),
        }
        Ok(())
    })
}
