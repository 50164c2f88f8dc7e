//! Faults a scenario's phase injects, and what the wire must show for each
//! (issue 10). The capture on the DUT's bridge port is the truth: it holds
//! everything the DUT sent and everything it received (loss is injected on
//! the peer's port, before it).
//!
//! What is judged, for every fault: each Down of ours for an expired
//! detection time came a detection time after the peer's last packet on the
//! wire (RFC 5880 6.8.4: not early, and within 3 ms), and no silence of the
//! peer longer than that, while both sides were Up, went without one.

use crate::manifest::faults::{FaultFigures, Silence};
use crate::manifest::verdict::ExcusedGap;
use crate::scenario::Fault;
use linecard_capture_analyzer::analysis::{PacketRecord, PacketSink};
use linecard_capture_analyzer::decode::State;

/// How long the impostor sends (one packet each kind every 2 ms): ten
/// detection times of 3 x 10 ms, so that an engine that took it for the
/// peer stays Up for all of them.
pub const IMPOSTOR_MS: u64 = 300;
/// The impostor's UDP source port: under every range a BFD speaker sends
/// from (RFC 5881 section 4 asks 49152-65535; BIRD takes the kernel's
/// ephemeral ports, seen from 46131), so its flow on the capture is never
/// the peer's.
pub const IMPOSTOR_PORT: u16 = 1023;
/// Fewer of the impostor's packets than this on the capture: the impostor
/// did not bite (it sends 2 every 2 ms for [`IMPOSTOR_MS`]).
pub const IMPOSTOR_MIN_PACKETS: u64 = 100;

/// Whose a flow on the capture is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Ours,
    Peer,
    /// The impostor's ([`IMPOSTOR_PORT`]): counted, never the peer's.
    Impostor,
}

/// When a fault's action starts within its phase.
pub const LEAD_IN: std::time::Duration = std::time::Duration::from_secs(1);
/// A peer's packet on the capture this soon before our Down crossed it:
/// it reached the DUT after its detection time had expired (seen: 0.03 ms
/// before our Down, after a silence of a detection time).
pub const CROSSED_MS: f64 = 1.0;
/// Our Down must come this long at most after the detection time.
pub const DETECTION_SLACK_MS: f64 = 3.0;
/// The same under a stress profile: the Down, sent on time by the
/// responder, crosses the veth's backlog on the stressed CPU, whose softirq
/// the kernel may defer to ksoftirqd at normal priority (one Down in
/// twenty reached the wire 35.18 ms, another 37.17 ms, after the peer's
/// last packet for a detection time of 30 ms, the kernel's own detection
/// 30.99 ms).
pub const DETECTION_SLACK_STRESSED_MS: f64 = 10.0;
/// Both sides Up again within this long after a fault's action ends (a
/// loss lasts its phase and is not held to it).
pub const RECOVERY_MS: f64 = 5000.0;

/// One control packet of the capture, in capture order.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub ts_ns: i64,
    pub flow: usize,
    pub state: State,
    pub diag: u8,
    pub my_discr: u32,
    pub your_discr: u32,
    /// The receiver had asked for the silence this packet ended (Demand
    /// mode, RFC 5880 6.6): not a stall of the sender's host.
    pub demand_silence: bool,
}

/// Collects every control packet of a whole-capture analysis.
#[derive(Default)]
pub struct Rows(pub Vec<Row>);

impl PacketSink for Rows {
    fn control(&mut self, r: &PacketRecord) {
        self.0.push(Row {
            ts_ns: r.ts_ns,
            flow: r.flow,
            state: r.control.state,
            diag: r.control.diag,
            my_discr: r.control.my_discr,
            your_discr: r.control.your_discr,
            demand_silence: r.demand_silence,
        });
    }
}

impl Silence {
    pub fn ms(&self) -> f64 {
        ms(self.to_ns - self.from_ns)
    }
}

