//! `tartan-bgpd`: Tartan's BGP speaker, run from a TOML file.
use anyhow::Context;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tartan_api::logging::LogFormat;
use tartan_bgpd::config;
use tartan_bgpd::control::{Health, Metrics, serve_health, serve_metrics, serve_unix};
use tartan_bgpd::daemon::{ControlHandle, Daemon, DaemonOptions};
use tracing::{error, info};

/// jemalloc rather than glibc's malloc: it gives freed memory back to the
/// system after a few seconds, where glibc's per-thread arenas kept what
/// the first listing of a large cluster used (bgpd at 5,000 Nodes and
/// 10,000 Services: 116 MiB resident with glibc, 85 MiB with jemalloc;
/// bench/scale.md).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(name = "tartan-bgpd", version, about = "Tartan's BGP speaker")]
struct Args {
    /// The TOML configuration file (re-read on SIGHUP).
    #[arg(
        long,
        short = 'c',
        env = "TARTAN_BGPD_CONFIG",
        required_unless_present = "datastore",
        conflicts_with = "datastore"
    )]
    config: Option<PathBuf>,
    /// Build the configuration from the datastore instead of a file
    /// (etcd://HOST:PORT[,…] or kubernetes), following its changes.
    #[arg(long, env = "TARTAN_DATASTORE")]
    datastore: Option<String>,
    /// This node's name, with --datastore (default: the host name).
    #[arg(long, env = "NODENAME")]
    node: Option<String>,
    /// The control API's Unix socket.
    #[arg(long, default_value = tartan_api::bgp::DEFAULT_SOCKET, env = "TARTAN_BGP_SOCKET")]
    socket: PathBuf,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9179).
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Serve the health probes `/livez` and `/readyz` on this address
    /// (e.g. 127.0.0.1:9098).
    #[arg(long, env = "TARTAN_BGPD_HEALTH")]
    health: Option<SocketAddr>,
    /// With --datastore: rewrite this node's BGPNodeStatus report at least
    /// this often (seconds), besides on every session change; a report
    /// older than that is shown stale.
    #[arg(long, env = "TARTAN_BGPD_STATUS_INTERVAL", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=3600))]
    status_interval: u32,
    /// On SIGTERM, drain first (RFC 8326 graceful shutdown): re-advertise
    /// every route with GRACEFUL_SHUTDOWN, wait this many seconds, close
    /// the sessions (Cease, Administrative Shutdown), then stop. Without
    /// it bgpd stops at once and graceful-restart peers keep its routes.
    /// Keep it below the pod's terminationGracePeriodSeconds.
    #[arg(long, env = "TARTAN_BGPD_SHUTDOWN_DRAIN", value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(0..=3600))]
    shutdown_drain: Option<u32>,
    /// Log format (the filter is TARTAN_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TARTAN_LOG_FORMAT")]
    log_format: LogFormat,
    /// Check the configuration file and exit.
    #[arg(long)]
    check: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    tartan_bgpd::log_level::install(tartan_api::logging::init_adjustable(
        args.log_format,
        "info",
    ));
    if let Some(store) = args.datastore.clone() {
        return run_runtime(from_datastore(args, store));
    }
    let Some(config_path) = args.config.clone() else {
        eprintln!("tartan-bgpd: give --config FILE or --datastore SPEC");
        return std::process::ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&config_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tartan-bgpd: cannot read {}: {e}", config_path.display());
            return std::process::ExitCode::from(2);
        }
    };
    let cfg = match config::parse(&config_path.display().to_string(), &text) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tartan-bgpd: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.check {
        println!(
            "{}: ok ({} neighbors, {} announcements)",
            config_path.display(),
            cfg.neighbors.len(),
            cfg.announce.len()
        );
        return std::process::ExitCode::SUCCESS;
    }
    run_runtime(async move {
        let health = start_health(args.health);
        let metrics = Arc::new(Metrics::new());
        let r = run(args, cfg, None, &health.0, None, metrics).await;
        health.stop();
        r
    })
}

/// The probes' server, up from the start (before the configuration is
/// built, `/readyz` says so); aborted when bgpd stops.
struct HealthServer(
    Arc<Health<ControlHandle>>,
    Option<tokio::task::JoinHandle<()>>,
);

