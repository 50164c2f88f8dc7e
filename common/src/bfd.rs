//! The XDP BFD fast path's maps, shared by `xdp/` and the engine.
//!
//! One writer per map value: [`SessionConfig`] is written by userspace
//! only, [`SessionState`] by the kernel only; the kernel acknowledges what
//! it did through its own counters (for example `finals_sent`) rather than
//! by clearing a userspace field.

/// Largest number of sessions the maps hold.
pub const MAX_SESSIONS: u32 = 4096;

/// `SessionConfig::flags`: the kernel answers the peer's packets itself
/// (the session is Up and offloaded).
pub const FLAG_REPLY: u32 = 1;
/// `SessionConfig::flags`: a multihop session (RFC 5883): its packets
/// arrive on UDP 4784 at `SessionConfig::min_ttl` or above, and only its.
pub const FLAG_MULTIHOP: u32 = 2;
/// `SessionConfig::flags`, with `FLAG_REPLY`: the peer is in Demand mode
/// (RFC 5880 6.6), so no periodic packet may go to it (6.8.7): the kernel
/// answers its Polls with Final and hears its other packets (D set, as
/// this flag says) without answering them. A packet whose D bit disagrees
/// with this flag goes to userspace: the peer changed its mode.
pub const FLAG_POLLS_ONLY: u32 = 4;
/// `SessionConfig::flags`: the session's authentication is verified in
/// userspace only: its keyed digest is a construction the kernel does not
/// compute (FRR bfdd's HMAC-SHA1). Its packets with the A bit pass to
/// userspace after the session-independent checks, and it is never
/// offloaded.
pub const FLAG_AUTH_IN_USERSPACE: u32 = 8;

/// UDP destination port of single-hop control packets (RFC 5881).
pub const PORT_SINGLE_HOP: u16 = 3784;
/// UDP destination port of multihop control packets (RFC 5883).
pub const PORT_MULTI_HOP: u16 = 4784;
/// UDP destination port of echo packets (RFC 5881 section 4).
pub const PORT_ECHO: u16 = 3785;

/// Value of the `LC_ECHO_PEERS` hash map, keyed by a peer's address (IPv4
/// as v4-mapped IPv6): the peer of a single-hop session with the echo
/// function on, whose self-addressed echoes the fast path reflects.
/// Written by userspace only. 4 + 4 = 8 bytes.
///
/// Only the peers listed here are reflected: a reflector that turns any
/// self-addressed packet around is an amplification tool.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EchoPeer {
    /// Our discriminator of the session (for people reading the map).
    pub discr: u32,
    pub _reserved: u32,
}

/// Value of the `LC_SESSIONS` hash map, keyed by our local discriminator
/// (the Your Discriminator of the peer's packets). Written by userspace.
///
/// Field order keeps every field naturally aligned without padding:
/// 16 + 16 + 6 + 6 + 2 + 1 + 1 + 24 + 4 + 4 + 8 + 1 + 7 = 96 bytes,
/// 8-aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// Our address, IPv4 as v4-mapped IPv6.
    pub local_ip: [u8; 16],
    /// The peer's address, same encoding.
    pub peer_ip: [u8; 16],
    pub local_mac: [u8; 6],
    pub peer_mac: [u8; 6],
    /// Our UDP source port, network byte order.
    pub local_port_be: u16,
    /// Lowest TTL or hop limit accepted (multihop; single-hop is 255,
    /// checked before any lookup).
    pub min_ttl: u8,
    /// bfd.AuthType (RFC 5880 section 4.1: 1 simple password, 2 keyed MD5,
    /// 3 meticulous keyed MD5, 4 keyed SHA1, 5 meticulous keyed SHA1), 0
    /// for none. The kernel verifies every packet of an authenticated
    /// session against `LC_AUTH_KEYS` before the packet counts as heard.
    pub auth_type: u8,
    /// The control packet we send while Up (P and F clear); the kernel sets
    /// F when it answers a Poll.
    pub reply: [u8; 24],
    /// `FLAG_*`.
    pub flags: u32,
    /// Index of this session's `SessionState` in `LC_STATE`.
    pub slot: u32,
    /// Detection time, ns.
    pub detect_ns: u64,
    /// The Auth Key ID our packets are signed with (an authenticated
    /// session; `LC_AUTH_KEYS` holds its secret). The kernel signs its
    /// replies with it (RFC 5880 6.7.2-6.7.4), taking each keyed
    /// packet's Sequence Number from `LC_XMIT_SEQ` at `slot`.
    pub send_key_id: u8,
    pub _reserved: [u8; 7],
}

