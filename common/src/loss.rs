//! Loss injected by the lab itself: the lab's kernel has no netem, so a
//! lossy link is an XDP program on an observer's bridge port that drops
//! BFD control frames (UDP 3784 and 4784) at a seeded, counted rate.

/// Value of the one-entry `LC_LOSS` array. Written by userspace before
/// attaching; the program advances `state`. 4 + 4 + 8 = 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossConfig {
    /// A frame is dropped when the top 32 bits of the next draw are below
    /// this: `rate * 2^32`.
    pub threshold: u32,
    pub _reserved: u32,
    /// xorshift64 state, seeded by userspace (never 0): the same seed and
    /// the same frames give the same drops.
    pub state: u64,
}

/// Indices of the per-CPU `LC_LOSS_COUNTS` array.
pub mod counter {
    /// BFD control frames the program judged.
    pub const SEEN: u32 = 0;
    /// Of those, dropped.
    pub const DROPPED: u32 = 1;
}
pub const LOSS_COUNTERS: u32 = 2;

impl LossConfig {
    /// `rate` in [0, 1]; a zero seed is replaced (xorshift stays at 0).
    pub fn new(rate: f64, seed: u64) -> Self {
        let rate = rate.clamp(0.0, 1.0);
        Self {
            threshold: (rate * 4_294_967_296.0).min(u32::MAX as f64) as u32,
            _reserved: 0,
            state: if seed == 0 {
                0x9e37_79b9_7f4a_7c15
            } else {
                seed
            },
        }
    }
}

/// One xorshift64 step (Marsaglia 2003): the program's and the tests' draw.
#[inline(always)]
pub fn next(state: u64) -> u64 {
    let mut x = state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

#[cfg(feature = "user")]
// SAFETY: repr(C), Copy, integers only, no padding (pinned below).
unsafe impl aya::Pod for LossConfig {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn loss_config_layout_is_pinned() {
        assert_eq!(size_of::<LossConfig>(), 16);
        assert_eq!(offset_of!(LossConfig, state), 8);
    }

    #[test]
    fn the_draw_drops_at_the_rate_asked() {
        let config = LossConfig::new(0.3, 7);
        let (mut state, mut dropped) = (config.state, 0u32);
        for _ in 0..100_000 {
            state = next(state);
            dropped += u32::from(((state >> 32) as u32) < config.threshold);
        }
        // 30 % of 100 000, within 5 standard deviations (145).
        assert!((29_275..=30_725).contains(&dropped), "{dropped}");
        assert_eq!(LossConfig::new(1.0, 1).threshold, u32::MAX);
        assert_eq!(LossConfig::new(0.0, 0).threshold, 0);
        assert_ne!(LossConfig::new(0.0, 0).state, 0);
    }
}
