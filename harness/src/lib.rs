//! The harness as a library: the `linecard` CLI (`main.rs`) and the
//! privileged tests use the same lab, process and capture code.

pub mod analysis_files;
pub mod analyze;
pub mod backends;
pub mod bench;
pub mod bench_metrics;
pub mod bench_xdp;
pub mod canary;
pub mod compare;
pub mod conformance;
pub mod evidence_tables;
pub mod export;
pub mod freeze;
pub mod gate;
pub mod inject;
pub mod lab;
pub mod linecardd;
pub mod lock;
pub mod manifest;
pub mod plots;
pub mod procs;
pub mod profile;
pub mod receive_path;
pub mod remote;
pub mod report;
pub mod rt_throttle;
pub mod run;
pub mod scenario;
pub mod scrape;
pub mod softirq_threads;
pub mod steal;
pub mod sys;
pub mod warning;

#[cfg(test)]
mod bad_input_doc;
