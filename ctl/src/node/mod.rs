//! `tartanctl node …`: every node's BGP state from the datastore
//! (`status`), from any machine; graceful shutdown of this node's BGP
//! speaker (`drain`).
mod drain;
mod status;

pub use status::{NodeView, render_status, views};

use crate::cli::{GetFormat, GlobalArgs, NodeCommand, NodeStatusArgs};
use crate::output;
use crate::resource::Ctx;
use crate::resource::get::to_yaml;
use anyhow::Context;
use tartan_api::resources::BgpNodeStatus;
use tartan_api::store::typed::TypedStore;

pub async fn run(global: &GlobalArgs, cmd: NodeCommand) -> anyhow::Result<()> {
    match cmd {
        NodeCommand::Status(a) => status(&Ctx::open(global).await?, a).await,
        NodeCommand::Drain(a) => drain::run(global, a).await,
    }
}

async fn status(ctx: &Ctx, a: NodeStatusArgs) -> anyhow::Result<()> {
    let reports: Vec<BgpNodeStatus> = match &a.node {
        Some(n) => vec![
            ctx.store
                .get_typed::<BgpNodeStatus>(None, n)
                .await
                .with_context(|| format!("no status report of node {n:?} (is its tartan-bgpd running with the datastore?)"))?,
        ],
        None => ctx.store.list_typed::<BgpNodeStatus>(None).await?.0,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let views = views(&reports, now);
    match a.output {
        Some(GetFormat::Json) => {
            let mut text = serde_json::to_string_pretty(&views)?;
            text.push('\n');
            output::print(&text)
        }
        Some(GetFormat::Yaml) => output::print(&to_yaml(&serde_json::to_value(&views)?)?),
        f => {
            let text = render_status(&views, f == Some(GetFormat::Wide));
            if text.is_empty() {
                eprintln!("No node status reports.");
                return Ok(());
            }
            output::print(&text)
        }
    }
}