impl HealthServer {
    fn stop(self) {
        if let Some(t) = self.1 {
            t.abort();
        }
    }
}

fn start_health(addr: Option<SocketAddr>) -> HealthServer {
    let health = Health::new();
    let task = addr.map(|addr| {
        let h = health.clone();
        tokio::spawn(async move {
            if let Err(e) = serve_health(addr, h, std::future::pending()).await {
                error!(error = %e, "health endpoints stopped");
            }
        })
    });
    HealthServer(health, task)
}

fn run_runtime(f: impl std::future::Future<Output = anyhow::Result<()>>) -> std::process::ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tartan-bgpd: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(f) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            eprintln!("tartan-bgpd: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Datastore mode: wait for the first configuration the datastore yields,
/// start with it, then apply each new one.
async fn from_datastore(args: Args, spec: String) -> anyhow::Result<()> {
    let node = match args.node.clone() {
        Some(n) => n,
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .context("no --node and the host name is unreadable")?,
    };
    let health = start_health(args.health);
    let store = tartan_api::store::connect(&spec, None)
        .await
        .with_context(|| format!("datastore {spec}"))?;
    info!(node = %node, datastore = %spec, "configuration from the datastore");
    // The node's BGP addresses, if its Node lacks them; the follower
    // rebuilds when the annotations arrive.
    let detector = tokio::spawn({
        let (store, node) = (store.clone(), node.clone());
        async move { tartan_bgpd::datastore::autodetect::run(&*store, &node).await }
    });
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let metrics = Arc::new(Metrics::new());
    let follower = tokio::spawn(tartan_bgpd::datastore::follow::follow_recording(
        store.clone(),
        node.clone(),
        tx,
        Some(metrics.durations().config_build.clone()),
    ));
    let first = tokio::select! {
        c = rx.recv() => c.context("the datastore follower stopped")?,
        _ = shutdown_signal() => return Ok(()),
    };
    let r = run(
        args,
        first,
        Some(rx),
        &health.0,
        Some((store, node)),
        metrics,
    )
    .await;
    follower.abort();
    detector.abort();
    health.stop();
    r
}

async fn run(
    args: Args,
    cfg: config::Config,
    updates: Option<tokio::sync::mpsc::Receiver<config::Config>>,
    health: &Health<ControlHandle>,
    report_to: Option<(Arc<dyn tartan_api::store::Datastore>, String)>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<()> {
    info!(router_id = %cfg.router_id, asn = cfg.asn, neighbors = cfg.neighbors.len(), "starting tartan-bgpd");
    let (daemon, control) = Daemon::start(
        cfg,
        DaemonOptions {
            bfd: Default::default(),
            config_path: args.config.clone().unwrap_or_default(),
            metrics: metrics.clone(),
            shutdown_drain: args
                .shutdown_drain
                .map(|s| std::time::Duration::from_secs(s.into())),
        },
    )
    .await
    .context("cannot start")?;
    health.set_source(control.clone());
    let publisher = report_to.map(|(store, node)| {
        tokio::spawn(tartan_bgpd::datastore::publish::publish_recording(
            store,
            node,
            control.clone(),
            std::time::Duration::from_secs(args.status_interval.into()),
            Some(metrics.durations().status_write.clone()),
        ))
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let socket = args.socket.clone();
    let control_task = tokio::spawn({
        let stop = stopped(stop_rx.clone());
        async move {
            if let Err(e) = serve_unix(&socket, control, stop).await {
                error!(error = %e, "control API stopped");
            }
        }
    });
    let metrics_task = args.metrics.map(|addr| {
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move {
            if let Err(e) = serve_metrics(addr, metrics, stop).await {
                error!(error = %e, "metrics endpoint stopped");
            }
        })
    });
    daemon.run_with_updates(shutdown_signal(), updates).await;
    if let Some(p) = publisher {
        p.abort();
    }
    let _ = stop_tx.send(true);
    let _ = control_task.await;
    if let Some(t) = metrics_task {
        let _ = t.await;
    }
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    tokio::select! {
        _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => info!("SIGTERM"),
        _ = async { match int.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => info!("SIGINT"),
    }
}
