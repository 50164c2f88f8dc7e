//! Authentication of one session (RFC 5880 section 6.7): the keys, the
//! sequence numbers both ways, and the verification of what arrives.
//!
//! Sans-IO like the session: time comes in as an argument. The wire codec
//! parses and emits the section ([`AuthSection`]); this module decides
//! what to put in it and whether a received one is genuine.

use super::Nanos;
use crate::wire::{digest_of, AuthSection, Construction, Packet, Repr, KEYED_DIGEST_AT};
use linecard_api::control::AuthStatus;
use linecard_api::AuthType;
use linecard_common::bfd::DropReason;
use linecard_common::verify::{digest_cost_ns, Budget, EXPECTED_SLOTS, HEADER_LEN, LOOKAHEAD};
use serde::Serialize;
use std::sync::Arc;

/// A bfd.XmitAuthSeq shared by several senders of one session (the xdp
/// backend's: the kernel's replies, the responder's own clock, the
/// userspace loop): each packet takes the next number atomically, so the
/// meticulous types advance by exactly one per packet whoever sends it
/// (RFC 5880 6.7.3).
pub trait SequenceCounter: Send + Sync {
    /// The next number, taken: no other sender gets it.
    fn take(&self) -> u32;
    /// The next number, left for whoever sends next.
    fn peek(&self) -> u32;
}

/// Where a session's bfd.XmitAuthSeq lives.
#[derive(Clone)]
enum XmitSeq {
    /// Here: one sender.
    Own(u32),
    /// In a counter every sender of the session adds to.
    Shared(Arc<dyn SequenceCounter>),
}

impl XmitSeq {
    fn peek(&self) -> u32 {
        match self {
            Self::Own(next) => *next,
            Self::Shared(counter) => counter.peek(),
        }
    }

    fn take(&mut self) -> u32 {
        match self {
            Self::Own(next) => {
                let taken = *next;
                *next = next.wrapping_add(1);
                taken
            }
            Self::Shared(counter) => counter.take(),
        }
    }
}

impl std::fmt::Debug for XmitSeq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Own(next) => write!(f, "Own({next})"),
            Self::Shared(counter) => write!(f, "Shared(next {})", counter.peek()),
        }
    }
}

/// One key: its Auth Key ID and its secret (a simple password of 1 to 16
/// bytes, an MD5 key of up to 16, a SHA1 key of up to 20; sections 4.2-4.4).
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct AuthKey {
    pub id: u8,
    /// Never serialized: configurations and `ctl list` show key IDs only.
    #[serde(skip)]
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets stay out of logs and panics.
        write!(
            f,
            "AuthKey {{ id: {}, secret: <{} bytes> }}",
            self.id,
            self.secret.len()
        )
    }
}

/// What the operator configured: the type, every key the session accepts
/// and the one it sends with. Key rollover (6.7.1) is a change of
/// `send_key` while both keys are accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuthConfig {
    pub auth_type: AuthType,
    pub keys: Vec<AuthKey>,
    /// Auth Key ID of the key we send with; one of `keys`.
    pub send_key: u8,
    /// How the keyed digest is computed: RFC 5880's, or FRR bfdd's
    /// HMAC-SHA1 (named in the configuration, never guessed).
    pub construction: Construction,
}