/// Walks the capture's packets within [phase_start, phase_end) (state is
/// tracked from the capture's start). `sides[flow]`: whose the flow is
/// (the impostor's is only counted); `timers`: the sessions' (detection
/// time, interval) in ms.
pub fn walk(
    rows: &[Row],
    sides: &[Side],
    phase: (i64, i64),
    fault: (i64, i64),
    timers: (f64, f64),
) -> FaultFigures {
    let (detection_ms, interval_ms) = timers;
    let (start, end) = phase;
    let mut f = FaultFigures {
        start_ns: fault.0,
        end_ns: fault.1,
        ..FaultFigures::default()
    };
    let (mut ours, mut theirs): (Option<State>, Option<State>) = (None, None);
    let (mut last_ours, mut last_theirs) = (i64::MIN, i64::MIN);
    // The peer's packet before its last one.
    let mut before_theirs = i64::MIN;
    let mut last_our_up = None;
    // Our Up packets in a row, up to the last one.
    let mut ups_in_a_row = 0u32;
    let mut ours_up_at_their_last = false;
    let mut our_last_down = i64::MIN;
    for r in rows {
        let inside = (start..end).contains(&r.ts_ns);
        let side = sides.get(r.flow).copied().unwrap_or(Side::Peer);
        if side == Side::Impostor {
            f.impostor_packets += u64::from(inside);
            continue;
        }
        if side == Side::Ours {
            if inside && r.state == State::Down && ours == Some(State::Up) {
                our_last_down = r.ts_ns;
                // A detection times a peer that fell silent while Up; after
                // the peer's own Down ours is a reaction, whatever its
                // diagnostic (a stopped engine resumes to a stale event).
                if r.diag == 1 && theirs == Some(State::Up) {
                    let since_last = ms(r.ts_ns.saturating_sub(last_theirs));
                    let since_before = ms(r.ts_ns.saturating_sub(before_theirs));
                    // Crossed on the wire: the peer's packet passed the
                    // capture just before our Down, but reached us after
                    // our detection time had expired on the silence
                    // before it: the Down times that silence.
                    let crossed = since_last < CROSSED_MS && since_before >= detection_ms - 1.0;
                    f.detections_ms
                        .push(if crossed { since_before } else { since_last });
                }
            }
            if inside && r.state == State::Up {
                // Not the gap after our first Up packet: the rate then
                // still follows the Poll Sequence that raises it from the
                // slow rate while not Up (RFC 5880 6.8.3; seen here: 18 ms
                // after a re-established session's first Up).
                if let Some(prev) = last_our_up.filter(|_| ups_in_a_row >= 2) {
                    let gap_ms = ms(r.ts_ns - prev);
                    f.up_gap_max_ms = f.up_gap_max_ms.max(gap_ms);
                    if gap_ms > LATE_INTERVALS * interval_ms {
                        f.late_up_gaps.push(crate::manifest::faults::LongGap {
                            gap_ms,
                            end_ns: r.ts_ns,
                            mirrors_peer: false,
                            stolen_ms: 0.0,
                            stalled_ms: 0.0,
                            frozen_ms: 0.0,
                            phase: String::new(),
                        });
                    }
                }
                f.our_last_your_discr = Some(r.your_discr);
                if r.ts_ns < fault.0 {
                    f.our_discr_before = Some(r.my_discr);
                } else if r.ts_ns >= fault.1 {
                    f.our_discr_after = Some(r.my_discr);
                }
            }
            if r.state == State::Up {
                last_our_up = Some(r.ts_ns);
                ups_in_a_row += 1;
            } else {
                ups_in_a_row = 0;
            }
            ours = Some(r.state);
            // The peer's detection counts from our last packet it took as
            // its session's: a bootstrap (Your Discriminator 0, from a
            // restarted engine) is discarded by FRR while its session is Up.
            if r.your_discr != 0 {
                last_ours = r.ts_ns;
            }
        } else {
            if inside {
                f.peer_packets += 1;
                if r.state != State::Up && theirs == Some(State::Up) {
                    if r.diag == 1 {
                        f.peer_detections_ms
                            .push(ms(r.ts_ns.saturating_sub(last_ours)));
                    }
                    if r.ts_ns >= fault.0 && f.peer_first_down_ms.is_none() {
                        f.peer_first_down_ms = Some(ms(r.ts_ns - fault.0));
                    }
                }
                let silence = ms(r.ts_ns.saturating_sub(last_theirs));
                if r.state == State::Up && theirs == Some(State::Up) {
                    f.peer_up_gap_max_ms = f.peer_up_gap_max_ms.max(silence);
                }
                let both_up =
                    theirs == Some(State::Up) && ours_up_at_their_last && !r.demand_silence;
                if both_up && silence >= detection_ms - 1.0 {
                    f.peer_silences.push(Silence {
                        from_ns: last_theirs,
                        to_ns: r.ts_ns,
                    });
                }
                if both_up
                    && silence > detection_ms + DETECTION_SLACK_MS
                    && our_last_down < last_theirs
                {
                    f.missed_ms.push(silence);
                }
                if r.state == State::Up {
                    if r.ts_ns < fault.0 {
                        f.peer_discr_before = Some(r.my_discr);
                    } else {
                        f.peer_discr_after = Some(r.my_discr);
                    }
                }
            }
            theirs = Some(r.state);
            before_theirs = last_theirs;
            last_theirs = r.ts_ns;
            ours_up_at_their_last = ours == Some(State::Up);
        }
        // Recovered: both sides' latest packets in Up, after the fault.
        if inside
            && r.ts_ns >= fault.1
            && f.recovered_ms.is_none()
            && ours == Some(State::Up)
            && theirs == Some(State::Up)
        {
            f.recovered_ms = Some(ms(r.ts_ns - fault.1));
        }
    }
    f
}