/// Value of the `LC_STATE` array (index: `SessionConfig::slot`). Written by
/// the kernel only. 5 x 8 + 4 x 4 + 9 x 8 = 128 bytes, 8-aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionState {
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC) of the last valid packet from
    /// the peer.
    pub last_rx_ns: u64,
    pub rx_packets: u64,
    /// Replies sent with XDP_TX.
    pub tx_packets: u64,
    /// Polls answered with Final in the kernel.
    pub finals_sent: u64,
    /// Packets handed to userspace (not Up, or not offloaded).
    pub passed: u64,
    /// The peer's timers from its last valid packet, µs: a Poll answered in
    /// the kernel never reaches userspace, so userspace learns them here.
    pub remote_desired_min_tx_us: u32,
    pub remote_required_min_rx_us: u32,
    pub remote_detect_mult: u32,
    /// bfd.RcvAuthSeq of an authenticated session: the Sequence Number of
    /// the last packet the kernel accepted (RFC 5880 6.8.1).
    pub rcv_auth_seq: u32,
    /// The `last_rx_ns` of the silence the sweep last reported. Each field
    /// of this value has one writer (the fast path writes `last_rx_ns`, the
    /// sweep, a single timer and so never concurrent with itself, writes
    /// this), so a silence is reported exactly once without atomics.
    pub reported_rx_ns: u64,
    /// `bpf_ktime_get_ns` of our last reply sent with XDP_TX.
    pub last_tx_ns: u64,
    /// `bpf_ktime_get_ns` of the sweep's last [`event::TRANSMIT_DUE`] (the
    /// session's own clock; written by the sweep only). A request, not a
    /// transmission: the responder thread may be held off (RT throttling
    /// holds every real-time task for up to 50 ms a second), so what it
    /// actually sent is stamped in `LC_CLOCK_SENT` and only that counts as
    /// our transmission.
    pub clock_tx_ns: u64,
    /// How many [`event::TRANSMIT_DUE`] the sweep raised for this slot.
    pub clock_tx_requests: u64,
    /// The jittered gap drawn at our last transmission, kernel reply or
    /// own-clock request ([`jittered_gap_ns`]): the earliest the next
    /// periodic packet may follow it where the peer sends faster than our
    /// interval ([`reply_floor_ns`]), and the own clock's wait after its
    /// own packet.
    pub next_gap_ns: u64,
    /// `bpf_ktime_get_ns` until which bfd.AuthSeqKnown is 1: the last
    /// accepted authenticated packet plus twice the detection time as it
    /// stood then (RFC 5880 6.8.1); 0: none accepted yet.
    pub auth_known_until_ns: u64,
    /// The detection time as the peer's last valid packet set it
    /// ([`detection_time_ns`] of its Detect Mult and Desired Min TX and
    /// the Required Min RX of our reply), ns: the time in force once heard
    /// after userspace's own ([`judged_detection_ns`]). 0 before the first
    /// packet.
    pub detect_ns: u64,
    /// The `last_rx_ns` of the peer's last valid packet that said Down or
    /// AdminDown (written by the fast path): while it is the last packet
    /// heard, our session is going Down with Diag 3 (RFC 5880 6.8.6), and
    /// the own clock sends no Up.
    pub peer_down_rx_ns: u64,
    /// The `peer_down_rx_ns` the sweep last reported as
    /// [`event::PEER_DOWN`] (written by the sweep only).
    pub reported_down_rx_ns: u64,
}

