//! Types shared by the BPF programs in `xdp/` and the userspace that loads
//! them (`engine/`, `harness/`).
//!
//! This is the one definition of every map key, map value and name both sides
//! use: a hand-synchronised copy of a struct is how the kernel and userspace
//! start reading different offsets from the same bytes. Every type here is
//! `#[repr(C)]`, has no implicit padding (fields are ordered and sized so that
//! none is needed), and has its size and offsets pinned by a test below.
//! `checksum` is the Internet checksum userspace's frame builders share;
//! `digest` the single-block MD5 and SHA-1 the fast path verifies with;
//! `verify` what bounds the digests it computes per session; `gaps` the
//! gap histograms both planes record.
#![no_std]

pub mod bfd;
pub mod checksum;
pub mod digest;
pub mod gaps;
pub mod loss;
pub mod placement;
pub mod verify;

/// Program and map names, as they appear in the ELF object.
///
/// Userspace looks programs and maps up by these strings; the BPF side names
/// its items with the same identifiers, so a rename breaks the layout test
/// instead of failing at load time with "program not found".
pub mod names {
    /// XDP program that lets every frame through (`XDP_PASS`).
    ///
    /// Attached to the lab's bridge ports that face an XDP_TX sender: on veth,
    /// frames sent with XDP_TX are silently dropped unless the receiving end
    /// runs an XDP program (its NAPI instance only exists then).
    pub const PASS_PROGRAM: &str = "lc_pass";
    /// XDP program that counts frames per CPU and passes them
    /// (see [`crate::placement`]).
    pub const PLACEMENT_PROGRAM: &str = "lc_placement";
    /// Per-CPU array of one [`crate::placement::PlacementCount`].
    pub const PLACEMENT_MAP: &str = "LC_PLACEMENT";
    /// The BFD fast path (see [`crate::bfd`]).
    pub const BFD_PROGRAM: &str = "lc_bfd";
    /// Hash map: our discriminator -> [`crate::bfd::SessionConfig`].
    pub const SESSIONS_MAP: &str = "LC_SESSIONS";
    /// Array: slot -> [`crate::bfd::SessionState`].
    pub const STATE_MAP: &str = "LC_STATE";
    /// Per-CPU array of u64 drop counters, indexed by `bfd::drop::*`.
    pub const DROPS_MAP: &str = "LC_DROPS";
    /// Per-CPU array of u64 verdict counters, indexed by `bfd::verdict::*`.
    pub const VERDICTS_MAP: &str = "LC_VERDICTS";
    /// Per-CPU array: slot -> [`crate::gaps::SessionGaps`], the fast
    /// path's receive and transmit gaps (kernel-written).
    pub const GAPS_MAP: &str = "LC_GAPS";
    /// Array of one u64: the scrape window the fast path records each
    /// window maximum into (`GapHistogram::window`; userspace-written,
    /// bumped at each scrape).
    pub const GAPS_WINDOW_MAP: &str = "LC_GAPS_WINDOW";
    /// Array: slot -> [`crate::bfd::SlotConfig`] (userspace-written).
    pub const SLOTS_MAP: &str = "LC_SLOTS";
    /// Array of one u32: how many slots from 0 the sweep visits, the
    /// highest armed slot + 1 (userspace-written; never shrinks).
    pub const SWEEP_LEN_MAP: &str = "LC_SWEEP_LEN";
    /// Ring buffer of [`crate::bfd::SweepEvent`].
    pub const EVENTS_MAP: &str = "LC_EVENTS";
    /// Array: slot -> u64 `CLOCK_MONOTONIC` of the last packet the
    /// responder thread actually sent for the session's own clock (written
    /// by that thread only).
    pub const CLOCK_SENT_MAP: &str = "LC_CLOCK_SENT";
    /// bfd.XmitAuthSeq of every authenticated session, by `LC_STATE` slot:
    /// one counter for every sender of the session (the kernel's replies,
    /// the responder's own clock, the userspace loop), each packet taking
    /// the next number with an atomic add (RFC 5880 6.7.3: the meticulous
    /// types advance by exactly one). Memory-mapped by userspace.
    pub const XMIT_SEQ_MAP: &str = "LC_XMIT_SEQ";
    /// XDP program that drops BFD control frames at a seeded rate
    /// (see [`crate::loss`]).
    pub const LOSS_PROGRAM: &str = "lc_loss";
    /// Array of one [`crate::loss::LossConfig`].
    pub const LOSS_MAP: &str = "LC_LOSS";
    /// Per-CPU array of u64, indexed by `loss::counter::*`.
    pub const LOSS_COUNTS_MAP: &str = "LC_LOSS_COUNTS";
    /// Array of one [`crate::bfd::DeadMan`]: the engine's heartbeat.
    pub const DEAD_MAN_MAP: &str = "LC_DEAD_MAN";
    /// Hash map: peer address -> [`crate::bfd::EchoPeer`], the peers
    /// whose echoes the fast path reflects.
    pub const ECHO_PEERS_MAP: &str = "LC_ECHO_PEERS";
    /// Hash map: [`crate::bfd::AuthKeyRef`] -> [`crate::bfd::AuthSecret`],
    /// the keys of authenticated sessions (userspace-written).
    pub const AUTH_KEYS_MAP: &str = "LC_AUTH_KEYS";
    /// Array of [`crate::verify::VerifyGuard`] by `LC_STATE` slot: each
    /// authenticated session's digest budget and expected digests
    /// (kernel-written).
    pub const VERIFY_MAP: &str = "LC_VERIFY";
    /// Load-time constant (`.rodata`, u8): 1 re-arms the detection sweep
    /// on its fixed `bfd::SWEEP_PERIOD_NS` instead of at the next deadline
    /// of any slot. A negative control only (`engine.xdp_sweep_fixed_period`):
    /// the detection test must fail with it.
    pub const FIXED_SWEEP_GLOBAL: &str = "LC_FIXED_SWEEP";
    /// Load-time constant (`.rodata`, u8): 1 takes every authentication
    /// section of the session's type as genuine, unchecked. A negative
    /// control only (`engine.verify_authentication = false`): the forgery
    /// test must fail with it.
    pub const UNVERIFIED_AUTH_GLOBAL: &str = "LC_UNVERIFIED_AUTH";
    /// Load-time constant (`.rodata`, u8): 1 reflects any self-addressed
    /// echo at TTL 255, its source listed in `LC_ECHO_PEERS` or not (the
    /// list lookup removed). A negative control of the fast-path tests.
    pub const ECHO_UNLISTED_GLOBAL: &str = "LC_ECHO_UNLISTED";
    /// Load-time constant (`.rodata`, u8): 1 applies GTSM before the echo
    /// branch, so our own echo returning at TTL 254 is dropped. A negative
    /// control of the fast-path tests.
    pub const GTSM_FIRST_GLOBAL: &str = "LC_GTSM_FIRST";
    /// Load-time constant (`.rodata`, u8): 1 records no gap into
    /// `GAPS_MAP`. Only `linecard bench xdp` sets it, to price the
    /// histograms against the same program without them.
    pub const NO_GAPS_GLOBAL: &str = "LC_NO_GAPS";
}

/// Bumped whenever a shared type changes layout. The object records the
/// version it was built with, and the loader refuses a mismatch so that a
/// stale object fails loudly instead of misreading maps.
pub const LAYOUT_VERSION: u32 = 18;
