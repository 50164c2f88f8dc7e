//! Which of the DUT's long gaps only mirrored the peer's silence.
//!
//! An RX-clocked DUT answers each peer packet within microseconds, so when
//! the peer host stalls and sends nothing for 27 ms, the DUT's next packet
//! is 27 ms late too, through no fault of its own (measured in CI: FRR on
//! the peer's CPU silent 27.79 ms, the xdp DUT's gap 27.80 ms, its reply
//! 21 us after the peer's packet). That is said beside the gap, but it
//! excuses nothing: the DUT's own clock must send within its interval
//! whatever the peer does (RFC 5880 6.8.7; the xdp backend's kernel clock
//! exists to fill exactly such silences), so a mirrored gap over a limit
//! is the DUT's failure.

use crate::manifest::faults::LongGap;
use linecard_capture_analyzer::analysis::{PacketRecord, PacketSink};
use std::collections::{HashMap, HashSet};

/// A DUT packet this soon after the peer's counts as an answer to it.
const REPLY_WITHIN_NS: i64 = 2_000_000;

/// Gaps of at least this many intervals are kept one by one, each to be
/// placed among the disturbances (shorter ones never break a limit worth
/// judging): a gap limit below it cannot be excused gap by gap.
pub const KEPT_FROM_INTERVALS: f64 = 1.2;

/// Gaps at least this long are kept (`KEPT_FROM_INTERVALS`).
#[derive(Debug)]
pub struct LongGaps {
    threshold_ns: u64,
    /// (flow, end of the gap, gap) in capture order.
    gaps: Vec<(usize, i64, u64)>,
}

impl LongGaps {
    pub fn new(threshold_ns: u64) -> Self {
        Self {
            threshold_ns,
            gaps: Vec::new(),
        }
    }

    /// Whether `flow` fell silent for at least `detection_ns` (less 1 ms,
    /// the capture's timestamping) in a silence whose expiry came at most
    /// `latency_ns` before `at_ns` and not after it: a Down on the other
    /// flow at `at_ns` then declared a true silence (RFC 5880 6.8.4), even
    /// when the late packet that ended it reached the wire before the Down
    /// did (it came while the Down was on its way).
    pub fn expired_before(
        &self,
        flow: usize,
        at_ns: i64,
        detection_ns: i64,
        latency_ns: i64,
    ) -> bool {
        let detection = detection_ns - 1_000_000;
        self.gaps.iter().any(|&(f, end, gap)| {
            let expired_at = end - gap as i64 + detection;
            f == flow
                && gap as i64 >= detection
                && (expired_at..=expired_at + latency_ns).contains(&at_ns)
        })
    }
}

impl PacketSink for LongGaps {
    fn control(&mut self, record: &PacketRecord) {
        // A silence the receiver asked for (Demand mode) is no late packet.
        if record.demand_silence {
            return;
        }
        if let Some(gap) = record.gap_ns.filter(|&g| g >= self.threshold_ns) {
            self.gaps.push((record.flow, record.ts_ns, gap));
        }
    }
}

/// A freeze began at most a witness period before the witness's missed
/// wake (it slept until then), so it may be that much longer than recorded.
const FREEZE_GRAIN_MS: f64 = crate::freeze::PERIOD_NS as f64 / 1e6;

/// The same for the canary: a stall began at most a period before its
/// missed wake (a CI run: a 16.13 ms gap under loss held a 5.65 ms canary
/// stall that began with a 3.4 ms freeze, the softirq backlog after it
/// the rest, against 6.13 ms of excess).
const CANARY_GRAIN_MS: f64 = crate::canary::PERIOD.as_secs_f64() * 1e3;

/// /proc/stat counts steal in ticks of 10 ms (USER_HZ 100).
const STEAL_TICK_MS: f64 = crate::steal::TICK_MS;

impl LongGap {
    pub fn start_ns(&self) -> i64 {
        self.end_ns - (self.gap_ms * 1e6) as i64
    }

    /// The one validity rule: whether a disturbance measured inside this
    /// very gap accounts for its excess over `bar_ms` (what it had to
    /// hold): steal placed in it (plus a tick of the counter's rounding:
    /// it rounds down), a freeze (plus the witness's period), or, outside
    /// stress, a canary stall as long (plus the canary's period). A disturbance elsewhere in the run
    /// excuses nothing: ten stolen ms inside a 21.9 ms gap excuse it
    /// against a 15 ms bar, never against 956 ms.
    pub fn excused_beyond(&self, bar_ms: f64) -> bool {
        self.excuse_beyond(bar_ms).is_some()
    }

