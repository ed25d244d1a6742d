//! The CNI plugins' credentials (issue 21, acceptance 2): tokens with a
//! short lifetime in the API server stand-in, felix renewing the plugins'
//! kubeconfig (TokenRequest for `tartan-system/tartan-cni`, bound to
//! felix's Pod), and the plugin still wiring pods after many lifetimes,
//! after felix's own token is revoked and replaced, and after felix's Pod
//! is replaced; and a plugin whose token nothing renews failing, never
//! wiring a pod without its records.
//!
//! Every test takes `tartan_tests::one_file_at_a_time` (see
//! tests/src/gate.rs).

mod expired;
mod renewal;
mod scene;
