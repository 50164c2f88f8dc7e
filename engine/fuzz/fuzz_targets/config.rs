//! Any text as linecardd's config file: never a panic; an error names the
//! file; a config that loads has every session's timers within
//! `linecard_api::timers`, and at most the keys the kernel holds.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_engine::config::EngineConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match EngineConfig::parse("fuzz.toml", text) {
        Ok(config) => {
            for s in &config.sessions {
                let ms = |us: u32| i64::from(us / 1000);
                assert!(
                    linecard_api::timers::Timers::from_ms(
                        ms(s.tx_interval_us),
                        ms(s.rx_interval_us),
                        i64::from(s.multiplier)
                    )
                    .is_ok(),
                    "{s:?}"
                );
                let keys = s.auth.as_ref().map_or(0, |a| a.keys.len());
                assert!(keys <= linecard_common::bfd::KEYS_PER_SESSION as usize);
            }
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz.toml"), "{e}"),
    }
});
