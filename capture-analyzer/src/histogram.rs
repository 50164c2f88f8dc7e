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

/// The bucket of `value`, as a key that orders as the values do and
/// leaves no key unused: bucket 0 holds 0..2048 exactly (keys 0..2048);
/// bucket b >= 1 holds [1024 << b, 2048 << b) in steps of 1 << b (keys
/// from 1024 (b + 1) up), so a flow's jittered gaps fill contiguous keys
/// even across a bucket boundary (10 ms BFD: 7.5-10 ms, about 410 keys).
fn key_of(value: u64) -> u32 {
    let bucket = (63 - (value | (SUB_BUCKET_COUNT - 1)).leading_zeros()) - SUB_BUCKET_HALF_BITS;
    let sub = (value >> bucket) as u32;
    (bucket << SUB_BUCKET_HALF_BITS) + sub
}

/// The lowest value of a key's bucket, and the bucket's width.
fn range_of(key: u32) -> (u64, u64) {
    if u64::from(key) < SUB_BUCKET_COUNT {
        return (u64::from(key), 1);
    }
    let bucket = (key >> SUB_BUCKET_HALF_BITS) - 1;
    let sub = u64::from(key - (bucket << SUB_BUCKET_HALF_BITS));
    (sub << bucket, 1 << bucket)
}

/// Most bucket keys the dense window spans: a BFD flow's jittered gaps
/// (75-100 % of its interval, RFC 5880 6.8.7) fill 256-512 contiguous
/// keys at any interval, so its samples land in the window by index;
/// outliers (a 1 s stall among 10 ms gaps) go to the sparse list.
const DENSE_SPAN: u32 = 1024;

/// Keys the dense window widens by at a time (`widen_to`).
const WIDEN_BY: u32 = 32;

/// `count` more samples of `key` in `list` (sorted by key).
fn carry(list: &mut Vec<(u32, u64)>, key: u32, count: u64) {
    match list.binary_search_by_key(&key, |&(k, _)| k) {
        Ok(i) => list[i].1 += count,
        Err(i) => list.insert(i, (key, count)),
    }
}

#[derive(Clone, Debug, Default)]
pub struct SparseHistogram {
    /// Samples of keys `dense_base ..`, by index: where a flow's gaps
    /// cluster, recorded without a search. 32 bits a bucket keeps a
    /// window no larger than the sparse list it replaces; a count past
    /// `u32::MAX` (4.3 billion gaps in one bucket) goes on in `carried`.
    dense_base: u32,
    dense: Vec<u32>,
    /// What the dense counts could not hold, by key (almost always empty).
    carried: Vec<(u32, u64)>,
    /// (bucket key, samples), by key, for keys outside the dense window:
    /// the window only grows, and only to a key it can take without
    /// spanning more than `DENSE_SPAN`, so a key refused once is never in
    /// it later.
    sparse: Vec<(u32, u64)>,
    len: u64,
}

impl PartialEq for SparseHistogram {
    /// The same samples, however they were laid out.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl SparseHistogram {
    #[inline]
    pub fn record(&mut self, value: u64) {
        self.record_key(key_of(value), 1);
    }

    #[inline]
    fn record_key(&mut self, key: u32, count: u64) {
        self.len += count;
        let in_window = (key.wrapping_sub(self.dense_base) as usize) < self.dense.len();
        if !(in_window || self.widen_to(key)) {
            return carry(&mut self.sparse, key, count);
        }
        let slot = &mut self.dense[key.wrapping_sub(self.dense_base) as usize];
        let sum = u64::from(*slot) + count;
        *slot = u32::try_from(sum).unwrap_or(u32::MAX);
        if sum > u64::from(u32::MAX) {
            carry(&mut self.carried, key, sum - u64::from(u32::MAX));
        }
    }

    /// Widens the dense window to take `key` when it can without spanning
    /// more than `DENSE_SPAN` keys; whether it did. It widens by
    /// `WIDEN_BY` keys at a time, to exactly that capacity: a flow's first
    /// gaps widen it a handful of times, and it holds no slack. Never
    /// over a key already in the sparse list: that key lies beyond
    /// `DENSE_SPAN` of every key the window has held.
    fn widen_to(&mut self, key: u32) -> bool {
        if self.dense.is_empty() {
            // One key: a flow whose gaps all fall in one bucket (a
            // synthetic capture's) holds four bytes.
            (self.dense_base, self.dense) = (key, vec![0]);
            return true;
        }
        let (base, top) = (
            self.dense_base,
            self.dense_base + self.dense.len() as u32 - 1,
        );
        if top.max(key) - base.min(key) >= DENSE_SPAN {
            return false;
        }
        let (new_base, new_top) = if key < base {
            let floor = (top + 1).saturating_sub(DENSE_SPAN);
            (key.saturating_sub(WIDEN_BY - 1).max(floor), top)
        } else {
            (
                base,
                key.saturating_add(WIDEN_BY - 1).min(base + DENSE_SPAN - 1),
            )
        };
        let mut widened = Vec::with_capacity((new_top - new_base + 1) as usize);
        widened.resize((base - new_base) as usize, 0);
        widened.extend_from_slice(&self.dense);
        widened.resize((new_top - new_base + 1) as usize, 0);
        (self.dense_base, self.dense) = (new_base, widened);
        true
    }

