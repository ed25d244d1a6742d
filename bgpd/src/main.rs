//! `tartan-bgpd`: Tartan's BGP speaker, run from a TOML file.
use anyhow::Context;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tartan_bgpd::config;
use tartan_bgpd::control::{Metrics, serve_metrics, serve_unix};
use tartan_bgpd::daemon::{Daemon, DaemonOptions};
use tracing::{error, info};

#[derive(Parser, Debug)]
#[command(name = "tartan-bgpd", version, about = "Tartan's BGP speaker")]
struct Args {
    /// The TOML configuration file (re-read on SIGHUP).
    #[arg(long, short = 'c', env = "TARTAN_BGPD_CONFIG")]
    config: PathBuf,
    /// The control API's Unix socket.
    #[arg(long, default_value = tartan_api::bgp::DEFAULT_SOCKET, env = "TARTAN_BGP_SOCKET")]
    socket: PathBuf,
    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9179).
    #[arg(long)]
    metrics: Option<SocketAddr>,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Check the configuration file and exit.
    #[arg(long)]
    check: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    init_logs(&args.log_format);
    let text = match std::fs::read_to_string(&args.config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tartan-bgpd: cannot read {}: {e}", args.config.display());
            return std::process::ExitCode::from(2);
        }
    };
    let cfg = match config::parse(&args.config.display().to_string(), &text) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tartan-bgpd: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.check {
        println!(
            "{}: ok ({} neighbors, {} announcements)",
            args.config.display(),
            cfg.neighbors.len(),
            cfg.announce.len()
        );
        return std::process::ExitCode::SUCCESS;
    }
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
    match rt.block_on(run(args, cfg)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            error!("{e:#}");
            eprintln!("tartan-bgpd: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args, cfg: config::Config) -> anyhow::Result<()> {
    info!(router_id = %cfg.router_id, asn = cfg.asn, neighbors = cfg.neighbors.len(), "starting tartan-bgpd");
    let metrics = Arc::new(Metrics::new());
    let (daemon, control) = Daemon::start(
        cfg,
        DaemonOptions {
            config_path: args.config.clone(),
            metrics: metrics.clone(),
        },
    )
    .await
    .context("cannot start")?;
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
    daemon.run(shutdown_signal()).await;
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

fn init_logs(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        b.json().init();
    } else {
        b.init();
    }
}
