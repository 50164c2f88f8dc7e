//! Gap histograms: how long each session went between two packets, as the
//! plane that handled them measured it (issue 41). The fast path records
//! into the per-CPU `LC_GAPS` map by slot; userspace keeps the same type
//! for the packets it handles itself; the engine's metrics endpoint sums
//! both. One definition of the buckets for both planes, so that the
//! kernel's and userspace's counts add up.
//!
//! Two views of every gap: in seconds ([`GAP_BOUNDS_NS`]), and as a
//! fraction of the detection time it ran against ([`RATIO_BUCKETS`], in
//! tenths): the operator's signal, which compares sessions with different
//! timers and which a p99 hides (a gap of 0.9 of the detection time is one
//! late packet from a false Down, RFC 5880 6.8.4).

/// Upper bounds (inclusive) of the seconds buckets, ns; one more bucket
/// above the last holds the rest (+Inf). From 1 ms, under the fastest
/// interval a 3 x 10 ms session can carry jittered, to 5 s, past the
/// slowest detection time the lab runs.
pub const GAP_BOUNDS_NS: [u64; 15] = [
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    15_000_000,
    20_000_000,
    30_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    300_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
];
/// The seconds buckets, +Inf included.
pub const GAP_BUCKETS: usize = GAP_BOUNDS_NS.len() + 1;
/// The ratio buckets, by [`ratio_bucket`]: gap / detection time 0, then at
/// most 0.1, 0.2, ... 1.0, then above it (+Inf).
pub const RATIO_BUCKETS: usize = 12;

/// The seconds bucket of `gap_ns`: the first whose bound it does not
/// exceed. A compare chain without a loop variable the verifier must
/// bound.
#[inline(always)]
pub const fn gap_bucket(gap_ns: u64) -> usize {
    let mut i = 0;
    while i < GAP_BOUNDS_NS.len() {
        if gap_ns <= GAP_BOUNDS_NS[i] {
            return i;
        }
        i += 1;
    }
    GAP_BOUNDS_NS.len()
}

/// `gap_ns` in thousandths of `detect_ns`, rounded up; `None` without a
/// detection time (nothing heard yet to set it). Wrapping only past 200
/// days of gap (a checked multiply needs a 128-bit helper BPF does not
/// have).
#[inline(always)]
pub const fn ratio_permille(gap_ns: u64, detect_ns: u64) -> Option<u64> {
    if detect_ns == 0 {
        return None;
    }
    Some(gap_ns.wrapping_mul(1000).wrapping_add(detect_ns - 1) / detect_ns)
}

/// The ratio bucket of a gap `permille` thousandths of its detection time
/// ([`ratio_permille`]): the least number of tenths that holds it
/// (ceil(ceil(1000 r) / 100) = ceil(10 r): exact), 0 for no gap at all, 11
/// beyond a whole detection time. Clamped last and by one compare, so that
/// the verifier sees the index bounded (an index one below, as LLVM
/// rewrote it, was refused; a compare chain per tenth cost 200 000
/// verified instructions).
#[inline(always)]
pub const fn ratio_bucket_of(permille: u64) -> usize {
    // Not div_ceil: its remainder test is a branch the verifier explores
    // twice on every path after it.
    #[allow(clippy::manual_div_ceil)]
    let tenths = (permille + 99) / 100;
    let last = RATIO_BUCKETS as u64 - 1;
    (if tenths > last { last } else { tenths }) as usize
}

/// The ratio bucket of `gap_ns` against `detect_ns` (`None`: no detection
/// time).
pub const fn ratio_bucket(gap_ns: u64, detect_ns: u64) -> Option<usize> {
    match ratio_permille(gap_ns, detect_ns) {
        Some(permille) => Some(ratio_bucket_of(permille)),
        None => None,
    }
}

/// The ratio thresholds the over-budget counters count gaps beyond, in
/// tenths of the detection time: 0.5, 0.8 and 1.0. Each is a bucket
/// boundary, so the counts are exact sums of [`GapHistogram::ratio`]
/// ([`GapHistogram::over_budget`]).
pub const OVER_BUDGET_TENTHS: [usize; 3] = [5, 8, 10];

/// The largest gap of one scrape window, in one of
/// [`GapHistogram::windows`]' two slots.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowSlot {
    /// The window it holds.
    pub window: u64,
    /// Its largest gap, ns, and the recorder's clock (`CLOCK_MONOTONIC`
    /// in the kernel) when that gap ended.
    pub max_ns: u64,
    pub max_at_ns: u64,
}

