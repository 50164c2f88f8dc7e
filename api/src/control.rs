//! linecardd's control socket, in types: what `linecardd ctl list`,
//! `ctl readiness` and `ctl drops` answer (as JSON). The engine builds
//! these values and serializes them; the harness and a user's scripts
//! read them back as the same types, never by indexing untyped JSON.
//! Every value here is the engine's own view: evidence beside a capture,
//! never a figure of a verdict.

use crate::AuthType;
use linecard_common::bfd::{DropReason, VERDICTS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// linecardd's exit status after a handover no running successor took
/// (SIGUSR2, `ctl handover`): the sessions wait in the kernel, answered
/// RX-clocked for `engine.handover_window_ms`, for the next start to
/// adopt them. A service manager restarts on it
/// (`RestartForceExitStatus=75` in linecardd.service); 75 is sysexits'
/// EX_TEMPFAIL. A take-over's predecessor exits 0: its successor runs.
pub const EXIT_AWAITING_NEXT_START: u8 = 75;

/// Session state (RFC 5880 section 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    AdminDown = 0,
    Down = 1,
    Init = 2,
    Up = 3,
}

impl State {
    /// The state of a packet's two State bits.
    pub fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => Self::AdminDown,
            1 => Self::Down,
            2 => Self::Init,
            _ => Self::Up,
        }
    }
}

/// Diagnostic codes (RFC 5880 section 4.1). The field is 5 bits; 9-31 are
/// reserved and kept as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Diagnostic {
    NoDiagnostic,
    ControlDetectionTimeExpired,
    EchoFunctionFailed,
    NeighborSignaledSessionDown,
    ForwardingPlaneReset,
    PathDown,
    ConcatenatedPathDown,
    AdministrativelyDown,
    ReverseConcatenatedPathDown,
    Reserved(u8),
}

impl Diagnostic {
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0x1f {
            0 => Self::NoDiagnostic,
            1 => Self::ControlDetectionTimeExpired,
            2 => Self::EchoFunctionFailed,
            3 => Self::NeighborSignaledSessionDown,
            4 => Self::ForwardingPlaneReset,
            5 => Self::PathDown,
            6 => Self::ConcatenatedPathDown,
            7 => Self::AdministrativelyDown,
            8 => Self::ReverseConcatenatedPathDown,
            other => Self::Reserved(other),
        }
    }

    pub fn bits(self) -> u8 {
        match self {
            Self::NoDiagnostic => 0,
            Self::ControlDetectionTimeExpired => 1,
            Self::EchoFunctionFailed => 2,
            Self::NeighborSignaledSessionDown => 3,
            Self::ForwardingPlaneReset => 4,
            Self::PathDown => 5,
            Self::ConcatenatedPathDown => 6,
            Self::AdministrativelyDown => 7,
            Self::ReverseConcatenatedPathDown => 8,
            Self::Reserved(bits) => bits & 0x1f,
        }
    }
}

/// A state change, with the diagnostic that explains it; `at_ns` on the
/// engine's CLOCK_MONOTONIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub at_ns: i64,
    pub from: State,
    pub to: State,
    pub diag: Diagnostic,
}

/// What the remote system last told us (the bfd.Remote* variables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    pub discr: u32,
    pub state: State,
    /// bfd.RemoteMinRxInterval; initialised to 1 (6.8.1).
    pub min_rx_us: u32,
    pub desired_min_tx_us: u32,
    pub detect_mult: u8,
    pub min_echo_rx_us: u32,
    pub demand: bool,
    pub diag: Diagnostic,
}

/// Counters kept by the session itself; never the source of a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub packets_in: u64,
    pub packets_out: u64,
    pub polls_started: u64,
    pub finals_sent: u64,
    pub transitions: u64,
}

/// Demand mode (RFC 5880 6.6): asked for here, and active on either side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DemandStatus {
    /// `demand = true` for this session (bfd.DemandMode).
    pub configured: bool,
    /// Between verification Polls, µs (0: never).
    pub verify_interval_us: u32,
    /// We set D and the peer sends nothing periodically.
    pub active_here: bool,
    /// The peer set D and we send nothing periodically outside a Poll.
    pub active_at_peer: bool,
}

/// One session's echo (advisory: it never moves the session's state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EchoStatus {
    /// The negotiated interval, µs; 0 while no echo is sent (the session
    /// is not Up, or the peer advertises Required Min Echo RX 0).
    pub interval_us: u64,
    pub sent: u64,
    pub returned: u64,
    /// Not back within the detection time.
    pub lost: u64,
    /// Returns that matched no echo still outstanding (late past the
    /// detection time, or duplicated).
    pub unmatched: u64,
    pub rtt_min_us: Option<u64>,
    pub rtt_max_us: Option<u64>,
    pub rtt_avg_us: Option<u64>,
    /// The longest time between two consecutive sends, µs, measured as
    /// they left: a stalled originator shows here.
    pub max_send_gap_us: u64,
    /// A return arrived within the detection time.
    pub live: bool,
}

