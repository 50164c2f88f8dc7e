//! What was measured of one DUT's run, outside it: the capture's figures,
//! the faults' windows, the disturbances and where each fell. The judge
//! (`run::judge`) turns it into a [`super::verdict::Verdict`].

use super::faults::FloodCounts;
use super::figures::PhaseFigures;
use serde::{Deserialize, Serialize};

/// Everything the verdict is drawn from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Evidence {
    pub capture_died_early: bool,
    pub capture_dropped: Option<u64>,
    /// The DUT was Up on both daemons' views and on the wire before the
    /// first phase.
    pub up_before_phases: Result<(), String>,
    /// BFD frames the fast path judged on the DUT's CPUs and in all (xdp
    /// only).
    #[serde(alias = "replies_on_dut_cpus")]
    pub fast_path_on_dut_cpus: Option<(u64, u64)>,
    /// How the fast path's responder thread was scheduled, in words.
    #[serde(default)]
    pub responder: Option<String>,
    /// Why the DUT's `ksoftirqd_priority` was not in force in some phase
    /// (`crate::softirq_threads::not_in_force`); `None` when it was or
    /// none was asked.
    #[serde(default)]
    pub softirq_not_in_force: Option<String>,
    /// What was measured while the daemons brought their sessions Up
    /// (absent in manifests written before it was).
    #[serde(default)]
    pub bring_up: Option<BringUp>,
    /// Hypervisor steal on the DUT's CPUs during the run, ms.
    pub steal_ms: f64,
    /// Hypervisor steal on the other CPUs (peer, observer), ms.
    #[serde(default)]
    pub peer_steal_ms: f64,
    /// The peer's Downs for an expired detection time, in the plain
    /// phases, that came sooner than that time after the DUT's last packet
    /// on the wire (ms after it): the peer host stalled, not the DUT (RFC
    /// 5880 6.8.4: a session goes down only when no packet arrived within
    /// the detection time). A fault's phase holds its own
    /// (`FaultFigures::premature_peer_detection`).
    #[serde(default)]
    pub premature_peer_detections_ms: Vec<f64>,
    /// Each session's first Down of the DUT's in the plain phases when it
    /// came after the peer had sent nothing on that session for at least
    /// a detection time on the wire (ms of that silence): the DUT told the
    /// truth about a peer whose host stalled, and the run says nothing
    /// about the DUT.
    #[serde(default)]
    pub silent_peer_detections_ms: Vec<f64>,
    /// The peer's silences of a detection time or more while both sides
    /// were Up, in the plain phases (ms): the peer sends on its own clock
    /// whatever the DUT does, so its host stalled, and the window says
    /// nothing about the DUT.
    #[serde(default)]
    pub peer_stalls_ms: Vec<f64>,
    /// The sessions' detection time, ms (multiplier x interval).
    #[serde(default = "default_detection_ms")]
    pub detection_ms: f64,
    /// The sessions' interval, ms (the larger of their transmit and
    /// receive intervals); absent in manifests written before it was
    /// recorded, where it was the detection time's third.
    #[serde(default)]
    pub interval_ms: Option<f64>,
    /// A DUT whose control plane is FRR's bfdd: whether bfdd kept every
    /// session Up throughout and its dataplane connection survived
    /// counters sweeps (`Ok` says what was verified, `Err` what broke).
    #[serde(default)]
    pub control_plane_uninterrupted: Option<Result<String, String>>,
    /// The DUT's gaps longer than 1.2 intervals during the phases, each
    /// marked when it only mirrored the peer's own silence.
    #[serde(default)]
    pub long_gaps: Vec<crate::manifest::faults::LongGap>,
    /// Long gaps of a DUT that did not pass left out of `long_gaps` once
    /// judged, the longest kept (`Evidence::keep_longest_gaps`): a
    /// saturated run makes hundreds of thousands (a 512-session step: a
    /// 349 MB manifest).
    #[serde(default)]
    pub long_gaps_left_out: u64,
    /// When the harness could not reach a host of the run over SSH while
    /// the DUT's processes ran on there: the verdict is the capture's
    /// all the same, and the report warns of each.
    #[serde(default)]
    pub connection_outages: Vec<ConnectionOutage>,
    pub phases: Vec<PhaseFigures>,
}

