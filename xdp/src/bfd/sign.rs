//! RFC 5880 6.7.2-6.7.4 in the kernel: the RX-clocked reply of an
//! authenticated session leaves signed, as every packet of such a session
//! must (6.7.1), with the key `SessionConfig::send_key_id` names. The keyed
//! types take their Sequence Number from `LC_XMIT_SEQ`, the one
//! bfd.XmitAuthSeq every sender of the session shares (the responder's own
//! clock and the userspace loop add to the same counter), so that the
//! meticulous types advance by exactly one per packet whoever sends it.
//! Split out of `bfd.rs` by responsibility; it names what it uses of it.

use super::auth::{copied, AUTH_DIGEST_AT, AUTH_SCRATCH_LEN, MD5_PACKET_LEN, SHA1_PACKET_LEN};
use super::{ptr_at, AuthScratch, LC_AUTH_KEYS};
use aya_ebpf::macros::map;
use aya_ebpf::maps::Array;
use aya_ebpf::programs::XdpContext;
use core::intrinsics::{atomic_xadd, AtomicOrdering};
use linecard_common::bfd::header::{field, HEADER_LEN};
use linecard_common::bfd::{auth_type, drop, AuthKeyRef, AuthSecret, SessionConfig, MAX_SESSIONS};
use linecard_common::digest::{md5_single_block_in, sha1_single_block_in};

/// `BPF_F_MMAPABLE`: userspace maps the counters into its memory and adds
/// to them with the same atomic instruction the program uses.
const BPF_F_MMAPABLE: u32 = 1 << 10;

/// bfd.XmitAuthSeq by `LC_STATE` slot (the low 32 bits are the Sequence
/// Number; a 64-bit counter so that both sides use one atomic width).
#[map]
static LC_XMIT_SEQ: Array<u64> = Array::with_max_entries(MAX_SESSIONS, BPF_F_MMAPABLE);

/// The longest packet the kernel signs: a keyed SHA1 one.
pub(super) const LONGEST_SIGNED: usize = SHA1_PACKET_LEN;

/// What signing a reply needs, looked up before the peer's frame is
/// rewritten (a reply that cannot be signed here goes to userspace whole).
#[derive(Clone, Copy)]
pub(super) struct Signer {
    secret: *const AuthSecret,
    /// Length of our signed packet: the template's Length field.
    pub(super) len: usize,
}

/// The signer for session `discr`'s reply, or `None` when the kernel
/// cannot sign it in the peer's frame: its key is not installed, or our
/// packet would not be exactly as long as the peer's (a simple password
/// of another length; keyed sections are as long as their type says).
#[inline(always)]
pub(super) fn signer(config: &SessionConfig, discr: u32, received_len: usize) -> Option<Signer> {
    let len = usize::from(config.reply[field::LENGTH]);
    if len != received_len || len > LONGEST_SIGNED {
        return None;
    }
    let key = AuthKeyRef::new(discr, config.send_key_id);
    // SAFETY: a hash map lookup; the value stays valid for this program run.
    let secret = unsafe { LC_AUTH_KEYS.get(&key) }?;
    Some(Signer {
        secret: core::ptr::from_ref(secret),
        len,
    })
}

/// Writes our authentication section over the peer's, at the BFD packet
/// `at` whose header is already ours (Final included: the digest covers
/// it).
#[inline(always)]
pub(super) fn sign(
    ctx: &XdpContext,
    at: usize,
    config: &SessionConfig,
    signer: Signer,
) -> Result<(), u32> {
    // SAFETY: `signer` looked it up in this program run.
    let secret = unsafe { &*signer.secret };
    match config.auth_type {
        auth_type::SIMPLE_PASSWORD => password(ctx, at, config.send_key_id, secret),
        auth_type::KEYED_MD5 | auth_type::METICULOUS_KEYED_MD5 => {
            keyed_sign::<MD5_PACKET_LEN, 16>(ctx, at, config, secret, md5_single_block_in)
        }
        auth_type::KEYED_SHA1 | auth_type::METICULOUS_KEYED_SHA1 => {
            keyed_sign::<SHA1_PACKET_LEN, 20>(ctx, at, config, secret, sha1_single_block_in)
        }
        _ => Err(drop::BAD_AUTH),
    }
}

