//! Any text as a scenario, with the committed stress profiles: never a
//! panic; an error names the file; a scenario that parses can say how long
//! each DUT runs.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_harness::profile::Profile;
use linecard_harness::scenario::Scenario;

const PROFILES: [(&str, &str); 6] = [
    ("idle", include_str!("../../../stress-profiles/idle.toml")),
    ("L1", include_str!("../../../stress-profiles/L1.toml")),
    ("L2", include_str!("../../../stress-profiles/L2.toml")),
    ("L3", include_str!("../../../stress-profiles/L3.toml")),
    ("L4", include_str!("../../../stress-profiles/L4.toml")),
    ("soak", include_str!("../../../stress-profiles/soak.toml")),
];

fn profile(name: &str) -> Result<Profile, String> {
    let (_, text) = PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("no profile {name}"))?;
    Profile::parse(name, text).map_err(|e| e.to_string())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Scenario::parse("fuzz.toml", text, &profile) {
        Ok(scenario) => {
            let _ = scenario.seconds_per_dut();
        }
        Err(e) => assert!(e.to_string().contains("fuzz.toml"), "{e}"),
    }
});
