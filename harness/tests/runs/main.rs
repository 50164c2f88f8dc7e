//! `linecard run` end to end on the local lab: the bake-off, the scenarios
//! beyond the reference, the engine's own faults and the comparison of two
//! builds. Timing is judged by the product (the run's verdicts and
//! `linecard gate`); what these tests assert is what makes each run a
//! measurement: controls that flapped, stress that bit, a fast path seen
//! on the DUT's CPU. The tiers are listed in `logic/main.rs`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line

// The helpers every tier shares (one copy, outside any tier's folder).
#[path = "../common/mod.rs"]
mod common;

mod compare;
mod engine_view;
mod faults;
mod handover;
mod ladder;
mod run;
mod run_features;
