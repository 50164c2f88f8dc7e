//! RFC 5880 6.7 in the kernel: an authenticated session's packet is
//! verified (the password, or the Sequence Number against bfd.RcvAuthSeq's
//! window and the keyed MD5 or SHA1 digest) before it counts as heard.
//! Split out of `bfd.rs` by responsibility; it names what it uses of it.

use super::{
    ptr_at, switch_on, AuthScratch, LC_AUTH_KEYS, LC_AUTH_SCRATCH, LC_UNVERIFIED_AUTH, LC_VERIFY,
};
use aya_ebpf::programs::XdpContext;
use linecard_common::bfd::header::HEADER_LEN;
use linecard_common::bfd::{
    auth_type, drop, AuthKeyRef, AuthSecret, SessionState, MD5_AUTH_LEN, SHA1_AUTH_LEN,
};
use linecard_common::digest::{md5_single_block_in, sha1_single_block_in};
use linecard_common::verify::{self, digest_cost_ns, Budget, VerifyGuard};

/// Offset of the Sequence Number in a keyed section, from the packet's
/// start (RFC 5880 sections 4.3 and 4.4), and of the digest after it.
pub(super) const AUTH_SEQUENCE_AT: usize = HEADER_LEN + 4;
pub(super) const AUTH_DIGEST_AT: usize = AUTH_SEQUENCE_AT + 4;
pub(super) const MD5_PACKET_LEN: usize = HEADER_LEN + MD5_AUTH_LEN;
pub(super) const SHA1_PACKET_LEN: usize = HEADER_LEN + SHA1_AUTH_LEN;
/// The larger of the two keyed packets.
pub(super) const AUTH_SCRATCH_LEN: usize = SHA1_PACKET_LEN;

/// An authenticated packet as received.
pub(super) struct Received {
    /// Offset of the BFD packet in the frame.
    pub(super) at: usize,
    /// Its Length field.
    pub(super) length: usize,
    pub(super) detect_mult: u8,
    /// How long bfd.AuthSeqKnown outlives this packet if it is accepted.
    pub(super) lapse_ns: u64,
    pub(super) now: u64,
    /// The session's `LC_STATE` and `LC_VERIFY` slot.
    pub(super) slot: u32,
    /// The packet's Desired Min TX and our Required Min RX, µs: the
    /// peer's legitimate rate, which a budgeted digest's cost follows.
    pub(super) desired_min_tx_us: u32,
    pub(super) our_required_min_rx_us: u32,
}

/// RFC 5880 6.7: the packet is genuine for session `discr`, whose Auth
/// Type is `kind`, or the reason it is not. An accepted keyed packet
/// moves bfd.RcvAuthSeq; a refused one changes nothing.
///
/// The kernel is stricter than the RFC's reader in one way: the section
/// must end the packet (Length = 24 + Auth Len), which every sender does,
/// so that the digest covers a fixed number of bytes.
#[inline(always)]
pub(super) fn verify_auth(
    ctx: &XdpContext,
    packet: &Received,
    discr: u32,
    kind: u8,
    session: &mut SessionState,
) -> Result<(), u32> {
    let at = packet.at;
    let Some(head) = ptr_at::<[u8; 3]>(ctx, at + HEADER_LEN) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY: `ptr_at` checked the three bytes are in the packet.
    let [received_kind, auth_len, key_id] = unsafe { *head };
    if received_kind != kind {
        return Err(drop::AUTH_MISMATCH);
    }
    let auth_len = usize::from(auth_len);
    if packet.length != HEADER_LEN + auth_len {
        return Err(drop::BAD_AUTH);
    }
    // The negative control: taken as genuine unchecked.
    if switch_on(&LC_UNVERIFIED_AUTH) {
        return Ok(());
    }
    let key = AuthKeyRef::new(discr, key_id);
    // SAFETY: a hash map lookup; the value stays valid for this program run.
    let Some(secret) = (unsafe { LC_AUTH_KEYS.get(&key) }) else {
        return Err(drop::AUTH_FAILED);
    };
    match kind {
        auth_type::SIMPLE_PASSWORD => simple_password(ctx, at, auth_len, secret),
        auth_type::KEYED_MD5 | auth_type::METICULOUS_KEYED_MD5 => {
            keyed_section::<MD5_PACKET_LEN>(ctx, packet, auth_len, kind, secret, session)
        }
        auth_type::KEYED_SHA1 | auth_type::METICULOUS_KEYED_SHA1 => {
            keyed_section::<SHA1_PACKET_LEN>(ctx, packet, auth_len, kind, secret, session)
        }
        _ => Err(drop::BAD_AUTH),
    }
}