/// Key of the `LC_AUTH_KEYS` hash map: one key of one authenticated
/// session. 4 + 1 + 3 = 8 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuthKeyRef {
    /// Our discriminator of the session.
    pub discr: u32,
    /// The Auth Key ID a packet names (RFC 5880 section 4.1).
    pub key_id: u8,
    pub _reserved: [u8; 3],
}

/// Value of the `LC_AUTH_KEYS` hash map: the secret, as userspace
/// configured it (written by userspace only). A keyed type's digest is
/// computed over the key zero-padded to the digest's length (RFC 5880
/// 6.7.3-6.7.4), so the zeros after `len` are part of the contract.
/// 20 + 1 + 3 = 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct AuthSecret {
    pub secret: [u8; 20],
    /// Bytes of `secret` in use: a password of 1-16, an MD5 key of up to
    /// 16, a SHA1 key of up to 20.
    pub len: u8,
    pub _reserved: [u8; 3],
}

impl AuthKeyRef {
    pub const fn new(discr: u32, key_id: u8) -> Self {
        Self {
            discr,
            key_id,
            _reserved: [0; 3],
        }
    }
}

impl AuthSecret {
    /// The secret, zero-padded; `None` past 20 bytes (no type takes more).
    pub fn new(secret: &[u8]) -> Option<Self> {
        let mut value = Self::default();
        value
            .secret
            .get_mut(..secret.len())?
            .copy_from_slice(secret);
        value.len = secret.len() as u8;
        Some(value)
    }
}

impl core::fmt::Debug for AuthSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Secrets stay out of logs and panics.
        write!(f, "AuthSecret {{ <{} bytes> }}", self.len)
    }
}

/// RFC 5880 section 4.1's Auth Type codes, as `SessionConfig::auth_type`
/// carries them.
pub mod auth_type {
    pub const NONE: u8 = 0;
    pub const SIMPLE_PASSWORD: u8 = 1;
    pub const KEYED_MD5: u8 = 2;
    pub const METICULOUS_KEYED_MD5: u8 = 3;
    pub const KEYED_SHA1: u8 = 4;
    pub const METICULOUS_KEYED_SHA1: u8 = 5;
}

/// RFC 5880 6.8.7 in one place for both planes: the interval between our
/// periodic packets before jitter, ns: the larger of our
/// bfd.DesiredMinTxInterval and the remote's Required Min RX, or 0 when the
/// remote asks for none (Required Min RX 0: no periodic packet at all; a
/// Final to its Poll still goes, 6.5). The remote's value is the one its
/// last packet carried, so a rise it announces is obeyed from that packet
/// on.
pub const fn periodic_interval_ns(desired_min_tx_ns: u64, remote_required_min_rx_us: u32) -> u64 {
    if remote_required_min_rx_us == 0 {
        return 0;
    }
    let remote_ns = remote_required_min_rx_us as u64 * 1_000;
    if desired_min_tx_ns > remote_ns {
        desired_min_tx_ns
    } else {
        remote_ns
    }
}

/// RFC 5880 6.8.4 in one place for both planes: the detection time in
/// Asynchronous mode, ns: the remote's Detect Mult times the larger of our
/// bfd.RequiredMinRxInterval in force and the remote's Desired Min TX, as
/// its last packet said them.
pub const fn detection_time_ns(
    remote_detect_mult: u8,
    required_min_rx_us: u32,
    remote_desired_min_tx_us: u32,
) -> u64 {
    let interval_us = if required_min_rx_us > remote_desired_min_tx_us {
        required_min_rx_us
    } else {
        remote_desired_min_tx_us
    };
    remote_detect_mult as u64 * interval_us as u64 * 1_000
}

