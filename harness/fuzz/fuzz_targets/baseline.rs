//! Any text as a baseline: never a panic; an error names the file; a
//! baseline that loads gives every check a finite limit.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_harness::gate::Baseline;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Baseline::parse("fuzz.toml", text) {
        Ok(baseline) => {
            for check in &baseline.checks {
                assert!(check.limit().is_finite(), "{check:?}");
            }
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.toml"), "{e}"),
    }
});
