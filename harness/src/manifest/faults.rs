//! What the judge measured of a phase with a fault, on the capture: our
//! Downs and the peer's, silences, our gaps while Up, the fault's own
//! counts.

use crate::scenario::Fault;
use serde::{Deserialize, Serialize};

/// A flood's frames and where the DUT refused them, from the engine's
/// control socket before and after: the fast path's drops by reason
/// (`None` without one) and the sessions' own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FloodCounts {
    pub sent: u64,
    /// Fast-path drops for an authentication reason over the flood.
    pub kernel_refused: Option<u64>,
    /// The same reasons in the engine's sessions over the flood: what
    /// reached userspace and was refused there.
    pub userspace_refused: u64,
}

/// A silence of the peer's while both sides were Up, ns since the epoch:
/// from its last packet to its next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Silence {
    pub from_ns: i64,
    pub to_ns: i64,
}

/// What the wire showed in a fault's window, and what the harness did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultFigures {
    pub fault: Option<Fault>,
    /// When the fault's action started and ended (ns since the epoch).
    pub start_ns: i64,
    pub end_ns: i64,
    /// `lc_loss`'s counters over the phase (loss only).
    pub frames_seen: Option<u64>,
    pub frames_dropped: Option<u64>,
    /// The peer's packets on the capture in the phase.
    pub peer_packets: u64,
    /// The peer's longest gap between packets sent in Up, ms.
    #[serde(default)]
    pub peer_up_gap_max_ms: f64,
    /// The phase ran a stress profile on the DUT's CPUs.
    #[serde(default)]
    pub stressed: bool,
    /// The impostor's packets on the capture in the phase.
    #[serde(default)]
    pub impostor_packets: u64,
    /// A flood's counts.
    #[serde(default)]
    pub flood: Option<FloodCounts>,
    /// Each Down of ours for an expired detection time while the peer's
    /// last packet was Up: ms after that packet.
    pub detections_ms: Vec<f64>,
    /// Peer silences beyond the detection time while both sides were Up
    /// with no Down of ours inside them, ms.
    pub missed_ms: Vec<f64>,
    /// Every silence of the peer's of a detection time or more (1 ms of
    /// tolerance) while both sides were Up, Down of ours or not.
    #[serde(default)]
    pub peer_silences: Vec<Silence>,
    /// Each Down of the peer's for an expired detection time: ms after our
    /// last packet that named its session (Your Discriminator not 0).
    pub peer_detections_ms: Vec<f64>,
    /// The peer's first Down after the fault started, ms after it.
    pub peer_first_down_ms: Option<f64>,
    /// Both sides Up on the wire again, ms after the fault ended.
    pub recovered_ms: Option<f64>,
    /// Our longest gap between packets sent in Up, ms (not the one after
    /// the first Up packet of a run of them: see `walk`).
    pub up_gap_max_ms: f64,
    /// Each gap of ours between packets sent in Up over
    /// [`LATE_INTERVALS`] intervals, with the disturbance the runner
    /// measured inside it: what a late packet of ours is judged on
    /// (`LongGap::excused_beyond`).
    #[serde(default)]
    pub late_up_gaps: Vec<crate::manifest::faults::LongGap>,
    /// The peer's discriminator before the fault and after (peer restart).
    pub peer_discr_before: Option<u32>,
    pub peer_discr_after: Option<u32>,
    /// The Your Discriminator of our last Up packet in the phase.
    pub our_last_your_discr: Option<u32>,
    /// Our discriminator before the fault and after (engine restart).
    #[serde(default)]
    pub our_discr_before: Option<u32>,
    #[serde(default)]
    pub our_discr_after: Option<u32>,
    /// Sessions walked on their own packets (a handover's phase runs
    /// many); these figures are the worst one's.
    #[serde(default)]
    pub sessions_judged: u64,
}

/// One long DUT gap inside the judged window.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LongGap {
    pub gap_ms: f64,
    /// The capture's timestamp of the packet that ended it (CLOCK_REALTIME
    /// ns; 0 in manifests written before it was recorded).
    #[serde(default)]
    pub end_ns: i64,
    /// The peer was silent at least as long (less the reply time) just
    /// before the packet that ended it. Information only: a DUT's own
    /// clock must send whatever the peer does (RFC 5880 6.8.7), so a
    /// mirrored gap over a limit is the DUT's.
    pub mirrors_peer: bool,
    /// Hypervisor steal on the DUT's CPUs that the steal witness placed
    /// inside this gap, ms: the only steal that can excuse it.
    #[serde(default)]
    pub stolen_ms: f64,
    /// In a phase without stress, the canary's longest stall inside this
    /// gap, ms (the idle CPU taken from every normal task); 0 under stress,
    /// where the canary's stalls are the stress itself.
    #[serde(default)]
    pub stalled_ms: f64,
    /// How long inside this gap no CPU of the DUT's could run anything
    /// (the freeze witness: the machine stood still, steal or not), ms.
    #[serde(default)]
    pub frozen_ms: f64,
    /// The phase it ended in (empty in manifests written before it was
    /// recorded, and in a fault's own figures).
    #[serde(default)]
    pub phase: String,
}