impl FaultFigures {
    /// The peer's first Down for an expired detection time that came
    /// sooner than that time after our last packet on the wire (1 ms of
    /// tolerance for the capture's timestamps): the peer's host stalled
    /// with our packets in its socket, and the phase says nothing about
    /// the DUT (RFC 5880 6.8.4). Not for a link flap, whose lost packets
    /// of ours the capture still holds.
    pub fn premature_peer_detection(&self, detection_ms: f64) -> Option<f64> {
        if !self.fault.as_ref()?.peer_hears_the_capture() {
            return None;
        }
        self.peer_detections_ms
            .iter()
            .copied()
            .find(|&ms| ms < detection_ms - 1.0)
    }
}

impl FaultFigures {
    /// The first silence of the peer's, while both sides were Up, that its
    /// fault does not explain: the peer sends on its own clock whatever
    /// the DUT does (RFC 5880 6.8.7), so only a link flap's or a peer
    /// restart's action, or a loss, can silence it. Any other silence of
    /// a detection time is its host's stall, and the phase says nothing
    /// about the DUT.
    pub fn peer_host_stall(&self) -> Option<&Silence> {
        let fault = self.fault.as_ref()?;
        self.peer_silences.iter().find(|s| match fault {
            Fault::Loss { .. } => false,
            Fault::LinkFlap { .. }
            | Fault::PeerRestart { .. }
            | Fault::PeerStall { .. }
            | Fault::Impostor => s.to_ns <= self.start_ns || s.from_ns >= self.end_ns,
            // The peer lives and sends on its own clock.
            Fault::EngineStop { .. }
            | Fault::EngineRestart
            | Fault::EngineHandover
            | Fault::EngineUpgrade
            | Fault::Flood { .. } => true,
        })
    }
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// What a fault's phase holds against the run, each with its reason.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultBreach {
    /// The DUT broke a rule.
    Fail(String),
    /// The fault did not bite, or the instrument disagrees with itself.
    Invalid(String),
    /// Late packets of ours, each inside a disturbance measured in its own
    /// gap that accounts for its lateness (steal, a freeze, an idle CPU's
    /// canary stall), every other rule kept: what the scenario's
    /// `excused_gaps` says (by default a pass with the gaps listed, their
    /// phase left for the judge to fill in; else invalid, run again).
    Excused(String, Vec<ExcusedGap>),
}

