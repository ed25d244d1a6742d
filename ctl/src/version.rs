//! `tartanctl version`: always prints its own version and succeeds; with a
//! datastore given, also says whether it answers and what it holds (a
//! warning, never a failure, when it does not).
use std::time::Duration;

use tartan_api::Kind;

use crate::cli::GlobalArgs;
use crate::output;

/// How long `version` waits for the datastore: it must stay quick.
const LIMIT: Duration = Duration::from_secs(3);

pub async fn run(global: &GlobalArgs) -> anyhow::Result<()> {
    output::print(&format!("tartanctl {}\n", env!("CARGO_PKG_VERSION")))?;
    let Some(spec) = global.datastore.as_deref().filter(|s| !s.trim().is_empty()) else {
        return Ok(());
    };
    let limit = LIMIT.min(Duration::from_secs(global.timeout.max(1)));
    match tokio::time::timeout(limit, cluster_summary(spec, limit)).await {
        Ok(Ok(summary)) => output::print(&format!("datastore: {summary}\n"))?,
        Ok(Err(e)) => eprintln!("warning: datastore {spec}: {e}"),
        Err(_) => eprintln!("warning: datastore {spec} did not answer within {limit:?}"),
    }
    Ok(())
}

async fn cluster_summary(spec: &str, limit: Duration) -> anyhow::Result<String> {
    let store = tartan_api::store::connect(spec, Some(limit)).await?;
    let nodes = store.list(Kind::Node, None).await?.items.len();
    let pools = store.list(Kind::IpPool, None).await?.items.len();
    Ok(format!(
        "{} ({nodes} node{}, {pools} IP pool{})",
        store.describe(),
        if nodes == 1 { "" } else { "s" },
        if pools == 1 { "" } else { "s" }
    ))
}
