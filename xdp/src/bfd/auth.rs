//! RFC 5880 6.7 in the kernel: an authenticated session's packet is
//! verified (the password, or the Sequence Number against bfd.RcvAuthSeq's
//! window and the keyed MD5 or SHA1 digest) before it counts as heard.
//! Split out of `bfd.rs` by responsibility; it sees its parent's items.

use super::*;
/// Offset of the Sequence Number in a keyed section, from the packet's
/// start (RFC 5880 sections 4.3 and 4.4), and of the digest after it.
pub(super) const AUTH_SEQUENCE_AT: usize = BFD_LEN + 4;
pub(super) const AUTH_DIGEST_AT: usize = AUTH_SEQUENCE_AT + 4;
pub(super) const MD5_PACKET_LEN: usize = BFD_LEN + MD5_AUTH_LEN;
pub(super) const SHA1_PACKET_LEN: usize = BFD_LEN + SHA1_AUTH_LEN;
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
    let Some(head) = ptr_at::<[u8; 3]>(ctx, at + BFD_LEN) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY: `ptr_at` checked the three bytes are in the packet.
    let [received_kind, auth_len, key_id] = unsafe { *head };
    if received_kind != kind {
        return Err(drop::AUTH_MISMATCH);
    }
    let auth_len = usize::from(auth_len);
    if packet.length != BFD_LEN + auth_len {
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
            keyed_section::<MD5_PACKET_LEN, 16>(
                ctx,
                packet,
                auth_len,
                kind,
                secret,
                session,
                md5_single_block_in,
            )
        }
        auth_type::KEYED_SHA1 | auth_type::METICULOUS_KEYED_SHA1 => {
            keyed_section::<SHA1_PACKET_LEN, 20>(
                ctx,
                packet,
                auth_len,
                kind,
                secret,
                session,
                sha1_single_block_in,
            )
        }
        _ => Err(drop::BAD_AUTH),
    }
}

/// 6.7.3-6.7.4: a keyed section of the `N`-byte packet (Auth Len `N` -
/// 24) with a `D`-byte digest: the window, the digest, then acceptance.
#[inline(always)]
fn keyed_section<const N: usize, const D: usize>(
    ctx: &XdpContext,
    packet: &Received,
    auth_len: usize,
    kind: u8,
    secret: &AuthSecret,
    session: &mut SessionState,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D],
) -> Result<(), u32> {
    if auth_len != N - BFD_LEN {
        return Err(drop::BAD_AUTH);
    }
    let window = Window::of(session, kind, packet);
    let scratch = copied::<N>(ctx, packet.at)?;
    genuine(keyed::<N, D>(scratch, secret, window, digest))?;
    window.accept(ctx, packet, session)
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
            let Some(byte) = ptr_at::<u8>(ctx, at + BFD_LEN + 3 + i) else {
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
#[derive(Clone, Copy)]
struct Window {
    /// bfd.AuthSeqKnown: the last accepted packet was less than twice the
    /// detection time ago, as it stood then (6.8.1); otherwise any
    /// Sequence Number starts the window afresh (the peer restarted).
    known: bool,
    last: u32,
    /// 1 for the meticulous types (the number must move), 0 otherwise.
    first: u32,
    /// 3 x Detect Mult of the received packet.
    widest: u32,
}

impl Window {
    #[inline(always)]
    fn of(session: &SessionState, kind: u8, packet: &Received) -> Self {
        let until = session.auth_known_until_ns;
        Self {
            known: until != 0 && (until as i64).wrapping_sub(packet.now as i64) >= 0,
            last: session.rcv_auth_seq,
            first: u32::from(
                kind == auth_type::METICULOUS_KEYED_MD5 || kind == auth_type::METICULOUS_KEYED_SHA1,
            ),
            widest: 3 * u32::from(packet.detect_mult),
        }
    }

    #[inline(always)]
    fn admits(&self, sequence: u32) -> bool {
        let ahead = sequence.wrapping_sub(self.last);
        !self.known || (ahead >= self.first && ahead <= self.widest)
    }

    /// The digest matched: bfd.AuthSeqKnown = 1 and bfd.RcvAuthSeq = the
    /// packet's Sequence Number.
    #[inline(always)]
    fn accept(
        &self,
        ctx: &XdpContext,
        packet: &Received,
        session: &mut SessionState,
    ) -> Result<(), u32> {
        let Some(sequence) = ptr_at::<[u8; 4]>(ctx, packet.at + AUTH_SEQUENCE_AT) else {
            return Err(drop::TRUNCATED);
        };
        // SAFETY: `ptr_at` checked the four bytes are in the packet. One
        // flow is one receive queue, so one CPU: no two packets of a
        // session race between this window's read and this write.
        session.rcv_auth_seq = u32::from_be_bytes(unsafe { *sequence });
        // Fixed now, as userspace fixes its own: a detection time that
        // changes later (the session goes Down) does not reopen the window.
        session.auth_known_until_ns = packet.now + packet.lapse_ns;
        Ok(())
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

/// 6.7.3-6.7.4: the Sequence Number within the window (checked first, it
/// costs nothing), then the digest of the `N`-byte packet with the key,
/// zero-padded to the `D`-byte field, in place of the digest.
///
/// A function of its own (a BPF-to-BPF call), not inlined: its frame
/// is one of the chain's 512 bytes of stack, not added to the largest
/// frame of `lc_bfd`. It sees a copy of
/// the packet, never the packet (LLVM passes packet pointers to a callee
/// as 32-bit halves, which the verifier refuses), and returns [`GENUINE`]
/// or the drop reason in a register: a `Result` would come back through
/// the caller's stack, which the verifier refuses too.
#[inline(never)]
fn keyed<const N: usize, const D: usize>(
    scratch: &mut AuthScratch,
    secret: &AuthSecret,
    window: Window,
    digest: impl Fn(&[u8; N], &mut [u32; 16]) -> [u8; D],
) -> u32 {
    const { assert!(N <= AUTH_SCRATCH_LEN && D <= 20) };
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
    let received = &mut scratch.received;
    let mut i = 0;
    while i < D {
        received[i] = copy[AUTH_DIGEST_AT + i];
        // The secret's bytes past its length are zero by contract
        // (`AuthSecret`): the zero padding of 6.7.3.
        copy[AUTH_DIGEST_AT + i] = secret.secret[i];
        i += 1;
    }
    let expected = digest(copy, &mut scratch.words);
    // Every byte compared: the time taken says nothing of where a forged
    // digest first went wrong.
    let mut differ = 0u8;
    let mut j = 0;
    while j < D {
        differ |= expected[j] ^ received[j];
        j += 1;
    }
    if differ == 0 {
        GENUINE
    } else {
        drop::AUTH_FAILED
    }
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
