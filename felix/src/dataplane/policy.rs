//! The policy table `inet tartan`: the first write (and any write after a
//! failure or detected drift) replaces the whole table in one nft
//! transaction; after that each change is the difference from what was
//! applied, also in one transaction. A difference nft refuses is followed
//! at once by a full rebuild, so the kernel never keeps half a change.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tartan_policy::compile::Ruleset;
use tartan_policy::compile::render::{self, TABLE};
use tracing::{debug, warn};

use super::DataplaneError;

/// How a write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Nothing to change.
    Nothing,
    /// The difference, in this time.
    Difference(Duration),
    /// The whole table, in this time.
    Full(Duration),
}

#[derive(Default)]
pub struct PolicyDriver {
    /// What the kernel holds, as far as felix knows.
    applied: Option<Ruleset>,
}

fn nft(batch: &Value) -> Result<(), DataplaneError> {
    nftables::helper::apply_ruleset_raw(
        &batch.to_string(),
        nftables::helper::DEFAULT_NFT,
        nftables::helper::DEFAULT_ARGS,
    )
    .map(|_| ())
    .map_err(|e| DataplaneError::Refused {
        what: format!("nftables table inet {TABLE}"),
        detail: match e {
            nftables::helper::NftablesError::NftFailed { stderr, .. } => stderr,
            other => other.to_string(),
        },
    })
}

/// Counts that tell whether the kernel's table is the one applied: chain
/// names with their rule counts, set names with their element counts.
fn summary_of_kernel() -> Option<Vec<(String, usize)>> {
    let out = Command::new("nft")
        .args(["-j", "list", "table", "inet", TABLE])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let mut rules: std::collections::BTreeMap<String, usize> = Default::default();
    for o in v["nftables"].as_array()? {
        if let Some(c) = o.get("chain") {
            rules.entry(c["name"].as_str()?.to_string()).or_default();
        } else if let Some(r) = o.get("rule") {
            *rules.entry(r["chain"].as_str()?.to_string()).or_default() += 1;
        } else if let Some(s) = o.get("set").or_else(|| o.get("map")) {
            let n = s["elem"].as_array().map_or(0, Vec::len);
            rules.insert(format!("@{}", s["name"].as_str()?), n);
        }
    }
    Some(rules.into_iter().collect())
}

fn summary_of(rs: &Ruleset) -> Vec<(String, usize)> {
    let mut m: std::collections::BTreeMap<String, usize> = Default::default();
    // The fixed chains (see render): forward 4 rules, dispatch 2 each.
    for (c, n) in [
        (render::FORWARD, 4),
        (render::FROM_ENDPOINT, 2),
        (render::TO_ENDPOINT, 2),
        (tartan_policy::compile::OPEN_CHAIN, 0),
    ] {
        m.insert(c.to_string(), n);
    }
    for (name, rules) in &rs.chains {
        m.insert(name.clone(), rules.len());
    }
    for (name, def) in &rs.sets {
        m.insert(format!("@{name}"), def.elements.len());
    }
    m.insert(
        format!("@{}", render::FROM_ENDPOINT),
        rs.from_endpoint.len(),
    );
    m.insert(format!("@{}", render::TO_ENDPOINT), rs.to_endpoint.len());
    m.into_iter().collect()
}

impl PolicyDriver {
    /// Make the kernel's table `want`. With `check`, first compare the
    /// kernel's table with what was applied (a table removed or edited by
    /// hand is rebuilt).
    pub fn apply(&mut self, want: &Ruleset, check: bool) -> Result<Written, DataplaneError> {
        if check
            && let Some(applied) = &self.applied
            && summary_of_kernel().as_ref() != Some(&summary_of(applied))
        {
            warn!("the policy table differs from what felix wrote; rebuilding it");
            self.applied = None;
        }
        let started = Instant::now();
        if let Some(applied) = &self.applied {
            let Some(batch) = render::diff(applied, want) else {
                return Ok(Written::Nothing);
            };
            match nft(&batch) {
                Ok(()) => {
                    self.applied = Some(want.clone());
                    return Ok(Written::Difference(started.elapsed()));
                }
                Err(e) => {
                    warn!(error = %e, "nft refused the policy change; rebuilding the whole table");
                    self.applied = None;
                }
            }
        }
        nft(&render::full(want))?;
        debug!(
            chains = want.chains.len(),
            sets = want.sets.len(),
            "policy table written whole"
        );
        self.applied = Some(want.clone());
        Ok(Written::Full(started.elapsed()))
    }
}