/// 6.7.2: Type, Len (the password's length + 3), Key ID, the password.
#[inline(always)]
fn password(ctx: &XdpContext, at: usize, key_id: u8, secret: &AuthSecret) -> Result<(), u32> {
    let len = usize::from(secret.len);
    let Some(head) = ptr_at::<[u8; 3]>(ctx, at + HEADER_LEN) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY: `ptr_at` checked the three bytes are in the packet.
    unsafe { *head = [auth_type::SIMPLE_PASSWORD, secret.len + 3, key_id] };
    let mut i = 0;
    while i < 16 {
        if i < len {
            let Some(byte) = ptr_at::<u8>(ctx, at + HEADER_LEN + 3 + i) else {
                return Err(drop::TRUNCATED);
            };
            // SAFETY: `ptr_at` checked the byte is in the packet.
            unsafe { *byte = secret.secret[i] };
        }
        i += 1;
    }
    Ok(())
}

/// 6.7.3-6.7.4: the keyed section of the `N`-byte packet, its Sequence
/// Number the session's next, its `D`-byte digest over the packet with the
/// key in the digest field.
#[inline(always)]
fn keyed_sign<const N: usize, const D: usize>(
    ctx: &XdpContext,
    at: usize,
    config: &SessionConfig,
    secret: &AuthSecret,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D],
) -> Result<(), u32> {
    let Some(counter) = LC_XMIT_SEQ.get_ptr_mut(config.slot) else {
        return Err(drop::NO_SESSION);
    };
    // SeqCst, not Relaxed: with Relaxed this toolchain's LLVM emitted the
    // add without BPF_FETCH and used the addend as the old value (every
    // reply carried Sequence Number 1; bpf-objects/tests/signing.rs).
    // SAFETY: an 8-byte aligned map value; userspace adds to it with the
    // same atomic width (`AtomicU64::fetch_add` on the mapped array).
    let sequence =
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::SeqCst }>(counter, 1) } as u32;
    let scratch = copied::<N>(ctx, at)?;
    signed::<N, D>(
        scratch,
        secret,
        [config.auth_type, (N - HEADER_LEN) as u8, config.send_key_id],
        sequence,
        digest,
    );
    let Some(out) = ptr_at::<[u8; N]>(ctx, at) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY: `ptr_at` checked the N bytes; the scratch holds N of its
    // AUTH_SCRATCH_LEN bytes.
    unsafe { *out = *scratch.packet.as_ptr().cast::<[u8; N]>() };
    Ok(())
}

/// The section and digest written into the scratch copy of our packet.
/// Not inlined, for the same stack reasons as `auth::keyed`.
#[inline(never)]
fn signed<const N: usize, const D: usize>(
    scratch: &mut AuthScratch,
    secret: &AuthSecret,
    head: [u8; 3],
    sequence: u32,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D],
) -> u32 {
    const { assert!(N <= AUTH_SCRATCH_LEN && D <= 20) };
    // SAFETY: the first N of the scratch's AUTH_SCRATCH_LEN bytes.
    let copy = unsafe { &mut *scratch.packet.as_mut_ptr().cast::<[u8; N]>() };
    copy[HEADER_LEN] = head[0];
    copy[HEADER_LEN + 1] = head[1];
    copy[HEADER_LEN + 2] = head[2];
    copy[HEADER_LEN + 3] = 0;
    super::auth::put_sequence_and_key::<N, D>(copy, sequence, secret);
    let sum = digest(copy, &mut scratch.words);
    let mut i = 0;
    while i < D {
        copy[AUTH_DIGEST_AT + i] = sum[i];
        i += 1;
    }
    0
}

/// One's-complement sum of our BFD packet's `len` bytes at `at` (an odd
/// last byte padded with zero, RFC 768), for the IPv6 UDP checksum.
#[inline(always)]
pub(super) fn payload_sum(ctx: &XdpContext, at: usize, len: usize) -> u32 {
    let mut sum = 0u32;
    let mut i = 0;
    while i < LONGEST_SIGNED / 2 {
        let offset = 2 * i;
        if offset + 1 < len {
            if let Some(word) = ptr_at::<[u8; 2]>(ctx, at + offset) {
                // SAFETY: `ptr_at` checked the two bytes.
                sum += u32::from(u16::from_ne_bytes(unsafe { *word }));
            }
        } else if offset < len {
            if let Some(byte) = ptr_at::<u8>(ctx, at + offset) {
                // SAFETY: `ptr_at` checked the byte.
                sum += u32::from(u16::from_ne_bytes([unsafe { *byte }, 0]));
            }
        }
        i += 1;
    }
    sum
}
