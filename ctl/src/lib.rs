//! tartanctl: Tartan's command-line tool. `main.rs` only parses and runs.
//!
//! - [`resource`]: get/apply/create/replace/delete/label against the
//!   datastore.
//! - [`bgp`]: read-only views of the node's BGP speaker.
//! - [`ipam`]: address use, consistency check and release.
//! - [`node`]: every node's BGP status from the datastore.
//! - [`check`]: every unreadable object in the datastore.
//! - [`completion`], [`version`].
pub mod bgp;
pub mod bgp_client;
pub mod check;
pub mod cli;
pub mod completion;
pub mod human;
pub mod ipam;
pub mod node;
pub mod output;
pub mod resource;
pub mod table;
pub mod version;

pub use cli::Cli;

use cli::Command;
use resource::Ctx;
use resource::write::Mode;

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let global = &cli.global;
    match cli.command {
        Command::Bgp(cmd) => bgp::run(global, cmd).await,
        Command::Node(cmd) => node::run(global, cmd).await,
        Command::Completion(a) => completion::run(a.shell),
        Command::Version => version::run(global).await,
        Command::Get(a) => resource::get::run(&Ctx::open(global).await?, a).await,
        Command::Apply(a) => resource::write::run(&Ctx::open(global).await?, Mode::Apply, a).await,
        Command::Create(a) => {
            resource::write::run(&Ctx::open(global).await?, Mode::Create, a).await
        }
        Command::Replace(a) => {
            resource::write::run(&Ctx::open(global).await?, Mode::Replace, a).await
        }
        Command::Delete(a) => resource::delete::run(&Ctx::open(global).await?, a).await,
        Command::Label(a) => resource::label::run(&Ctx::open(global).await?, a).await,
        Command::Ipam(c) => ipam::run(&Ctx::open(global).await?, c).await,
        Command::Check(o) => check::run(&Ctx::open(global).await?, o.output).await,
    }
}
