//! What bounds the kernel's digest work per authenticated session: a
//! budget for the digests it computes, and the digests it already knows.
//!
//! A keyed MD5 or SHA1 digest costs the fast path about a microsecond
//! (20-50 times any other check), and anyone who can put frames on the
//! link can make it compute one per frame: a Sequence Number inside
//! bfd.RcvAuthSeq's window (RFC 5880 6.7.3-6.7.4) and any digest will do.
//! Two rules keep that cost bounded without starving the real peer:
//!
//! - **Expected digests.** The peer's next packets are its last accepted
//!   one with the Sequence Number moved on, so the kernel computes the
//!   digests of the next [`LOOKAHEAD`] numbers under the same header and
//!   key ahead of time (the detection sweep does, within half a
//!   millisecond of the packet: `SWEEP_PERIOD_NS`). A frame with that
//!   header and one of those numbers is judged by comparing 20 bytes: the
//!   real peer's packet matches, a forgery of it does not, and neither
//!   computes a digest. In the steady state this costs one digest per
//!   genuine packet, as verifying it would.
//! - **A budget for the rest.** Any other frame (another header, a number
//!   not yet expected) computes a digest only while the session has
//!   credit: [`BUDGET_MULTIPLE`] digests per interval of the peer's
//!   legitimate rate, up to [`BUDGET_BURST`] at once, a genuine packet's
//!   digest refunded. Past it the frame is refused uncomputed
//!   (`drop::VERIFY_BUDGET`).
//!
//! A flood of in-window frames that differ from the peer's header can
//! then take at most the budget, and the peer's own packets, expected,
//! never need it. What the budget can still refuse is a packet of the
//! peer's that is not its last one moved on (a Poll, a Final, a state or
//! timer change) while a flood holds the credit at zero: the peer repeats
//! a Poll until it is answered (6.5), and a changed header is expected
//! again once one such packet has been verified.

use crate::bfd::AuthSecret;

/// Digests the budget allows per interval of the peer's legitimate rate.
pub const BUDGET_MULTIPLE: u64 = 4;
/// Digests the budget allows at once: a Poll sequence, a state change,
/// the peer's own restart.
pub const BUDGET_BURST: u64 = 16;
/// The interval the budget assumes when the packet and our Required Min
/// RX name a shorter one (or none): the budget never exceeds
/// [`BUDGET_MULTIPLE`] digests a millisecond.
pub const BUDGET_FLOOR_INTERVAL_NS: u64 = 1_000_000;
/// How many Sequence Numbers past the last accepted one have their digest
/// computed in advance: the peer's next packet, and the two after it
/// should the ones before be lost.
pub const LOOKAHEAD: u32 = 3;
/// Slots of [`VerifyGuard`]'s ring of expected digests: the last accepted
/// number and the [`LOOKAHEAD`] after it, indexed by the number modulo 4.
pub const EXPECTED_SLOTS: usize = 4;
/// Bytes of a keyed packet that must match the last accepted one for its
/// expected digests to apply: the 24-byte control packet and the section's
/// Auth Type, Auth Len, Auth Key ID and Reserved (RFC 5880 4.3-4.4).
pub const HEADER_LEN: usize = 28;

/// Value of the `LC_VERIFY` array (index: `SessionConfig::slot`): written
/// by the kernel only (the fast path, and the sweep's expected digests);
/// userspace reads its counts. 4 x 8 + 24 + 28 + 4 + 4 + 4 x 4 + 4 x 4 +
/// 4 x 20 = 204, padded to 208 bytes, 8-aligned.
///
/// The fast path (one CPU per flow: only the peer's genuine packets write
/// the header) and the sweep (another CPU, maybe) share it like a
/// seqlock: the fast path makes `generation` odd while it rewrites
/// `header` and `secret`, and the sweep computes only from a copy taken
/// between two equal even reads of it. An expected digest counts only
/// while its slot's generation is the guard's: one computed for a header
/// since replaced is never compared.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyGuard {
    /// The budget's credit, ns of [`digest_cost_ns`] (see [`Budget`]).
    pub credit_ns: u64,
    /// `bpf_ktime_get_ns` when `credit_ns` was last brought up to date.
    pub credited_at_ns: u64,
    /// Digests computed to verify a frame (budgeted).
    pub computed: u64,
    /// Frames judged against an expected digest, none computed.
    pub expected_hits: u64,
    /// The key the expected digests were computed with: a secret changed
    /// under the same Key ID makes them stale.
    pub secret: AuthSecret,
    /// The first [`HEADER_LEN`] bytes of the last accepted packet.
    pub header: [u8; HEADER_LEN],
    /// Even and non-zero once a header is set; odd while it is rewritten.
    pub generation: u32,
    /// The Sequence Number of the last accepted packet.
    pub accepted: u32,
    /// The Sequence Number each slot's digest is for.
    pub sequences: [u32; EXPECTED_SLOTS],
    /// The `generation` each slot's digest was computed under.
    pub generations: [u32; EXPECTED_SLOTS],
    /// The digest of `header` with that number and `secret` (MD5 uses 16
    /// of the 20 bytes).
    pub digests: [[u8; 20]; EXPECTED_SLOTS],
    pub _reserved: u32,
}

