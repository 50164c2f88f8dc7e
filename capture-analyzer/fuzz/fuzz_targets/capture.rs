//! Any bytes as a capture file: never a panic, only a result or an error.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_capture_analyzer::{analyze_reader, Options, Phase};

fuzz_target!(|data: &[u8]| {
    let options = Options {
        phases: vec![Phase { name: "all".into(), start_ns: i64::MIN, end_ns: i64::MAX }],
        timeline: true,
    };
    let _ = analyze_reader("fuzz", Box::new(std::io::Cursor::new(data.to_vec())), &options);
});
