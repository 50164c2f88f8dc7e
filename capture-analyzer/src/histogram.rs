//! A sparse log-linear histogram of nanosecond gaps: HdrHistogram's buckets
//! at 3 significant digits (relative error <= 0.1 %), stored only where a
//! sample fell.
//!
//! A dense HdrHistogram sized for 1 ns .. 1 s holds ~21,500 counters
//! (172 KiB) whatever it records; a flow carries several distributions in
//! every phase window, so 8192 flows over four windows took 14 GB. BFD gaps
//! cluster around the transmit interval and fill a few hundred buckets, so
//! the sparse form holds the same figures in a few KiB per distribution.

/// Sub-buckets per bucket: the smallest power of two that keeps 3
/// significant digits (2 x 10^3 -> 2048), as HdrHistogram chooses.
const SUB_BUCKET_BITS: u32 = 11;
const SUB_BUCKET_COUNT: u64 = 1 << SUB_BUCKET_BITS;
const SUB_BUCKET_HALF_BITS: u32 = SUB_BUCKET_BITS - 1;

/// The bucket of `value`, as a key that orders as the values do: bucket 0
/// holds 0..2048 exactly; bucket b >= 1 holds [1024 << b, 2048 << b) in
/// steps of 1 << b.
fn key_of(value: u64) -> u32 {
    let bucket = (63 - (value | (SUB_BUCKET_COUNT - 1)).leading_zeros()) - SUB_BUCKET_HALF_BITS;
    let sub = (value >> bucket) as u32;
    (bucket << SUB_BUCKET_BITS) | sub
}