impl AuthConfig {
    /// Problems with the configuration, as (what, why).
    pub fn check(&self) -> Result<(), String> {
        if self.keys.is_empty() {
            return Err("no key: authentication needs at least one".into());
        }
        // Every session's keys fit the kernel's map (LC_AUTH_KEYS), on any
        // backend: one rule wherever the session runs.
        let most = linecard_common::bfd::KEYS_PER_SESSION as usize;
        if self.keys.len() > most {
            return Err(format!(
                "{} keys; a session holds at most {most}, the one in use and the next (RFC 5880 6.7.1)",
                self.keys.len()
            ));
        }
        for key in &self.keys {
            self.auth_type
                .check_secret_len(key.secret.len())
                .map_err(|why| format!("key {}: {why}", key.id))?;
            if self.keys.iter().filter(|k| k.id == key.id).count() > 1 {
                return Err(format!("key {} is listed twice", key.id));
            }
        }
        if !self.keys.iter().any(|k| k.id == self.send_key) {
            return Err(format!("send_key {} is not among the keys", self.send_key));
        }
        if self.construction == Construction::FrrHmacSha1
            && !matches!(
                self.auth_type,
                AuthType::KeyedSha1 | AuthType::MeticulousKeyedSha1
            )
        {
            return Err(format!(
                "the frr-hmac-sha1 digest is FRR's keyed SHA1; {:?} has none",
                self.auth_type
            ));
        }
        Ok(())
    }

    fn key(&self, id: u8) -> Option<&AuthKey> {
        self.keys.iter().find(|k| k.id == id)
    }
}

/// Which plane judges a received Sequence Number against bfd.RcvAuthSeq.
///
/// The first plane that sees a packet decides. With the fast path attached
/// the kernel has already applied the window to every packet of a
/// registered session, by the same rule
/// ([`linecard_common::bfd::auth_seq_known_lapse_ns`]); a second verdict
/// here, by a clock read later, could only disagree at the lapse's edge:
/// refuse a packet the kernel rightly took as the peer's restart (6.8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceJudge {
    /// This plane: nothing judged the packet before it reached us.
    Here,
    /// The kernel did: record the packet's Sequence Number, refuse nothing
    /// for it. The digest is still checked here.
    Kernel,
}

/// A session's authentication state (the bfd.*Auth* variables of 6.8.1).
#[derive(Clone, Debug)]
pub struct Auth {
    config: AuthConfig,
    /// bfd.XmitAuthSeq: starts random (6.8.1).
    xmit_seq: XmitSeq,
    /// bfd.RcvAuthSeq, while bfd.AuthSeqKnown.
    rcv_seq: Option<u32>,
    /// bfd.AuthSeqKnown lapses once nothing has been accepted for twice
    /// the detection time (6.8.1).
    known_until: Nanos,
    /// `false` only for the negative control (`engine.verify_authentication
    /// = false`): every section of the configured type is taken as genuine.
    verify: bool,
    /// The kernel's digest budget, kept in userspace too.
    digest_budget: DigestBudget,
    /// The kernel's expected digests, kept in userspace too: the header of
    /// the last accepted packet and, per Sequence Number past it, the
    /// digest once computed, so that copies of the peer's next packet cost
    /// a comparison, not a digest (nor the budget).
    expected: Expected,
}

/// The digests of the peer's next packets: its last accepted header with
/// the Sequence Number moved on by up to `LOOKAHEAD`, each computed once.
#[derive(Clone, Debug, Default)]
struct Expected {
    header: Option<[u8; HEADER_LEN]>,
    /// (Sequence Number, digest), by the number modulo the slots.
    digests: [Option<(u32, [u8; 20])>; EXPECTED_SLOTS],
}

impl Expected {
    /// Whether `wire` is the accepted header with `sequence` moved on from
    /// `last` by 0 to `LOOKAHEAD`.
    fn covers(&self, wire: &[u8], last: Option<u32>, sequence: u32) -> bool {
        let ahead = last.map(|l| sequence.wrapping_sub(l));
        self.header
            .is_some_and(|h| wire.get(..HEADER_LEN) == Some(&h[..]))
            && ahead.is_some_and(|a| a <= LOOKAHEAD)
    }

    fn digest(&self, sequence: u32) -> Option<&[u8; 20]> {
        match &self.digests[sequence as usize % EXPECTED_SLOTS] {
            Some((s, d)) if *s == sequence => Some(d),
            _ => None,
        }
    }

