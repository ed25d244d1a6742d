//! Tartan's lab: network namespaces, links and processes for tests, demos
//! and benchmarks, each uniquely named and removed by a drop guard.
pub mod netns;
