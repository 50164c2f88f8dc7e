//! The result model: the one definition of what `linecard analyze --json`
//! prints. Units are in field names; timestamps are nanoseconds since the
//! epoch (`*_ns`) or seconds (`first_ts`, `last_ts`, as the contract says).

use crate::decode::{Malformed, Service, State};
use crate::stats::{CcdfPoint, GapSummary, TimelinePoint};
use serde::Serialize;

/// Bumped on any incompatible change of this model.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Analysis {
    pub schema_version: u32,
    pub files: Vec<FileSummary>,
    /// Measurement-quality problems, in words, with what to do about them.
    pub warnings: Vec<Warning>,
    /// The whole capture.
    #[serde(flatten)]
    pub all: WindowResult,
    /// The same statistics within each requested time window.
    pub phases: Vec<PhaseResult>,
}

#[derive(Debug, Serialize)]
pub struct WindowResult {
    /// One entry per sender flow (src, dst, src_port, dst_port).
    pub flows: Vec<FlowResult>,
    /// One entry per conversation (the two flows of one address pair and service).
    pub sessions: Vec<SessionResult>,
    pub echo: Vec<EchoResult>,
    /// Distribution of the per-session maximum gap (one value per session).
    pub per_session_max_gap_ms: GapSummary,
    pub integrity: Integrity,
}

#[derive(Debug, Serialize)]
pub struct PhaseResult {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    #[serde(flatten)]
    pub result: WindowResult,
}

#[derive(Debug, Serialize)]
pub struct FileSummary {
    pub path: String,
    pub frames: u64,
    /// The file ended inside a record: what it held was analysed.
    pub truncated: bool,
    pub corrupt_at_byte: Option<u64>,
    /// Drops recorded by the capturing side (pcapng statistics), if known.
    pub capture_drops: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct FlowResult {
    pub src: String,
    pub dst: String,
    pub src_port: u16,
    pub dst_port: u16,
    pub service: Service,
    pub packets: u64,
    /// Lowest and highest TTL (IPv4) or hop limit (IPv6) the flow's control
    /// packets carried: 255 and 255 for a single-hop sender (RFC 5881
    /// section 5).
    #[serde(default)]
    pub ttl_min: u8,
    #[serde(default)]
    pub ttl_max: u8,
    /// Seconds since the epoch.
    pub first_ts: f64,
    pub last_ts: f64,
    pub first_ts_ns: i64,
    pub last_ts_ns: i64,
    /// All gaps between consecutive packets of this flow.
    pub gap_ms: GapSummary,
    /// P(gap > x) at log-spaced x, for plots.
    pub gap_ccdf: Vec<CcdfPoint>,
    /// Largest gap per time bin (at most 1024 bins); only when asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gap_timeline: Vec<TimelinePoint>,
    /// Gaps between consecutive packets both sent in state Up.
    pub up_gap_ms: GapSummary,
    /// Times the sender's state left Up.
    pub flaps: u64,
    pub flap_events: Vec<FlapEvent>,
    /// Gaps above the detect budget (sender's mult x max(receiver's
    /// Required Min RX, sender's Desired Min TX), from the wire).
    pub over_budget: u64,
    /// The last detect budget computed for this direction.
    pub budget_ms: Option<f64>,
    /// Poll sequences this sender started.
    pub polls: u64,
    /// From this sender's Final back to the start of the reverse flow's Poll.
    pub poll_final_ms: GapSummary,
    /// This sender's packets that answered a reverse-flow packet within 2 ms:
    /// the RX-clocked signature (count = answered packets).
    pub reply_latency_ms: GapSummary,
    /// From the reverse flow's last packet to this sender's Down with
    /// diagnostic 1 (detection time expired).
    pub detection_latency_ms: GapSummary,
    pub out_of_order: u64,
    pub last_state: Option<State>,
    pub detect_mult: Option<u8>,
    pub desired_min_tx_ms: Option<f64>,
    pub required_min_rx_ms: Option<f64>,
    /// What the wire shows of the flow's authentication; `None` when no
    /// packet carried the A bit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<FlowAuth>,
    /// Packets this sender sent with D: it asked the other side for Demand
    /// mode (RFC 5880 6.6).
    pub demand_packets: u64,
    /// This sender's silences while the other side asked for Demand mode:
    /// the gaps it was excused from (kept out of `gap_ms`, `up_gap_ms` and
    /// `over_budget`; once the request ends, the rest of a gap counts
    /// there). `count` 0: none.
    pub demand_silence_ms: GapSummary,
    /// RFC 5880 6.8.7 on the wire: this sender's gaps between two Up
    /// packets against the interval in force when each began.
    #[serde(default)]
    pub interval: IntervalCheck,
}

/// A sender's periodic gaps against its legal interval (RFC 5880 6.8.7):
/// the larger of its Desired Min TX and the receiver's Required Min RX,
/// each from its side's latest packet when the gap began; the gap must
/// fall in 75-100 % of it (the jitter), give or take
/// `INTERVAL_SLACK_NS` of capture timestamps. A gap next to a Final is
/// not judged too short (a Final goes off the timer, 6.5); none is judged
/// where the receiver asked for Required Min RX 0 or Demand mode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct IntervalCheck {
    /// The legal interval when the last judged gap began, ms.
    pub legal_ms: Option<f64>,
    /// Gaps judged.
    pub gaps: u64,
    /// Each gap as a share of its own legal interval: the shortest and
    /// the longest (1.0: exactly the interval).
    pub shortest_share: Option<f64>,
    pub longest_share: Option<f64>,
    /// The shortest and longest judged gap, ms.
    pub shortest_ms: Option<f64>,
    pub longest_ms: Option<f64>,
    /// Shorter than 75 % of the interval: more often than allowed.
    pub too_soon: u64,
    /// Longer than the interval: late.
    pub late: u64,
}