    fn remember(&mut self, sequence: u32, digest: [u8; 20]) {
        self.digests[sequence as usize % EXPECTED_SLOTS] = Some((sequence, digest));
    }

    /// A packet was accepted: its header is the one expected from now on.
    fn accepted(&mut self, wire: &[u8]) {
        let header = wire.get(..HEADER_LEN).and_then(|h| h.try_into().ok());
        if header != self.header {
            self.header = header;
            self.digests = Default::default();
        }
    }
}

/// The kernel's digest budget (`linecard_common::verify::Budget`) on the
/// session thread: each forged in-window packet would otherwise cost a
/// digest there, at any rate a sender likes; the peer's own packets are
/// refunded.
#[derive(Clone, Debug)]
struct DigestBudget {
    credit_ns: u64,
    /// When `credit_ns` was last brought up to date.
    credited_at_ns: u64,
}

impl DigestBudget {
    /// Full from the start (capped at the burst by `credit_at`).
    const FULL: Self = Self {
        credit_ns: u64::MAX,
        credited_at_ns: 0,
    };

    /// Takes one digest's cost at `now`: `false` refuses the packet
    /// uncomputed.
    fn take(&mut self, now: Nanos, cost_ns: u64) -> bool {
        let now = now.max(0) as u64;
        let credit = Budget::credit_at(self.credit_ns, self.credited_at_ns, now, cost_ns);
        self.credited_at_ns = self.credited_at_ns.max(now);
        self.credit_ns = credit.saturating_sub(cost_ns);
        credit >= cost_ns
    }

    fn refund(&mut self, cost_ns: u64) {
        let cap = linecard_common::verify::BUDGET_BURST * cost_ns;
        self.credit_ns = self.credit_ns.saturating_add(cost_ns).min(cap);
    }
}

impl Auth {
    pub fn new(config: AuthConfig, initial_seq: u32) -> Self {
        Self {
            config,
            xmit_seq: XmitSeq::Own(initial_seq),
            rcv_seq: None,
            known_until: 0,
            verify: true,
            digest_budget: DigestBudget::FULL,
            expected: Expected::default(),
        }
    }

    /// The negative control: a section of the configured type is accepted
    /// whatever its key, digest or Sequence Number. Never for a real
    /// deployment: a test must fail with it.
    pub fn unverified(mut self) -> Self {
        self.verify = false;
        self
    }

    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    pub fn status(&self) -> AuthStatus {
        AuthStatus {
            auth_type: self.config.auth_type,
            send_key: self.config.send_key,
            receive_sequence: self.rcv_seq,
            transmit_sequence: self.xmit_seq.peek(),
        }
    }

    /// Key rollover: send with `id` from now on (it must be configured).
    pub fn set_send_key(&mut self, id: u8) -> Result<(), String> {
        if self.config.key(id).is_none() {
            return Err(format!("key {id} is not configured"));
        }
        self.config.send_key = id;
        Ok(())
    }

    /// From now on bfd.XmitAuthSeq is `counter`, which the caller set to
    /// [`Auth::next_sequence`] (the sequence goes on where it was).
    pub fn share(&mut self, counter: Arc<dyn SequenceCounter>) {
        self.xmit_seq = XmitSeq::Shared(counter);
    }

    /// A copy that takes its numbers from nobody: for packets prepared
    /// ahead that are signed again when they leave
    /// ([`Signer::sign`]).
    pub fn detached(&self) -> Self {
        Self {
            xmit_seq: XmitSeq::Own(self.xmit_seq.peek()),
            ..self.clone()
        }
    }

    /// The kernel accepted a packet of ours with `sequence`, bfd.AuthSeqKnown
    /// holding until `known_until` (the fast path's `SessionState`):
    /// userspace's bfd.RcvAuthSeq follows it, so that `ctl list` and the
    /// window after a withdrawal are the session's, not a stale copy from
    /// before the offload (6.8.1).
    pub fn note_kernel_sequence(&mut self, sequence: u32, known_until: Nanos) {
        if self.config.auth_type.digest_len().is_some() {
            self.rcv_seq = Some(sequence);
            self.known_until = self.known_until.max(known_until);
        }
    }