/// The lowest value of a key's bucket, and the bucket's width.
fn range_of(key: u32) -> (u64, u64) {
    let bucket = key >> SUB_BUCKET_BITS;
    let sub = u64::from(key & (SUB_BUCKET_COUNT as u32 - 1));
    (sub << bucket, 1 << bucket)
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SparseHistogram {
    /// (bucket key, samples), by key.
    counts: Vec<(u32, u64)>,
    len: u64,
}

impl SparseHistogram {
    #[inline]
    pub fn record(&mut self, value: u64) {
        let key = key_of(value);
        // Consecutive gaps of one flow mostly fall in the last bucket hit
        // or near it; a binary search over a few hundred keys otherwise.
        match self.counts.binary_search_by_key(&key, |&(k, _)| k) {
            Ok(i) => self.counts[i].1 += 1,
            Err(i) => self.counts.insert(i, (key, 1)),
        }
        self.len += 1;
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The union of two histograms.
    pub fn add(&mut self, other: &Self) {
        let (a, b) = (&self.counts, &other.counts);
        let mut merged = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            match (a.get(i), b.get(j)) {
                (Some(&(k, x)), Some(&(l, y))) if k == l => {
                    merged.push((k, x + y));
                    i += 1;
                    j += 1;
                }
                (Some(&x), Some(&y)) if x.0 < y.0 => {
                    merged.push(x);
                    i += 1;
                }
                (Some(&x), None) => {
                    merged.push(x);
                    i += 1;
                }
                (_, Some(&y)) => {
                    merged.push(y);
                    j += 1;
                }
                (None, None) => unreachable!("the loop runs while one has more"),
            }
        }
        self.counts = merged;
        self.len += other.len;
    }

    /// The value at each nearest rank (ascending ranks, each below `len`):
    /// the median of the bucket holding it, as HdrHistogram's
    /// `median_equivalent` reports it.
    pub fn values_at_ranks<const N: usize>(&self, ranks: [u64; N]) -> [u64; N] {
        let mut out = [0; N];
        let (mut next, mut seen) = (0, 0);
        for &(key, count) in &self.counts {
            seen += count;
            while next < N && seen > ranks[next] {
                let (low, width) = range_of(key);
                out[next] = low + (width >> 1);
                next += 1;
            }
            if next == N {
                break;
            }
        }
        out
    }

    /// (value, samples in its bucket and below) at `first`, `first x
    /// factor`, ... until every sample is counted: a CDF at log-spaced
    /// points in one pass.
    pub fn cumulative_log(&self, first: u64, factor: f64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let (mut at, mut seen, mut next) = (first.max(1) as f64, 0, 0);
        while !self.is_empty() {
            let value = at as u64;
            let key = key_of(value);
            while let Some(&(_, c)) = self.counts.get(next).filter(|&&(k, _)| k <= key) {
                seen += c;
                next += 1;
            }
            out.push((value, seen));
            if seen >= self.len {
                break;
            }
            at *= factor;
        }
        out
    }

    /// Buckets in use (for memory accounting and tests).
    pub fn buckets(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;

    /// A deterministic spread of gaps: a 10 ms cluster with jitter, a tail
    /// to seconds, and exact small values.
    fn samples() -> Vec<u64> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut v = Vec::new();
        for _ in 0..50_000 {
            v.push(8_000_000 + next() % 4_000_000);
        }
        for _ in 0..500 {
            v.push(1 + next() % 2_000_000_000);
        }
        v.extend(1..=3000);
        v
    }

    #[test]
    fn buckets_and_quantiles_are_hdrhistograms_at_three_digits() {
        let mut hdr = Histogram::<u64>::new(3).unwrap();
        let mut sparse = SparseHistogram::default();
        for s in samples() {
            hdr.record(s).unwrap();
            sparse.record(s);
        }
        assert_eq!(sparse.len(), hdr.len());
        for s in samples().into_iter().step_by(97) {
            let (low, width) = range_of(key_of(s));
            assert_eq!(low, hdr.lowest_equivalent(s), "{s}");
            assert_eq!(width, hdr.equivalent_range(s), "{s}");
        }
        let n = hdr.len();
        let qs = [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999];
        let ranks = qs.map(|q| ((q * n as f64).floor() as u64).min(n - 1));
        let got = sparse.values_at_ranks(ranks);
        for (i, &rank) in ranks.iter().enumerate() {
            // HdrHistogram's own nearest rank, bucket by bucket.
            let mut seen = 0;
            let want = hdr
                .iter_recorded()
                .find(|v| {
                    seen += v.count_at_value();
                    seen > rank
                })
                .map(|v| hdr.median_equivalent(v.value_iterated_to()))
                .unwrap();
            assert_eq!(got[i], want, "q{}", qs[i]);
        }
        // Far fewer buckets than a dense histogram's ~21,500 counters.
        assert!(sparse.buckets() < 4000, "{}", sparse.buckets());
    }

    #[test]
    fn the_union_is_the_histogram_of_both() {
        let all = samples();
        let (left, right) = all.split_at(all.len() / 3);
        let mut a = SparseHistogram::default();
        let mut b = SparseHistogram::default();
        let mut both = SparseHistogram::default();
        for &s in left {
            a.record(s);
            both.record(s);
        }
        for &s in right {
            b.record(s);
            both.record(s);
        }
        a.add(&b);
        assert_eq!(a, both);
        a.add(&SparseHistogram::default());
        assert_eq!(a, both);
    }

    #[test]
    fn the_log_spaced_cdf_is_cumulative_at_the_histogram_s_precision() {
        let mut h = SparseHistogram::default();
        for v in [5, 10, 10, 2_000_000, 9_000_000] {
            h.record(v);
        }
        let cdf = h.cumulative_log(1_000, 1.2);
        assert_eq!(cdf[0], (1_000, 3));
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(cdf.last().unwrap().1, 5);
        let at = |ns: u64| cdf.iter().rev().find(|&&(x, _)| x <= ns).unwrap().1;
        assert_eq!(at(8_000_000), 4);
        // 8.99 ms shares the 9 ms bucket (8192 ns wide there).
        assert_eq!(key_of(8_999_999), key_of(9_000_000));
    }
}
