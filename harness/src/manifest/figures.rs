//! What one phase showed on the capture: the figures a DUT is judged by
//! (`run::figures` computes them, `run::judge` holds them to the limits).

use serde::{Deserialize, Serialize};

/// Figures of one phase, from the capture: the DUT's transmit gaps and the
/// flaps either side showed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PhaseFigures {
    pub phase: String,
    pub profile: String,
    /// The DUT's packets in the phase.
    pub packets: u64,
    /// Up -> not Up on the wire, the larger of the two directions.
    pub flaps: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Sessions in the run, sessions with at least one flap in the phase,
    /// and the most sessions that flapped within 100 ms of each other (a
    /// correlated flap: one stall of the DUT taking many sessions down).
    #[serde(default)]
    pub sessions: usize,
    #[serde(default)]
    pub sessions_flapped: usize,
    #[serde(default)]
    pub correlated_flaps: usize,
    /// The DUT's gaps above the detect budget in the phase (absent in
    /// manifests written before it was recorded).
    #[serde(default)]
    pub over_budget: Option<u64>,
    /// The canary's longest stall on the DUT's CPUs in the phase, and what
    /// the profile requires for the stress to count as biting.
    pub canary_stall_ms: f64,
    pub canary_required_ms: Option<f64>,
    /// Hypervisor steal on the DUT's CPUs that the steal witness placed
    /// inside the phase, ms.
    #[serde(default)]
    pub stolen_ms: f64,
    /// Whether stress ran on the DUT's CPUs in the phase. Only where none
    /// did is a canary stall a disturbance (the CPU was taken from every
    /// normal task); under stress it is the stress itself.
    #[serde(default = "stressed_by_default")]
    pub stressed: bool,
    /// The phase's fault and what the wire showed of it; such a phase is
    /// judged by its fault's checks, not by the DUT's limits.
    #[serde(default)]
    pub fault: Option<crate::manifest::faults::FaultFigures>,
    /// Echo packets on the wire in the phase, by originator
    /// (`sessions.echo`).
    #[serde(default)]
    pub echo: Vec<EchoFigures>,
    /// Authentication on the wire in the phase, per side (`dut`, `peer`),
    /// over every session's control packets (`sessions.auth`).
    #[serde(default)]
    pub auth: Vec<AuthFigures>,
    /// Demand mode on the wire in the phase, per side (`dut`, `peer`),
    /// over every session's control packets (`sessions.demand`).
    #[serde(default)]
    pub demand: Vec<DemandFigures>,
    /// Each side's periodic gaps against its legal interval (RFC 5880
    /// 6.8.7), over every session's control packets.
    #[serde(default)]
    pub intervals: Vec<IntervalFigures>,
}

/// One side's gaps between Up packets against the interval in force when
/// each began: the larger of its Desired Min TX and the other side's
/// Required Min RX (the capture analyzer's `IntervalCheck`, merged).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IntervalFigures {
    /// `dut` or `peer`.
    pub side: String,
    /// The legal interval at the last judged gap, ms (the largest over the
    /// sessions).
    pub legal_ms: Option<f64>,
    pub gaps: u64,
    pub shortest_ms: Option<f64>,
    pub longest_ms: Option<f64>,
    /// Under 75 % of the interval (more often than allowed), and over it
    /// (late).
    pub too_soon: u64,
    pub late: u64,
}

/// One side's control packets in a phase and what they show of Demand
/// mode (RFC 5880 6.6; the capture analyzer's per-flow figures, summed).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DemandFigures {
    /// `dut` or `peer`.
    pub side: String,
    pub packets: u64,
    /// Sent with D: this side asked the other to stop.
    pub demand_packets: u64,
    /// This side's silences the other side asked for, and the longest.
    pub silences: u64,
    pub silence_max_ms: f64,
    /// Poll Sequences this side started, and its Finals to the other's.
    pub polls: u64,
    pub finals: u64,
    /// The slowest of those Finals, from the start of the other side's
    /// Poll, ms (0: none): the kernel answers at once, a starved loop when
    /// it next runs.
    #[serde(default)]
    pub final_max_ms: f64,
}

/// One side's control packets in a phase and what their authentication
/// sections showed (the capture analyzer's `FlowAuth`, summed).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AuthFigures {
    /// `dut` or `peer`.
    pub side: String,
    pub packets: u64,
    /// With the A bit.
    pub authenticated: u64,
    pub types: Vec<u8>,
    pub key_ids: Vec<u8>,
    /// Consecutive keyed packets of one sender: up by one, the same, other.
    pub sequence_next: u64,
    pub sequence_same: u64,
    pub sequence_other: u64,
}

/// One side's echoes in a phase, from the capture: each echo passes the
/// observer twice, going and coming back.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EchoFigures {
    /// `dut` or `peer`.
    pub originator: String,
    /// `IPv4` or `IPv6`.
    #[serde(default)]
    pub family: String,
    pub sent: u64,
    pub returned: u64,
    /// Not back within 1 s.
    pub lost: u64,
    pub rtt_max_ms: f64,
    /// The longest gap between two consecutive echoes of this side: its
    /// originator's own lateness, whatever came back.
    pub send_gap_max_ms: f64,
    pub send_gap_p99_ms: f64,
}

fn stressed_by_default() -> bool {
    true
}
