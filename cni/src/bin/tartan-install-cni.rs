//! `tartan-install-cni`: renders this node's CNI conflist from the
//! ConfigMap `tartan-config` (mounted as files) and writes it atomically;
//! with `mtu` auto, the pods' MTU is the underlay's (the interface of the
//! default route) less the default pool's encapsulation overhead. Run by
//! the DaemonSet's init container (`install-cni.sh`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Parser;
use tartan_api::tartan_config::TartanConfig;
use tartan_cni::install::conflist::Conflist;
use tartan_cni::install::{read_config_dir, underlay, write_atomic};

#[derive(Parser)]
#[command(name = "tartan-install-cni", version, about)]
struct Cli {
    /// The ConfigMap tartan-config's volume (one file per key). Without
    /// it every key takes its default.
    #[arg(long)]
    config_dir: Option<PathBuf>,
    /// Where the conflist goes, e.g. /host/etc/cni/net.d/10-tartan.conflist.
    #[arg(long)]
    out: PathBuf,
    /// This node's name.
    #[arg(long, env = "NODENAME")]
    nodename: String,
    #[arg(long, default_value = "kubernetes")]
    datastore: String,
    /// The kubeconfig the plugin reads, as the host sees it.
    #[arg(long)]
    kubeconfig: Option<String>,
    /// Measure the MTU on this interface instead of the default route's.
    #[arg(long, env = "TARTAN_UNDERLAY_INTERFACE")]
    underlay_interface: Option<String>,
    #[arg(long, default_value = "/proc")]
    proc: PathBuf,
    #[arg(long, default_value = "/sys")]
    sys: PathBuf,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if cli.nodename.is_empty() {
        bail!("--nodename (NODENAME) is empty");
    }
    let data = match &cli.config_dir {
        Some(d) => read_config_dir(d)
            .with_context(|| format!("read the ConfigMap's files in {}", d.display()))?,
        None => Default::default(),
    };
    let config = TartanConfig::parse(&data)?;
    let interface = cli.underlay_interface.as_deref().filter(|i| !i.is_empty());
    let found = underlay::detect(&cli.proc, &cli.sys, interface).map_err(anyhow::Error::msg)?;
    let mtu = config
        .pod_mtu(found.as_ref().map(|(_, u)| *u))
        .map_err(anyhow::Error::msg)?;
    let conflist = Conflist {
        nodename: cli.nodename.clone(),
        datastore: cli.datastore.clone(),
        kubeconfig: cli.kubeconfig.clone(),
        mtu,
    };
    write_atomic(&cli.out, &conflist.render(), 0o644)
        .with_context(|| format!("write {}", cli.out.display()))?;
    let under = match &found {
        Some((i, u)) => format!("{i} (MTU {})", u.mtu),
        None => "none found".into(),
    };
    println!(
        "tartan-install-cni: {} for node {}: pod MTU {}, underlay {under}, encapsulation {}",
        cli.out.display(),
        cli.nodename,
        mtu.map_or("the kernel's default".to_string(), |m| m.to_string()),
        config.encapsulation
    );
    Ok(())
}