/// 6.7.3-6.7.4: a keyed section of the `N`-byte packet (Auth Len `N` -
/// 24), judged by the global function of its digest: the window, the
/// digest (expected, or computed within the session's budget,
/// `linecard_common::verify`), then acceptance.
#[inline(always)]
fn keyed_section<const N: usize>(
    ctx: &XdpContext,
    packet: &Received,
    auth_len: usize,
    kind: u8,
    secret: &AuthSecret,
    session: &mut SessionState,
) -> Result<(), u32> {
    const { assert!(N == MD5_PACKET_LEN || N == SHA1_PACKET_LEN) };
    if auth_len != N - HEADER_LEN {
        return Err(drop::BAD_AUTH);
    }
    let scratch = copied::<N>(ctx, packet.at)?;
    scratch.now_ns = packet.now;
    scratch.lapse_ns = packet.lapse_ns;
    scratch.slot = packet.slot;
    scratch.kind = u32::from(kind);
    scratch.detect_mult = u32::from(packet.detect_mult);
    scratch.desired_min_tx_us = packet.desired_min_tx_us;
    scratch.our_required_min_rx_us = packet.our_required_min_rx_us;
    let (scratch, secret, session) = (
        core::ptr::from_mut(scratch),
        core::ptr::from_ref(secret),
        core::ptr::from_mut(session),
    );
    genuine(if N == MD5_PACKET_LEN {
        lc_verify_md5(scratch, secret, session)
    } else {
        lc_verify_sha1(scratch, secret, session)
    })
}

/// [`verified`] for keyed and meticulous keyed MD5, as a global BPF
/// function: the verifier checks its body once, on its own, with its
/// arguments as any memory of their types' sizes (or null), instead of
/// once for every path of `lc_bfd` that calls it, each holding a
/// different state. Those paths are many (`lc_bfd` walks close to its
/// million instructions without a digest), and a digest is thousands.
#[no_mangle]
#[inline(never)]
pub extern "C" fn lc_verify_md5(
    scratch: *mut AuthScratch,
    secret: *const AuthSecret,
    session: *mut SessionState,
) -> u32 {
    accepted::<MD5_PACKET_LEN, 16>(scratch, secret, session, md5_single_block_in)
}

/// [`lc_verify_md5`] for keyed and meticulous keyed SHA1.
#[no_mangle]
#[inline(never)]
pub extern "C" fn lc_verify_sha1(
    scratch: *mut AuthScratch,
    secret: *const AuthSecret,
    session: *mut SessionState,
) -> u32 {
    accepted::<SHA1_PACKET_LEN, 20>(scratch, secret, session, sha1_single_block_in)
}

/// The window, the digest ([`verified`]), then acceptance: bfd.AuthSeqKnown
/// = 1 and bfd.RcvAuthSeq = the packet's Sequence Number (6.7.3-6.7.4).
#[inline(always)]
fn accepted<const N: usize, const D: usize>(
    scratch: *mut AuthScratch,
    secret: *const AuthSecret,
    session: *mut SessionState,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D] + Copy,
) -> u32 {
    // SAFETY: null or a live map value of each type (the verifier checks
    // the callers' arguments against these types' sizes).
    let (Some(scratch), Some(secret), Some(session)) =
        (unsafe { (scratch.as_mut(), secret.as_ref(), session.as_mut()) })
    else {
        return drop::TRUNCATED;
    };
    let Some(guard) = LC_VERIFY.get_ptr_mut(scratch.slot) else {
        return drop::NO_SESSION;
    };
    // SAFETY: the kernel is this value's only writer (see `VerifyGuard`
    // for the sweep's share of it).
    let guard = unsafe { &mut *guard };
    let window = Window::of(session, scratch);
    let verdict = verified::<N, D>(scratch, secret, window, guard, digest);
    if verdict != GENUINE {
        return verdict;
    }
    // One flow is one receive queue, so one CPU: no two packets of a
    // session race between the window's read and this write.
    session.rcv_auth_seq = u32::from_be_bytes([
        scratch.packet[AUTH_SEQUENCE_AT],
        scratch.packet[AUTH_SEQUENCE_AT + 1],
        scratch.packet[AUTH_SEQUENCE_AT + 2],
        scratch.packet[AUTH_SEQUENCE_AT + 3],
    ]);
    // Fixed now, as userspace fixes its own: a detection time that
    // changes later (the session goes Down) does not reopen the window.
    session.auth_known_until_ns = scratch.now_ns + scratch.lapse_ns;
    GENUINE
}

