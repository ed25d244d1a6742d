//! A lab driven through the `tartan-lab` binary as a user runs it: named
//! from a short prefix and this process's id, brought up with `up`, and
//! taken down when the handle is dropped.

use tartan_lab::cluster::client::LabCli;

/// A handle on the lab named from `prefix` (not brought up).
#[track_caller]
pub fn lab(prefix: &str) -> LabCli {
    let bin = crate::bins::lab_bin();
    LabCli::new(bin.to_str().expect("a UTF-8 target path"), prefix)
}

/// `tartan-lab up` with `args` (after `up`); returns the lab and what `up`
/// printed.
#[track_caller]
pub fn lab_up(prefix: &str, args: &[&str]) -> (LabCli, String) {
    let lab = lab(prefix);
    let mut up = vec!["up"];
    up.extend_from_slice(args);
    let out = lab.ok(&up);
    (lab, out)
}
