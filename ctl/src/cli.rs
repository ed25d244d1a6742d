//! The command line: resource commands (get/apply/create/replace/delete/
//! label) against the datastore, `bgp …` against the node's speaker, and
//! `completion`/`version`.
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

    /// The datastore: `etcd://HOST:PORT[,HOST:PORT...]`, `kubernetes` (the
    /// cluster of the current kubeconfig) or `memory` (an empty scratch
    /// store, for checking files). There is no default: resource commands
    /// refuse to guess which cluster you mean.
    #[arg(long, global = true, env = "TARTAN_DATASTORE", value_name = "SPEC")]
    pub datastore: Option<String>,

    /// Namespace for namespaced kinds (default: `default`).
    #[arg(short = 'n', long, global = true, value_name = "NS")]
    pub namespace: Option<String>,

    /// Give up on an unreachable datastore after this many seconds.
    #[arg(
        long,
        global = true,
        env = "TARTAN_TIMEOUT",
        default_value_t = 10,
        value_name = "SECONDS"
    )]
    pub timeout: u64,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show resources: a table by default, or YAML/JSON.
    ///
    /// KIND is a kind (IPPool), its plural (ippools) or a short name
    /// (pool); `plural.group` picks between kinds of the same name
    /// (networkpolicies.networking.k8s.io).
    Get(GetArgs),
    /// Create or update the resources in files so they match the files.
    ///
    /// Every document is checked first; if any is bad, nothing is written.
    /// Labels and annotations are replaced only when the file gives them.
    Apply(FileArgs),
    /// Create the resources in files; fails for any that exists.
    Create(FileArgs),
    /// Replace existing resources with the files' versions; fails for any
    /// that is absent. A resourceVersion in the file must match the stored
    /// one (compare-and-swap).
    Replace(FileArgs),
    /// Delete resources by kind and name, or those named in files.
    Delete(DeleteArgs),
    /// Add, change or remove labels: `key=value` sets, `key-` removes.
    Label(LabelArgs),
    /// Print a shell completion script (e.g. `source <(tartanctl completion bash)`).
    Completion(CompletionArgs),
    /// Print tartanctl's version (and what the datastore says, if given).
    Version,
    /// Inspect the node's BGP speaker.
    #[command(subcommand)]
    Bgp(BgpCommand),
    /// Nodes' BGP state from the datastore, from any machine.
    #[command(subcommand)]
    Node(NodeCommand),
    /// Address management: pools and blocks, a consistency check, release.
    #[command(subcommand)]
    Ipam(IpamCommand),
    /// List every object in the datastore that does not read as its kind
    /// (written straight into etcd, or by an older version), with the field
    /// at fault. Exits non-zero when there is any.
    Check(OutputArgs),
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Every node's BGP sessions (or one node's), as each node's bgpd last
    /// reported them in its BGPNodeStatus. A node whose report is older
    /// than its refresh period shows its sessions as `Down (stale)`.
    Status(NodeStatusArgs),
    /// Graceful shutdown (RFC 8326) of this node's BGP speaker, over its
    /// control socket: every route is re-advertised at once with the
    /// GRACEFUL_SHUTDOWN community (and LOCAL_PREF 0 to iBGP peers) so that
    /// peers move traffic away, then after the wait every session is
    /// closed (Cease, Administrative Shutdown) and stays down until
    /// tartan-bgpd restarts.
    Drain(DrainArgs),
}

#[derive(Debug, Args)]
pub struct DrainArgs {
    /// Time between the re-advertisement and the close (`30s`, `1m`, or
    /// seconds).
    #[arg(long, default_value = "30s", value_parser = crate::human::parse_wait)]
    pub wait: std::time::Duration,
    /// Return once the drain has started instead of when the sessions
    /// are closed.
    #[arg(long)]
    pub no_wait: bool,
}

#[derive(Debug, Args)]
pub struct NodeStatusArgs {
    /// Only this node.
    pub node: Option<String>,
    /// Output format: a table (default), a wider table, YAML or JSON.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<GetFormat>,
}

#[derive(Debug, Subcommand)]
pub enum IpamCommand {
    /// Pools with their use, and blocks with the node each belongs to
    /// (empty blocks with -o wide).
    Show(OutputArgs),
    /// Cross-check allocations against pod interfaces: addresses held with
    /// no pod (leaks), pods whose address is not held for them, addresses
    /// held twice. Exits non-zero when it finds any.
    Check(OutputArgs),
    /// Release an address, or every address of a handle, by hand.
    Release(ReleaseArgs),
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The address to release, whoever holds it.
    #[arg(long, value_name = "IP", conflicts_with = "handle")]
    pub ip: Option<String>,
    /// The handle (`<network>.<containerID>`) whose addresses to release.
    #[arg(long, value_name = "HANDLE")]
    pub handle: Option<String>,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The kind of resource.
    pub kind: String,
    /// Only these names (default: all).
    pub names: Vec<String>,
    /// List across all namespaces.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only objects whose labels match, e.g. `env=prod,tier!=db,!legacy`.
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Output format: a table (default), a wider table, YAML or JSON.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<GetFormat>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GetFormat {
    Wide,
    Yaml,
    Json,
}

#[derive(Debug, Args)]
pub struct FileArgs {
    /// A file or directory of YAML or JSON documents (`-` reads stdin).
    /// May be given several times.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Go on after a failed write; report every failure at the end.
    #[arg(long)]
    pub continue_on_error: bool,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The kind, then one or more names (or use -f).
    #[arg(value_name = "KIND NAME")]
    pub words: Vec<String>,
    /// Delete the objects named in these files.
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        conflicts_with = "words"
    )]
    pub files: Vec<PathBuf>,
    /// Absent objects are not an error.
    #[arg(long)]
    pub ignore_not_found: bool,
    /// Go on after a failed delete; report every failure at the end.
    #[arg(long)]
    pub continue_on_error: bool,
}

#[derive(Debug, Args)]
pub struct LabelArgs {
    /// The kind of resource.
    pub kind: String,
    /// Names, then label edits: `key=value` sets, `key-` removes.
    #[arg(required = true, value_name = "NAME|EDIT")]
    pub words: Vec<String>,
    /// Allow changing the value of a label that is already set.
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Debug, Args)]
pub struct CompletionArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