impl FaultBreach {
    pub fn why(&self) -> &str {
        match self {
            Self::Fail(w) | Self::Invalid(w) | Self::Excused(w, _) => w,
        }
    }
}

/// A gap of ours longer than this many intervals while Up is our own
/// clock's failure (RFC 5880 6.8.7: a packet every interval, jittered to
/// 75-100 %, whatever the peer sends); the half interval over one is room
/// for the sweep's wake and the capture's timestamps (11.24-11.62 ms seen
/// under 30 % loss here).
pub const LATE_INTERVALS: f64 = 1.5;
/// The same under a stress profile: our packet, sent on time, crosses the
/// veth's NAPI on the DUT's CPU, a softirq the kernel may defer to
/// ksoftirqd at normal priority behind the hog (16.57 ms seen in CI with
/// the responder at SCHED_DEADLINE; a throttled responder mirrors the
/// peer's whole silence, 27.40-27.58 ms here).
pub const LATE_INTERVALS_STRESSED: f64 = 2.0;

impl FaultFigures {
    /// How long after the detection time our Down may come here.
    pub fn detection_slack_ms(&self) -> f64 {
        if self.stressed {
            DETECTION_SLACK_STRESSED_MS
        } else {
            DETECTION_SLACK_MS
        }
    }

    /// How many intervals a gap of ours while Up may last here.
    pub fn late_intervals(&self) -> f64 {
        if self.stressed {
            LATE_INTERVALS_STRESSED
        } else {
            LATE_INTERVALS
        }
    }

    /// Our gaps while Up over [`Self::late_intervals`] intervals, split
    /// into those a disturbance measured inside accounts for and the rest.
    pub fn late_own_gaps(
        &self,
        interval_ms: f64,
    ) -> (
        Vec<&crate::manifest::faults::LongGap>,
        Vec<&crate::manifest::faults::LongGap>,
    ) {
        let limit = self.late_intervals() * interval_ms;
        self.late_up_gaps
            .iter()
            .filter(|g| g.gap_ms > limit)
            .partition(|g| g.excused_beyond(interval_ms))
    }
}

/// What the figures say about the DUT: a breach when the fault did not
/// bite or the instrument disagrees with itself (invalid), or the DUT broke
/// a rule (fail). A late packet of ours is excused only by a disturbance
/// measured inside its own gap (`late_up_gaps`), never a missed or early
/// Down.
pub fn judge(f: &FaultFigures, detection_ms: f64, interval_ms: f64) -> Result<(), FaultBreach> {
    let Some(fault) = &f.fault else {
        return Ok(());
    };
    let what = fault.describe();
    let fail = |why: String| Err(FaultBreach::Fail(format!("{what}: {why}")));
    if let Some(&early_or_late) = f
        .detections_ms
        .iter()
        .find(|&&ms| !(detection_ms - 1.0..=detection_ms + f.detection_slack_ms()).contains(&ms))
    {
        return fail(format!(
            "our Down came {early_or_late:.2} ms after the peer's last packet (detection time {detection_ms} ms)"
        ));
    }
    if let Some(ms) = f.missed_ms.first() {
        return fail(format!(
            "the peer was silent for {ms:.2} ms while both were Up and we never declared it Down"
        ));
    }
    // A fault on the peer's side leaves our own clock to send (RFC 5880
    // 6.8.7: every interval, whatever the peer does); judged first, since
    // a late packet of ours is ours whatever the peer did next.
    let (excused, late) = if fault.leaves_our_clock_running() {
        f.late_own_gaps(interval_ms)
    } else {
        (Vec::new(), Vec::new())
    };
    if let Some(g) = late.first() {
        return fail(format!(
            "our gap while Up of {:.2} ms (ending {:+.0} ms from the fault's start), over {} intervals: our own clock did not send",
            g.gap_ms,
            ms(g.end_ns - f.start_ns),
            f.late_intervals()
        ));
    }
    // Any other rule the DUT broke stands whatever a disturbance excused.
    fault_rules(f, fault, detection_ms)?;
    if !excused.is_empty() {
        let took = excused.iter().map(|g| g.disturbed_ms()).fold(0.0, f64::max);
        let gaps = (excused.iter())
            .filter_map(|g| {
                let (by, disturbed_ms) = g.excuse_beyond(interval_ms)?;
                Some(ExcusedGap {
                    phase: String::new(),
                    gap_ms: g.gap_ms,
                    end_ns: g.end_ns,
                    by: by.into(),
                    disturbed_ms,
                })
            })
            .collect();
        return Err(FaultBreach::Excused(format!(
            "{what}: {} gap(s) of ours over {} intervals while Up (the longest {:.2} ms), each with a disturbance inside it that accounts for it (up to {took:.0} ms: hypervisor steal, a freeze, or the idle CPU's canary stalled)",
            excused.len(),
            f.late_intervals(),
            f.up_gap_max_ms
        ), gaps));
    }
    Ok(())
}