/// The detection time the kernel's sweep judges a silence by, ns. The
/// fast path computes 6.8.4's from every packet it hears
/// (`SessionState::detect_ns`, 0 before the first), and that is the time
/// in force once it has heard one since userspace last wrote its own
/// (`SlotConfig::detect_ns`, at `SlotConfig::written_ns`). Before then the
/// larger of the two: the peer's last packets may have been userspace's to
/// judge (a Poll answered there, 6.8.3), so the kernel's value may be older
/// than userspace's. Judging by the larger always kept a peer that lowered
/// its Detect Mult (6.8.11: at once, no Poll) on the old time until the
/// starved loop rewrote its value: 300 ms for 150 under L4 (measured).
pub const fn judged_detection_ns(
    heard_detect_ns: u64,
    heard_at_ns: u64,
    userspace_detect_ns: u64,
    userspace_written_ns: u64,
) -> u64 {
    let heard_since_written = heard_detect_ns != 0 && heard_at_ns > userspace_written_ns;
    if heard_since_written || heard_detect_ns > userspace_detect_ns {
        heard_detect_ns
    } else {
        userspace_detect_ns
    }
}

/// The jittered gap before our next periodic packet (6.8.7): the interval
/// less a random 0-25 %, or 10-25 % when our bfd.DetectMult is 1 (never
/// more than 90 % of it then). `draw` is any random number.
pub const fn jittered_gap_ns(interval_ns: u64, detect_mult: u8, draw: u32) -> u64 {
    let span = if detect_mult == 1 { 15 } else { 25 };
    interval_ns * (75 + draw as u64 % (span + 1)) / 100
}

/// The longest legal jittered gap (6.8.7): the whole interval, or 90 % of
/// it when our bfd.DetectMult is 1.
pub const fn longest_gap_ns(interval_ns: u64, detect_mult: u8) -> u64 {
    if detect_mult == 1 {
        interval_ns * 90 / 100
    } else {
        interval_ns
    }
}

/// How long after our last packet the kernel may answer a peer's periodic
/// packet, ns. A peer that sends no faster than our interval clocks us:
/// its own jitter is ours, and the floor is the shortest jittered gap (75
/// %), so a punctual peer is answered every time. A peer that sends faster
/// (its Desired Min TX below our interval: it raised its Required Min RX,
/// or ours is the slower side) is paced: the first of its packets after
/// the gap drawn at our last packet (`drawn_gap_ns`) is answered, the
/// others are heard.
pub const fn reply_floor_ns(
    interval_ns: u64,
    remote_desired_min_tx_us: u32,
    drawn_gap_ns: u64,
) -> u64 {
    if remote_desired_min_tx_us as u64 * 1_000 >= interval_ns {
        interval_ns * 3 / 4
    } else {
        drawn_gap_ns
    }
}

/// How long bfd.AuthSeqKnown outlives a packet accepted now, ns: RFC 5880
/// 6.8.1 lets it lapse after no packet for at least twice the Detection
/// Time. Twice the larger of the session's detection time as it stood
/// before this packet (`session_detect_ns`, 0 when not known yet) and the
/// one the packet itself implies (its Detect Mult times its Desired Min
/// TX, 6.8.4). The kernel and userspace both call this one function, so
/// that the two planes never disagree on whether a replay is still inside
/// the window.
pub const fn auth_seq_known_lapse_ns(
    session_detect_ns: u64,
    packet_detect_mult: u8,
    packet_desired_min_tx_us: u32,
) -> u64 {
    let implied = packet_detect_mult as u64 * packet_desired_min_tx_us as u64 * 1_000;
    let detect = if session_detect_ns > implied {
        session_detect_ns
    } else {
        implied
    };
    2 * detect
}

/// Auth Len of the keyed sections (RFC 5880 sections 4.3 and 4.4), and
/// the Length of a packet that carries one and nothing more.
pub const MD5_AUTH_LEN: usize = 24;
pub const SHA1_AUTH_LEN: usize = 28;
/// Keys a session may have: the one in use and the next (key rollover,
/// 6.7.1). The config refuses more, so that the kernel's map never does.
pub const KEYS_PER_SESSION: u32 = 2;
/// Largest number of keys the kernel holds, over every session.
pub const MAX_AUTH_KEYS: u32 = KEYS_PER_SESSION * MAX_SESSIONS;

