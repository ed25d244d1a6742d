//! The BGP ingest-and-propagate benchmark (see BENCHMARKS.md, "BGP: ingest
//! and propagate") and its load generator.
//!
//! M injectors, each a minimal BGP speaker in its own namespace, write N
//! unique IPv4 /24s into the device under test; the device passes them to
//! one sink speaker, which counts them. Namespaces: one for the device, one
//! per injector, one for the sink, each peer joined to the device by a veth
//! of its own (no bridge). The wall time runs from the first UPDATE written
//! to the moment the sink holds all M×N prefixes.
mod bench;
mod counter;
mod devices;
mod injector;
mod peer;
mod prefixes;
mod report;
mod sink;
mod speaker;
mod topology;

pub use bench::{
    BenchOptions, DeviceResult, GeneratorRate, RunResult, measure_generator, median, run_bench,
    run_device_once,
};
pub use counter::Counter;
pub use devices::{Device, DeviceKind};
pub use injector::Injector;
pub use peer::{Peer, PeerReport};
pub use prefixes::{PrefixPlan, encode_updates};
pub use report::{Environment, load_average, render_markdown};
pub use sink::{PassThrough, Sink};
pub use speaker::{Established, SpeakerId, establish, handshake, keepalive};
pub use topology::Topology;