/// Each fault kind's own rules, and the recovery after it.
fn fault_rules(f: &FaultFigures, fault: &Fault, detection_ms: f64) -> Result<(), FaultBreach> {
    let what = fault.describe();
    let fail = |why: String| Err(FaultBreach::Fail(format!("{what}: {why}")));
    let invalid = |why: String| Err(FaultBreach::Invalid(format!("{what}: {why}")));
    match fault {
        Fault::Loss { percent, .. } => {
            let (Some(seen), Some(dropped)) = (f.frames_seen, f.frames_dropped) else {
                return invalid("the loss program's counters were not read".into());
            };
            if (seen - dropped).abs_diff(f.peer_packets) > 3 {
                return invalid(format!(
                    "{} of the peer's frames passed the loss program but the capture holds {}",
                    seen - dropped,
                    f.peer_packets
                ));
            }
            if *percent >= 20.0 && f.detections_ms.is_empty() {
                return invalid("no Down of ours: the loss did not bite".into());
            }
            // Only the peer's frames are lost: ours (our Down with them)
            // all reach it, so it never has to time out on us.
            if let Some(ms) = f
                .peer_detections_ms
                .iter()
                .find(|&&ms| ms >= detection_ms - 1.0)
            {
                return fail(format!(
                    "the peer timed out on us {ms:.2} ms after our last packet, though none of ours was lost"
                ));
            }
        }
        Fault::LinkFlap { down_ms } => {
            if (*down_ms as f64) > detection_ms + 10.0 && f.detections_ms.is_empty() {
                return invalid("no Down of ours while the link was down".into());
            }
        }
        Fault::PeerStall { stall_ms, .. } => {
            // Precondition: the stops silenced the peer (it sends every
            // interval otherwise).
            if f.peer_up_gap_max_ms < *stall_ms as f64 {
                return invalid(format!(
                    "the peer's longest gap was {:.2} ms: the stops did not silence it",
                    f.peer_up_gap_max_ms
                ));
            }
        }
        Fault::PeerRestart { .. } | Fault::Impostor => {
            if matches!(fault, Fault::Impostor) && f.impostor_packets < IMPOSTOR_MIN_PACKETS {
                return invalid(format!(
                    "{} of the impostor's packets on the capture: it did not bite",
                    f.impostor_packets
                ));
            }
            if f.detections_ms.is_empty() {
                return invalid("no Down of ours for the killed peer".into());
            }
            if f.peer_discr_before.is_some() && f.peer_discr_before == f.peer_discr_after {
                return invalid("the restarted peer kept its discriminator".into());
            }
            if f.our_last_your_discr != f.peer_discr_after {
                return fail(format!(
                    "our last Up packet names {:?}, the restarted peer is {:?}",
                    f.our_last_your_discr, f.peer_discr_after
                ));
            }
        }
        Fault::Flood { .. } => flood_rules(f)?,
        Fault::EngineHandover | Fault::EngineUpgrade => {
            if let Some(ms) = f.peer_detections_ms.first() {
                return fail(format!(
                    "the peer declared us Down {ms:.2} ms after our last packet"
                ));
            }
            if let Some(ms) = f.peer_first_down_ms {
                return fail(format!(
                    "the peer said Down {ms:.0} ms after the handover began"
                ));
            }
            if let Some(ms) = f.detections_ms.first() {
                return fail(format!(
                    "we declared the peer Down ({ms:.2} ms after its last packet)"
                ));
            }
            if f.our_discr_before.is_none() || f.our_discr_after.is_none() {
                return invalid("no Up packet of ours before or after the handover".into());
            }
            if f.our_discr_before != f.our_discr_after {
                return fail(format!(
                    "the new engine runs under discriminator {:?}, not {:?}",
                    f.our_discr_after, f.our_discr_before
                ));
            }
        }
        Fault::EngineStop { .. } | Fault::EngineRestart => {
            let Some(&ms) = f.peer_detections_ms.first() else {
                return fail("the peer never declared the stopped engine Down".into());
            };
            if matches!(fault, Fault::EngineRestart)
                && f.our_discr_before.is_some()
                && f.our_discr_before == f.our_discr_after
            {
                return fail("the restarted engine came back under its old discriminator".into());
            }
            // Sooner than the detection time is the peer host's stall,
            // judged with the plain phases' (`Evidence`); later is its
            // timer's lateness. Neither says anything about the DUT.
            if !(detection_ms - 1.0..=detection_ms + DETECTION_SLACK_MS).contains(&ms) {
                return invalid(format!(
                    "the peer declared us Down {ms:.2} ms after our last packet, not a detection time after it"
                ));
            }
        }
    }
    // A loss lasts its phase: the sessions flap and recover inside it.
    if matches!(fault, Fault::Loss { .. }) {
        return Ok(());
    }
    match f.recovered_ms {
        Some(ms) if ms <= RECOVERY_MS => Ok(()),
        Some(ms) => fail(format!("Up again only {ms:.0} ms after the fault ended")),
        None => fail("never Up again after the fault".into()),
    }
}

