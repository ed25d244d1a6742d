//! The property test's cases: a cluster, two policy sets, and the
//! compiles after the first (cluster changes, which policies).

use proptest::prelude::*;

use super::clusters::{Change, ClusterGen, change, cluster_gen};
use super::kube_policies::kube_spec;
use super::policies::Spec;
use super::tartan_policies::{hardening_spec, tartan_spec};

/// The policies of a compile after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Policies {
    /// Those of the compile before: only the cluster changed.
    Previous,
    First,
    Second,
}

/// A compile after the first, with the same cache: the cluster changed
/// by `changes` (in order), and its policies.
#[derive(Debug, Clone)]
pub(super) struct Step {
    pub(super) changes: Vec<Change>,
    pub(super) policies: Policies,
}

#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) cluster: ClusterGen,
    /// The first policy set, named `p0`, `p1`, …
    pub(super) first: Vec<Spec>,
    /// The second: for each index, the first set's policy when `keep`
    /// says so, else this one under the same name (a changed policy).
    pub(super) second: Vec<Spec>,
    pub(super) keep: Vec<bool>,
    /// The compiles after the first: two.
    pub(super) steps: Vec<Step>,
    /// Varies the packets' source ports.
    pub(super) seed: usize,
}

pub(super) fn case() -> impl Strategy<Value = Case> {
    use Policies::*;
    let steps = (
        // The second compile: at times on the same cluster (changed
        // policies only), at times with the same policies (a changed
        // cluster only).
        prop::collection::vec(change(), 0..=3),
        prop_oneof![2 => Just(Second), 1 => Just(Previous)],
        prop::collection::vec(change(), 1..=3),
        prop_oneof![2 => Just(Previous), 1 => Just(First), 1 => Just(Second)],
    )
        .prop_map(|(c1, p1, c2, p2)| {
            vec![
                Step {
                    changes: c1,
                    policies: p1,
                },
                Step {
                    changes: c2,
                    policies: p2,
                },
            ]
        });
    (
        cluster_gen(),
        prop::collection::vec(spec(), 1..=8),
        prop::collection::vec(spec(), 1..=8),
        prop::collection::vec(any::<bool>(), 8),
        steps,
        0..16usize,
    )
        .prop_map(|(cluster, first, second, keep, steps, seed)| Case {
            cluster,
            first,
            second,
            keep,
            steps,
            seed,
        })
}

/// The policy mix: Kubernetes policies, hardening stretches and Tartan
/// policies with any rule.
fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        3 => kube_spec(),
        4 => hardening_spec(),
        3 => tartan_spec(),
    ]
}