/// The digest judged ([`screened`], then [`keyed`] if it must be
/// computed) and, for a genuine packet, its header noted for the next
/// ones ([`note_accepted`]).
#[inline(always)]
fn verified<const N: usize, const D: usize>(
    scratch: &mut AuthScratch,
    secret: &AuthSecret,
    window: Window,
    guard: &mut VerifyGuard,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D] + Copy,
) -> u32 {
    match screened::<N, D>(scratch, secret, window, guard) {
        GENUINE => {}
        COMPUTE => {
            let verdict = keyed::<N, D>(scratch, secret, digest);
            if verdict != GENUINE {
                return verdict;
            }
        }
        refused => return refused,
    }
    note_accepted::<N>(scratch, secret, guard);
    GENUINE
}

/// 6.7.2: Auth Len is the password's length + 3 (1 to 16 bytes), and the
/// password must be the key's, byte for byte.
#[inline(always)]
fn simple_password(
    ctx: &XdpContext,
    at: usize,
    auth_len: usize,
    secret: &AuthSecret,
) -> Result<(), u32> {
    if !(4..=19).contains(&auth_len) {
        return Err(drop::BAD_AUTH);
    }
    let len = auth_len - 3;
    if len != usize::from(secret.len) {
        return Err(drop::AUTH_FAILED);
    }
    let mut differ = 0u8;
    let mut i = 0;
    while i < 16 {
        if i < len {
            let Some(byte) = ptr_at::<u8>(ctx, at + HEADER_LEN + 3 + i) else {
                return Err(drop::TRUNCATED);
            };
            // SAFETY: `ptr_at` checked the byte is in the packet.
            differ |= unsafe { *byte } ^ secret.secret[i];
        }
        i += 1;
    }
    if differ == 0 {
        Ok(())
    } else {
        Err(drop::AUTH_FAILED)
    }
}

/// bfd.RcvAuthSeq's window for one packet (6.7.3-6.7.4).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Window {
    /// bfd.AuthSeqKnown (1): the last accepted packet was less than twice
    /// the detection time ago, as it stood then (6.8.1); otherwise any
    /// Sequence Number starts the window afresh (the peer restarted).
    known: u32,
    last: u32,
    /// 1 for the meticulous types (the number must move), 0 otherwise.
    first: u32,
    /// 3 x Detect Mult of the received packet.
    widest: u32,
}

impl Window {
    #[inline(always)]
    fn of(session: &SessionState, packet: &AuthScratch) -> Self {
        let until = session.auth_known_until_ns;
        let kind = packet.kind as u8;
        Self {
            known: u32::from(until != 0 && (until as i64).wrapping_sub(packet.now_ns as i64) >= 0),
            last: session.rcv_auth_seq,
            first: u32::from(
                kind == auth_type::METICULOUS_KEYED_MD5 || kind == auth_type::METICULOUS_KEYED_SHA1,
            ),
            widest: 3 * packet.detect_mult,
        }
    }

    #[inline(always)]
    fn admits(&self, sequence: u32) -> bool {
        let ahead = sequence.wrapping_sub(self.last);
        self.known == 0 || (ahead >= self.first && ahead <= self.widest)
    }
}

