//! The `xdp` backend: RX-clocked replies from an XDP program.

use super::Availability;

/// The XDP backend needs the embedded object (absent when the crate was
/// built without the BPF toolchain, or stale against this binary's layout).
pub fn availability() -> Availability {
    match linecard_bpf_objects::object() {
        Ok(_) => Availability::Available,
        Err(e) => Availability::Unavailable {
            reason: e.to_string(),
        },
    }
}
