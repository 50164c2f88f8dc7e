//! Any bytes as a control socket request line: never a panic; a request
//! that is read has passed every check the config file applies, so the
//! engine never acts on an out-of-range value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_engine::daemon::control::{read_request, Request};

fuzz_target!(|data: &[u8]| {
    match read_request(data) {
        Ok(Request::Set {
            tx_interval_ms,
            rx_interval_ms,
            multiplier,
            ..
        }) => {
            for ms in [tx_interval_ms, rx_interval_ms] {
                assert!((1..=60_000).contains(&ms), "{ms}");
            }
            assert_ne!(multiplier, 0);
        }
        Ok(_) => {}
        Err(e) => assert!(!e.is_empty()),
    }
});
