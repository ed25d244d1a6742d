//! A lab cluster that outlives the command that made it: `tartan-lab up`
//! starts etcd (or the API server stand-in, [`apiserver`]) on an underlay
//! bridge, makes node namespaces, has a default IPPool made ([`pools`])
//! and starts tartan-bgpd and tartan-felix in each node;
//! `pod add/del`, `exec`, `status` and `down` work on it later, from the
//! state kept in `/run/tartan-lab/<name>/`. [`services`] runs the
//! control plane's Service parts (addresses, ports, EndpointSlices; from
//! `tartan-controllers`), [`kubelet`] writes the Pods' status, and [`dns`]
//! runs the cluster DNS and gives pods its resolver.

pub mod apiserver;
pub mod client;
pub mod controllers;
pub mod daemons;
pub mod detached;
pub mod dns;
pub mod down;
pub mod hostnets;
pub mod kubelet;
pub mod pod;
pub mod pools;
pub mod ranges6;
pub mod runtime;
pub mod services;
pub mod state;
pub mod status;
pub mod store;
pub mod svcprobe;
pub mod topology;
pub mod up;
pub mod up_options;

pub use state::LabState;
