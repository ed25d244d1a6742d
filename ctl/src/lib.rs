//! tartanctl: Tartan's command-line tool. `main.rs` only parses and runs.
pub mod bgp;
pub mod bgp_client;
pub mod cli;
pub mod human;
pub mod output;
pub mod table;

pub use cli::Cli;

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        cli::Command::Bgp(cmd) => bgp::run(&cli.global, cmd).await,
    }
}
