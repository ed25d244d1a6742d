//! `tartanctl ipam`: pools and blocks with their use per node, a
//! consistency check of allocations against pods, and releasing an
//! address or a handle by hand.

use std::net::IpAddr;

use anyhow::{Result, bail};
use tartan_api::resources::{IpPool, IpamBlock, IpamHandle, WorkloadEndpoint};
use tartan_api::store::typed::TypedStore;
use tartan_cni::ipam::{Ipam, IpamConfig, report};

use crate::cli::{IpamCommand, OutputFormat, ReleaseArgs};
use crate::resource::Ctx;
use crate::table::Table;

pub async fn run(cx: &Ctx, cmd: IpamCommand) -> Result<()> {
    match cmd {
        IpamCommand::Show(o) => show(cx, o.output).await,
        IpamCommand::Check(o) => check(cx, o.output).await,
        IpamCommand::Release(a) => release(cx, a).await,
    }
}

async fn show(cx: &Ctx, output: Option<OutputFormat>) -> Result<()> {
    let (pools, _) = cx.store.list_typed::<IpPool>(None).await?;
    let (blocks, _) = cx.store.list_typed::<IpamBlock>(None).await?;
    let usage = report::usage(&pools, &blocks);
    if output == Some(OutputFormat::Json) {
        println!("{}", serde_json::to_string_pretty(&usage)?);
        return Ok(());
    }
    print!(
        "{}",
        render_show(&usage, output == Some(OutputFormat::Wide))
    );
    Ok(())
}

/// The text of `ipam show`: a pool table, then blocks per node.
pub fn render_show(usage: &[report::PoolUsage], wide: bool) -> String {
    let mut out = String::new();
    let mut t = Table::new([
        "POOL",
        "CIDR",
        "BLOCK SIZE",
        "IN USE",
        "CAPACITY",
        "BLOCKS",
        "DISABLED",
    ]);
    for p in usage.iter().filter(|p| !p.cidr.is_empty()) {
        t.row([
            p.name.clone(),
            p.cidr.clone(),
            format!("/{}", p.block_size),
            p.in_use.to_string(),
            p.capacity.to_string(),
            p.blocks.len().to_string(),
            p.disabled.to_string(),
        ]);
    }
    out.push_str(&t.render());
    let mut b = Table::new(["BLOCK", "POOL", "NODE", "IN USE", "SIZE", "LENT"]);
    let mut rows = 0;
    for p in usage {
        for u in &p.blocks {
            if !wide && u.in_use == 0 && !p.cidr.is_empty() {
                // Empty blocks are shown with -o wide only.
                continue;
            }
            rows += 1;
            b.row([
                u.cidr.clone(),
                p.name.clone(),
                u.node.clone().unwrap_or_else(|| "-".into()),
                u.in_use.to_string(),
                u.size.to_string(),
                u.lent.to_string(),
            ]);
        }
    }
    if rows > 0 {
        out.push('\n');
        out.push_str(&b.render());
    }
    // Per node: blocks held and addresses in them.
    let mut nodes: std::collections::BTreeMap<String, (usize, usize, usize)> = Default::default();
    for u in usage.iter().flat_map(|p| &p.blocks) {
        let e = nodes
            .entry(u.node.clone().unwrap_or_else(|| "-".into()))
            .or_default();
        e.0 += 1;
        e.1 += u.in_use;
        e.2 += u.size;
    }
    if !nodes.is_empty() {
        let mut n = Table::new(["NODE", "BLOCKS", "IN USE", "ADDRESSES"]);
        for (node, (blocks, in_use, size)) in nodes {
            n.row([
                node,
                blocks.to_string(),
                in_use.to_string(),
                size.to_string(),
            ]);
        }
        out.push('\n');
        out.push_str(&n.render());
    }
    out
}

async fn check(cx: &Ctx, output: Option<OutputFormat>) -> Result<()> {
    let (blocks, _) = cx.store.list_typed::<IpamBlock>(None).await?;
    let (handles, _) = cx.store.list_typed::<IpamHandle>(None).await?;
    let (weps, _) = cx.store.list_typed::<WorkloadEndpoint>(None).await?;
    let findings = report::check(&blocks, &handles, &weps);
    if output == Some(OutputFormat::Json) {
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else if findings.is_empty() {
        let allocated: usize = blocks
            .iter()
            .map(|b| tartan_cni::ipam::block::in_use(&b.spec))
            .sum();
        println!(
            "ok: {allocated} allocations in {} blocks, {} pod interfaces; no leaks, orphans or duplicates",
            blocks.len(),
            weps.len()
        );
    } else {
        for f in &findings {
            println!("{f}");
        }
    }
    if findings.is_empty() {
        Ok(())
    } else {
        bail!("{} problem(s) found", findings.len())
    }
}

async fn release(cx: &Ctx, a: ReleaseArgs) -> Result<()> {
    let ipam = Ipam::new(cx.store.clone(), IpamConfig::new("tartanctl"));
    match (a.ip, a.handle) {
        (Some(ip), None) => {
            let ip: IpAddr = ip
                .parse()
                .map_err(|_| anyhow::anyhow!("--ip {ip:?} is not an IP address"))?;
            match ipam.release_address(ip).await? {
                Some(h) => println!("released {ip} (held by {h})"),
                None => bail!("{ip} is not allocated"),
            }
        }
        (None, Some(h)) => {
            let released = ipam.release(&h).await?;
            if released.is_empty() {
                bail!("handle {h} holds no address");
            }
            for ip in released {
                println!("released {ip} (held by {h})");
            }
        }
        _ => bail!("give exactly one of --ip and --handle"),
    }
    Ok(())
}
