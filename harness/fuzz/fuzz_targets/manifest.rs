//! Any bytes as a run directory's manifest.json, the file `report`,
//! `compare`, `tables` and `gate` read: never a panic; a manifest that
//! parses renders its summary and is gated against the committed CI
//! baseline without one either.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_harness::gate::{gate_manifest, parse_manifest, Baseline};
use std::path::Path;

const CI_BASELINE: &str = include_str!("../../../baselines/ci.toml");

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_manifest("manifest.json", text) {
        Ok(manifest) => {
            let _ = linecard_harness::export::summary::summary_markdown(&manifest);
            let baseline = Baseline::parse("ci.toml", CI_BASELINE).expect("the committed baseline");
            let result = gate_manifest(&baseline, &manifest, Path::new("ci.toml"), Path::new("run"));
            assert_eq!(result.comparisons.len(), baseline.checks.len());
        }
        Err(e) => assert!(format!("{e:#}").starts_with("manifest.json"), "{e:#}"),
    }
});