    /// The disturbance that excuses this gap's excess over `bar_ms`
    /// (`excused_beyond`), named, with what it took inside the gap, ms.
    pub fn excuse_beyond(&self, bar_ms: f64) -> Option<(&'static str, f64)> {
        let excess = self.gap_ms - bar_ms;
        [
            ("freeze", self.frozen_ms, FREEZE_GRAIN_MS),
            ("steal", self.stolen_ms, STEAL_TICK_MS),
            ("canary stall", self.stalled_ms, CANARY_GRAIN_MS),
        ]
        .into_iter()
        .find(|&(_, took, grain)| took > 0.0 && excess <= took + grain)
        .map(|(by, took, _)| (by, took))
    }

    /// The largest disturbance measured inside the gap, ms.
    pub fn disturbed_ms(&self) -> f64 {
        self.stolen_ms.max(self.stalled_ms).max(self.frozen_ms)
    }
}

/// What the witnesses recorded on the DUT's CPUs during a run, to be
/// placed inside each gap it is judged by.
pub struct Witnesses<'a> {
    pub steal: &'a crate::steal::StealTrace,
    pub freezes: &'a [crate::canary::Stall],
    /// The freeze witness on the other CPUs (the peer's, the observer's):
    /// a freeze of the DUT's CPUs at the same instants is the machine's.
    pub rest_freezes: &'a [crate::canary::Stall],
    pub stalls: &'a [crate::canary::Stall],
    /// The phases without stress, where a canary stall is a disturbance
    /// (under stress it is the stress itself).
    pub unstressed: Vec<(i64, i64)>,
    /// While a successor engine starts on the DUT's CPUs (a handover, an
    /// upgrade: from its spawn to its predecessor's exit): a canary stall
    /// or a freeze of the DUT's CPUs alone there is the engine's own doing
    /// (an upgrade's program load: the kernel's verifier held the CPU
    /// 12-16 ms at a stretch, measured by the freeze witness), so only the
    /// hypervisor's steal, or a freeze of every CPU at once (the other
    /// CPUs' witness froze too: the successor runs on the DUT's alone),
    /// may excuse a gap that reaches into it.
    pub successors: Vec<(i64, i64)>,
}

impl Witnesses<'_> {
    /// Fills in what a disturbance took inside `gap`: steal anywhere;
    /// freezes, but only those of the whole machine if the gap reaches
    /// into a successor's start; a canary stall only in a phase without
    /// stress, and not where a successor starts either.
    pub fn place(&self, gap: &mut LongGap) {
        let (start, end) = (gap.start_ns(), gap.end_ns);
        let within = |windows: &[(i64, i64)]| windows.iter().any(|&(a, b)| (a..b).contains(&end));
        gap.stolen_ms = self.steal.within(start, end);
        if (self.successors.iter()).any(|&(a, b)| start < b && a < end) {
            gap.frozen_ms = crate::freeze::frozen_together_within_ms(
                self.freezes,
                self.rest_freezes,
                start,
                end,
            );
            return;
        }
        gap.frozen_ms = crate::freeze::frozen_within_ms(self.freezes, start, end);
        if within(&self.unstressed) {
            gap.stalled_ms = crate::canary::longest_stall_ms(self.stalls, start, end);
        }
    }
}

/// Phases as time windows, CLOCK_REALTIME ns, [start, end).
pub type Windows = Vec<(i64, i64)>;

/// The windows of the phases without stress ([`Witnesses::unstressed`])
/// and those where a successor engine starts on the DUT's CPUs
/// ([`Witnesses::successors`]): the handover's own window as applied,
/// from the successor's spawn to its predecessor's exit. Not the whole
/// phase: once the predecessor is gone the successor is a running engine
/// like any other, and a freeze seconds later is the machine's (traced on
/// this VM: 5-16 ms freezes 0.6-2.2 s after a handover, the DUT's CPU
/// halted in the idle loop throughout, woken late).
pub fn phase_windows(
    records: &[crate::manifest::PhaseRecord],
    specs: &[crate::scenario::PhaseSpec],
) -> (Windows, Windows) {
    let window = |record: &crate::manifest::PhaseRecord| (record.start_ns, record.end_ns);
    let unstressed = (records.iter())
        .filter(|record| record.stress_ng.is_none())
        .map(window)
        .collect();
    let successors = (records.iter().zip(specs))
        .filter(|(_, spec)| (spec.fault.as_ref()).is_some_and(crate::scenario::Fault::hands_over))
        .filter_map(|(record, _)| record.fault.as_ref())
        .map(|applied| (applied.start_ns, applied.end_ns))
        .collect();
    (unstressed, successors)
}

