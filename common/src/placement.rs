//! Evidence of where an XDP program ran.
//!
//! With plain veth, the receiver's XDP program runs on the *sender's* CPU;
//! the lab moves it onto the DUT's CPUs with RPS. A run proves where it ran by
//! reading a per-CPU counter rather than trusting the configuration.

/// Value of the per-CPU placement map (one entry, index 0).
///
/// Two `u64`s: 16 bytes, 8-aligned, no padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlacementCount {
    /// Frames the program saw on this CPU.
    pub packets: u64,
    /// Bytes of those frames (linear part, as XDP sees them).
    pub bytes: u64,
}

#[cfg(feature = "user")]
// SAFETY: `PlacementCount` is `repr(C)`, `Copy`, made only of integers and
// has no padding, so every bit pattern is a valid value.
unsafe impl aya::Pod for PlacementCount {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    #[test]
    fn placement_count_layout_is_pinned() {
        assert_eq!(size_of::<PlacementCount>(), 16);
        assert_eq!(align_of::<PlacementCount>(), 8);
        assert_eq!(offset_of!(PlacementCount, packets), 0);
        assert_eq!(offset_of!(PlacementCount, bytes), 8);
    }
}