/// One direction's gaps of one session, as one plane (one CPU of the fast
/// path, or userspace) measured them. 4 + 6 + 16 + 12 = 38 u64s, 304
/// bytes, no padding; what every gap writes (the sums, the maxima, the
/// window's slot) first, in the first 80 bytes.
///
/// Besides the counts since start, the largest gap of the current scrape
/// window and when it ended, in two slots by the window's parity: the
/// endpoint opens window `w + 1` (the kernel's `LC_GAPS_WINDOW`) before it
/// reads window `w`'s slot, so that a packet recorded meanwhile lands in
/// the other slot instead of overwriting what is being read.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GapHistogram {
    /// Gaps recorded, and their sum, ns.
    pub count: u64,
    pub sum_ns: u64,
    /// The sum of the ratios counted in `ratio`, in thousandths (each
    /// rounded up).
    pub ratio_sum_permille: u64,
    /// The largest gap recorded, ns.
    pub max_ns: u64,
    /// By the window's parity.
    pub windows: [WindowSlot; 2],
    /// Counts by [`gap_bucket`].
    pub seconds: [u64; GAP_BUCKETS],
    /// Counts by [`ratio_bucket`] (gaps without a detection time are in
    /// `seconds` only).
    pub ratio: [u64; RATIO_BUCKETS],
}

impl Default for GapHistogram {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl GapHistogram {
    pub const EMPTY: Self = Self {
        seconds: [0; GAP_BUCKETS],
        ratio: [0; RATIO_BUCKETS],
        count: 0,
        sum_ns: 0,
        ratio_sum_permille: 0,
        max_ns: 0,
        windows: [WindowSlot {
            window: 0,
            max_ns: 0,
            max_at_ns: 0,
        }; 2],
    };

    /// Records one gap that ran against `detect_ns` (0: none yet) and
    /// ended at `at_ns`, in scrape window `window`.
    #[inline(always)]
    pub fn record(&mut self, gap_ns: u64, detect_ns: u64, at_ns: u64, window: u64) {
        let bucket = gap_bucket(gap_ns);
        if bucket < GAP_BUCKETS {
            self.seconds[bucket] += 1;
        }
        if let Some(permille) = ratio_permille(gap_ns, detect_ns) {
            self.ratio[ratio_bucket_of(permille)] += 1;
            self.ratio_sum_permille += permille;
        }
        self.count += 1;
        self.sum_ns += gap_ns;
        if gap_ns > self.max_ns {
            self.max_ns = gap_ns;
        }
        // A bit mask, not `% 2`: the verifier sees the index bounded.
        let slot = &mut self.windows[(window & 1) as usize];
        // One branch, not two (`|`, not `||`): each is a path the verifier
        // walks on to the program's end.
        if (slot.window != window) | (gap_ns > slot.max_ns) {
            *slot = WindowSlot {
                window,
                max_ns: gap_ns,
                max_at_ns: at_ns,
            };
        }
    }

    /// The largest gap of scrape window `window` and when it ended, if
    /// one was recorded in it.
    pub fn window_max(&self, window: u64) -> Option<(u64, u64)> {
        let slot = &self.windows[(window & 1) as usize];
        (slot.window == window && slot.max_ns > 0).then_some((slot.max_ns, slot.max_at_ns))
    }

    /// `other`'s counts added to these (per-CPU values, or both planes).
    pub fn add(&mut self, other: &Self) {
        for (a, b) in self.seconds.iter_mut().zip(other.seconds) {
            *a += b;
        }
        for (a, b) in self.ratio.iter_mut().zip(other.ratio) {
            *a += b;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.ratio_sum_permille += other.ratio_sum_permille;
        self.max_ns = self.max_ns.max(other.max_ns);
        // Each slot keeps the later window's, the larger gap of the same.
        for (mine, theirs) in self.windows.iter_mut().zip(other.windows) {
            if (theirs.window, theirs.max_ns) > (mine.window, mine.max_ns) {
                *mine = theirs;
            }
        }
    }

    /// Gaps longer than `tenths` tenths of their detection time.
    pub fn over_budget(&self, tenths: usize) -> u64 {
        self.ratio.iter().skip(tenths + 1).sum()
    }
}

/// Value of the per-CPU `LC_GAPS` array by slot: the fast path's receive
/// gaps (between valid packets from the peer, against our detection time)
/// and transmit gaps (before each RX-clocked reply, since our last packet
/// whoever sent it, against the peer's detection time). 608 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionGaps {
    pub rx: GapHistogram,
    pub tx: GapHistogram,
}

#[cfg(feature = "user")]
// SAFETY: repr(C), Copy, u64s only, no padding (pinned below): every bit
// pattern is a valid value.
unsafe impl aya::Pod for SessionGaps {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    const MS: u64 = 1_000_000;

    #[test]
    fn layout_is_pinned() {
        assert_eq!(size_of::<WindowSlot>(), 24);
        assert_eq!(size_of::<GapHistogram>(), 304);
        assert_eq!(offset_of!(GapHistogram, max_ns), 24);
        assert_eq!(offset_of!(GapHistogram, windows), 32);
        assert_eq!(offset_of!(GapHistogram, seconds), 80);
        assert_eq!(offset_of!(GapHistogram, ratio), 208);
        assert_eq!(size_of::<SessionGaps>(), 608);
        assert_eq!(offset_of!(SessionGaps, tx), 304);
    }