/// This CPU's scratch, with the `N` bytes of the packet at `at` copied
/// into it.
#[inline(always)]
pub(super) fn copied<const N: usize>(
    ctx: &XdpContext,
    at: usize,
) -> Result<&'static mut AuthScratch, u32> {
    const { assert!(N <= AUTH_SCRATCH_LEN) };
    let Some(packet) = ptr_at::<[u8; N]>(ctx, at) else {
        return Err(drop::TRUNCATED);
    };
    let Some(scratch) = LC_AUTH_SCRATCH.get_ptr_mut(0) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY: this CPU's scratch (no other writer while this program
    // runs here), at least N bytes long; `ptr_at` checked the N bytes of
    // the packet.
    unsafe {
        *(*scratch).packet.as_mut_ptr().cast::<[u8; N]>() = *packet;
        Ok(&mut *scratch)
    }
}

/// 6.7.3-6.7.4: the digest of the `N`-byte packet with the key,
/// zero-padded to the `D`-byte field, in place of the digest ([`screened`]
/// has checked the window and taken the budget). Inside the global
/// functions, so it sees a copy of the packet, never the packet (LLVM
/// passes packet pointers to a callee as 32-bit halves, which the
/// verifier refuses), and answers [`GENUINE`] or the drop reason in a
/// register, as they do.
#[inline(always)]
fn keyed<const N: usize, const D: usize>(
    scratch: &mut AuthScratch,
    secret: &AuthSecret,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D],
) -> u32 {
    const { assert!(N <= AUTH_SCRATCH_LEN && D <= 20 && D % 4 == 0) };
    set_key_aside::<N, D>(scratch, secret);
    // SAFETY: the first N of the scratch's AUTH_SCRATCH_LEN bytes.
    let copy = unsafe { &*scratch.packet.as_ptr().cast::<[u8; N]>() };
    // Into the scratch as it is made, and compared a word at a time: as a
    // local, each byte of it took a stack slot of its own, and the stack
    // is `lc_bfd`'s 336 bytes and this call's within 512.
    // SAFETY: the scratch's `expected`, D of its 20 bytes.
    unsafe { *scratch.expected.as_mut_ptr().cast::<[u8; D]>() = digest(copy, &mut scratch.words) };
    if same_digest::<D>(scratch.expected.as_ptr(), scratch.received.as_ptr()) {
        GENUINE
    } else {
        drop::AUTH_FAILED
    }
}

/// What stands before [`keyed`]'s digest (`linecard_common::verify`):
/// the window, then the digest the sweep computed for this header
/// (`super::expect`)
/// and number if there is one (compared here, [`GENUINE`] or a forgery),
/// else the session's budget: [`COMPUTE`] if it allows one more digest
/// (taken, and refunded by [`note_accepted`] if the packet is genuine). No
/// digest is computed here, and each comparison is read back so that the
/// paths out of it stay few (see [`same_digest`]).
#[inline(always)]
fn screened<const N: usize, const D: usize>(
    scratch: &mut AuthScratch,
    secret: &AuthSecret,
    window: Window,
    guard: &mut VerifyGuard,
) -> u32 {
    const { assert!(N <= AUTH_SCRATCH_LEN && D <= 20) };
    scratch.charged = 0;
    // SAFETY: the first N of the scratch's AUTH_SCRATCH_LEN bytes.
    let copy = unsafe { &mut *scratch.packet.as_mut_ptr().cast::<[u8; N]>() };
    let sequence = u32::from_be_bytes([
        copy[AUTH_SEQUENCE_AT],
        copy[AUTH_SEQUENCE_AT + 1],
        copy[AUTH_SEQUENCE_AT + 2],
        copy[AUTH_SEQUENCE_AT + 3],
    ]);
    if !window.admits(sequence) {
        return drop::AUTH_SEQUENCE;
    }
    if same_header(copy, secret, guard) {
        if let Some(expected) = guard.expected(sequence) {
            // Word by word, as `keyed` compares: bytes took a stack slot
            // each. The digest field is at 32 in the scratch, the guard's
            // digests at 124 + 20 i, the key at 0 of its value: all
            // 4-aligned.
            if same_digest::<D>(expected.as_ptr(), copy[AUTH_DIGEST_AT..].as_ptr()) {
                guard.expected_hits = guard.expected_hits.wrapping_add(1);
                set_key_aside::<N, D>(scratch, secret);
                return GENUINE;
            }
            // Not the expected digest: computed below, within the budget,
            // rather than refused on the ring's word alone.
        }
    }
    let cost = digest_cost_ns(scratch.desired_min_tx_us, scratch.our_required_min_rx_us);
    if !Budget::take(guard, scratch.now_ns, cost) {
        return drop::VERIFY_BUDGET;
    }
    guard.computed += 1;
    scratch.charged = 1;
    COMPUTE
}