/// Value of the `LC_SLOTS` array: what the kernel's detection sweep needs
/// per slot, and what the fast path needs to know of userspace's own
/// transmissions. Written by userspace. 8 + 4 + 4 + 8 + 8 + 4 + 4 + 8 = 48
/// bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotConfig {
    /// Detection time, ns (RFC 5880 6.8.4), as the state machine computes it.
    pub detect_ns: u64,
    /// Our discriminator, echoed in events.
    pub discr: u32,
    /// 1 while the session is offloaded: only then does the kernel judge it.
    pub armed: u32,
    /// `CLOCK_MONOTONIC` of userspace's last packet for this session when
    /// it wrote this value: where the session's own clock starts counting
    /// before the kernel has sent anything.
    pub user_tx_ns: u64,
    /// Our bfd.DesiredMinTxInterval in force, ns, for the session's own
    /// clock (0: no own clock). The interval is this against the peer's
    /// Required Min RX from its last packet ([`periodic_interval_ns`]).
    /// The peer clocks us while it transmits at our interval; when
    /// nothing has left for the whole interval after an RX-clocked reply
    /// (the peer is slower, stalled, or RX-clocked too), the sweep raises
    /// [`event::TRANSMIT_DUE`] and the responder thread sends the steady
    /// packet, then every jittered gap (6.8.7) while nothing else leaves:
    /// no gap of ours is longer than the interval.
    pub desired_min_tx_ns: u64,
    /// Our bfd.DetectMult (the jitter's range depends on it, 6.8.7).
    pub detect_mult: u32,
    pub _reserved: u32,
    /// `CLOCK_MONOTONIC` when userspace wrote this value: a packet the
    /// fast path heard later sets the detection time in force
    /// ([`judged_detection_ns`]).
    pub written_ns: u64,
}

/// Value of the one-entry `LC_DEAD_MAN` array: the engine's heartbeat,
/// written by its responder thread only. 8 + 8 = 16 bytes.
///
/// An attached program outlives a stopped engine (SIGSTOP, a debugger, a
/// wedged process): without this guard the kernel would keep answering for
/// a control plane that no longer runs, and the peer would keep routing
/// through it. The fast path answers only while the heartbeat is younger
/// than `limit_ns`; after that it hands the peer's packets to userspace,
/// which is not reading them, and the peer detects us Down as it should.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeadMan {
    /// `CLOCK_MONOTONIC` (`bpf_ktime_get_ns`) of the last heartbeat.
    pub heartbeat_ns: u64,
    /// How old the heartbeat may grow before the kernel stops answering,
    /// ns; 0: the guard is off.
    pub limit_ns: u64,
}

/// A record of the `LC_EVENTS` ring buffer: what the sweep found.
/// 8 + 8 + 4 + 4 + 4 + 4 = 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepEvent {
    /// `bpf_ktime_get_ns` when the sweep noticed.
    pub at_ns: u64,
    /// The last valid packet from the peer (same clock).
    pub last_rx_ns: u64,
    pub discr: u32,
    pub slot: u32,
    /// `event::*`.
    pub kind: u32,
    pub _reserved: u32,
}

/// `SweepEvent::kind`.
pub mod event {
    /// The peer has been silent for longer than the detection time
    /// (RFC 5880 6.8.4): reported once per silence.
    pub const PEER_SILENT: u32 = 0;
    /// Nothing has left the session for its own clock's gap (see
    /// `SlotConfig::desired_min_tx_ns`): send the steady packet now.
    pub const TRANSMIT_DUE: u32 = 1;
    /// The peer's last packet said Down or AdminDown (RFC 5880 6.8.6):
    /// send our Down with Diag 3 now; reported once per such packet.
    pub const PEER_DOWN: u32 = 2;
}

