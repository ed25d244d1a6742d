//! Numbers the types, their checks and their CRD schema rules share. Kept
//! in a file of their own, below all three.

/// The graceful restart time field is 12 bits (RFC 4724).
pub const MAX_RESTART_SECONDS: u64 = 4095;

/// The largest block IPAM keeps, in addresses: an IPv4 /20 or IPv6 /116.
pub const MAX_BLOCK_ADDRESSES: u32 = 4096;

/// AS 23456 (AS_TRANS, RFC 6793) stands in for 4-octet AS numbers on old
/// speakers; no network may use it as its own.
pub const AS_TRANS: u32 = 23456;