    /// (bucket key, samples) of every bucket in use, by key.
    fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        // The sparse keys lie below the window or above it, never in it.
        let split = self.sparse.partition_point(|&(k, _)| k < self.dense_base);
        let (below, above) = self.sparse.split_at(split);
        let carried = |key: u32| match self.carried.binary_search_by_key(&key, |&(k, _)| k) {
            Ok(i) => self.carried[i].1,
            Err(_) => 0,
        };
        let dense = (self.dense.iter().enumerate())
            .filter(|&(_, &count)| count > 0)
            .map(move |(i, &count)| {
                let key = self.dense_base + i as u32;
                (key, u64::from(count) + carried(key))
            });
        below
            .iter()
            .copied()
            .chain(dense)
            .chain(above.iter().copied())
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The union of two histograms.
    pub fn add(&mut self, other: &Self) {
        for (key, count) in other.iter() {
            self.record_key(key, count);
        }
    }

    /// The value at each nearest rank (ascending ranks, each below `len`):
    /// the median of the bucket holding it, as HdrHistogram's
    /// `median_equivalent` reports it.
    pub fn values_at_ranks<const N: usize>(&self, ranks: [u64; N]) -> [u64; N] {
        let mut out = [0; N];
        let (mut next, mut seen) = (0, 0);
        for (key, count) in self.iter() {
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
        let mut buckets = self.iter().peekable();
        let (mut at, mut seen) = (first.max(1) as f64, 0);
        while !self.is_empty() {
            let value = at as u64;
            let key = key_of(value);
            while let Some((_, c)) = buckets.next_if(|&(k, _)| k <= key) {
                seen += c;
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
        self.iter().count()
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
    fn the_dense_window_and_the_sparse_list_hold_every_bucket_once_in_order() {
        // Each order the window meets: rising, falling (it grows down),
        // outliers first (they take the window, the cluster goes sparse).
        let mut orders = vec![samples()];
        orders.push(samples().into_iter().rev().collect());
        let mut outliers_first = samples();
        outliers_first.sort_by_key(|&v| std::cmp::Reverse(v % 7));
        orders.push(outliers_first);
        for order in orders {
            let mut h = SparseHistogram::default();
            let mut want = std::collections::BTreeMap::new();
            for &v in &order {
                h.record(v);
                *want.entry(key_of(v)).or_insert(0u64) += 1;
            }
            assert_eq!(
                h.iter().collect::<Vec<_>>(),
                want.into_iter().collect::<Vec<_>>()
            );
            assert!(h.dense.len() <= DENSE_SPAN as usize);
            assert_eq!(h.len(), order.len() as u64);
        }
    }

    #[test]
    fn a_bfd_flow_s_jittered_gaps_land_in_the_window_whatever_its_interval() {
        // 75-100 % of the interval (RFC 5880 6.8.7), across the 8.39 ms
        // bucket boundary at 10 ms; at 300 ms and 1 s as well.
        for interval in [10_000_000u64, 300_000_000, 1_000_000_000] {
            let mut h = SparseHistogram::default();
            for i in 0..10_000 {
                h.record(interval * 3 / 4 + interval / 4 * i / 10_000);
            }
            assert!(h.sparse.is_empty(), "{interval}: {} sparse", h.sparse.len());
            assert!(
                h.dense.len() <= 512 + 2 * WIDEN_BY as usize,
                "{interval}: {}",
                h.dense.len()
            );
        }
    }

    #[test]
    fn a_bucket_past_four_billion_samples_keeps_counting() {
        let mut h = SparseHistogram::default();
        let key = key_of(10_000_000);
        h.record_key(key, u64::from(u32::MAX) - 1);
        h.record_key(key, 5);
        h.record(10_000_000);
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            [(key, u64::from(u32::MAX) + 5)]
        );
        assert_eq!(h.len(), u64::from(u32::MAX) + 5);
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
