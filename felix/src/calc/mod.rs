//! Pure calculation: from the objects felix has seen to the dataplane it
//! wants. No I/O.

pub mod desired;
pub mod encap;
pub mod endpoints;
pub mod hosts;
pub mod intern;
pub mod labels;
pub mod nat;
pub mod policy;
pub mod remote;
pub mod routes;
pub mod services;
pub mod state;
