//! What happened on the local lab, as root against the real kernel, with
//! readiness waits: Up in both daemons' words and on the capture, counters
//! moved by exactly N. One lab for the machine: each test holds the lab
//! lock (`common::lock_lab`) while it uses it. The tiers are listed in
//! `logic/main.rs`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line

// The helpers every tier shares (one copy, outside any tier's folder).
#[path = "../common/mod.rs"]
mod common;

mod auth;
mod bad_input;
mod conformance;
mod demand;
mod detection;
mod frr_dataplane;
mod frr_json;
mod handover;
mod inject;
mod interop;
mod local_lab;
mod metrics;
mod multihop;
mod package;
mod reload;
mod scale;
mod symmetric;
mod throttling;
mod xdp;
