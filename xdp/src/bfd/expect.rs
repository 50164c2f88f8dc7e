//! The expected digests of `linecard_common::verify`, computed by the
//! detection sweep: for each armed authenticated session, the digest of
//! the next Sequence Number the ring lacks, under the header and key of
//! the peer's last accepted packet. The sweep runs at least every
//! `SWEEP_PERIOD_NS`, so the peer's next packet (an interval later) finds
//! its digest waiting and costs a comparison, not a digest. Here rather
//! than on the packet path: the verifier walks this once, where a digest
//! on the packet path is walked once per path into it.

use super::auth::{
    put_sequence_and_key, AUTH_SCRATCH_LEN, AUTH_SEQUENCE_AT, MD5_PACKET_LEN, SHA1_PACKET_LEN,
};
use super::{AuthScratch, LC_AUTH_SCRATCH, LC_VERIFY};
use linecard_common::bfd::auth_type;
use linecard_common::bfd::header::HEADER_LEN;
use linecard_common::digest::{md5_single_block_in, sha1_single_block_in};
use linecard_common::verify::{self, VerifyGuard};

/// Computes one missing expected digest of slot `slot`, if any. A global
/// BPF function (see `auth::lc_verify_md5`): the verifier checks it once,
/// on its own; inside the sweep's `bpf_loop` callback its branches and
/// digests took the program past the verifier's million instructions.
#[no_mangle]
#[inline(never)]
pub extern "C" fn lc_expect_ahead(slot: u32) -> u32 {
    expect_ahead(slot);
    0
}

#[inline(always)]
fn expect_ahead(slot: u32) {
    let Some(guard) = LC_VERIFY.get_ptr_mut(slot) else {
        return;
    };
    // SAFETY: a live map value; the fast path writes it concurrently, as
    // `VerifyGuard`'s seqlock allows.
    let guard = unsafe { &mut *guard };
    // SAFETY: a load of a field of a live map value.
    let generation = unsafe { core::ptr::read_volatile(&guard.generation) };
    let Some(sequence) = guard.first_missing() else {
        return;
    };
    let Some(scratch) = LC_AUTH_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's scratch: the sweep and the fast path are both
    // softirq work, never interleaved on one CPU.
    let scratch = unsafe { &mut *scratch };
    match guard.header[HEADER_LEN] {
        auth_type::KEYED_MD5 | auth_type::METICULOUS_KEYED_MD5 => {
            computed_ahead::<MD5_PACKET_LEN, 16>(
                scratch,
                guard,
                sequence,
                generation,
                md5_single_block_in,
            );
        }
        auth_type::KEYED_SHA1 | auth_type::METICULOUS_KEYED_SHA1 => {
            computed_ahead::<SHA1_PACKET_LEN, 20>(
                scratch,
                guard,
                sequence,
                generation,
                sha1_single_block_in,
            );
        }
        _ => {}
    }
}

/// The digest of the guard's header with Sequence Number `sequence` and
/// its key (RFC 5880 6.7.3-6.7.4: the key, zero-padded, in the digest's
/// place), remembered under `generation` unless the header was being
/// rewritten while it was copied.
#[inline(always)]
fn computed_ahead<const N: usize, const D: usize>(
    scratch: &mut AuthScratch,
    guard: &mut VerifyGuard,
    sequence: u32,
    generation: u32,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D],
) -> u32 {
    const { assert!(N <= AUTH_SCRATCH_LEN && D <= 20 && verify::HEADER_LEN == AUTH_SEQUENCE_AT) };
    // SAFETY: the first N of the scratch's AUTH_SCRATCH_LEN bytes.
    let copy = unsafe { &mut *scratch.packet.as_mut_ptr().cast::<[u8; N]>() };
    // The seqlock's read side (`VerifyGuard`): volatile loads between
    // the two reads of the generation, in order.
    let mut i = 0;
    while i < verify::HEADER_LEN {
        // SAFETY: a load of a field of a live map value.
        copy[i] = unsafe { core::ptr::read_volatile(&guard.header[i]) };
        i += 1;
    }
    // SAFETY: as above.
    let secret = unsafe { core::ptr::read_volatile(&guard.secret) };
    put_sequence_and_key::<N, D>(copy, sequence, &secret);
    // SAFETY: a load of a field of a live map value.
    if unsafe { core::ptr::read_volatile(&guard.generation) } != generation {
        // Torn: the fast path rewrote the header meanwhile. The next pass
        // computes from the new one.
        return 0;
    }
    let sum = digest(copy, &mut scratch.words);
    let mut full = [0u8; 20];
    let mut i = 0;
    while i < D {
        full[i] = sum[i];
        i += 1;
    }
    guard.remember(sequence, generation, &full);
    0
}