/// Slots the sweep can visit: one per session. `LC_SWEEP_LEN` (the
/// highest armed slot + 1) caps each pass, so a pass costs what the
/// sessions in use cost, not what the map could hold.
pub const SWEEP_SLOTS: u32 = MAX_SESSIONS;
/// The sweep's longest wait, ns: the own clock's granularity. Detection
/// does not wait for it: the sweep also runs at the earliest detection
/// deadline.
pub const SWEEP_PERIOD_NS: u64 = 500_000;
/// The sweep's shortest wait, ns: deadlines closer together than this
/// share one pass (a mass failure of 512 sessions spread over 10 ms costs
/// at most 100 extra passes, not 512), and no detection is later by more
/// than this plus the timer's own latency.
pub const SWEEP_MIN_NS: u64 = 100_000;

mod drop_reason;
pub use drop_reason::{drop, DropReason, DROP_REASONS};
pub mod header;

/// Indices of the per-CPU `LC_VERDICTS` array: what the program did.
pub mod verdict {
    /// Not a single-hop BFD frame: passed untouched.
    pub const NOT_BFD: u32 = 0;
    /// Valid BFD handed to userspace.
    pub const PASSED: u32 = 1;
    /// Answered in the kernel with XDP_TX.
    pub const REPLIED: u32 = 2;
    pub const DROPPED: u32 = 3;
    /// Valid, counted as heard, not answered: a periodic packet of ours
    /// may not leave yet ([`super::reply_floor_ns`]), or the peer wants
    /// none (Required Min RX 0, RFC 5880 6.8.7).
    pub const HEARD: u32 = 4;
    /// Valid and Up, not answered: the engine's heartbeat is older than
    /// its limit ([`super::DeadMan`]), so the frame went to userspace.
    pub const ORPHANED: u32 = 5;
    /// A peer's self-addressed echo (RFC 5880 6.4), reflected with XDP_TX.
    pub const ECHO_REFLECTED: u32 = 6;
    /// A frame to the echo port not reflected (our own echoes coming back,
    /// echoes of peers without the echo function, anything off-link or
    /// malformed): passed to the stack untouched.
    pub const ECHO_PASSED: u32 = 7;
    /// Each verdict's name, by index, for people and metrics.
    pub const NAMES: [&str; super::VERDICTS as usize] = [
        "not_bfd",
        "passed",
        "replied",
        "dropped",
        "heard",
        "orphaned",
        "echo_reflected",
        "echo_passed",
    ];
}
pub const VERDICTS: u32 = 8;

#[cfg(feature = "user")]
// SAFETY: repr(C), Copy, two u64: every bit pattern is a valid value.
unsafe impl aya::Pod for DeadMan {}

#[cfg(feature = "user")]
// SAFETY: repr(C), Copy, integers and byte arrays only, no padding (pinned
// by the layout tests below): every bit pattern is a valid value.
unsafe impl aya::Pod for SessionConfig {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for SessionState {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for SlotConfig {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for EchoPeer {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for AuthKeyRef {}
#[cfg(feature = "user")]
// SAFETY: as above.
unsafe impl aya::Pod for AuthSecret {}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    const MS: u64 = 1_000_000;

    #[test]
    fn the_interval_is_the_slower_side_s_and_none_for_a_remote_that_wants_none() {
        assert_eq!(periodic_interval_ns(10 * MS, 10_000), 10 * MS);
        // The remote raised its Required Min RX (6.8.7: never faster).
        assert_eq!(periodic_interval_ns(10 * MS, 200_000), 200 * MS);
        // Our Desired Min TX is the slower.
        assert_eq!(periodic_interval_ns(300 * MS, 10_000), 300 * MS);
        // Required Min RX 0: no periodic packet at all.
        assert_eq!(periodic_interval_ns(10 * MS, 0), 0);
    }

    #[test]
    fn the_jitter_spans_75_to_100_percent_or_75_to_90_with_detect_mult_1() {
        let gaps = |mult| (0..1_000u32).map(move |d| jittered_gap_ns(100 * MS, mult, d));
        assert_eq!(gaps(3).min(), Some(75 * MS));
        assert_eq!(gaps(3).max(), Some(100 * MS));
        assert_eq!(gaps(1).min(), Some(75 * MS));
        assert_eq!(gaps(1).max(), Some(90 * MS));
    }

