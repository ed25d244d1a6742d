//! Tartan's benchmark harnesses, each run in the lab's network namespaces
//! by `tartan-bench <harness>` and written up beside this crate
//! (`bench/*.md`).
pub mod benchkit;
pub mod bfdbench;
pub mod bgpload;
pub mod clusterbench;
pub mod cnibench;
pub mod conntrackbench;
pub mod dnsbench;
pub mod heapcount;
pub mod policybench;
pub mod scalebench;
pub mod servicebench;
pub mod storebench;
pub mod svcapply;
