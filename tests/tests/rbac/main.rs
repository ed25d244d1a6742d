//! RBAC (issue 21, acceptance 3): the daemons run with `--datastore
//! kubernetes` against the API server stand-in, each under its own
//! deploy/ service account's token; every request they make must be
//! allowed by deploy/'s roles, and every grant of those roles must be used
//! by some request (or be on a short allow-list with its reason).
//!
//! Every test takes `tartan_tests::one_file_at_a_time` (see
//! tests/src/gate.rs).

mod daemons_rbac;
mod scene;
mod verdict;
