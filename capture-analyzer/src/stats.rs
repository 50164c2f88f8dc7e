//! Gap distributions: a sparse HdrHistogram for percentiles, the exact maximum,
//! and the longest gaps with their timestamps. Integer nanoseconds inside;
//! milliseconds only in the summary.

use crate::histogram::SparseHistogram;
use serde::Serialize;

/// How many of the longest gaps each distribution keeps with timestamps.
const LONGEST_KEPT: usize = 5;

#[derive(Clone, Debug, Default)]
pub struct GapStats {
    /// Nanoseconds in HdrHistogram's buckets at 3 significant digits
    /// (relative error <= 0.1 %), stored only where samples fell: a flow
    /// carries several distributions in every phase window, and 8192 flows
    /// of dense histograms took 14 GB (`crate::histogram`).
    hist: SparseHistogram,
    max_ns: u64,
    /// (gap, timestamp of the packet that ended it), longest first.
    longest: Vec<(u64, i64)>,
}

impl GapStats {
    #[inline]
    pub fn record(&mut self, gap_ns: u64, ended_at_ns: i64) {
        self.hist.record(gap_ns.max(1));
        if gap_ns > self.max_ns {
            self.max_ns = gap_ns;
        }
        if self.longest.len() < LONGEST_KEPT || gap_ns > self.longest[self.longest.len() - 1].0 {
            let at = self.longest.partition_point(|&(g, _)| g >= gap_ns);
            self.longest.insert(at, (gap_ns, ended_at_ns));
            self.longest.truncate(LONGEST_KEPT);
        }
    }

    /// The union of two distributions (for example Up gaps and the rest).
    pub fn merged(a: &Self, b: &Self) -> Self {
        let mut out = a.clone();
        out.hist.add(&b.hist);
        out.max_ns = a.max_ns.max(b.max_ns);
        out.longest.extend_from_slice(&b.longest);
        out.longest
            .sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        out.longest.truncate(LONGEST_KEPT);
        out
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// Nearest rank, as the reference defines it: `v[min(n-1, floor(q*n))]`
    /// over the sorted gaps, resolved to the histogram bucket's median and
    /// never above the exact maximum.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        self.quantiles_ns([q])[0]
    }

    /// Several quantiles (ascending) in one pass over the histogram.
    fn quantiles_ns<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        let n = self.hist.len();
        if n == 0 {
            return [0; N];
        }
        let ranks = qs.map(|q| ((q * n as f64).floor() as u64).min(n - 1));
        self.hist.values_at_ranks(ranks).map(|v| v.min(self.max_ns))
    }

    /// The complementary CDF, P(gap > x), at log-spaced points from 1 us
    /// by factors of 1.2 (x in ms), for plots on log axes. Empty for an
    /// empty distribution.
    pub fn ccdf(&self) -> Vec<CcdfPoint> {
        let n = self.hist.len();
        self.hist
            .cumulative_log(1_000, 1.2)
            .into_iter()
            .map(|(x, seen)| CcdfPoint {
                gap_ms: x.min(self.max_ns) as f64 / 1e6,
                fraction_above: (n - seen.min(n)) as f64 / n as f64,
            })
            .collect()
    }

    pub fn summary(&self) -> GapSummary {
        let ms = |ns: u64| ns as f64 / 1e6;
        let [p50, p90, p99, p999] = self.quantiles_ns([0.50, 0.90, 0.99, 0.999]);
        GapSummary {
            count: self.count(),
            p50: ms(p50),
            p90: ms(p90),
            p99: ms(p99),
            p999: ms(p999),
            max: ms(self.max_ns),
            longest: self
                .longest
                .iter()
                .map(|&(g, at)| LongGap {
                    gap_ms: ms(g),
                    ended_at_ns: at,
                })
                .collect(),
        }
    }
}

/// A distribution in milliseconds (field names carry no unit because the
/// enclosing field does: `gap_ms`, `up_gap_ms`, ...).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct GapSummary {
    /// Number of samples.
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    /// Exact maximum.
    pub max: f64,
    /// The longest samples, longest first, with the timestamp (ns since the
    /// epoch) of the packet that ended each.
    pub longest: Vec<LongGap>,
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct CcdfPoint {
    pub gap_ms: f64,
    /// Share of gaps longer than `gap_ms`.
    pub fraction_above: f64,
}

