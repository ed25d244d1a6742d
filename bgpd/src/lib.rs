//! Tartan's BGP speaker.
pub mod model;