    #[test]
    fn a_gap_on_a_bound_is_in_that_bucket_and_one_past_it_in_the_next() {
        assert_eq!(gap_bucket(0), 0);
        assert_eq!(gap_bucket(10 * MS), 3);
        assert_eq!(gap_bucket(10 * MS + 1), 4);
        assert_eq!(gap_bucket(5_000 * MS), 14);
        assert_eq!(gap_bucket(5_000 * MS + 1), 15);
        assert_eq!(gap_bucket(u64::MAX), GAP_BUCKETS - 1);
    }

    #[test]
    fn the_ratio_bucket_holds_the_gap_in_tenths_of_the_detection_time() {
        // 3 x 10 ms: a detection time of 30 ms.
        let detect = 30 * MS;
        assert_eq!(ratio_bucket(0, detect), Some(0));
        assert_eq!(ratio_bucket(1, detect), Some(1));
        assert_eq!(ratio_bucket(3 * MS, detect), Some(1));
        assert_eq!(ratio_bucket(3 * MS + 1, detect), Some(2));
        assert_eq!(ratio_bucket(10 * MS, detect), Some(4));
        assert_eq!(ratio_bucket(24 * MS, detect), Some(8));
        assert_eq!(ratio_bucket(24 * MS + 1, detect), Some(9));
        assert_eq!(ratio_bucket(30 * MS, detect), Some(10));
        assert_eq!(ratio_bucket(30 * MS + 1, detect), Some(11));
        assert_eq!(ratio_bucket(3_600_000 * MS, detect), Some(11), "an hour");
        assert_eq!(ratio_bucket(5 * MS, 0), None);
    }

    #[test]
    fn over_budget_counts_exactly_the_gaps_beyond_each_threshold() {
        let mut h = GapHistogram::EMPTY;
        let detect = 30 * MS;
        // 0.5 exactly (not over), just over 0.5, 0.8 exactly, just over
        // 0.8, a whole detection time, past it; and one without a
        // detection time (seconds only).
        for gap in [15 * MS, 15 * MS + 1, 24 * MS, 24 * MS + 1, 30 * MS, 31 * MS] {
            h.record(gap, detect, 0, 0);
        }
        h.record(40 * MS, 0, 0, 0);
        assert_eq!(h.over_budget(5), 5);
        assert_eq!(h.over_budget(8), 3);
        assert_eq!(h.over_budget(10), 1);
        assert_eq!(h.count, 7);
        assert_eq!(h.seconds.iter().sum::<u64>(), 7);
        assert_eq!(h.ratio.iter().sum::<u64>(), 6);
        assert_eq!(h.max_ns, 40 * MS);
        // 500 + 501 + 800 + 801 + 1000 + 1034 thousandths.
        assert_eq!(h.ratio_sum_permille, 4636);
        let mut twice = h;
        twice.add(&h);
        assert_eq!(
            (twice.count, twice.over_budget(8), twice.max_ns),
            (14, 6, 40 * MS)
        );
    }

    #[test]
    fn a_window_keeps_its_largest_gap_until_the_one_after_next_reuses_its_slot() {
        let mut h = GapHistogram::EMPTY;
        assert_eq!(h.window_max(0), None, "nothing recorded");
        h.record(12 * MS, 0, 100, 0);
        h.record(17 * MS, 0, 200, 0);
        h.record(9 * MS, 0, 300, 0);
        assert_eq!(h.window_max(0), Some((17 * MS, 200)));
        // The endpoint opened window 1: window 0 stays readable.
        h.record(5 * MS, 0, 400, 1);
        assert_eq!(h.window_max(0), Some((17 * MS, 200)));
        assert_eq!(h.window_max(1), Some((5 * MS, 400)));
        // Window 2 reuses window 0's slot, from its first gap on.
        assert_eq!(h.window_max(2), None);
        h.record(3 * MS, 0, 500, 2);
        assert_eq!(h.window_max(2), Some((3 * MS, 500)));
        assert_eq!(h.window_max(0), None);
        assert_eq!(h.max_ns, 17 * MS, "the maximum since start stays");
        // Per-CPU values summed: the later window's slot wins, then the
        // larger gap of the same window.
        let mut other = GapHistogram::EMPTY;
        other.record(8 * MS, 0, 600, 2);
        other.record(30 * MS, 0, 700, 1);
        h.add(&other);
        assert_eq!(h.window_max(2), Some((8 * MS, 600)));
        assert_eq!(h.window_max(1), Some((30 * MS, 700)));
    }
}
