//! BGP filters: which routes a session imports and exports, and what they
//! change on the way (communities, AS path). `rule` holds the rules and
//! their evaluation; `from_api` reads BGPFilter objects into rules (the
//! TOML file's `[[filter]]` tables are read by `config`).
mod from_api;
mod rule;

pub use from_api::peer_filters;
pub use rule::{MatchOp, PeerFilters, Rule, RuleList, Verdict};

#[cfg(test)]
mod tests;
