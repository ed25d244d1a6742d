//! Pure calculation: from the objects felix has seen to the dataplane it
//! wants. No I/O.

pub mod encap;
pub mod nat;
pub mod policy;
pub mod routes;
pub mod services;
pub mod state;
