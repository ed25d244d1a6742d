//! A lab driven through the `tartan-lab` binary as a user runs it: named
//! from a short prefix and this process's id, brought up with `up` on the
//! datastore a test chooses (etcd, or the Kubernetes API through the API
//! server stand-in), checked for the BGP sessions its topology makes, its
//! state file read, and taken down when the handle is dropped.

use tartan_lab::cluster::client::LabCli;

/// A handle on the lab named from `prefix` (not brought up).
#[track_caller]
pub fn lab(prefix: &str) -> LabCli {
    let bin = crate::bins::lab_bin();
    LabCli::new(bin.to_str().expect("a UTF-8 target path"), prefix)
}

/// What a lab keeps its objects in (`tartan-lab up --datastore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datastore {
    Etcd,
    /// The API server stand-in, deploy/'s RBAC enforced, every program
    /// with its own service account's kubeconfig.
    Kubernetes,
}

impl Datastore {
    /// `up`'s `--datastore` value.
    pub fn arg(self) -> &'static str {
        match self {
            Datastore::Etcd => "etcd",
            Datastore::Kubernetes => "kubernetes",
        }
    }
}

/// `tartan-lab up` with `args` (after `up`) on etcd; returns the lab and
/// what `up` printed.
#[track_caller]
pub fn lab_up(prefix: &str, args: &[&str]) -> (LabCli, String) {
    lab_up_on(prefix, Datastore::Etcd, args)
}

/// [`lab_up`] on `datastore`.
#[track_caller]
pub fn lab_up_on(prefix: &str, datastore: Datastore, args: &[&str]) -> (LabCli, String) {
    let lab = lab(prefix);
    let mut up = vec!["up", "--datastore", datastore.arg()];
    up.extend_from_slice(args);
    let out = lab.ok(&up);
    (lab, out)
}

/// `lab_up(prefix, args)`, checked: what `up` printed contains `summary`,
/// and the nodes hold `sessions` Established BGP sessions (node-1 first;
/// `why` says why that many).
#[track_caller]
pub fn lab_up_with_sessions(
    prefix: &str,
    args: &[&str],
    summary: &str,
    sessions: &[u64],
    why: &str,
) -> LabCli {
    let (lab, out) = lab_up(prefix, args);
    assert!(out.contains(summary), "{out}");
    assert_eq!(lab.sessions(), sessions, "{why}");
    lab
}

/// The lab's state file (`/run/tartan-lab/NAME/state.json`) as JSON.
#[track_caller]
pub fn state_json(lab: &LabCli) -> serde_json::Value {
    let path = format!("/run/tartan-lab/{}/state.json", lab.name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
