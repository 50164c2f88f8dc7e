//! Gap distributions: an HdrHistogram for percentiles, the exact maximum,
//! and the longest gaps with their timestamps. Integer nanoseconds inside;
//! milliseconds only in the summary.

use hdrhistogram::Histogram;
use serde::Serialize;

/// How many of the longest gaps each distribution keeps with timestamps.
const LONGEST_KEPT: usize = 5;

#[derive(Clone, Debug)]
pub struct GapStats {
    /// Nanoseconds, 3 significant digits (relative error <= 0.1 %),
    /// auto-resizing so memory follows the range seen, not the sample count.
    hist: Histogram<u64>,
    max_ns: u64,
    /// (gap, timestamp of the packet that ended it), longest first.
    longest: Vec<(u64, i64)>,
}

impl Default for GapStats {
    fn default() -> Self {
        Self { hist: Histogram::new(3).expect("3 significant digits is valid"), max_ns: 0, longest: Vec::new() }
    }
}

impl GapStats {
    #[inline]
    pub fn record(&mut self, gap_ns: u64, ended_at_ns: i64) {
        // Auto-resize makes record infallible for any u64.
        let _ = self.hist.record(gap_ns.max(1));
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
        out.hist.add(&b.hist).expect("auto-resizing histograms always merge");
        out.max_ns = a.max_ns.max(b.max_ns);
        out.longest.extend_from_slice(&b.longest);
        out.longest.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
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
        let mut out = [0; N];
        if n == 0 {
            return out;
        }
        let ranks = qs.map(|q| ((q * n as f64).floor() as u64).min(n - 1));
        let (mut next, mut seen) = (0, 0);
        for v in self.hist.iter_recorded() {
            seen += v.count_at_value();
            while next < N && seen > ranks[next] {
                out[next] = self.hist.median_equivalent(v.value_iterated_to()).min(self.max_ns);
                next += 1;
            }
            if next == N {
                break;
            }
        }
        out
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
            longest: self.longest.iter().map(|&(g, at)| LongGap { gap_ms: ms(g), ended_at_ns: at }).collect(),
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
            assert!(got.abs_diff(want) <= want / 1000 + 1, "q{q}: {got} vs {want}");
        }
        assert_eq!(s.max_ns(), 1_000_000);
        assert_eq!(s.summary().longest[0], LongGap { gap_ms: 1.0, ended_at_ns: 1000 });
        assert_eq!(s.summary().longest.len(), LONGEST_KEPT);
    }

    #[test]
    fn empty_distribution_is_zero_not_a_panic() {
        assert_eq!(GapStats::default().summary().count, 0);
    }
}