/// A flow's authentication as seen on the wire (RFC 5880 6.7): which
/// types and keys, and how the keyed types' sequence numbers moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlowAuth {
    /// Control packets with the A bit (the flow's `packets` counts all).
    pub packets: u64,
    /// Auth Type codes seen, ascending (1 simple password, 2/3 keyed MD5,
    /// 4/5 keyed SHA1; the odd ones meticulous).
    pub types: Vec<u8>,
    pub key_ids: Vec<u8>,
    /// Between consecutive keyed packets: the Sequence Number went up by
    /// exactly one, stayed, or did anything else (a leap, a step back).
    /// A meticulous sender shows `sequence_next` only (6.7.3).
    pub sequence_next: u64,
    pub sequence_same: u64,
    pub sequence_other: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FlapEvent {
    pub at_ns: i64,
    pub to_state: State,
    pub diag: u8,
    pub gap_before_ms: f64,
    /// Set when diag is 1: time since the other side's last packet.
    pub detection_latency_ms: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct SessionResult {
    pub a: String,
    pub b: String,
    pub service: Service,
    /// Indices into `flows`.
    pub flows: Vec<usize>,
    /// Downtime episodes (one per flap of the session).
    pub flaps: u64,
    pub downtimes: Vec<Downtime>,
    pub max_gap_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Downtime {
    pub started_at_ns: i64,
    /// The side that left Up first.
    pub first_down_sender: String,
    pub diag: u8,
    /// Until both sides were Up again; `None`: not within the capture.
    pub downtime_ms: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct EchoResult {
    pub sender: String,
    pub sent: u64,
    pub returned: u64,
    /// Not back within the timeout (1 s).
    pub lost: u64,
    /// Still out when the window ended, less than the timeout after it
    /// left: neither returned nor lost as far as this window can tell.
    pub pending: u64,
    pub rtt_ms: GapSummary,
    /// Gaps between this sender's consecutive echoes (first sightings).
    pub send_gap_ms: GapSummary,
}

#[derive(Debug, Default, Serialize)]
pub struct Integrity {
    pub control_packets: u64,
    pub echo_packets: u64,
    /// Frames that were not UDP to a BFD port.
    pub other_frames: u64,
    /// Frames captured shorter than on the wire (snap length).
    pub snapped_frames: u64,
    pub out_of_order: u64,
    /// Frames without a usable timestamp (pcapng simple packet blocks).
    pub untimed_frames: u64,
    /// Malformed BFD, by reason.
    #[serde(serialize_with = "serialize_reasons")]
    pub malformed: Vec<(Malformed, u64)>,
}

fn serialize_reasons<S: serde::Serializer>(
    reasons: &[(Malformed, u64)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(reasons.len()))?;
    for (reason, count) in reasons {
        map.serialize_entry(reason, count)?;
    }
    map.end()
}

#[derive(Debug, Serialize, Clone)]
pub struct Warning {
    pub code: &'static str,
    pub message: String,
}
