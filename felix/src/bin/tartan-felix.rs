//! `tartan-felix`: Tartan's node agent.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use tartan_api::logging::LogFormat;
use tartan_felix::cnitoken::CniToken;
use tartan_felix::daemon::{Config, run};

/// jemalloc rather than glibc's malloc: it gives freed memory back to the
/// system after a few seconds, where glibc's per-thread arenas kept what
/// the first listing of a large cluster used (bgpd at 5,000 Nodes and
/// 10,000 Services: 116 MiB resident with glibc, 85 MiB with jemalloc;
/// bench/scale.md).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// Keep the CNI plugins' kubeconfig at this path fresh: a token of
    /// their service account (TokenRequest), renewed at 80 % of its
    /// lifetime, written atomically with mode 0600 (docs/install.md).
    /// Needs the kubernetes datastore.
    #[arg(long, env = "TARTAN_FELIX_CNI_KUBECONFIG")]
    cni_kubeconfig: Option<PathBuf>,
    /// The CNI plugins' conflist, which the init container leaves beside
    /// it as `<path>.pending`: felix moves it into place once the
    /// kubeconfig of --cni-kubeconfig has a token (the runtime calls the
    /// node's network ready when a conflist appears).
    #[arg(long, env = "TARTAN_FELIX_CNI_CONFLIST")]
    cni_conflist: Option<PathBuf>,
    /// The CNI plugins' service account.
    #[arg(long, default_value = "tartan-cni")]
    cni_service_account: String,
    /// Its namespace (felix's own, from the downward API).
    #[arg(long, env = "POD_NAMESPACE", default_value = "tartan-system")]
    cni_namespace: String,
    /// The lifetime to ask for the plugins' tokens (at least 600; the API
    /// server may give less).
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(i64).range(600..))]
    cni_token_seconds: i64,
    /// felix's Pod, from the downward API: the plugins' tokens are bound
    /// to it, so they die with it.
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,
    #[arg(long, env = "POD_UID")]
    pod_uid: Option<String>,
    /// Ports always let into this node's host endpoints, ahead of policy:
    /// `none`, or a comma-separated list of PROTOCOL:PORT (tcp, udp,
    /// sctp) or PORT (TCP). Calico's default.
    #[arg(long, env = "TARTAN_FELIX_FAILSAFE_INBOUND_HOST_PORTS",
          default_value = tartan_felix::calc::hosts::FAILSAFE_IN_DEFAULT,
          value_parser = tartan_felix::calc::hosts::parse_failsafe)]
    failsafe_inbound_host_ports: FailsafeList,
    /// Destination ports always let out of this node's host endpoints,
    /// ahead of policy (as --failsafe-inbound-host-ports).
    #[arg(long, env = "TARTAN_FELIX_FAILSAFE_OUTBOUND_HOST_PORTS",
          default_value = tartan_felix::calc::hosts::FAILSAFE_OUT_DEFAULT,
          value_parser = tartan_felix::calc::hosts::parse_failsafe)]
    failsafe_outbound_host_ports: FailsafeList,
    /// Log format (the filter is TARTAN_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "TARTAN_LOG_FORMAT")]
    log_format: LogFormat,
}

/// A parsed failsafe list (clap takes a `Vec` field as repeated values).
type FailsafeList = std::vec::Vec<tartan_policy::compile::host::FailsafePort>;

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
    if cli.cni_conflist.is_some() && cli.cni_kubeconfig.is_none() {
        anyhow::bail!(
            "--cni-conflist needs --cni-kubeconfig (felix installs it once the plugins have a token)"
        );
    }
    let cni_token = match cli.cni_kubeconfig {
        None => None,
        Some(_) if cli.datastore.trim() != "kubernetes" => {
            anyhow::bail!("--cni-kubeconfig needs --datastore kubernetes")
        }
        Some(kubeconfig) => Some(CniToken {
            kubeconfig,
            namespace: cli.cni_namespace,
            service_account: cli.cni_service_account,
            seconds: cli.cni_token_seconds,
            pod: cli
                .pod_name
                .filter(|n| !n.is_empty())
                .map(|n| (n, cli.pod_uid.filter(|u| !u.is_empty()))),
            conflist: cli.cni_conflist,
        }),
    };
    // One thread: felix's work is one loop over its watches, and every
    // datastore event handed between two workers cost a thread wakeup
    // (most of an idle felix's CPU under 500 Node heartbeats a second).
    // Its servers answer from a thread of their own (`serving`).
    let rt = tokio::runtime::Builder::new_current_thread()
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
                cni_token,
                failsafe_in: cli.failsafe_inbound_host_ports,
                failsafe_out: cli.failsafe_outbound_host_ports,
            },
            store,
            shutdown,
        )
        .await
    })
}