/// A session's authentication (RFC 5880 6.7), never a secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthStatus {
    pub auth_type: AuthType,
    pub send_key: u8,
    /// bfd.AuthSeqKnown and bfd.RcvAuthSeq.
    pub receive_sequence: Option<u32>,
    /// bfd.XmitAuthSeq.
    pub transmit_sequence: u32,
}

/// The kernel's digest work for one session (`linecard_common::verify`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelDigests {
    /// Digests computed to verify a packet, within the budget.
    pub computed: u64,
    /// Packets judged against a digest the sweep computed ahead.
    pub expected_hits: u64,
}

/// One session as `linecardd ctl list` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    pub local: IpAddr,
    pub peer: IpAddr,
    pub backend: String,
    pub source_port: u16,
    pub state: State,
    pub diag: Diagnostic,
    pub local_discr: u32,
    pub detect_mult: u8,
    /// Advertised, µs.
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub polling: bool,
    pub demand: DemandStatus,
    pub detection_time_us: Option<i64>,
    pub remote: Remote,
    pub counters: Counters,
    /// Refused after demultiplexing, by reason (non-zero only).
    pub drops: Vec<(DropReason, u64)>,
    pub last_transition: Option<Transition>,
    /// The XDP fast path answers for this session now.
    pub offloaded: bool,
    /// `last_transition.at_ns` on CLOCK_REALTIME (the capture's clock).
    pub last_transition_unix_ns: Option<i64>,
    /// When the kernel's sweep last declared the peer silent (CLOCK_REALTIME).
    pub kernel_detection_unix_ns: Option<i64>,
    /// What clocks our packets: `own` (our timer), `peer` (offloaded and
    /// RX-clocked), or `own: the peer stalled or is RX-clocked too`
    /// (offloaded, and the kernel's own clock for the session sent within
    /// the last three intervals).
    pub clock: String,
    /// How often the kernel's sweep asked the responder for a packet of
    /// the session's own clock while offloaded.
    pub own_clock_requests: u64,
    /// Required Min Echo RX we advertise, µs (non-zero: we reflect).
    pub required_min_echo_rx_us: u32,
    /// Our echoes (sessions with `echo = true`).
    pub echo: Option<EchoStatus>,
    /// Authentication (6.7): type, key in use, both sequence numbers.
    pub auth: Option<AuthStatus>,
    /// What the kernel's digest verification cost for this session
    /// (authenticated sessions on the xdp backend).
    pub kernel_digests: Option<KernelDigests>,
    /// How the session was configured (`[[session]]`): RFC 5883's
    /// multihop, the interface, passive (6.1: it waits to hear first),
    /// and the least TTL accepted on a multihop session. Absent from a
    /// linecardd that predates them.
    #[serde(default)]
    pub multihop: bool,
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default)]
    pub passive: bool,
    #[serde(default)]
    pub min_ttl: u8,
    /// Transitions into Up and out of it since the session was added
    /// (FRR's `session-up` and `session-down`).
    #[serde(default)]
    pub ups: u64,
    #[serde(default)]
    pub downs: u64,
    /// The fast path's own counts for the session (xdp backend): every
    /// valid packet it heard (those it passed up included) and every
    /// reply it sent.
    #[serde(default)]
    pub kernel_packets_in: Option<u64>,
    #[serde(default)]
    pub kernel_packets_out: Option<u64>,
}

/// One session as `linecardd ctl readiness` shows it: whether it is Up
/// and steady, and where it should be served (cheap at thousands of
/// sessions, where `list` is megabytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionReadiness {
    pub peer: IpAddr,
    pub state: State,
    pub polling: bool,
    pub offloaded: bool,
    pub authenticated: bool,
    pub demand_configured: bool,
    pub demand_active_at_peer: bool,
    /// The session is where this engine's policy puts it now (held by the
    /// kernel in the role the policy wants, or kept in userspace): steady
    /// in its own words, whatever the build's policy. `None` from a
    /// linecardd that predates it.
    #[serde(default)]
    pub placed: Option<bool>,
}

/// How one of the engine's threads is scheduled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadPolicy {
    /// SCHED_DEADLINE: runs before every SCHED_FIFO task and is not held by
    /// RT throttling (its own reservation bounds it instead).
    Deadline { runtime_us: u64, period_us: u64 },
    /// SCHED_FIFO: held with every other RT task for the throttled part of
    /// each second (~50 ms as shipped) once RT hogs saturate the CPU.
    Fifo {
        priority: i32,
        why_not_deadline: String,
    },
    /// Neither was allowed.
    Normal { why: String },
}