/// What [`screened`] returns for a frame [`keyed`] must compute.
const COMPUTE: u32 = u32::MAX - 1;

/// Sequence Number `sequence` and the key in the digest's place (RFC 5880
/// 6.7.3-6.7.4: zero-padded to the field, `AuthSecret`'s contract) in a
/// keyed packet being signed or whose digest is computed ahead.
#[inline(always)]
pub(super) fn put_sequence_and_key<const N: usize, const D: usize>(
    copy: &mut [u8; N],
    sequence: u32,
    secret: &AuthSecret,
) {
    const { assert!(N == AUTH_DIGEST_AT + D && D <= 20) };
    let be = sequence.to_be_bytes();
    let mut i = 0;
    while i < 4 {
        copy[AUTH_SEQUENCE_AT + i] = be[i];
        i += 1;
    }
    let mut i = 0;
    while i < D {
        copy[AUTH_DIGEST_AT + i] = secret.secret[i];
        i += 1;
    }
}

/// The received digest set aside in the scratch and the key in its place
/// (6.7.3-6.7.4: the key, zero-padded to the field: an `AuthSecret`'s
/// bytes past its length are zero by contract), a word at a time.
#[inline(always)]
fn set_key_aside<const N: usize, const D: usize>(scratch: &mut AuthScratch, secret: &AuthSecret) {
    const { assert!(N <= AUTH_SCRATCH_LEN && D <= 20 && D % 4 == 0 && AUTH_DIGEST_AT % 4 == 0) };
    let field = scratch.packet[AUTH_DIGEST_AT..].as_mut_ptr().cast::<u32>();
    let aside = scratch.received.as_mut_ptr().cast::<u32>();
    let key = secret.secret.as_ptr().cast::<u32>();
    let mut w = 0;
    while w < D / 4 {
        // SAFETY: word `w` of 20-byte fields at multiples of 4 in map
        // values (the scratch's packet and received, the key's secret).
        unsafe {
            *aside.add(w) = *field.add(w);
            *field.add(w) = *key.add(w);
        }
        w += 1;
    }
}

/// The packet's header and key are those the guard's expected digests
/// were computed for.
#[inline(always)]
fn same_header<const N: usize>(copy: &[u8; N], secret: &AuthSecret, guard: &VerifyGuard) -> bool {
    const { assert!(N >= verify::HEADER_LEN && verify::HEADER_LEN == 28) };
    // Word by word: the scratch's packet, the guard's header and secret
    // and the key map's value are all 8-byte aligned (map values; the
    // fields at multiples of 8), and bytes would cost a register each.
    let ours = copy.as_ptr().cast::<u64>();
    let theirs = guard.header.as_ptr().cast::<u64>();
    let key = core::ptr::from_ref(secret).cast::<u64>();
    let held = core::ptr::from_ref(&guard.secret).cast::<u64>();
    // SAFETY: in bounds of each (28 and 24 bytes), aligned as said.
    let differ = unsafe {
        (*ours ^ *theirs)
            | (*ours.add(1) ^ *theirs.add(1))
            | (*ours.add(2) ^ *theirs.add(2))
            | u64::from(*ours.add(3).cast::<u32>() ^ *theirs.add(3).cast::<u32>())
            | (*key ^ *held)
            | (*key.add(1) ^ *held.add(1))
            | (*key.add(2) ^ *held.add(2))
    };
    // SAFETY: a read of a local (see `same_digest`).
    unsafe { core::ptr::read_volatile(&differ) == 0 }
}