    /// bfd.XmitAuthSeq: the number our next packet carries.
    pub fn next_sequence(&self) -> u32 {
        self.xmit_seq.peek()
    }

    /// What signs a prepared packet at the moment it leaves from another
    /// thread: the send key, the type, the shared sequence (a copy of
    /// the key; the caller keeps it as long as the packet is armed).
    pub fn signer(&self) -> Signer {
        let key = self
            .config
            .key(self.config.send_key)
            .expect("AuthConfig::check keeps send_key among the keys");
        Signer {
            auth_type: self.config.auth_type,
            construction: self.config.construction,
            secret: key.secret.clone(),
            sequence: self.xmit_seq.clone(),
        }
    }

    /// The section of our next packet: the password, or the key with
    /// bfd.XmitAuthSeq (the codec computes the digest over it).
    pub fn section(&self) -> AuthSection {
        let key = self
            .config
            .key(self.config.send_key)
            .expect("AuthConfig::check keeps send_key among the keys");
        let mut bytes = [0u8; 20];
        bytes[..key.secret.len()].copy_from_slice(&key.secret);
        let auth_type = self.config.auth_type;
        AuthSection {
            auth_type,
            construction: self.config.construction,
            key_id: key.id,
            sequence: auth_type.digest_len().map(|_| self.xmit_seq.peek()),
            // A keyed type's field is the whole key, zero-padded (6.7.3).
            len: auth_type.digest_len().unwrap_or(key.secret.len()) as u8,
            bytes,
        }
    }

    /// A packet leaves: the number it carries, taken. Keyed types advance
    /// bfd.XmitAuthSeq with every packet: the meticulous ones must (6.7.3),
    /// and for the others it costs nothing and narrows replay.
    pub fn take_sequence(&mut self) -> u32 {
        self.xmit_seq.take()
    }

