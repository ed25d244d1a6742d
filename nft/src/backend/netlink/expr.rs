//! The kernel's expressions as the netlink encoder writes them
//! ([`Expr`]), and nft's data registers.

use super::types::Verdict;

/// `meta mark` (NFT_META_MARK).
pub const META_MARK: u32 = 3;
/// `meta nfproto` (NFT_META_NFPROTO).
pub(crate) const META_NFPROTO: u32 = 15;
/// `meta l4proto` (NFT_META_L4PROTO).
pub(crate) const META_L4PROTO: u32 = 16;

/// The register number nft writes for the data register that starts
/// `unit` 32-bit words in: the 16-byte NFT_REG_n where one starts there,
/// else NFT_REG32_nn (as nft's `netlink_put_register` does).
pub const fn reg(unit: u32) -> u32 {
    if unit.is_multiple_of(4) {
        1 + unit / 4
    } else {
        8 + unit
    }
}

/// The first data register, where every single-value expression works.
pub const REG: u32 = reg(0);

/// NFT_CMP_* operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq = 0,
    Neq = 1,
    Lte = 3,
    Gte = 5,
}

/// One kernel expression; registers are netlink register numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    MetaLoad {
        key: u32,
        reg: u32,
    },
    MetaStore {
        key: u32,
        reg: u32,
    },
    /// `len` bytes at `offset` of header `base` into `reg`.
    Payload {
        base: u32,
        offset: u32,
        len: u32,
        reg: u32,
    },
    /// `reg = (reg & mask) ^ xor`, over `mask.len()` bytes.
    Bitwise {
        reg: u32,
        mask: Vec<u8>,
        xor: Vec<u8>,
    },
    Cmp {
        reg: u32,
        op: CmpOp,
        data: Vec<u8>,
    },
    /// `reg` within (or, `equal` false, outside) `from..=to`.
    Range {
        reg: u32,
        equal: bool,
        from: Vec<u8>,
        to: Vec<u8>,
    },
    /// Host to network order of `reg`, as nft writes it before a
    /// host-order field (meta l4proto) goes into an interval set key.
    Hton {
        reg: u32,
        len: u32,
        size: u32,
    },
    Lookup {
        reg: u32,
        set: String,
        /// NFTA_SET_ID of a set made in the same batch.
        set_id: Option<u32>,
        invert: bool,
    },
    Log {
        prefix: Option<String>,
        level: Option<u32>,
    },
    Verdict(Verdict),
}

impl Expr {
    pub fn name(&self) -> &'static str {
        match self {
            Expr::MetaLoad { .. } | Expr::MetaStore { .. } => "meta",
            Expr::Payload { .. } => "payload",
            Expr::Bitwise { .. } => "bitwise",
            Expr::Cmp { .. } => "cmp",
            Expr::Range { .. } => "range",
            Expr::Hton { .. } => "byteorder",
            Expr::Lookup { .. } => "lookup",
            Expr::Log { .. } => "log",
            Expr::Verdict(_) => "immediate",
        }
    }
}