    #[test]
    fn the_detection_time_is_the_remote_s_multiple_of_the_slower_side() {
        // 3 x 10 ms both ways.
        assert_eq!(detection_time_ns(3, 10_000, 10_000), 30 * MS);
        // The peer slowed its transmission to 50 ms: 5 x 50 ms.
        assert_eq!(detection_time_ns(5, 10_000, 50_000), 250 * MS);
        // We receive no faster than 100 ms.
        assert_eq!(detection_time_ns(3, 100_000, 10_000), 300 * MS);
    }

    #[test]
    fn a_packet_heard_after_userspace_wrote_sets_the_detection_time() {
        const WRITTEN: u64 = 1_000 * MS;
        // The conformance script's step that flaked under L4: Detect Mult
        // 10 then 3 again at 50 ms (6.8.11), userspace's value still 10's.
        let heard = detection_time_ns(3, 50_000, 50_000);
        let stale = detection_time_ns(10, 50_000, 50_000);
        assert_eq!(
            judged_detection_ns(heard, WRITTEN + 1, stale, WRITTEN),
            150 * MS
        );
        // Nothing heard since the write: the larger (a Poll userspace
        // answered may have slowed the peer; the kernel's value is older).
        assert_eq!(
            judged_detection_ns(heard, WRITTEN, stale, WRITTEN),
            500 * MS
        );
        assert_eq!(
            judged_detection_ns(stale, WRITTEN - 1, heard, WRITTEN),
            500 * MS
        );
        // Nothing heard at all: userspace's.
        assert_eq!(judged_detection_ns(0, 0, stale, WRITTEN), 500 * MS);
        // A packet after the write that slowed the peer down counts too.
        assert_eq!(
            judged_detection_ns(stale, WRITTEN + 1, heard, WRITTEN),
            500 * MS
        );
    }

    #[test]
    fn a_punctual_peer_clocks_us_and_a_faster_one_is_paced() {
        // The peer sends every 10 ms against our 10 ms: any of its packets
        // 7.5 ms or more after ours is answered, whatever was drawn.
        assert_eq!(reply_floor_ns(10 * MS, 10_000, 9 * MS), 7_500_000);
        // It asked for 200 ms but still sends every 50 ms: paced by the
        // gap drawn at our last packet.
        assert_eq!(reply_floor_ns(200 * MS, 50_000, 180 * MS), 180 * MS);
    }

    #[test]
    fn session_config_layout_is_pinned() {
        assert_eq!(size_of::<SessionConfig>(), 96);
        assert_eq!(align_of::<SessionConfig>(), 8);
        assert_eq!(offset_of!(SessionConfig, local_ip), 0);
        assert_eq!(offset_of!(SessionConfig, peer_ip), 16);
        assert_eq!(offset_of!(SessionConfig, local_mac), 32);
        assert_eq!(offset_of!(SessionConfig, peer_mac), 38);
        assert_eq!(offset_of!(SessionConfig, local_port_be), 44);
        assert_eq!(offset_of!(SessionConfig, min_ttl), 46);
        assert_eq!(offset_of!(SessionConfig, reply), 48);
        assert_eq!(offset_of!(SessionConfig, flags), 72);
        assert_eq!(offset_of!(SessionConfig, slot), 76);
        assert_eq!(offset_of!(SessionConfig, detect_ns), 80);
        assert_eq!(offset_of!(SessionConfig, send_key_id), 88);
    }