impl VerifyGuard {
    /// The slot of Sequence Number `sequence` in the ring.
    pub const fn slot_of(sequence: u32) -> usize {
        (sequence as usize) % EXPECTED_SLOTS
    }

    /// The expected digest of `sequence` under the current header, if the
    /// ring holds it.
    pub fn expected(&self, sequence: u32) -> Option<&[u8; 20]> {
        let slot = Self::slot_of(sequence);
        (self.generation != 0
            && self.generations[slot] == self.generation
            && self.sequences[slot] == sequence)
            .then_some(&self.digests[slot])
    }

    /// The first of the [`LOOKAHEAD`] numbers after the last accepted one
    /// whose digest the ring lacks: the sweep's next to compute.
    pub fn first_missing(&self) -> Option<u32> {
        if self.generation == 0 || self.generation % 2 == 1 {
            return None;
        }
        let mut ahead = 1;
        while ahead <= LOOKAHEAD {
            let sequence = self.accepted.wrapping_add(ahead);
            if self.expected(sequence).is_none() {
                return Some(sequence);
            }
            ahead += 1;
        }
        None
    }

    /// Records `digest` as expected for `sequence` under `generation`.
    pub fn remember(&mut self, sequence: u32, generation: u32, digest: &[u8; 20]) {
        let slot = Self::slot_of(sequence);
        self.digests[slot] = *digest;
        self.sequences[slot] = sequence;
        self.generations[slot] = generation;
    }
}

/// What one budgeted digest costs the session's credit, ns: the peer's
/// legitimate interval (the slower of its Desired Min TX and our Required
/// Min RX, RFC 5880 6.8.7, floored) over [`BUDGET_MULTIPLE`].
pub const fn digest_cost_ns(remote_desired_min_tx_us: u32, local_required_min_rx_us: u32) -> u64 {
    let slower = if remote_desired_min_tx_us > local_required_min_rx_us {
        remote_desired_min_tx_us
    } else {
        local_required_min_rx_us
    } as u64
        * 1_000;
    let interval = if slower > BUDGET_FLOOR_INTERVAL_NS {
        slower
    } else {
        BUDGET_FLOOR_INTERVAL_NS
    };
    interval / BUDGET_MULTIPLE
}

/// The budget as a token bucket measured in time: credit accrues one ns
/// per ns, up to [`BUDGET_BURST`] digests' worth; a digest takes
/// `cost_ns` of it.
pub struct Budget;

impl Budget {
    /// The credit at `now_ns`, from the guard's last account.
    pub const fn credit_at(credit_ns: u64, credited_at_ns: u64, now_ns: u64, cost_ns: u64) -> u64 {
        let cap = BUDGET_BURST * cost_ns;
        let elapsed = now_ns.saturating_sub(credited_at_ns);
        let credit = credit_ns.saturating_add(elapsed);
        if credit > cap {
            cap
        } else {
            credit
        }
    }

    /// Takes one digest's cost at `now_ns`: `true` if the credit covered
    /// it (the guard's account updated), `false` if the frame must be
    /// refused uncomputed (the account brought up to date all the same).
    pub fn take(guard: &mut VerifyGuard, now_ns: u64, cost_ns: u64) -> bool {
        let credit = Self::credit_at(guard.credit_ns, guard.credited_at_ns, now_ns, cost_ns);
        // The account's clock never runs back: a stamp another CPU's clock
        // put a hair ahead is kept, so no interval is credited twice (and
        // an account stamped ahead accrues nothing until then).
        if now_ns > guard.credited_at_ns {
            guard.credited_at_ns = now_ns;
        }
        if credit < cost_ns {
            guard.credit_ns = credit;
            return false;
        }
        guard.credit_ns = credit - cost_ns;
        true
    }

    /// Gives a genuine packet's digest back: the peer's own packets never
    /// spend the budget.
    pub fn refund(guard: &mut VerifyGuard, cost_ns: u64) {
        let cap = BUDGET_BURST * cost_ns;
        let credit = guard.credit_ns.saturating_add(cost_ns);
        guard.credit_ns = if credit > cap { cap } else { credit };
    }
}

#[cfg(feature = "user")]
// SAFETY: repr(C), Copy, integers and byte arrays only, no padding (pinned
// by the layout test below): every bit pattern is a valid value.
unsafe impl aya::Pod for VerifyGuard {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    const MS: u64 = 1_000_000;

    #[test]
    fn the_layout_is_pinned() {
        assert_eq!(size_of::<VerifyGuard>(), 208);
        assert_eq!(align_of::<VerifyGuard>(), 8);
        assert_eq!(offset_of!(VerifyGuard, secret), 32);
        assert_eq!(offset_of!(VerifyGuard, header), 56);
        assert_eq!(offset_of!(VerifyGuard, generation), 84);
        assert_eq!(offset_of!(VerifyGuard, accepted), 88);
        assert_eq!(offset_of!(VerifyGuard, sequences), 92);
        assert_eq!(offset_of!(VerifyGuard, generations), 108);
        assert_eq!(offset_of!(VerifyGuard, digests), 124);
        assert_eq!(offset_of!(VerifyGuard, _reserved), 204);
    }

