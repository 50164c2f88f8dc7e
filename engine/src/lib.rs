//! linecardd, the engine under test: an RFC 5880/5881/5883 BFD daemon with
//! pluggable transmit backends.
//!
//! The engine knows nothing of the harness; the harness drives `linecardd`
//! as a process, through its config file, control socket and CLI.

pub mod backend;
pub mod bench;
pub mod bfddp;
pub mod config;
pub mod daemon;
pub mod echo;
pub mod frr_json;
pub mod io;
pub mod log;
pub mod metrics;
pub mod reload_plan;
pub mod session;
pub mod wire;
