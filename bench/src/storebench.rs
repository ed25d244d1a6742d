//! The datastore benchmark: on a local single-member etcd, how long a list
//! of many objects takes through Tartan's etcd backend (beside a bare range
//! read of the same keys, the floor), and how long a change takes from the
//! write to its delivery by a watch (beside the write's own round trip).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tartan_api::examples::{example, modified};
use tartan_api::kind::Kind;
use tartan_api::store::etcd::{EtcdStore, keys};
use tartan_api::store::watch::{WatchEvent, watch};
use tartan_api::store::{Datastore, WatchScope};

use crate::bgpload::Environment;
use tartan_lab::etcd::EtcdCluster;

#[derive(Clone, Debug)]
pub struct StoreBenchOptions {
    /// Objects listed.
    pub objects: usize,
    /// Times the list is repeated (median reported).
    pub list_runs: usize,
    /// Writes whose delivery is timed.
    pub writes: usize,
    /// Pause between timed writes, so each is measured alone.
    pub pace: Duration,
}

#[derive(Debug, Default)]
pub struct StoreBenchResult {
    pub object_bytes: usize,
    pub fill: Duration,
    pub list_tartan: Vec<Duration>,
    pub list_bare: Vec<Duration>,
    pub write_rtt: Vec<Duration>,
    pub delivery: Vec<Duration>,
    pub etcd_version: String,
}

/// Runs the benchmark against a fresh etcd member started here.
pub async fn run(opts: &StoreBenchOptions) -> Result<StoreBenchResult> {
    let etcd = EtcdCluster::single()?;
    let store = Arc::new(EtcdStore::connect(&etcd.client_endpoints()).await?);
    let mut r = StoreBenchResult {
        etcd_version: etcd_version(),
        ..Default::default()
    };

    // Fill with NetworkPolicies (a mid-sized object) from 8 writers.
    let started = Instant::now();
    let per = opts.objects.div_ceil(8);
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        let n = opts.objects;
        tasks.push(tokio::spawn(async move {
            for i in (w * per)..((w + 1) * per).min(n) {
                store
                    .create(example(Kind::NetworkPolicy, &format!("policy-{i:06}")))
                    .await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    r.fill = started.elapsed();
    r.object_bytes = serde_json::to_vec(&example(Kind::NetworkPolicy, "policy-000000"))?.len();

    let prefix = keys::prefix(Kind::NetworkPolicy, None);
    let range_end = keys::range_end(&prefix);
    let mut kv = store.client().kv_client();
    for _ in 0..opts.list_runs {
        let t = Instant::now();
        let l = store.list(Kind::NetworkPolicy, None).await?;
        r.list_tartan.push(t.elapsed());
        anyhow::ensure!(
            l.items.len() == opts.objects,
            "listed {} objects",
            l.items.len()
        );

        let t = Instant::now();
        let resp = kv
            .get(
                prefix.clone(),
                Some(etcd_client::GetOptions::new().with_range(range_end.clone())),
            )
            .await?;
        r.list_bare.push(t.elapsed());
        anyhow::ensure!(resp.kvs().len() == opts.objects);
    }

    // Watch latency: one watcher, paced single updates of one object.
    let dyn_store: Arc<dyn Datastore> = store.clone();
    let mut w = watch(
        dyn_store,
        WatchScope {
            kind: Kind::IpPool,
            namespace: None,
            metadata_only: false,
        },
    );
    let mut obj = store.create(example(Kind::IpPool, "watched")).await?;
    // Drain the initial list.
    loop {
        if let WatchEvent::Synced { .. } = next(&mut w).await? {
            break;
        }
    }
    for i in 0..opts.writes {
        tokio::time::sleep(opts.pace).await;
        let t = Instant::now();
        obj = store.update(modified(&obj, i as u32)).await?;
        r.write_rtt.push(t.elapsed());
        let want = obj.metadata.resource_version.clone();
        loop {
            match next(&mut w).await? {
                WatchEvent::Modified(o) | WatchEvent::Added(o)
                    if o.metadata.resource_version == want =>
                {
                    r.delivery.push(t.elapsed());
                    break;
                }
                _ => {}
            }
        }
    }
    Ok(r)
}

async fn next(w: &mut tartan_api::store::watch::Watch) -> Result<WatchEvent> {
    tokio::time::timeout(Duration::from_secs(30), w.next())
        .await
        .context("the watch delivered nothing for 30 s")
}

fn etcd_version() -> String {
    std::process::Command::new(tartan_lab::etcd::etcd_binary())
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_else(|| "etcd (version unknown)".into())
}

/// The value at quantile `q` (0..=1) of `v`, nearest rank.
pub fn quantile(v: &[Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let mut s = v.to_vec();
    s.sort();
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

pub fn render_markdown(env: &Environment, o: &StoreBenchOptions, r: &StoreBenchResult) -> String {
    let mut md = String::new();
    md.push_str("# Datastore: list and watch on etcd\n\n");
    md.push_str(&env.render());
    md.push('\n');
    md.push_str(&format!(
        "Store: {}, one member on loopback, data on the root disk. {} NetworkPolicy objects of {} bytes of JSON each, written by 8 concurrent writers in {:.2} s.\n\n",
        r.etcd_version,
        o.objects,
        r.object_bytes,
        r.fill.as_secs_f64()
    ));
    md.push_str(&format!(
        "## List of {} objects ({} runs)\n\n| read | median | min | max | ÷ bare |\n|---|---|---|---|---|\n",
        o.objects, o.list_runs
    ));
    let bare = quantile(&r.list_bare, 0.5);
    for (name, v) in [
        (
            "Tartan `Datastore::list` (range read + JSON decode of every object)",
            &r.list_tartan,
        ),
        (
            "bare etcd range read of the same keys (etcd-client, no decode)",
            &r.list_bare,
        ),
    ] {
        let med = quantile(v, 0.5);
        md.push_str(&format!(
            "| {name} | {} | {} | {} | {:.2} |\n",
            ms(med),
            ms(quantile(v, 0.0)),
            ms(quantile(v, 1.0)),
            med.as_secs_f64() / bare.as_secs_f64().max(1e-9)
        ));
    }
    md.push_str(&format!(
        "\n## Watch delivery ({} updates of one object, one every {} ms)\n\nFrom just before `update()` is called to the consumer of `watch()` holding the event; beside it the update's own round trip (the write is acknowledged after etcd has fsynced it).\n\n| | p50 | p99 | max |\n|---|---|---|---|\n",
        o.writes,
        o.pace.as_millis()
    ));
    for (name, v) in [
        ("write → delivered to the watch consumer", &r.delivery),
        ("write round trip (update acknowledged)", &r.write_rtt),
    ] {
        md.push_str(&format!(
            "| {name} | {} | {} | {} |\n",
            ms(quantile(v, 0.5)),
            ms(quantile(v, 0.99)),
            ms(quantile(v, 1.0))
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Duration::from_millis(50));
        assert_eq!(quantile(&v, 0.99), Duration::from_millis(99));
        assert_eq!(quantile(&v, 1.0), Duration::from_millis(100));
        assert_eq!(quantile(&v, 0.0), Duration::from_millis(1));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }
}
