//! The timed Service table writes at each size: full sync, one endpoint
//! replaced, added and removed, and the drift check.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tartan_felix::dataplane::nft::{self, Written};
use tartan_felix::dataplane::services::ServiceProxy;
use tartan_felix::services::SliceInfo;
use tartan_felix::services::render::{self, TABLE};

use super::figures::*;
use super::objects::*;
use super::options::*;
use crate::benchkit::{children_peak_rss_kib, in_ns};
use tartan_lab::netns::Netns;

pub(super) fn delete_table() {
    let _ = Command::new("nft")
        .args(["delete", "table", "ip", TABLE])
        .stderr(std::process::Stdio::null())
        .status();
}

/// One change through the proxy's own calls: what `sync(false)` does
/// once the table is written (`update`, `take_patch`, `nft::run`), each
/// timed.
pub(super) fn change(proxy: &mut ServiceProxy, slice_key: &str, slice: SliceInfo) -> Result<Step> {
    let t = Instant::now();
    proxy.index.set_slice(slice_key, Some(slice));
    proxy.index.update();
    let index = t.elapsed();
    let t = Instant::now();
    let batch = proxy
        .index
        .take_patch()
        .context("the change made no patch")?;
    let bytes = batch.to_string().len();
    let render = t.elapsed();
    let t = Instant::now();
    proxy.writer.write(&batch, "ip", TABLE)?;
    Ok(Step {
        index,
        render,
        nft: t.elapsed(),
        bytes,
    })
}

/// The first whole-table write of a new proxy. `fresh`: the kernel has
/// no table, so the pure part is the skeleton JSON and the encoded
/// elements; otherwise the in-place JSON and the same elements.
pub(super) fn full_sync(proxy: &mut ServiceProxy, items: Vec<Item>, fresh: bool) -> Result<Step> {
    let t = Instant::now();
    feed(proxy, items);
    proxy.index.update();
    let index = t.elapsed();
    let w = proxy.sync(false)?;
    let Written::Full(write) = w else {
        bail!("the first write was {w:?}, not the whole table");
    };
    // What the write rendered, timed apart (pure).
    let t = Instant::now();
    let table = proxy.index.table();
    let first = if fresh {
        render::skeleton(table)
    } else {
        render::in_place(table, &|_| true)
    };
    let bytes = first.to_string().len();
    let mut s = tartan_nft::backend::netlink::stream::Stream::new(1);
    tartan_felix::services::elements::write(table, &mut s);
    std::hint::black_box(s.finish());
    let render = t.elapsed();
    Ok(Step {
        index,
        render,
        nft: write.saturating_sub(render),
        bytes,
    })
}

pub(super) fn size_runs(
    node: &Netns,
    n: usize,
    o: &ServiceBenchOptions,
    log: &mut dyn FnMut(&str),
) -> Result<SizeFigures> {
    let per = o.endpoints;
    let mut fig = SizeFigures {
        services: n,
        ..Default::default()
    };
    let mid = n / 2;
    let base = synthetic(n, per)
        .into_iter()
        .nth(mid)
        .context("no Service")?
        .slice;
    let mut replaced = base.clone();
    replaced.endpoints[per / 2].addr = Ipv4Addr::new(10, 200, 0, 2);
    let mut added = base.clone();
    let mut extra = base.endpoints[0].clone();
    extra.addr = Ipv4Addr::new(10, 200, 0, 3);
    added.endpoints.push(extra);
    let key = slice_key(mid);
    for r in 0..o.runs {
        let items = synthetic(n, per);
        let (steps, check, pure, floor, terse) = in_ns(node, || {
            delete_table();
            let mut p = ServiceProxy::new(NODE);
            let full = full_sync(&mut p, items, true)?;
            let mut out = vec![full];
            for s in [&replaced, &base, &added, &base] {
                out.push(change(&mut p, &key, s.clone())?);
            }
            let mut again = ServiceProxy::new(NODE);
            out.push(full_sync(&mut again, synthetic(n, per), false)?);
            let t = Instant::now();
            let same = p.index.recomputed() == *p.index.table();
            let pure = t.elapsed();
            if !same {
                bail!("the kept table differs from one computed afresh");
            }
            let t = Instant::now();
            let w = p.sync(true)?;
            let check = t.elapsed();
            if w != Written::Nothing {
                bail!("the check rewrote the table: {w:?}");
            }
            let mut noop = tartan_nft::Transaction::new();
            noop.add(tartan_nft::model::schema::NfListObject::Table(
                tartan_nft::model::schema::Table {
                    family: tartan_nft::model::types::NfFamily::IP,
                    name: TABLE.into(),
                    handle: None,
                },
            ));
            let mut floor = Vec::new();
            for _ in 0..3 {
                let t = Instant::now();
                nft::run(&noop, "ip", TABLE)?;
                floor.push(t.elapsed());
            }
            let t = Instant::now();
            let listed = Command::new("nft")
                .args(["-t", "-j", "list", "ruleset", "ip"])
                .output()?;
            let terse = t.elapsed();
            if !listed.status.success() {
                bail!("nft -t -j list ruleset ip failed");
            }
            if r == 0 {
                let t = p.index.table();
                fig.elements = t.frontends.len() + 2 * t.fe_slots.len() + t.hairpin.len();
            }
            Ok((out, check, pure, floor, terse))
        })?;
        log(&format!(
            "{n} Services, run {r}: full {:?} (index {:?}, nft {:?}), rebuild {:?}, replace {:?}, add {:?}, remove {:?}, check {check:?}",
            steps[0].total(),
            steps[0].index,
            steps[0].nft,
            steps[5].total(),
            steps[1].total(),
            steps[3].total(),
            steps[4].total(),
        ));
        fig.full.push(steps[0]);
        fig.rebuild.push(steps[5]);
        fig.replace.extend_from_slice(&steps[1..3]);
        fig.add.push(steps[3]);
        fig.remove.push(steps[4]);
        fig.check.push(check);
        fig.check_pure.push(pure);
        fig.floor.extend(floor);
        fig.terse_ruleset.push(terse);
    }
    fig.nft_peak_rss_kib = children_peak_rss_kib();
    in_ns(node, || {
        delete_table();
        Ok(())
    })?;
    Ok(fig)
}

/// A proxy holding the measured Service among `n` (`n - 1` synthetic).
pub(super) fn table_of(n: usize, per: usize) -> ServiceProxy {
    let mut p = ServiceProxy::new(NODE);
    let mut items = synthetic(n.saturating_sub(1), per);
    items.push(measured(per));
    feed(&mut p, items);
    let mut local: BTreeSet<Ipv4Addr> = (0..per).map(server_addr).collect();
    local.insert(CLIENT_ADDR);
    p.index.set_local_pods(local);
    p
}
