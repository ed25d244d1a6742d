//! [`Netlink`]: the netlink encoder as a [`Backend`]. It commits a
//! transaction only when every command can be encoded, and refuses the
//! rest as unsupported, for the caller to send to `nft`
//! ([`crate::backend::program`]); what it accepted it remembers, so that
//! later transactions can fill the sets it declared.

use super::Declarations;
use super::message::{Op, batch};
use super::socket::{Answer, Conn};
use crate::backend::Backend;
use crate::{Error, Transaction};

/// A netlink socket to nf_tables and the sets declared through it.
#[derive(Default)]
pub struct Netlink {
    decls: Declarations,
    /// Opened on first use, in the namespace of the thread that uses it.
    conn: Option<Conn>,
}

impl Netlink {
    pub fn new() -> Netlink {
        Netlink::default()
    }

    /// The declarations learnt so far (also from transactions committed
    /// elsewhere, through [`Netlink::observe`]).
    pub fn declarations(&self) -> &Declarations {
        &self.decls
    }

    pub fn declarations_mut(&mut self) -> &mut Declarations {
        &mut self.decls
    }

    /// Take note of a transaction another backend committed.
    pub fn observe(&mut self, tx: &Transaction) {
        self.decls.observe(tx);
    }

    fn conn(&mut self) -> std::io::Result<&mut Conn> {
        if self.conn.is_none() {
            self.conn = Some(Conn::open()?);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no netlink socket"))
    }

    /// Send `ops` as one transaction; a socket that failed is opened
    /// afresh next time. `Ok(Err(why))`: the kernel refused it, and
    /// nothing was applied.
    pub fn send(&mut self, ops: &[Op]) -> std::io::Result<Result<(), String>> {
        let (bytes, acked) = batch(ops, seq());
        self.send_bytes(&bytes, acked)
    }

    /// Send a batch already encoded (by [`super::stream::Stream`], with
    /// sequence numbers from [`seq`]), as [`Netlink::send`] does.
    pub fn send_bytes(
        &mut self,
        bytes: &[u8],
        acked: usize,
    ) -> std::io::Result<Result<(), String>> {
        let r = self.conn().and_then(|c| c.send(bytes, acked));
        if r.is_err() {
            self.conn = None;
        }
        r.map(|answer| match answer {
            Answer::Committed => Ok(()),
            Answer::Refused(errno) => Err(std::io::Error::from_raw_os_error(errno).to_string()),
        })
    }

    /// Whether table `name` of `family` (NFPROTO_*) is in the kernel.
    pub fn table_exists(&mut self, family: u8, name: &str) -> std::io::Result<bool> {
        self.conn().and_then(|c| c.table_exists(family, name))
    }
}

/// Sequence numbers for netlink batches: distinct per process and call.
pub fn seq() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    NEXT.fetch_add(64 * 1024, Ordering::Relaxed)
}

impl Backend for Netlink {
    fn commit(&mut self, tx: &Transaction) -> Result<(), Error> {
        let ops = self
            .decls
            .ops(tx)
            .ok_or_else(|| Error::Unsupported("a command netlink does not encode".into()))?;
        if ops.is_empty() {
            return Ok(());
        }
        self.send(&ops)?.map_err(Error::Refused)?;
        self.decls.observe(tx);
        Ok(())
    }
}