impl Evidence {
    /// Keeps the `n` longest of `long_gaps` and counts the rest in
    /// `long_gaps_left_out`: for a verdict other than a pass, which no
    /// later reader re-judges gap by gap (the gate reads the gaps of an
    /// excused pass, kept whole).
    pub fn keep_longest_gaps(&mut self, n: usize) {
        if self.long_gaps.len() <= n {
            return;
        }
        self.long_gaps.sort_by(|a, b| b.gap_ms.total_cmp(&a.gap_ms));
        self.long_gaps_left_out += (self.long_gaps.len() - n) as u64;
        self.long_gaps.truncate(n);
    }
}

/// A time the harness could not reach a host over SSH.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionOutage {
    /// `dut`, `peer` or `observer`, and its SSH target.
    pub host: String,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// What the harness did for a phase's fault: when its action ran (ns since
/// the epoch; a loss lasts the whole phase) and, for a loss, the program's
/// counters over it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    pub start_ns: i64,
    pub end_ns: i64,
    pub frames_seen: Option<u64>,
    pub frames_dropped: Option<u64>,
    /// A flood's: what the impostor sent, and over the flood the DUT
    /// engine's authentication refusals (`FloodCounts`).
    #[serde(default)]
    pub flood: Option<FloodCounts>,
    /// A handover's or upgrade's: the file its successor engine was seen
    /// running (`/proc/PID/exe`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<std::path::PathBuf>,
}

/// The bring-up window: from the daemons' start to readiness (or its
/// deadline), and the hypervisor's steal inside it, the only disturbance
/// measured there (the witnesses start with the phases).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BringUp {
    pub window_ms: f64,
    pub dut_steal_ms: f64,
    pub peer_steal_ms: f64,
}

/// A phase's cost, from two samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuCost {
    /// The DUT daemon's CPU time over the phase (user + system, all its
    /// threads), ms; `None`: not readable.
    pub engine_cpu_ms: Option<f64>,
    /// Softirq time on the DUT's CPUs over the phase, ms.
    pub softirq_ms: f64,
    /// Idle (and iowait) time on those CPUs over the phase, ms: what was
    /// left over (absent in manifests written before it was recorded).
    #[serde(default)]
    pub idle_ms: Option<f64>,
    /// The phase's length, s (for per-second shares).
    pub seconds: f64,
}

/// The detection time of manifests written before it was recorded.
fn default_detection_ms() -> f64 {
    30.0
}

#[cfg(test)]
mod tests {
    use crate::manifest::faults::LongGap;

    #[test]
    fn keeping_the_longest_gaps_counts_the_rest() {
        let gap = |gap_ms: f64| LongGap {
            gap_ms,
            end_ns: 0,
            mirrors_peer: false,
            stolen_ms: 0.0,
            stalled_ms: 0.0,
            frozen_ms: 0.0,
            phase: "L4#1".into(),
        };
        let mut e: super::Evidence = serde_json::from_value(serde_json::json!({
            "capture_died_early": false, "capture_dropped": 0, "up_before_phases": {"Ok": null},
            "fast_path_on_dut_cpus": null, "steal_ms": 0.0, "phases": []
        }))
        .unwrap();
        e.long_gaps = [12.5, 40.0, 20.1, 13.0].map(gap).to_vec();
        e.keep_longest_gaps(2);
        let kept: Vec<f64> = e.long_gaps.iter().map(|g| g.gap_ms).collect();
        assert_eq!((kept, e.long_gaps_left_out), (vec![40.0, 20.1], 2));
        // Fewer than the bound: untouched.
        e.keep_longest_gaps(5);
        assert_eq!(e.long_gaps.len(), 2);
    }
}
