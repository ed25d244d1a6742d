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
use tartan_nft::Transaction;
use tartan_nft::backend::netlink as nftnl;
use tartan_nft::backend::netlink::commit::{Netlink, seq};
use tartan_nft::backend::netlink::message::{ElementOp, Op};
use tartan_nft::backend::netlink::stream::Stream;
use tartan_nft::backend::program;
use tartan_nft::model::schema::{NfListObject, Table as NftTable};
use tracing::warn;

use super::DataplaneError;

/// What a table's desired state must give its driver.
pub trait Table: Clone + PartialEq {
    /// The table's family and name as nft says them (`inet`, `tartan`).
    const FAMILY: &'static str;
    const NAME: &'static str;
    /// Commands that replace the whole table.
    fn full(&self) -> Transaction;
    /// Commands from `old` (as applied) to `new`; `None` when equal.
    fn diff(old: &Self, new: &Self) -> Option<Transaction>;
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
    writer: NftWriter,
    /// How the latest write reached the kernel (for benchmarks and logs).
    last_via: Option<Via>,
}

impl<T> Default for NftDriver<T> {
    fn default() -> Self {
        NftDriver {
            applied: None,
            writer: NftWriter::default(),
            last_via: None,
        }
    }
}

/// Which way a batch reached the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Over netlink ([`tartan_nft::backend::netlink`]): every command
    /// could be encoded.
    Netlink,
    /// The `nft` program.
    Nft,
}

/// Writes batches: those [`nftnl::Declarations::ops`] can encode over netlink
/// (tartan-nft's [`Netlink`] backend), the rest through `nft`. Set
/// `TARTAN_NFT_NETLINK=0` to send everything through `nft`.
pub struct NftWriter {
    nl: Netlink,
    netlink: bool,
}

impl Default for NftWriter {
    fn default() -> Self {
        NftWriter {
            nl: Netlink::new(),
            netlink: std::env::var("TARTAN_NFT_NETLINK").map_or(true, |v| v != "0"),
        }
    }
}

impl NftWriter {
    /// Whether batches that can be encoded go over netlink.
    pub fn netlink(mut self, on: bool) -> Self {
        self.netlink = on;
        self
    }

    /// Apply `batch` to table `family name` as one transaction.
    pub fn write(
        &mut self,
        batch: &Transaction,
        family: &str,
        name: &str,
    ) -> Result<Via, DataplaneError> {
        if self.netlink
            && let Some(ops) = self.nl.declarations().ops(batch)
        {
            if ops.is_empty() {
                return Ok(Via::Netlink);
            }
            match self.nl.send(&ops) {
                Ok(Ok(())) => {
                    // The batch may declare or delete sets.
                    self.nl.observe(batch);
                    return Ok(Via::Netlink);
                }
                Ok(Err(why)) => {
                    return Err(DataplaneError::Refused {
                        what: format!("nftables table {family} {name}"),
                        detail: format!("the kernel refused the change: {why}"),
                    });
                }
                // The kernel's answer could not be read: let nft apply
                // the same batch (adding an element twice is harmless, a
                // delete that fails leads to a full rebuild).
                Err(e) => warn!(error = %e, "netlink write failed; using nft"),
            }
        }
        run(batch, family, name)?;
        self.nl.observe(batch);
        Ok(Via::Nft)
    }

    /// Write `batch`, which builds the whole table. When the table is not
    /// in the kernel at all, the elements go over netlink after `nft` has
    /// made everything else: 200,000 map elements cost `nft` seconds of
    /// JSON parsing and the kernel a fraction of that. The table then
    /// appears in two transactions (first without elements, then with all
    /// of them at once), which is safe only because there was no table to
    /// keep serving; a table that exists is replaced in one transaction.
    pub fn write_new(
        &mut self,
        batch: Transaction,
        family: &str,
        name: &str,
    ) -> Result<Via, DataplaneError> {
        if !self.table_absent(family, name) {
            return self.write(&batch, family, name);
        }
        let mut decls = self.nl.declarations().clone();
        decls.observe(&batch);
        let (skeleton, ops) = decls.split_elements(batch);
        self.write_fresh(skeleton, ops, family, name)
    }

    /// Whether batches that can be encoded go over netlink.
    pub fn netlink_enabled(&self) -> bool {
        self.netlink
    }

