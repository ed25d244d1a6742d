//! `tartan-lab`'s command line: the lab's name, and the subcommands with
//! their arguments (up, down, restart, pod, exec, status, ctl, bgp-demo).

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "tartan-lab",
    version,
    about = "Tartan on one machine, in network namespaces (run as root)"
)]
pub(super) struct Cli {
    /// Which lab (several can live side by side).
    #[arg(long, global = true, default_value = "tartan")]
    pub(super) name: String,
    #[command(subcommand)]
    pub(super) cmd: Cmd,
}

#[derive(Subcommand)]
pub(super) enum Cmd {
    /// Start a cluster: etcd (or the API server stand-in), N node
    /// namespaces on an underlay, a default IPPool, tartan-bgpd and
    /// tartan-felix in each node.
    Up(UpArgs),
    /// Remove the cluster: daemons, namespaces, bridge, state (also after
    /// a crash).
    Down,
    /// Pods: add (Namespace and Pod objects, then the CNI plugin as a
    /// kubelet calls it), del, ip.
    #[command(subcommand)]
    Pod(PodCmd),
    /// Run a command in a pod's network namespace; its exit code.
    Exec {
        /// NS/NAME
        pod: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<String>,
    },
    /// Restart a node's tartan-bgpd or tartan-felix (SIGTERM, or SIGKILL
    /// with --kill).
    Restart {
        node: String,
        /// bgpd or felix
        daemon: String,
        #[arg(long)]
        kill: bool,
    },
    /// Nodes, daemons, BGP sessions and pods.
    Status {
        /// `json` for machine reading.
        #[arg(short = 'o', long = "output", value_parser = ["json"])]
        output: Option<String>,
    },
    /// Run tartanctl against the lab's datastore. Services applied get a
    /// ClusterIP and NodePorts when they give none, and EndpointSlices
    /// from the lab's pods (LoadBalancer IPs come from tartan-controllers).
    Ctl {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// eBGP between tartan-bgpd and BIRD in two namespaces joined by a
    /// veth: session, kernel routes, a ping; then tear down.
    BgpDemo(DemoArgs),
}

#[derive(clap::Args)]
pub(super) struct UpArgs {
    /// Number of nodes (node-1 … node-N).
    #[arg(long, default_value_t = 3)]
    pub(super) nodes: usize,
    /// mesh; rr (node-1 and node-2 reflect, mesh off); tor (mesh off,
    /// an AS per node, eBGP with a BIRD top-of-rack router); two-subnets (the
    /// first half of the nodes on one subnet, the rest behind a router
    /// that knows no pod routes).
    #[arg(long, default_value = "mesh")]
    pub(super) topology: String,
    /// The default pool's vxlanMode: Never, Always or CrossSubnet
    /// (default: CrossSubnet for two-subnets, else Never).
    #[arg(long)]
    pub(super) vxlan_mode: Option<String>,
    /// The default pool's ipipMode: Never, Always or CrossSubnet.
    #[arg(long)]
    pub(super) ipip_mode: Option<String>,
    /// IPv6 too: node addresses, BGP over IPv6 and an IPv6 pool (mesh and
    /// rr topologies).
    #[arg(long)]
    pub(super) dual_stack: bool,
    /// Where ClusterIPs are allocated from [default: 10.96.0.0/16, or the
    /// next free one of 10.97.0.0/16, 10.98.0.0/16, ... when the host uses it].
    /// Refused when it overlaps an address or route of the host.
    #[arg(long)]
    pub(super) service_cidr: Option<String>,
    /// With --dual-stack: where IPv6 ClusterIPs are allocated from, the
    /// cluster's second service range [default: fd00:10:96::/112]; /108
    /// to /124, apart from the lab's other IPv6 networks.
    #[arg(long)]
    pub(super) service_cidr6: Option<String>,
    /// Where LoadBalancer ingress IPs come from (the LoadBalancerIPPool
    /// `lab-lb`, which tartan-controllers give from) [default:
    /// 192.0.2.0/24, or the next free one of 198.51.100.0/24,
    /// 203.0.113.0/24, ... when the host uses it]. Refused when it overlaps
    /// an address or route of the host.
    #[arg(long)]
    pub(super) lb_cidr: Option<String>,
    /// etcd, or kubernetes: the API server stand-in (tartan-apiserver)
    /// in place of etcd, enforcing deploy/'s RBAC; every daemon, the CNI
    /// plugin and `ctl` use the kubernetes backend with the kubeconfig of
    /// their service account (the admin's for `ctl`), and the default
    /// pools come from the ConfigMap tartan-system/tartan-config.
    #[arg(long, default_value = "etcd", value_parser = ["etcd", "kubernetes"])]
    pub(super) datastore: String,
}

#[derive(Subcommand)]
pub(super) enum PodCmd {
    /// Create NS/NAME on a node and wire it.
    Add {
        /// NS/NAME
        pod: String,
        #[arg(long)]
        node: String,
        /// k=v,k=v
        #[arg(long, default_value = "")]
        labels: String,
        /// The container's ports, for Services that name them:
        /// [NAME=]PORT[/PROTOCOL],… (e.g. http=8080,dns=53/UDP).
        #[arg(long, default_value = "")]
        ports: String,
        /// The Pod's spec.hostname (a DNS label).
        #[arg(long)]
        hostname: Option<String>,
        /// The Pod's spec.subdomain: with a headless Service of this name,
        /// the pod resolves as HOSTNAME.SUBDOMAIN.NS.svc.cluster.local.
        #[arg(long)]
        subdomain: Option<String>,
    },
    /// Set NS/NAME's Ready condition (true or false); its Service
    /// endpoints follow.
    Ready {
        /// NS/NAME
        pod: String,
        #[arg(action = clap::ArgAction::Set)]
        ready: bool,
    },
    /// Begin NS/NAME's graceful deletion: it keeps running, its endpoints
    /// turn terminating (no new Service connections while others are
    /// ready); `pod del` ends it.
    Terminate {
        /// NS/NAME
        pod: String,
    },
    /// Unwire and delete NS/NAME.
    Del {
        /// NS/NAME
        pod: String,
    },
    /// Print NS/NAME's address.
    Ip {
        /// NS/NAME
        pod: String,
        /// The IPv6 address (dual-stack labs).
        #[arg(short = '6', long = "ipv6")]
        ipv6: bool,
    },
}

#[derive(clap::Args)]
pub(super) struct DemoArgs {
    /// Keep the namespaces and daemons until Ctrl-C.
    #[arg(long)]
    pub(super) keep: bool,
    /// The tartan-bgpd binary (default: beside this one).
    #[arg(long, env = "TARTAN_BGPD")]
    pub(super) bgpd: Option<PathBuf>,
    /// The tartanctl binary (default: beside this one).
    #[arg(long, env = "TARTANCTL")]
    pub(super) tartanctl: Option<PathBuf>,
}