    /// Verifies a received packet (6.7.1-6.7.4): `wire` is the packet as
    /// received (its Length field says how much of it is the packet);
    /// `lapse_ns` how long bfd.AuthSeqKnown outlives it if accepted
    /// ([`linecard_common::bfd::auth_seq_known_lapse_ns`]); `judge` who
    /// applies the sequence window; `required_min_rx_us` ours, which with
    /// the packet's Desired Min TX sets the digest budget's rate. A packet
    /// that fails changes nothing but the budget.
    pub fn verify(
        &mut self,
        now: Nanos,
        packet: &Repr,
        wire: &[u8],
        lapse_ns: Nanos,
        judge: SequenceJudge,
        required_min_rx_us: u32,
    ) -> Result<(), DropReason> {
        // 6.7.1: A bit and Auth Type must match what is configured.
        let Some(section) = packet.auth else {
            return Err(DropReason::AuthMismatch);
        };
        if section.auth_type != self.config.auth_type {
            return Err(DropReason::AuthMismatch);
        }
        if !self.verify {
            self.rcv_seq = section.sequence;
            return Ok(());
        }
        let key = self
            .config
            .key(section.key_id)
            .ok_or(DropReason::AuthFailed)?;
        let Some(digest_len) = section.auth_type.digest_len() else {
            // 6.7.2: the password, with its length (Auth Len = length + 3).
            return if &section.bytes[..usize::from(section.len)] == key.secret.as_slice() {
                Ok(())
            } else {
                Err(DropReason::AuthFailed)
            };
        };
        let sequence = section.sequence.ok_or(DropReason::BadAuth)?;
        if now - self.known_until > 0 {
            self.rcv_seq = None;
        }
        if let (Some(last), SequenceJudge::Here) = (self.rcv_seq, judge) {
            // 6.7.3: within bfd.RcvAuthSeq (+1 when meticulous) to
            // bfd.RcvAuthSeq + 3 x Detect Mult, in circular space.
            let ahead = sequence.wrapping_sub(last);
            let first = u32::from(section.auth_type.meticulous());
            if ahead < first || ahead > 3 * u32::from(packet.detect_mult) {
                return Err(DropReason::AuthSequence);
            }
        }
        // The digest over the whole packet (its Length bytes) with the key
        // in the digest field.
        let length = usize::from(Packet::new_unchecked(wire).length()).min(wire.len());
        if length < KEYED_DIGEST_AT + digest_len {
            return Err(DropReason::BadAuth);
        }
        // As the kernel bounds its digest work (linecard_common::verify):
        // the peer's next packets are compared with a digest computed once
        // per Sequence Number; anything else spends the budget.
        let expected_next = self.expected.covers(wire, self.rcv_seq, sequence);
        let cost_ns = digest_cost_ns(packet.desired_min_tx_us, required_min_rx_us);
        let expected = match self.expected.digest(sequence) {
            Some(digest) if expected_next => *digest,
            _ => {
                if !expected_next && !self.digest_budget.take(now, cost_ns) {
                    return Err(DropReason::VerifyBudget);
                }
                let mut copy = [0u8; u8::MAX as usize];
                copy[..length].copy_from_slice(&wire[..length]);
                let field = &mut copy[KEYED_DIGEST_AT..KEYED_DIGEST_AT + digest_len];
                field.fill(0);
                field[..key.secret.len()].copy_from_slice(&key.secret);
                let digest =
                    digest_of(section.auth_type, self.config.construction, &copy[..length]);
                if expected_next {
                    self.expected.remember(sequence, digest);
                }
                digest
            }
        };
        if !constant_time_eq(&expected[..digest_len], &section.bytes[..digest_len]) {
            return Err(DropReason::AuthFailed);
        }
        // Accepted: bfd.AuthSeqKnown = 1, bfd.RcvAuthSeq = the received one.
        if !expected_next {
            self.digest_budget.refund(cost_ns);
        }
        self.expected.accepted(wire);
        self.rcv_seq = Some(sequence);
        self.known_until = now + lapse_ns;
        Ok(())
    }
}

/// Signs a prepared packet as it leaves (the xdp backend's responder
/// thread): the next number of the session's shared bfd.XmitAuthSeq and
/// the digest over the packet as it then is (6.7.3-6.7.4).
#[derive(Clone)]
pub struct Signer {
    auth_type: AuthType,
    construction: Construction,
    secret: Vec<u8>,
    sequence: XmitSeq,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets stay out of logs and panics.
        write!(f, "Signer {{ {:?}, {:?} }}", self.auth_type, self.sequence)
    }
}

impl Signer {
    /// Re-signs `packet` (an emitted packet of this session, its Length
    /// bytes) with the next sequence number. A simple password has
    /// nothing that changes.
    pub fn sign(&mut self, packet: &mut [u8]) {
        let Some(digest_len) = self.auth_type.digest_len() else {
            return;
        };
        let length = usize::from(Packet::new_unchecked(&*packet).length()).min(packet.len());
        if length < KEYED_DIGEST_AT + digest_len {
            return;
        }
        let sequence = self.sequence.take();
        let packet = &mut packet[..length];
        packet[KEYED_DIGEST_AT - 4..KEYED_DIGEST_AT].copy_from_slice(&sequence.to_be_bytes());
        let field = &mut packet[KEYED_DIGEST_AT..KEYED_DIGEST_AT + digest_len];
        field.fill(0);
        field[..self.secret.len()].copy_from_slice(&self.secret);
        let digest = digest_of(self.auth_type, self.construction, packet);
        packet[KEYED_DIGEST_AT..KEYED_DIGEST_AT + digest_len]
            .copy_from_slice(&digest[..digest_len]);
    }
}

/// Equality whose time does not depend on where the inputs first differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
