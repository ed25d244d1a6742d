//! BGP interop: Tartan's speaker against BIRD, FRR, GoBGP and ExaBGP, and
//! every peer's configuration file.
//!
//! One test binary; each module is one former `lab/tests` file. Every test
//! takes `tartan_tests::one_file_at_a_time`, so that two modules' clusters
//! never run at once (see tests/src/gate.rs).

mod bfd;
mod bird;
mod configs;
mod exabgp;
mod frr;
mod gobgp;
mod gshut;
