//! Tartan's lab: network namespaces, links and processes for tests, demos
//! and benchmarks, each uniquely named and removed by a drop guard; real
//! BGP peers (BIRD, FRR, GoBGP, ExaBGP) to run inside them.
pub mod benchkit;
pub mod bgpload;
pub mod cluster;
pub mod clusterbench;
pub mod cni;
pub mod cnibench;
pub mod cnilab;
pub mod conntrackbench;
pub mod etcd;
pub mod netns;
pub mod netpol;
pub mod peers;
pub mod policybench;
pub mod process;
pub mod servicebench;
pub mod storebench;
pub mod tempdir;
pub mod topo;
pub mod underlay;
pub mod wire;

pub use process::Daemon;
pub use tempdir::TempDir;
pub use topo::{Family, KernelRoute, Pair, kernel_routes, ping, wait_kernel_route};
