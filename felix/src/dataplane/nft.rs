//! Tables felix owns in nftables, written the same way: the first write
//! (and any write after a failure or detected drift) replaces the whole
//! table in one nft transaction; after that each change is the difference
//! from what was applied, also one transaction. A difference nft refuses
//! is followed at once by a full rebuild, so the kernel never keeps half a
//! change.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tracing::warn;

use super::DataplaneError;

/// What a table's desired state must give its driver.
pub trait Table: Clone + PartialEq {
    /// The table's family and name as nft says them (`inet`, `tartan`).
    const FAMILY: &'static str;
    const NAME: &'static str;
    /// Commands that replace the whole table.
    fn full(&self) -> Value;
    /// Commands from `old` (as applied) to `new`; `None` when equal.
    fn diff(old: &Self, new: &Self) -> Option<Value>;
    /// What the kernel's table should show: each chain with its rule
    /// count, each set and map (as `@name`) with its element count.
    /// Sets the packet path fills are left out.
    fn summary(&self) -> BTreeMap<String, usize>;
}

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

pub struct NftDriver<T> {
    /// What the kernel holds, as far as felix knows.
    applied: Option<T>,
}

impl<T> Default for NftDriver<T> {
    fn default() -> Self {
        NftDriver { applied: None }
    }
}

fn nft<T: Table>(batch: &Value) -> Result<(), DataplaneError> {
    run(batch, T::FAMILY, T::NAME)
}

/// Hand `batch` to nft as one transaction.
pub fn run(batch: &Value, family: &str, name: &str) -> Result<(), DataplaneError> {
    nftables::helper::apply_ruleset_raw(
        &batch.to_string(),
        nftables::helper::DEFAULT_NFT,
        nftables::helper::DEFAULT_ARGS,
    )
    .map(|_| ())
    .map_err(|e| DataplaneError::Refused {
        what: format!("nftables table {family} {name}"),
        detail: match e {
            nftables::helper::NftablesError::NftFailed { stderr, .. } => stderr,
            other => other.to_string(),
        },
    })
}

/// The kernel's table in the shape of [`Table::summary`]; `None` when
/// it is not there. `skip`: sets left out of the comparison. `terse`:
/// without set elements (every set counts 0), for tables whose sets are
/// too large to list at every check.
pub fn kernel_summary(
    family: &str,
    name: &str,
    skip: &dyn Fn(&str) -> bool,
    terse: bool,
) -> Option<BTreeMap<String, usize>> {
    // nft 1.0.6 fetches every set element from the kernel for `list
    // table` even with -t (2.4 s and 315 MB at 200,000 elements); `list
    // ruleset FAMILY` with -t does not, so list the family and keep this
    // table's objects.
    let mut cmd = Command::new("nft");
    if terse {
        cmd.args(["-t", "-j", "list", "ruleset", family]);
    } else {
        cmd.args(["-j", "list", "table", family, name]);
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    let objects = v["nftables"].as_array()?;
    let ours = |o: &&Value| {
        !terse
            || o.as_object()
                .and_then(|m| m.values().next())
                .and_then(|x| x.get("table"))
                .and_then(Value::as_str)
                == Some(name)
    };
    if terse
        && !objects
            .iter()
            .any(|o| o.get("table").is_some_and(|t| t["name"] == name))
    {
        return None;
    }
    let mut m: BTreeMap<String, usize> = BTreeMap::new();
    for o in objects.iter().filter(ours) {
        if let Some(c) = o.get("chain") {
            m.entry(c["name"].as_str()?.to_string()).or_default();
        } else if let Some(r) = o.get("rule") {
            *m.entry(r["chain"].as_str()?.to_string()).or_default() += 1;
        } else if let Some(s) = o.get("set").or_else(|| o.get("map")) {
            let set = s["name"].as_str()?;
            if !skip(set) {
                m.insert(format!("@{set}"), s["elem"].as_array().map_or(0, Vec::len));
            }
        }
    }
    Some(m)
}

impl<T: Table> NftDriver<T> {
    /// Make the kernel's table `want`. With `check`, first compare the
    /// kernel's table with what was applied (a table removed or edited by
    /// hand is rebuilt). `dynamic`: names of sets the packet path fills.
    pub fn apply(
        &mut self,
        want: &T,
        check: bool,
        dynamic: &dyn Fn(&str) -> bool,
    ) -> Result<Written, DataplaneError> {
        if check
            && let Some(applied) = &self.applied
            && kernel_summary(T::FAMILY, T::NAME, dynamic, false).as_ref()
                != Some(&applied.summary())
        {
            warn!(
                table = T::NAME,
                "the table differs from what felix wrote; rebuilding it"
            );
            self.applied = None;
        }
        let started = Instant::now();
        if let Some(applied) = &self.applied {
            let Some(batch) = T::diff(applied, want) else {
                return Ok(Written::Nothing);
            };
            match nft::<T>(&batch) {
                Ok(()) => {
                    self.applied = Some(want.clone());
                    return Ok(Written::Difference(started.elapsed()));
                }
                Err(e) => {
                    warn!(table = T::NAME, error = %e, "nft refused a change; rebuilding the whole table");
                    self.applied = None;
                }
            }
        }
        nft::<T>(&want.full())?;
        self.applied = Some(want.clone());
        Ok(Written::Full(started.elapsed()))
    }
}
