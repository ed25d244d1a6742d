//! Tartan's lab: network namespaces, links and processes for tests, demos
//! and benchmarks (`tartan-bench`), each uniquely named and removed by a
//! drop guard; real BGP peers (BIRD, FRR, GoBGP, ExaBGP) to run inside
//! them; lab clusters whose control plane parts come from
//! `tartan-controllers`.
pub mod cluster;
pub mod cni;
pub mod cnilab;
pub mod etcd;
pub mod mounts;
pub mod netns;
pub mod netpol;
pub mod peers;
pub mod process;
pub mod subnet_claims;
pub mod tempdir;
pub mod topo;
pub mod underlay;
pub mod wire;

pub use process::Daemon;
pub use tempdir::TempDir;
pub use topo::{Family, KernelRoute, Pair, kernel_routes, ping, wait_kernel_route, wait_ping};
