//! Any text as a stress profile: never a panic; an error names the file,
//! and a profile that parses yields its stress-ng lines for any CPU count.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_harness::profile::Profile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Profile::parse("fuzz.toml", text) {
        Ok(profile) => {
            for cpus in [1, 2, 12] {
                let _ = profile.stress_ng_processes(cpus, 60);
            }
        }
        Err(e) => assert!(e.to_string().contains("fuzz.toml"), "{e}"),
    }
});
