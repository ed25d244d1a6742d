//! `tartan-controllers`: the cluster controllers, leader-elected with a
//! Lease so that of several replicas one acts.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use tartan_api::logging::LogFormat;
use tartan_api::resources::TARTAN_NAMESPACE;
use tartan_controllers::daemon::{self, Intervals};
use tartan_controllers::firststart::FirstStart;
use tartan_controllers::ipamgc::Collector;
use tartan_controllers::lease::{self, Candidate, Elector, Timing};
use tartan_controllers::metrics::{Health, Metrics};
use tokio::sync::watch;
use tracing::info;

#[derive(Parser)]
#[command(
    name = "tartan-controllers",
    version,
    about = "Tartan's cluster controllers: the default IPPools at first start, IPAM garbage collection for deleted nodes, LoadBalancer addresses from LoadBalancerIPPools"
)]
struct Cli {
    /// The datastore: etcd://HOST:PORT[,…], kubernetes or memory.
    #[arg(long, env = "TARTAN_DATASTORE")]
    datastore: String,
    /// This replica's name in the Lease (default: the host name and pid).
    #[arg(long, env = "POD_NAME")]
    id: Option<String>,
    /// Namespace of the Lease and of the ConfigMap tartan-config.
    #[arg(long, env = "POD_NAMESPACE", default_value = TARTAN_NAMESPACE)]
    lease_namespace: String,
    #[arg(long, default_value = "tartan-controllers")]
    lease_name: String,
    /// Seconds others wait for a renewal before taking the Lease.
    #[arg(long, default_value_t = 15)]
    lease_duration: u64,
    /// Milliseconds after a renewal began that the holder still acts.
    #[arg(long, default_value_t = 10_000)]
    renew_deadline_ms: u64,
    /// Milliseconds between election rounds.
    #[arg(long, default_value_t = 2_000)]
    retry_period_ms: u64,
    /// Milliseconds between LoadBalancer passes.
    #[arg(long, default_value_t = 2_000)]
    loadbalancer_interval_ms: u64,
    /// Milliseconds between IPAM garbage collection passes.
    #[arg(long, default_value_t = 5_000)]
    ipam_gc_interval_ms: u64,
    /// Seconds a Node must be missing before its IPAM records go.
    #[arg(long, default_value_t = 10)]
    ipam_gc_grace: u64,
    /// Serve /livez, /readyz and /metrics here ("none": nowhere).
    #[arg(long, default_value = "0.0.0.0:9095")]
    health_address: String,
    /// Log format (the filter is TARTAN_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TARTAN_LOG_FORMAT")]
    log_format: LogFormat,
}

fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "tartan-controllers".into());
    format!("{host}-{}", std::process::id())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tartan_api::logging::init(cli.log_format, "info");
    let timing = Timing {
        lease_duration: Duration::from_secs(cli.lease_duration),
        renew_deadline: Duration::from_millis(cli.renew_deadline_ms),
        retry_period: Duration::from_millis(cli.retry_period_ms),
    };
    timing.check().map_err(anyhow::Error::msg)?;
    let health = match cli.health_address.as_str() {
        "none" => None,
        a => Some(
            a.parse::<std::net::SocketAddr>()
                .with_context(|| format!("--health-address {a:?} is not HOST:PORT"))?,
        ),
    };
    let intervals = Intervals {
        loadbalancer: Duration::from_millis(cli.loadbalancer_interval_ms.max(100)),
        ipam_gc: Duration::from_millis(cli.ipam_gc_interval_ms.max(100)),
    };
    let id = cli.id.clone().unwrap_or_else(default_id);
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let store = tartan_api::store::connect(&cli.datastore, Some(Duration::from_secs(10)))
            .await
            .with_context(|| format!("open the datastore {}", cli.datastore))?;
        info!(%id, datastore = %store.describe(), lease = %format!("{}/{}", cli.lease_namespace, cli.lease_name), "starting");
        let (tx, rx) = watch::channel(false);
        let metrics = Arc::new(Metrics::new());
        if let Some(addr) = health {
            let h = Health {
                metrics: metrics.clone(),
                leading: rx.clone(),
            };
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listen on {addr}"))?;
            tokio::spawn(async move {
                if let Err(e) = tartan_controllers::metrics::serve(listener, h).await {
                    tracing::error!(error = %e, "health server stopped");
                }
            });
        }
        let elector = Elector {
            store: store.clone(),
            namespace: cli.lease_namespace.clone(),
            name: cli.lease_name.clone(),
            candidate: Candidate::new(&id, timing),
        };
        let election = tokio::spawn(lease::run(elector, tx));
        let gc = Collector::new(cli.ipam_gc_grace.min(i64::MAX as u64) as i64);
        let first = FirstStart::new(&cli.lease_namespace);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = daemon::run(store.clone(), rx, metrics, intervals, gc, first) => {}
            r = tokio::signal::ctrl_c() => { r?; info!("interrupted; stopping"); }
            _ = term.recv() => info!("terminated; stopping"),
        }
        // The controllers stopped with the select; the election stops
        // before the Lease is given up, so nothing renews it after.
        election.abort();
        let _ = election.await;
        match lease::release(&*store, &cli.lease_namespace, &cli.lease_name, &id).await {
            Ok(true) => info!("gave up the Lease"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "could not give up the Lease; another replica takes it when it expires"),
        }
        Ok(())
    })
}