    /// Write a whole table in two transactions: `first` through `nft`
    /// (everything but the large sets' elements), then the elements
    /// `fill` encodes straight into one netlink batch. With `fresh` (the
    /// kernel had no such table), a table left without its elements is
    /// removed; otherwise `first` must leave the kernel's table serving
    /// as it did (see `render::in_place` of the service table).
    pub fn write_streamed(
        &mut self,
        first: &Transaction,
        fill: impl FnOnce(&mut Stream),
        family: &str,
        name: &str,
        fresh: bool,
    ) -> Result<(), DataplaneError> {
        run(first, family, name)?;
        self.nl.observe(first);
        let mut s = Stream::new(seq());
        fill(&mut s);
        let (bytes, acked) = s.finish();
        let why = match self.nl.send_bytes(&bytes, acked) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(why)) => why,
            Err(e) => e.to_string(),
        };
        if fresh {
            self.remove_table(family, name);
        }
        Err(DataplaneError::Refused {
            what: format!("nftables table {family} {name}"),
            detail: format!("the kernel refused the table's elements: {why}"),
        })
    }

    /// Send `ops` (chain and set removals, say) as one netlink
    /// transaction.
    pub fn send_ops(&mut self, ops: &[Op], family: &str, name: &str) -> Result<(), DataplaneError> {
        let why = match self.nl.send(ops) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(why)) => why,
            Err(e) => e.to_string(),
        };
        Err(DataplaneError::Refused {
            what: format!("nftables table {family} {name}"),
            detail: why,
        })
    }

    /// Remove table `family name` (logged when it cannot be), and forget
    /// its sets.
    fn remove_table(&mut self, family: &str, name: &str) {
        let mut gone = Transaction::new();
        if let Some(f) = tartan_nft::model::family_of(family) {
            gone.delete(NfListObject::Table(NftTable {
                family: f,
                name: name.to_string().into(),
                handle: None,
            }));
        }
        if let Err(e) = run(&gone, family, name) {
            warn!(error = %e, "could not remove the table left without elements");
        }
        self.nl.declarations_mut().forget(family, name);
    }

    /// Whether the kernel surely has no table `family name` (and the
    /// netlink path is on): any doubt counts as present.
    pub fn table_absent(&mut self, family: &str, name: &str) -> bool {
        let Some(fam) = nftnl::family_number(family) else {
            return false;
        };
        self.netlink && self.nl.table_exists(fam, name).is_ok_and(|exists| !exists)
    }

    /// A table the kernel does not have: `skeleton` through nft, then
    /// `elements` over netlink in one transaction.
    fn write_fresh(
        &mut self,
        skeleton: Transaction,
        elements: Vec<ElementOp>,
        family: &str,
        name: &str,
    ) -> Result<Via, DataplaneError> {
        run(&skeleton, family, name)?;
        self.nl.observe(&skeleton);
        if elements.is_empty() {
            return Ok(Via::Nft);
        }
        let ops: Vec<Op> = elements.into_iter().map(Op::Elements).collect();
        let why = match self.nl.send(&ops) {
            Ok(Ok(())) => return Ok(Via::Netlink),
            Ok(Err(why)) => why,
            Err(e) => e.to_string(),
        };
        // Leave no table without its elements behind.
        self.remove_table(family, name);
        Err(DataplaneError::Refused {
            what: format!("nftables table {family} {name}"),
            detail: format!("the kernel refused the elements of a new table: {why}"),
        })
    }
}

/// Hand `batch` to nft as one transaction.
pub fn run(batch: &Transaction, family: &str, name: &str) -> Result<(), DataplaneError> {
    program::run(batch).map_err(|e| DataplaneError::Refused {
        what: format!("nftables table {family} {name}"),
        detail: e.to_string(),
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
    /// How the latest write reached the kernel; `None` before the first.
    pub fn last_via(&self) -> Option<Via> {
        self.last_via
    }

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
            match self.writer.write(&batch, T::FAMILY, T::NAME) {
                Ok(via) => {
                    self.last_via = Some(via);
                    self.applied = Some(want.clone());
                    return Ok(Written::Difference(started.elapsed()));
                }
                Err(e) => {
                    warn!(table = T::NAME, error = %e, "nft refused a change; rebuilding the whole table");
                    self.applied = None;
                }
            }
        }
        self.last_via = Some(self.writer.write(&want.full(), T::FAMILY, T::NAME)?);
        self.applied = Some(want.clone());
        Ok(Written::Full(started.elapsed()))
    }
}

/// Whether the kernel has table `family name` (asked of `nft`); false
/// also when `nft` cannot be asked.
pub fn table_present(family: &str, name: &str) -> bool {
    table_known(family, name).unwrap_or(false)
}

/// Whether the kernel has table `family name`, asked of the kernel over
/// netlink for that one table (`NFT_MSG_GETTABLE`); an error when it
/// cannot say. Not through `nft`: nft 1.0.6 fills its cache with every
/// table of the family before it lists even the names, set elements
/// included (a `list tables ip` beside a service table of 210,000
/// elements peaked at 321.6 MiB), and this runs at every periodic check.
pub fn table_known(family: &str, name: &str) -> Result<bool, DataplaneError> {
    let refused = |detail: String| DataplaneError::Refused {
        what: format!("the kernel's nftables table {family} {name}"),
        detail,
    };
    let fam = nftnl::family_number(family)
        .ok_or_else(|| refused(format!("no nftables family {family:?}")))?;
    Netlink::new()
        .table_exists(fam, name)
        .map_err(|e| refused(e.to_string()))
}