impl std::fmt::Display for ThreadPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Deadline {
                runtime_us,
                period_us,
            } => write!(f, "SCHED_DEADLINE, {runtime_us} of every {period_us} us"),
            Self::Fifo {
                priority,
                why_not_deadline,
            } => write!(
                f,
                "SCHED_FIFO {priority} (not SCHED_DEADLINE: {why_not_deadline})"
            ),
            Self::Normal { why } => write!(f, "normal priority ({why})"),
        }
    }
}

/// What the XDP fast path counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FastPathCounters {
    /// Indexed by [`DropReason`], summed over CPUs.
    pub drops: Vec<u64>,
    /// The same, by the reason's name, for people.
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Per CPU, indexed by `linecard_common::bfd::verdict::*`.
    pub verdicts_per_cpu: Vec<[u64; VERDICTS as usize]>,
    /// How the responder thread is scheduled (None in its first instants).
    pub responder: Option<ThreadPolicy>,
    /// Own-clock packets the responder sent (every session): with the
    /// REPLIED verdicts, everything the fast path transmitted.
    pub own_clock_sent: u64,
}

/// `ctl list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListReply {
    pub sessions: Vec<SessionStatus>,
}

/// `ctl readiness`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadinessReply {
    pub sessions: Vec<SessionReadiness>,
}

/// `ctl drops`: the engine's refusals by reason (non-zero only), and the
/// fast path's counters when it runs one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropsReply {
    pub drops: Vec<(DropReason, u64)>,
    pub fast_path: Option<FastPathCounters>,
}

impl ListReply {
    /// The session facing `peer`.
    pub fn session(&self, peer: IpAddr) -> Option<&SessionStatus> {
        self.sessions.iter().find(|s| s.peer == peer)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
    use super::*;

    #[test]
    fn a_reply_reads_back_as_the_value_the_engine_wrote() {
        let drops = DropsReply {
            drops: vec![(DropReason::AuthSequence, 3)],
            fast_path: Some(FastPathCounters {
                drops: vec![0; 20],
                drops_by_reason: BTreeMap::from([("bad_ttl".to_string(), 1)]),
                verdicts_per_cpu: vec![[1, 2, 3, 4, 5, 6, 7, 8]],
                responder: Some(ThreadPolicy::Deadline {
                    runtime_us: 1000,
                    period_us: 5000,
                }),
                own_clock_sent: 9,
            }),
        };
        let text = serde_json::to_string(&drops).unwrap();
        // The names people and scripts read, as the engine spells them.
        assert!(text.contains("[\"auth_sequence\",3]"), "{text}");
        assert!(
            text.contains("{\"deadline\":{\"runtime_us\":1000"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<DropsReply>(&text).unwrap(), drops);
        let reserved = serde_json::to_string(&Diagnostic::from_bits(9)).unwrap();
        assert_eq!(reserved, "{\"reserved\":9}");
        assert_eq!(
            serde_json::from_str::<Diagnostic>(&reserved)
                .unwrap()
                .bits(),
            9
        );
        assert_eq!(
            drops.fast_path.unwrap().responder.unwrap().to_string(),
            "SCHED_DEADLINE, 1000 of every 5000 us"
        );
    }
}

/// `ctl reload` (and the log line of a SIGHUP): what the reload did, each
/// session named `local -> peer`. `refused` says why nothing changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// New timers, announced by a Poll Sequence (RFC 5880 6.8.3).
    pub retimed: Vec<String>,
    /// Sending with another of the session's configured keys (6.7.1).
    pub rekeyed: Vec<String>,
    /// A change no running session can take: AdminDown, then added anew.
    pub restarted: Vec<String>,
    pub unchanged: usize,
    /// Sessions the reload could not add (each with why); the rest of the
    /// reload stands.
    pub errors: Vec<String>,
    pub refused: Option<String>,
}

/// The one-line summary linecardd logs and `ctl reload` prints.
impl std::fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(why) = &self.refused {
            return write!(f, "reload refused: {why}");
        }
        write!(
            f,
            "reloaded: {} added, {} removed, {} retimed, {} rekeyed, {} restarted, {} unchanged",
            self.added.len(),
            self.removed.len(),
            self.retimed.len(),
            self.rekeyed.len(),
            self.restarted.len(),
            self.unchanged
        )?;
        for error in &self.errors {
            write!(f, "; not added: {error}")?;
        }
        Ok(())
    }
}