/// The largest gap per time bin, for a gap time series of bounded size:
/// when the bins would exceed [`Timeline::MAX_BINS`], neighbours merge and
/// the bin width doubles, so memory follows neither duration nor packets.
#[derive(Clone, Debug)]
pub struct Timeline {
    origin_ns: i64,
    bin_ns: i64,
    max_gap_ns: Vec<u64>,
}

impl Default for Timeline {
    fn default() -> Self {
        Self {
            origin_ns: i64::MIN,
            bin_ns: 10_000_000,
            max_gap_ns: Vec::new(),
        }
    }
}

impl Timeline {
    pub const MAX_BINS: usize = 1024;

    pub fn record(&mut self, at_ns: i64, gap_ns: u64) {
        if self.origin_ns == i64::MIN {
            self.origin_ns = at_ns;
        }
        let mut index = ((at_ns - self.origin_ns).max(0) / self.bin_ns) as usize;
        while index >= Self::MAX_BINS {
            self.max_gap_ns = self
                .max_gap_ns
                .chunks(2)
                .map(|pair| pair.iter().copied().max().unwrap_or(0))
                .collect();
            self.bin_ns *= 2;
            index = ((at_ns - self.origin_ns).max(0) / self.bin_ns) as usize;
        }
        if self.max_gap_ns.len() <= index {
            self.max_gap_ns.resize(index + 1, 0);
        }
        self.max_gap_ns[index] = self.max_gap_ns[index].max(gap_ns);
    }

    /// (bin start in ns since the epoch, largest gap in ms) for non-empty bins.
    pub fn points(&self) -> Vec<TimelinePoint> {
        self.max_gap_ns
            .iter()
            .enumerate()
            .filter(|(_, &g)| g > 0)
            .map(|(i, &g)| TimelinePoint {
                at_ns: self.origin_ns + i as i64 * self.bin_ns,
                max_gap_ms: g as f64 / 1e6,
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct TimelinePoint {
    pub at_ns: i64,
    pub max_gap_ms: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LongGap {
    pub gap_ms: f64,
    pub ended_at_ns: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_sorted_definition() {
        let mut s = GapStats::default();
        // 1..=1000 microseconds: exact in a 3-digit histogram below 2048 us.
        for us in 1..=1000u64 {
            s.record(us * 1000, us as i64);
        }
        let exact = |q: f64| {
            let n = 1000.0;
            (((q * n) as usize).min(999) + 1) as u64 * 1000
        };
        for q in [0.5, 0.9, 0.99, 0.999] {
            let got = s.quantile_ns(q);
            let want = exact(q);
            assert!(
                got.abs_diff(want) <= want / 1000 + 1,
                "q{q}: {got} vs {want}"
            );
        }
        assert_eq!(s.max_ns(), 1_000_000);
        assert_eq!(
            s.summary().longest[0],
            LongGap {
                gap_ms: 1.0,
                ended_at_ns: 1000
            }
        );
        assert_eq!(s.summary().longest.len(), LONGEST_KEPT);
    }

    #[test]
    fn ccdf_falls_from_one_to_zero() {
        let mut s = GapStats::default();
        for i in 1..=100u64 {
            s.record(i * 100_000, 0);
        }
        let c = s.ccdf();
        assert!(c.first().unwrap().fraction_above > 0.9);
        assert_eq!(c.last().unwrap().fraction_above, 0.0);
        assert!(c
            .windows(2)
            .all(|w| w[0].fraction_above >= w[1].fraction_above));
    }

    #[test]
    fn timeline_stays_bounded_and_keeps_the_maximum() {
        let mut t = Timeline::default();
        for i in 0..100_000i64 {
            t.record(
                i * 10_000_000,
                if i == 77_777 { 500_000_000 } else { 10_000_000 },
            );
        }
        let points = t.points();
        assert!(points.len() <= Timeline::MAX_BINS);
        assert_eq!(
            points.iter().map(|p| p.max_gap_ms).fold(0.0, f64::max),
            500.0
        );
    }

    #[test]
    fn empty_distribution_is_zero_not_a_panic() {
        assert_eq!(GapStats::default().summary().count, 0);
    }
}
