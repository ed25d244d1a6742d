//! `tartanctl bgp …`: read-only views of the node's BGP speaker.
mod peers;
mod routes;
mod status;

pub use peers::render_peers;
pub use routes::render_routes;
pub use status::render_status;

use crate::bgp_client::BgpClient;
use crate::cli::{BgpCommand, GlobalArgs, OutputFormat};
use crate::output;

pub async fn run(global: &GlobalArgs, cmd: BgpCommand) -> anyhow::Result<()> {
    let client = BgpClient::new(&global.bgp_socket);
    let (body, format) = match &cmd {
        BgpCommand::Peers(o) => (client.peers().await?, o.output),
        BgpCommand::Status(o) => (client.status().await?, o.output),
        BgpCommand::Routes(r) => {
            let body = client
                .routes(r.family.as_deref(), r.prefix.as_deref())
                .await?;
            (body, r.output.output)
        }
    };
    let wide = match format {
        Some(OutputFormat::Json) => return output::print(&output::pretty_json(&body)?),
        Some(OutputFormat::Wide) => true,
        None => false,
    };
    let text = match cmd {
        BgpCommand::Peers(_) => render_peers(&output::parse::<Vec<_>>(&body)?, wide),
        BgpCommand::Routes(_) => render_routes(&output::parse::<Vec<_>>(&body)?, wide),
        BgpCommand::Status(_) => render_status(&output::parse(&body)?),
    };
    if text.is_empty() {
        eprintln!("{}", empty_message(&cmd));
        return Ok(());
    }
    output::print(&text)
}

fn empty_message(cmd: &BgpCommand) -> &'static str {
    match cmd {
        BgpCommand::Peers(_) => "No BGP peers.",
        BgpCommand::Routes(_) => "No routes.",
        BgpCommand::Status(_) => "No status.",
    }
}
