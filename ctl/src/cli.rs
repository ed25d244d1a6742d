//! The command line. Later subcommands (get/apply/ipam) hang off [`Command`].
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "tartanctl", version, about = "Manage a Tartan network")]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Control socket of tartan-bgpd.
    #[arg(
        long,
        global = true,
        env = "TARTAN_BGP_SOCKET",
        default_value = tartan_api::bgp::DEFAULT_SOCKET,
        value_name = "PATH"
    )]
    pub bgp_socket: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect the node's BGP speaker.
    #[command(subcommand)]
    Bgp(BgpCommand),
}

#[derive(Debug, Subcommand)]
pub enum BgpCommand {
    /// List BGP peers and their sessions.
    Peers(OutputArgs),
    /// List the routes in the speaker's RIB.
    ///
    /// Flags: `*>` best path, `*=` multipath (installed beside the best),
    /// `*` other valid path; a leading `s` marks a stale path (graceful
    /// restart).
    Routes(RoutesArgs),
    /// Show the speaker's overall status.
    Status(OutputArgs),
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output format: a table (default), a wider table, or the API's JSON.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<OutputFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Json,
    Wide,
}

#[derive(Debug, Args)]
pub struct RoutesArgs {
    /// Only this address family.
    #[arg(long, value_parser = ["ipv4-unicast", "ipv6-unicast"])]
    pub family: Option<String>,
    /// Only this prefix (e.g. 10.0.0.0/24; a bare address means its host route).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}
