//! The vocabulary shared by the codec, the RIB, the sessions and the kernel
//! sync: address families, next hops and path attributes. Plain data, no I/O.
mod attrs;
pub mod checks;
pub mod community;
mod family;

pub use attrs::{AsPath, AsSegment, NextHop, NextHopMode, Origin, PathAttrs, RawAttr, well_known};
pub use family::Family;