    #[test]
    fn a_digest_costs_a_quarter_of_the_slower_interval_and_never_less_than_a_quarter_ms() {
        assert_eq!(digest_cost_ns(10_000, 10_000), 10 * MS / 4);
        // 6.8.7: the peer may not send faster than our Required Min RX.
        assert_eq!(digest_cost_ns(3_300, 50_000), 50 * MS / 4);
        assert_eq!(digest_cost_ns(300_000, 10_000), 300 * MS / 4);
        // A peer that wants no packets, or a sub-millisecond interval.
        assert_eq!(digest_cost_ns(0, 0), MS / 4);
        assert_eq!(digest_cost_ns(100, 100), MS / 4);
    }

    #[test]
    fn a_new_session_has_the_whole_burst_then_one_digest_per_cost() {
        let cost = digest_cost_ns(10_000, 10_000);
        let mut guard = VerifyGuard::default();
        let now = 1_000 * MS;
        for _ in 0..BUDGET_BURST {
            assert!(Budget::take(&mut guard, now, cost));
        }
        assert!(!Budget::take(&mut guard, now, cost), "past the burst");
        // A refusal spends nothing: the next digest is one cost away.
        assert!(!Budget::take(&mut guard, now + cost - 1, cost));
        assert!(Budget::take(&mut guard, now + cost, cost));
        assert!(!Budget::take(&mut guard, now + cost, cost));
    }

    #[test]
    fn the_account_s_clock_never_runs_back() {
        let cost = digest_cost_ns(10_000, 10_000);
        let now = 1_000 * MS;
        // Stamped ahead (another CPU's clock, or a test freezing the
        // credit): nothing accrues until then, and the stamp stays.
        let mut ahead = VerifyGuard {
            credit_ns: 0,
            credited_at_ns: now + 10 * cost,
            ..VerifyGuard::default()
        };
        for i in 0..10 {
            assert!(
                !Budget::take(&mut ahead, now + i * cost, cost),
                "at {i} costs"
            );
        }
        assert_eq!(ahead.credited_at_ns, now + 10 * cost);
        assert!(Budget::take(&mut ahead, now + 11 * cost, cost));
    }

    #[test]
    fn a_refund_gives_the_genuine_packet_s_digest_back_up_to_the_burst() {
        let cost = digest_cost_ns(10_000, 10_000);
        let mut guard = VerifyGuard::default();
        let now = 1_000 * MS;
        for _ in 0..BUDGET_BURST {
            assert!(Budget::take(&mut guard, now, cost));
        }
        Budget::refund(&mut guard, cost);
        assert!(Budget::take(&mut guard, now, cost));
        assert!(!Budget::take(&mut guard, now, cost));
        // Refunds never raise the credit past the burst.
        let mut full = VerifyGuard::default();
        assert!(Budget::take(&mut full, now, cost));
        Budget::refund(&mut full, cost);
        Budget::refund(&mut full, cost);
        assert_eq!(full.credit_ns, BUDGET_BURST * cost);
    }

    #[test]
    fn over_a_second_the_budget_allows_the_multiple_of_the_peer_s_rate_and_the_burst() {
        let cost = digest_cost_ns(10_000, 10_000);
        let mut guard = VerifyGuard::default();
        let start = 1_000 * MS;
        // A frame every 0.1 ms for one second.
        let allowed = (0..10_000u64)
            .filter(|i| Budget::take(&mut guard, start + i * MS / 10, cost))
            .count() as u64;
        // 100 packets a second legitimate: 400 a second plus the burst.
        assert_eq!(allowed, BUDGET_BURST + 1_000 * MS / cost - 1);
    }

    #[test]
    fn the_ring_answers_only_for_the_number_and_the_header_it_was_computed_for() {
        let mut guard = VerifyGuard {
            generation: 2,
            accepted: 6,
            ..VerifyGuard::default()
        };
        assert_eq!(guard.expected(7), None);
        assert_eq!(guard.first_missing(), Some(7));
        guard.remember(7, 2, &[7; 20]);
        assert_eq!(guard.expected(7), Some(&[7; 20]));
        assert_eq!(guard.first_missing(), Some(8));
        // Same slot, another number.
        assert_eq!(guard.expected(11), None);
        guard.remember(8, 2, &[8; 20]);
        guard.remember(9, 2, &[9; 20]);
        assert_eq!(guard.first_missing(), None);
        // The header changed: nothing computed before counts.
        guard.generation = 4;
        assert_eq!(guard.expected(7), None);
        assert_eq!(guard.first_missing(), Some(7));
        // A digest computed under the old header arrives late: ignored.
        guard.remember(7, 2, &[7; 20]);
        assert_eq!(guard.expected(7), None);
        // Mid-rewrite and before any header, the sweep computes nothing.
        guard.generation = 5;
        assert_eq!(guard.first_missing(), None);
        assert_eq!(VerifyGuard::default().first_missing(), None);
        assert_eq!(VerifyGuard::default().expected(0), None);
    }
}
