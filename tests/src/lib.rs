//! The end-to-end tests' fixtures: where the workspace's binaries are,
//! one test file at a time within a test binary, and the openings the
//! tests share (a lab through `tartan-lab`, peer pairs, CNI labs, fault
//! traffic, policy grids, Services, the API server stand-in), one module
//! each. The tests themselves are under `tests/`, one binary per group
//! (see README.md).

pub mod bins;
pub mod cni_files;
pub mod cnilab;
pub mod faults;
pub mod felix;
pub mod gate;
pub mod lab;
pub mod metric_names;
pub mod netpol;
pub mod peering;
pub mod services;
pub mod standin;

pub use bins::{lab_bin, target_bin};
pub use cni_files::PluginFiles;
pub use cnilab::{cni_lab, cni_lab_with_pool, daemons_and_a_pod_each, runtime_with};
pub use felix::felix_http_get;
pub use gate::{FileGuard, one_file_at_a_time};
pub use lab::{Datastore, lab, lab_up, lab_up_on, lab_up_with_sessions, state_json};
