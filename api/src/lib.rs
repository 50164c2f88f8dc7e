//! What `linecardd` and the programs that drive it (the `linecard` harness,
//! a user's scripts) agree on, so that neither links the other's internals:
//! linecardd's config file (`config`), the names a config file or a
//! scenario may use for a transmit backend and an authentication type, what `linecardd backends --json` answers, and the
//! error both report for a bad input file.
//!
//! The harness runs linecardd as a user would (a process, its config file,
//! its control socket); this crate is the vocabulary of that conversation,
//! nothing more. It holds no behaviour of the engine: whether a backend can
//! run here is asked of the linecardd binary that will run, never computed
//! in-process by the harness.

mod auth;
mod backend;
pub mod config;
pub mod control;
mod input;
pub mod timers;

pub use auth::{auth_type_named, AuthType, AUTH_TYPES};
pub use backend::{Availability, BackendKind};
pub use input::InputError;

/// One authentication type verified by linecardd's `Auth::verify` (the
/// `md-5`/`sha1` crates), timed in-process: computation only, after the
/// packet has crossed the socket, which costs more than this (and is what
/// L4 starves). `linecardd bench --json` prints a list of them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UserspaceVerifyCost {
    pub auth_type: String,
    /// Median over the rounds of the mean per verification.
    pub ns_per_packet: u32,
    pub method: String,
}
#[cfg(feature = "cli-docs")]
pub mod cli_docs;
