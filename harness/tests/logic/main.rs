//! The harness's logic as a user meets it, without root or a lab: the
//! analyzer's and the report's command lines on committed inputs, the
//! engine boundary, reviewing a scenario, and the rule that no test passes
//! without asserting. Seconds, deterministic.
//!
//! The harness's integration tests are four binaries by tier, a module per
//! area: `logic` (this), `lab` (what happened on the local lab, as root),
//! `runs` (`linecard run` end to end, timing judged by the product) and
//! `remote` (the ssh and proxmox providers against real sshd).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line

// The helpers every tier shares (one copy, outside any tier's folder).
#[path = "../common/mod.rs"]
mod common;

mod analyze;
mod boundary;
mod doc_paths;
mod early_returns;
mod report;
mod review;