/// The long gaps of the flows in `dut_flows` within [start, end), each
/// checked against the long gaps of its reverse flow (`reverse_of`).
/// Indexed by flow, not compared pairwise: a flapping positive control at
/// 4096 sessions has long gaps by the hundred thousand.
pub fn judge_gaps(
    long: &LongGaps,
    dut_flows: &[usize],
    reverse_of: impl Fn(usize) -> Option<usize>,
    start_ns: i64,
    end_ns: i64,
) -> Vec<LongGap> {
    let dut: HashSet<usize> = dut_flows.iter().copied().collect();
    // Each flow's long gaps as (end, gap), by end.
    let mut by_flow: HashMap<usize, Vec<(i64, u64)>> = HashMap::new();
    for &(flow, end, gap) in &long.gaps {
        by_flow.entry(flow).or_default().push((end, gap));
    }
    for gaps in by_flow.values_mut() {
        gaps.sort_unstable();
    }
    let mut reverse: HashMap<usize, Option<usize>> = HashMap::new();
    long.gaps
        .iter()
        .filter(|(flow, end, _)| dut.contains(flow) && *end >= start_ns && *end < end_ns)
        .map(|&(flow, end, gap)| {
            let reverse = *reverse.entry(flow).or_insert_with(|| reverse_of(flow));
            // The peer's gaps that ended within the reply time before ours.
            let mirrors_peer = reverse.and_then(|r| by_flow.get(&r)).is_some_and(|peer| {
                let from = peer.partition_point(|&(peer_end, _)| peer_end < end - REPLY_WITHIN_NS);
                peer[from..]
                    .iter()
                    .take_while(|&&(peer_end, _)| peer_end <= end)
                    .any(|&(_, peer_gap)| peer_gap as i64 >= gap as i64 - REPLY_WITHIN_NS)
            });
            LongGap {
                gap_ms: gap as f64 / 1e6,
                end_ns: end,
                mirrors_peer,
                stolen_ms: 0.0,
                stalled_ms: 0.0,
                frozen_ms: 0.0,
                phase: String::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use linecard_capture_analyzer::decode::Control;

    fn record(flow: usize, ts_ns: i64, gap_ns: Option<u64>) -> PacketRecord {
        PacketRecord {
            ts_ns,
            flow,
            control: Control {
                diag: 0,
                state: linecard_capture_analyzer::decode::State::Up,
                poll: false,
                final_: false,
                demand: false,
                detect_mult: 3,
                my_discr: 1,
                your_discr: 2,
                desired_min_tx_us: 10_000,
                required_min_rx_us: 10_000,
                auth: None,
            },
            gap_ns,
            demand_silence: false,
        }
    }

    const MS: i64 = 1_000_000;

    /// The scale-256 run's case: the peer silent 30.72 ms (889.955 to
    /// 920.677 ms), our Down on the wire at 921.821 ms, after their late
    /// packet: a true detection. The same Down before the silence reached
    /// the detection time, or long after it expired, is not; nor is a
    /// silence shorter than it, nor one on another flow.
    #[test]
    fn a_down_after_the_peer_s_silence_expired_is_its_detection_even_behind_a_late_packet() {
        let mut long = LongGaps::new((12 * MS) as u64);
        let sink: &mut dyn PacketSink = &mut long;
        sink.control(&record(1, 889_955_000, Some(9_800_000)));
        sink.control(&record(1, 920_677_000, Some(30_722_000)));
        sink.control(&record(2, 500 * MS, Some(20_000_000)));
        let (detection, latency) = (30 * MS, 5 * MS);
        assert!(long.expired_before(1, 921_821_000, detection, latency));
        // Before the expiry (889.955 + 29 ms), or past the latency.
        assert!(!long.expired_before(1, 917 * MS, detection, latency));
        assert!(!long.expired_before(1, 925 * MS, detection, latency));
        // Another flow, or a silence under the detection time.
        assert!(!long.expired_before(0, 921_821_000, detection, latency));
        assert!(!long.expired_before(2, 500 * MS, detection, latency));
    }

    #[test]
    fn where_a_successor_starts_only_steal_or_the_whole_machine_s_freeze_excuses_a_gap() {
        let idle = crate::profile::Profile::parse(
            "idle",
            "schema_version = 1\nname = \"idle\"\nwhat = \"x\"\n",
        )
        .unwrap();
        let spec = |fault| crate::scenario::PhaseSpec {
            profile: idle.clone(),
            seconds: 5,
            fault,
        };
        // Each phase's fault (if any) applied from 200 to 400 ms into it.
        let record = |i: i64, stress: bool| crate::manifest::PhaseRecord {
            name: format!("p#{i}"),
            profile: "p".into(),
            start_ns: i * 1000 * MS,
            end_ns: (i + 1) * 1000 * MS,
            stress_ng: stress.then(|| "stress-ng --cpu 1".to_string()),
            fault: (i > 0).then(|| crate::manifest::evidence::Applied {
                start_ns: (i * 1000 + 200) * MS,
                end_ns: (i * 1000 + 400) * MS,
                ..Default::default()
            }),
            cpu: None,
            peer_cpu: None,
            drops: Vec::new(),
            softirq_threads: Vec::new(),
        };
        use crate::scenario::Fault;
        let specs = [
            spec(None),
            spec(Some(Fault::EngineUpgrade)),
            spec(Some(Fault::EngineHandover)),
            spec(Some(Fault::EngineRestart)),
            spec(None),
        ];
        let records = [
            record(0, false),
            record(1, false),
            record(2, false),
            record(3, false),
            record(4, true),
        ];
        let (unstressed, successors) = phase_windows(&records, &specs);
        assert_eq!(unstressed.len(), 4);
        assert_eq!(successors, [(1200 * MS, 1400 * MS), (2200 * MS, 2400 * MS)]);
        // A freeze and a canary stall of 12 ms inside a 17 ms gap: an
        // excuse in a plain idle phase, none where a successor started.
        let steal = crate::steal::StealTrace::default();
        let disturbance = [crate::canary::Stall {
            from_unix_ns: 1,
            to_unix_ns: 12 * MS + 1,
        }];
        let witnesses = Witnesses {
            steal: &steal,
            freezes: &disturbance,
            rest_freezes: &[],
            stalls: &disturbance,
            unstressed,
            successors,
        };
        // A 17 ms gap ending at `end_ns`, as the witnesses place it.
        let placed = |witnesses: &Witnesses, end_ns: i64| {
            let mut gap = LongGap {
                gap_ms: 17.0,
                end_ns,
                mirrors_peer: false,
                stolen_ms: 0.0,
                stalled_ms: 0.0,
                frozen_ms: 0.0,
                phase: String::new(),
            };
            witnesses.place(&mut gap);
            gap
        };
        let plain = placed(&witnesses, 17 * MS);
        assert_eq!((plain.frozen_ms, plain.stalled_ms), (12.0, 12.0));
        // The same inside an upgrade phase: none while its successor
        // starts (a gap ending in the window, or beginning in it and ending
        // just after), an excuse again once its predecessor has exited.
        let shifted = |by_ms: i64| {
            let mut moved = disturbance;
            moved[0].from_unix_ns += by_ms * MS;
            moved[0].to_unix_ns += by_ms * MS;
            moved
        };
        for (offset_ms, excused) in [(1200, false), (1390, false), (1500, true)] {
            let moved = shifted(offset_ms);
            let witnesses = Witnesses {
                freezes: &moved,
                rest_freezes: &[],
                stalls: &moved,
                steal: &steal,
                unstressed: witnesses.unstressed.clone(),
                successors: witnesses.successors.clone(),
            };
            let gap = placed(&witnesses, (offset_ms + 17) * MS);
            let expected = if excused { 12.0 } else { 0.0 };
            assert_eq!(
                (gap.frozen_ms, gap.stalled_ms),
                (expected, expected),
                "a gap ending {offset_ms} + 17 ms"
            );
        }
        // Where a successor starts, the part of the DUT's freeze when the
        // other CPUs froze too (the machine stood still; seen in CI: 14.2
        // ms inside a 25.08 ms gap, the peer silent 24.3 ms) excuses; a
        // canary stall still does not.
        let moved = shifted(1200);
        let rest = [crate::canary::Stall {
            from_unix_ns: 1200 * MS + 3 * MS,
            to_unix_ns: 1200 * MS + 20 * MS,
        }];
        let machine = Witnesses {
            freezes: &moved,
            rest_freezes: &rest,
            stalls: &moved,
            steal: &steal,
            unstressed: witnesses.unstressed.clone(),
            successors: witnesses.successors.clone(),
        };
        let gap = placed(&machine, 1217 * MS);
        assert_eq!((gap.frozen_ms, gap.stalled_ms), (9.000001, 0.0));
    }

    #[test]
    fn a_reply_after_the_peer_s_silence_mirrors_it_and_a_late_own_packet_does_not() {
        let mut long = LongGaps::new(12 * MS as u64);
        // Flow 1 is the peer, flow 0 the DUT. The peer is silent 27.79 ms,
        // the DUT answers 21 us later: a mirror.
        long.control(&record(1, 1_000 * MS, Some((27.79 * MS as f64) as u64)));
        long.control(&record(
            0,
            1_000 * MS + 21_000,
            Some((27.80 * MS as f64) as u64),
        ));
        // Later the DUT is 25 ms late on its own while the peer kept
        // sending (its gaps stayed short, so none was kept).
        long.control(&record(0, 2_000 * MS, Some(25 * MS as u64)));
        // Ignored: short, and outside the window.
        long.control(&record(0, 2_500 * MS, Some(5 * MS as u64)));
        long.control(&record(0, 9_000 * MS, Some(40 * MS as u64)));
        let gaps = judge_gaps(&long, &[0], |f| Some(1 - f), 0, 5_000 * MS);
        assert_eq!(
            gaps,
            [
                LongGap {
                    gap_ms: 27.8,
                    end_ns: 1_000 * MS + 21_000,
                    mirrors_peer: true,
                    stolen_ms: 0.0,
                    stalled_ms: 0.0,
                    frozen_ms: 0.0,
                    phase: String::new(),
                },
                LongGap {
                    gap_ms: 25.0,
                    end_ns: 2_000 * MS,
                    mirrors_peer: false,
                    stolen_ms: 0.0,
                    stalled_ms: 0.0,
                    frozen_ms: 0.0,
                    phase: String::new(),
                }
            ]
        );
    }

    #[test]
    fn a_peer_gap_much_shorter_than_the_dut_s_is_no_excuse() {
        let mut long = LongGaps::new(12 * MS as u64);
        long.control(&record(1, 1_000 * MS, Some(13 * MS as u64)));
        long.control(&record(0, 1_000 * MS + 21_000, Some(27 * MS as u64)));
        let gaps = judge_gaps(&long, &[0], |f| Some(1 - f), 0, 5_000 * MS);
        assert!(!gaps[0].mirrors_peer);
    }

    #[test]
    fn only_a_peer_gap_ending_within_the_reply_time_before_ours_counts() {
        let mut long = LongGaps::new(12 * MS as u64);
        // The peer's gap ends 2 ms before ours (the edge): a mirror.
        long.control(&record(1, 1_000 * MS, Some(25 * MS as u64)));
        long.control(&record(0, 1_002 * MS, Some(25 * MS as u64)));
        // The peer's gap ends 0.45 ms after ours: both silent at once, not
        // the DUT answering a late peer (seen in CI, 23.20 ms).
        long.control(&record(0, 2_000 * MS, Some(23 * MS as u64)));
        long.control(&record(1, 2_000 * MS + 450_000, Some(23 * MS as u64)));
        // Another flow's gap never excuses ours.
        long.control(&record(2, 3_000 * MS, Some(40 * MS as u64)));
        long.control(&record(0, 3_000 * MS + 21_000, Some(30 * MS as u64)));
        let gaps = judge_gaps(&long, &[0], |f| (f == 0).then_some(1), 0, 5_000 * MS);
        let mirrors: Vec<bool> = gaps.iter().map(|g| g.mirrors_peer).collect();
        assert_eq!(mirrors, [true, false, false]);
    }
}