    #[test]
    fn session_state_layout_is_pinned() {
        assert_eq!(offset_of!(SessionState, remote_desired_min_tx_us), 40);
        assert_eq!(offset_of!(SessionState, remote_required_min_rx_us), 44);
        assert_eq!(offset_of!(SessionState, remote_detect_mult), 48);
        assert_eq!(offset_of!(SessionState, reported_rx_ns), 56);
        assert_eq!(offset_of!(SessionState, last_tx_ns), 64);
        assert_eq!(offset_of!(SessionState, clock_tx_ns), 72);
        assert_eq!(offset_of!(SessionState, clock_tx_requests), 80);
        assert_eq!(offset_of!(SessionState, next_gap_ns), 88);
        assert_eq!(offset_of!(SessionState, rcv_auth_seq), 52);
        assert_eq!(offset_of!(SessionState, auth_known_until_ns), 96);
        assert_eq!(offset_of!(SessionState, detect_ns), 104);
        assert_eq!(offset_of!(SessionState, peer_down_rx_ns), 112);
        assert_eq!(offset_of!(SessionState, reported_down_rx_ns), 120);
        assert_eq!(size_of::<SessionState>(), 128);
    }

    #[test]
    fn slot_config_and_event_layouts_are_pinned() {
        assert_eq!(size_of::<SlotConfig>(), 48);
        assert_eq!(offset_of!(SlotConfig, written_ns), 40);
        assert_eq!(offset_of!(SlotConfig, discr), 8);
        assert_eq!(offset_of!(SlotConfig, armed), 12);
        assert_eq!(offset_of!(SlotConfig, user_tx_ns), 16);
        assert_eq!(offset_of!(SlotConfig, desired_min_tx_ns), 24);
        assert_eq!(offset_of!(SlotConfig, detect_mult), 32);
        assert_eq!(size_of::<SweepEvent>(), 32);
        assert_eq!(size_of::<DeadMan>(), 16);
        assert_eq!(size_of::<EchoPeer>(), 8);
        assert_eq!(offset_of!(EchoPeer, _reserved), 4);
        assert_eq!(size_of::<AuthKeyRef>(), 8);
        assert_eq!(offset_of!(AuthKeyRef, key_id), 4);
        assert_eq!(size_of::<AuthSecret>(), 24);
        assert_eq!(offset_of!(AuthSecret, len), 20);
        assert_eq!(offset_of!(SessionConfig, auth_type), 47);
        assert_eq!(drop::name(drop::BAD_AUTH), "bad_auth");
        assert_eq!(drop::name(drop::HOP_MISMATCH), "hop_mismatch");
        assert_eq!(drop::name(drop::IP_OPTIONS), "ip_options");
        assert_eq!(drop::name(drop::NO_SESSION), "no_session");
        assert_eq!(drop::name(DROP_REASONS), "unknown");
        for (index, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), index, "{reason:?} is dense");
        }
        assert_eq!(offset_of!(DeadMan, limit_ns), 8);
        assert_eq!(offset_of!(SweepEvent, last_rx_ns), 8);
        assert_eq!(offset_of!(SweepEvent, discr), 16);
        assert_eq!(offset_of!(SweepEvent, slot), 20);
        assert_eq!(offset_of!(SweepEvent, kind), 24);
        assert_eq!(offset_of!(SessionState, last_rx_ns), 0);
        assert_eq!(offset_of!(SessionState, finals_sent), 24);
        assert_eq!(offset_of!(SessionState, passed), 32);
    }

    #[test]
    fn the_sequence_window_outlives_twice_the_larger_detection_time() {
        // The session's 3 x 10 ms against a packet implying 3 x 50 ms: the
        // packet's (the peer slowed down, 6.8.3); and the other way round.
        assert_eq!(auth_seq_known_lapse_ns(30_000_000, 3, 50_000), 300_000_000);
        assert_eq!(auth_seq_known_lapse_ns(150_000_000, 3, 10_000), 300_000_000);
        // Not known yet: the packet's alone.
        assert_eq!(auth_seq_known_lapse_ns(0, 3, 10_000), 60_000_000);
        // The widest fields do not overflow: 255 x (2^32 - 1) us.
        assert_eq!(
            auth_seq_known_lapse_ns(0, u8::MAX, u32::MAX),
            2 * 255 * u32::MAX as u64 * 1_000
        );
    }
}
