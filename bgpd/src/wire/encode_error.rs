//! Why an UPDATE could not be encoded: shared by the attribute and the
//! message encoders.

use ipnet::IpNet;

use crate::model::{Family, NextHop};

/// An UPDATE that cannot be written as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error(
        "path attributes take {needed} bytes with one prefix, more than the {max_len}-byte message limit"
    )]
    AttributesTooLarge { needed: usize, max_len: usize },
    #[error("attribute type {type_code} is {len} bytes long, more than 65535")]
    AttributeTooLong { type_code: u8, len: usize },
    #[error("next hop {next_hop:?} cannot be announced for {family}")]
    NextHopMismatch { family: Family, next_hop: NextHop },
    #[error("prefix {prefix} is not {family}")]
    PrefixFamilyMismatch { family: Family, prefix: IpNet },
}
