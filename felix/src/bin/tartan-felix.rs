//! `tartan-felix`: Tartan's node agent.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use tartan_api::logging::LogFormat;
use tartan_felix::daemon::{Config, run};

#[derive(Parser)]
#[command(name = "tartan-felix", version, about = "Tartan's node agent")]
struct Cli {
    /// The datastore: etcd://HOST:PORT[,…] or kubernetes.
    #[arg(long, env = "TARTAN_DATASTORE")]
    datastore: String,
    /// This node's name (default: the host name).
    #[arg(long, env = "NODENAME")]
    node: Option<String>,
    /// Seconds between full comparisons of the kernel with the desired
    /// state (drift repair).
    #[arg(long, default_value_t = 5)]
    resync_seconds: u64,
    /// Seconds an unexpected route of Tartan's is left alone before removal.
    #[arg(long, default_value_t = 10)]
    grace_seconds: u64,
    /// Serve /livez, /readyz and /metrics here ("none": nowhere).
    #[arg(long, default_value = "127.0.0.1:9099")]
    health_address: String,
    /// Serve the Service proxy's /healthz and /livez here, as kube-proxy
    /// does ("none": nowhere).
    #[arg(long, default_value = "0.0.0.0:10256")]
    proxy_health_address: String,
    /// Implement Services (ClusterIP, NodePort, LoadBalancer and external
    /// IPs) on nftables: "on", or "off" when kube-proxy does.
    #[arg(long, value_enum, default_value_t = OnOff::On, env = "TARTAN_FELIX_SERVICES")]
    services: OnOff,
    /// Log format (the filter is TARTAN_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TARTAN_LOG_FORMAT")]
    log_format: LogFormat,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tartan_api::logging::init(cli.log_format, "info");
    let node = cli
        .node
        .or_else(hostname)
        .context("no --node and no host name")?;
    let health = match cli.health_address.as_str() {
        "none" => None,
        a => Some(
            a.parse()
                .with_context(|| format!("--health-address {a:?} is not HOST:PORT"))?,
        ),
    };
    let proxy_health = match cli.proxy_health_address.as_str() {
        "none" => None,
        a => Some(
            a.parse()
                .with_context(|| format!("--proxy-health-address {a:?} is not HOST:PORT"))?,
        ),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let store = tartan_api::store::connect(&cli.datastore, None).await?;
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("install SIGTERM handler");
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        run(
            Config {
                node,
                resync: Duration::from_secs(cli.resync_seconds.max(1)),
                grace: Duration::from_secs(cli.grace_seconds),
                health,
                proxy_health,
                services: cli.services == OnOff::On,
            },
            store,
            shutdown,
        )
        .await
    })
}
