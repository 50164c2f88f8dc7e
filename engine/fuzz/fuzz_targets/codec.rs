//! Any bytes through the codec: parse never panics, and what parses
//! re-emits to bytes that parse to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_engine::wire::Repr;

fuzz_target!(|data: &[u8]| {
    if let Ok(repr) = Repr::parse_bytes(data) {
        if repr.auth.is_none() {
            let again = Repr::parse_bytes(&repr.to_bytes()).expect("emitted packets parse");
            assert_eq!(again, repr);
        }
    }
});