/// A flood's rules: it bit (its packets on the capture, the engine's
/// refusals), the session held through it on both sides, and on the fast
/// path the kernel refused every frame (RFC 5880 6.7: a forgery never
/// reaches the state machine; here, never userspace either).
fn flood_rules(f: &FaultFigures) -> Result<(), FaultBreach> {
    let what = f.fault.as_ref().map(Fault::describe).unwrap_or_default();
    let fail = |why: String| Err(FaultBreach::Fail(format!("{what}: {why}")));
    let invalid = |why: String| Err(FaultBreach::Invalid(format!("{what}: {why}")));
    let Some(counts) = &f.flood else {
        return invalid("the engine's refusals were not read".into());
    };
    if f.impostor_packets < IMPOSTOR_MIN_PACKETS {
        return invalid(format!(
            "{} of its packets on the capture: it did not bite",
            f.impostor_packets
        ));
    }
    if let Some(ms) = f.detections_ms.first() {
        return fail(format!(
            "we declared the live peer Down ({ms:.2} ms after its last packet)"
        ));
    }
    if let Some(ms) = f.peer_detections_ms.first() {
        return fail(format!(
            "the peer timed out on us {ms:.2} ms after our last packet"
        ));
    }
    // The capture is taken on the DUT's port: what it holds of the flood
    // reached the DUT (at most 1 % lost on the way, or it judged nothing).
    if f.impostor_packets * 100 < counts.sent * 99 {
        return invalid(format!(
            "{} of its {} frames on the DUT's port: the flood did not reach the DUT",
            f.impostor_packets, counts.sent
        ));
    }
    let refused = counts.kernel_refused.unwrap_or(0) + counts.userspace_refused;
    if refused * 100 < f.impostor_packets * 99 {
        return fail(format!(
            "{refused} refusals for the {} of its packets that reached the DUT: the rest were taken for the peer's",
            f.impostor_packets
        ));
    }
    if counts.kernel_refused.is_some() && counts.userspace_refused > 0 {
        return fail(format!(
            "{} of the flood's packets reached userspace past the kernel",
            counts.userspace_refused
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "faults_tests.rs"]
mod tests;
