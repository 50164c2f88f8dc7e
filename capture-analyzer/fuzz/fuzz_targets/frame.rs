//! Any bytes as a frame of every link type, then as a BFD payload.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_capture_analyzer::decode::{control, decode};
use linecard_capture_analyzer::reader::LinkType;

fuzz_target!(|data: &[u8]| {
    for link in [LinkType::Ethernet, LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::RawIp] {
        let _ = decode(link, data);
    }
    let _ = control(data);
});