/// After a packet was accepted: its header and key become the ones the
/// sweep computes expected digests for (`super::expect`), its own digest
/// is expected for its number (a non-meticulous peer may repeat it), and
/// a budgeted digest is refunded (the peer's own packets never spend the
/// budget). No digest here: each would be walked by the verifier once
/// per path into this call. `scratch` holds the accepted packet with the
/// key in its digest field.
#[inline(always)]
fn note_accepted<const N: usize>(
    scratch: &mut AuthScratch,
    secret: &AuthSecret,
    guard: &mut VerifyGuard,
) -> u32 {
    const { assert!(N <= AUTH_SCRATCH_LEN) };
    // SAFETY: the first N of the scratch's AUTH_SCRATCH_LEN bytes.
    let copy = unsafe { &*scratch.packet.as_ptr().cast::<[u8; N]>() };
    if !same_header(copy, secret, guard) {
        // The seqlock's write side (`VerifyGuard`): odd while rewritten.
        // Volatile stores, so that the compiler keeps their order (BPF has
        // no fence; x86 keeps stores in order).
        let odd = guard.generation | 1;
        // SAFETY: stores to fields of a live map value.
        unsafe {
            core::ptr::write_volatile(&mut guard.generation, odd);
            let from = copy.as_ptr().cast::<u64>();
            let to = guard.header.as_mut_ptr().cast::<u64>();
            core::ptr::write_volatile(to, *from);
            core::ptr::write_volatile(to.add(1), *from.add(1));
            core::ptr::write_volatile(to.add(2), *from.add(2));
            core::ptr::write_volatile(to.add(3).cast::<u32>(), *from.add(3).cast::<u32>());
            let key = core::ptr::from_ref(secret).cast::<u64>();
            let held = core::ptr::from_mut(&mut guard.secret).cast::<u64>();
            core::ptr::write_volatile(held, *key);
            core::ptr::write_volatile(held.add(1), *key.add(1));
            core::ptr::write_volatile(held.add(2), *key.add(2));
            core::ptr::write_volatile(&mut guard.generation, odd.wrapping_add(1));
        }
    }
    let accepted = u32::from_be_bytes([
        copy[AUTH_SEQUENCE_AT],
        copy[AUTH_SEQUENCE_AT + 1],
        copy[AUTH_SEQUENCE_AT + 2],
        copy[AUTH_SEQUENCE_AT + 3],
    ]);
    guard.remember(accepted, guard.generation, &scratch.received);
    guard.accepted = accepted;
    if scratch.charged != 0 {
        let cost = digest_cost_ns(scratch.desired_min_tx_us, scratch.our_required_min_rx_us);
        Budget::refund(guard, cost);
    }
    0
}

/// Whether the first `D` bytes at `a` and `b` (4-aligned: fields of map
/// values at multiples of 4) are equal, compared a word at a time (bytes
/// took a stack slot each) and every word compared (the time taken says
/// nothing of where a forged digest first went wrong). The verdict is
/// read back through a volatile load: LLVM cannot see through it, so it
/// keeps the OR of the differences instead of rewriting "all equal" into
/// one branch per byte, each a path the verifier walks (2^20 of them for
/// a digest, past its million instructions).
#[inline(always)]
fn same_digest<const D: usize>(a: *const u8, b: *const u8) -> bool {
    const { assert!(D <= 20 && D % 4 == 0) };
    let (a, b) = (a.cast::<u32>(), b.cast::<u32>());
    let mut differ = 0u32;
    let mut w = 0;
    while w < D / 4 {
        // SAFETY: word `w` of two D-byte fields, 4-aligned as said.
        differ |= unsafe { *a.add(w) ^ *b.add(w) };
        w += 1;
    }
    // SAFETY: a read of a local.
    unsafe { core::ptr::read_volatile(&differ) == 0 }
}

/// What [`keyed`] returns for a genuine packet: no drop reason.
const GENUINE: u32 = u32::MAX;

#[inline(always)]
fn genuine(verdict: u32) -> Result<(), u32> {
    if verdict == GENUINE {
        Ok(())
    } else {
        Err(verdict)
    }
}
