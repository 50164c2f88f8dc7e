//! The verdict on one DUT's run, from what was measured outside it. Order
//! matters: a run that cannot be trusted is `invalid` whatever its numbers
//! say; only a trusted run can `pass` or `fail`.

use super::mirror::KEPT_FROM_INTERVALS;
use super::readiness::{DUT_EXITED, DUT_SILENT, PEER_EXITED};
use crate::manifest::evidence::{BringUp, Evidence};
use crate::manifest::faults::LongGap;
use crate::manifest::figures::{EchoFigures, PhaseFigures};
use crate::manifest::verdict::{ExcusedGap, Verdict};
use crate::scenario::{DemandAsker, ExcusedGaps, Expectation, PeerEcho};

impl PhaseFigures {
    /// A phase the DUT's limits (and positive control) apply to.
    fn plain(&self) -> bool {
        self.fault.is_none()
    }
}

impl Evidence {
    /// The same evidence over other phase figures (one family's sessions).
    pub fn with_phases(&self, phases: Vec<PhaseFigures>) -> Evidence {
        Evidence {
            phases,
            ..self.clone()
        }
    }

    /// A premature peer detection that spoils what this DUT is judged on.
    /// The wire proves such a Down was not the DUT's (its last packet was
    /// on time), so it is excused from the flaps the DUT is judged on
    /// (`own_flaps`) instead of spoiling the run, unless:
    /// - it came in a fault's phase (judged by the fault's own rules);
    /// - the environment took more than `MAX_EXCUSED_DOWNS` Downs from a
    ///   DUT that must hold, and the window says too little about it;
    /// - a positive control has no flap of its own left: nothing proves
    ///   the stress (CI saw FRR bfdd's 56 flaps under L4 next to one Down
    ///   the peer sent 1.56 ms after our last packet: the other 55 are its
    ///   own);
    /// - another limit than its own flaps breaks: the re-established
    ///   session's gaps are in the figures, and the run says nothing
    ///   either way.
    fn spoiling_peer_detection(&self, expect: &Expectation) -> Option<f64> {
        if let Some(in_fault) = self.phases.iter().find_map(|p| {
            let f = p.fault.as_ref()?;
            // A late packet of our own clock in that phase is ours,
            // whatever the peer did after it: no excuse from the peer.
            if f.fault
                .as_ref()
                .is_some_and(crate::scenario::Fault::leaves_our_clock_running)
                && !f.late_own_gaps(self.interval_ms()).1.is_empty()
            {
                return None;
            }
            f.premature_peer_detection(self.detection_ms)
        }) {
            return Some(in_fault);
        }
        let first = *self.premature_peer_detections_ms.first()?;
        self.excuse_spoils(expect).then_some(first)
    }

    /// Whether the Downs the wire excuses (`excused_flaps`) still spoil
    /// the run (see `spoiling_peer_detection`).
    fn excuse_spoils(&self, expect: &Expectation) -> bool {
        // A positive control is judged on flapping at all: flaps of its own
        // prove the stress bit however many the peer's stalls added (CI: 60
        // of its own beside 7 premature Downs).
        if expect.positive_control {
            return self.own_flaps() == 0;
        }
        if self.excused_flaps() > MAX_EXCUSED_DOWNS {
            return true;
        }
        // Flaps of its own beyond its limit are the DUT's whatever else
        // happened; any other broken limit may be the re-established
        // session's.
        let own_flaps_break = expect.max_flaps.is_some_and(|n| self.own_flaps() > n);
        !own_flaps_break && !broken_limits(expect, self).is_empty()
    }

    /// Flaps in the plain phases that the wire proves were not the DUT's:
    /// the peer's Downs that came before its detection time after our
    /// last packet, and each session's first Down of the DUT's when it
    /// came after the peer had been silent for a detection time on that
    /// session (it told the truth about a stalled peer).
    pub fn excused_flaps(&self) -> u64 {
        (self.premature_peer_detections_ms.len() + self.silent_peer_detections_ms.len()) as u64
    }

    /// The plain phases' flaps less those the wire excuses: what a DUT's
    /// limits and a positive control's flapping are judged on.
    fn own_flaps(&self) -> u64 {
        self.plain_flaps().saturating_sub(self.excused_flaps())
    }

    /// What a fault's phase holds against the DUT by the fault's own rules
    /// (`faults::judge`); `None` for a plain phase or a kept rule.
    pub fn fault_breach(&self, p: &PhaseFigures) -> Option<super::faults::FaultBreach> {
        let f = p.fault.as_ref()?;
        super::faults::judge(f, self.detection_ms, self.interval_ms()).err()
    }

    /// The sessions' interval, ms.
    fn interval_ms(&self) -> f64 {
        self.interval_ms.unwrap_or(self.detection_ms / 3.0)
    }

    /// A fault phase whose only fault was late packets of ours, each with
    /// a disturbance measured inside it that accounts for its lateness
    /// (spoiled where the scenario does not pass such gaps).
    fn fault_spoiled_by_steal(&self) -> bool {
        self.phases.iter().any(|p| {
            matches!(
                self.fault_breach(p),
                Some(super::faults::FaultBreach::Excused(..))
            )
        })
    }

    /// A fault phase's silence of the peer that its fault does not
    /// explain (`FaultFigures::peer_host_stall`).
    fn fault_peer_host_stall(&self) -> Option<&crate::manifest::faults::Silence> {
        self.phases
            .iter()
            .find_map(|p| p.fault.as_ref()?.peer_host_stall())
    }

    fn plain_flaps(&self) -> u64 {
        self.phases
            .iter()
            .filter(|p| p.plain())
            .map(|p| p.flaps)
            .sum()
    }

    /// The longest gap in the phases the DUT's limits apply to, ms.
    fn plain_max_ms(&self) -> f64 {
        self.phases
            .iter()
            .filter(|p| p.plain())
            .map(|p| p.max_ms)
            .fold(0.0, f64::max)
    }
}

impl Expectation {
    /// Whether these limits hold anything against a DUT's figures: a DUT
    /// judged by none was measured, not passed.
    pub fn judges_anything(&self) -> bool {
        self.positive_control
            || self.max_flaps.is_some()
            || self.max_gap_ms.is_some()
            || self.peer_echo.is_some()
            || self.own_echo
            || self.auth.is_some()
            || self.demand.is_some()
    }
}

impl super::DutOutcome {
    /// Its verdict as tables show it ([`Verdict::shown`]): judged by its
    /// limits, any family's, or a fault phase's own checks.
    pub fn shown_verdict(&self) -> String {
        self.verdict
            .shown(&self.spec.expect, self.faults_or_families_judged())
    }

    /// Its verdict on one phase's row ([`Verdict::shown_in`]): an excused
    /// pass names only that phase's excused gaps.
    pub fn shown_verdict_in(&self, phase: &str) -> String {
        (self.verdict).shown_in(phase, &self.spec.expect, self.faults_or_families_judged())
    }

    fn faults_or_families_judged(&self) -> bool {
        (self.spec.per_family.iter()).any(|(_, e)| e.judges_anything())
            || self.phases.iter().any(|p| p.fault.is_some())
    }
}

/// Share of replies that must come from the DUT's CPUs for the fast path's
/// placement to count (the rest: frames processed before steering settled).
const PLACEMENT_SHARE_PERCENT: u64 = 95;

/// Most Downs the wire may excuse in one run (`Evidence::excused_flaps`)
/// before the run is spoiled: each costs the window a re-established
/// session, and CI's VM, losing 1.5-3 s a minute to its hypervisor,
/// showed one or two per 60 s run.
const MAX_EXCUSED_DOWNS: u64 = 2;

pub fn judge(expect: &Expectation, e: &Evidence) -> Verdict {
    if e.capture_died_early {
        return Verdict::Fail(
            "the observer's capture stopped before the run ended (partial capture kept)".into(),
        );
    }
    match e.capture_dropped {
        None => return Verdict::Invalid("tcpdump did not report its drop count".into()),
        Some(n) if n > 0 => return Verdict::Invalid(format!("the capture dropped {n} packets")),
        _ => {}
    }
    if let Some(why) = &e.softirq_not_in_force {
        // The run measured another receive path than the scenario's.
        return Verdict::Invalid(format!("the receive path was not as asked: {why}"));
    }
    if let Err(why) = &e.up_before_phases {
        // Unexplained is failed: only the peer's own exit or a disturbance
        // measured inside the bring-up window makes it the run's.
        let excuse = if why.starts_with(DUT_EXITED) || why.starts_with(DUT_SILENT) {
            None
        } else if why.starts_with(PEER_EXITED) {
            Some(String::new())
        } else {
            e.bring_up.as_ref().and_then(BringUp::explains_no_up)
        };
        return match excuse {
            None => Verdict::Fail(format!("sessions never came Up: {why}")),
            Some(excuse) if excuse.is_empty() => {
                Verdict::Invalid(format!("sessions never came Up: {why}"))
            }
            Some(excuse) => {
                Verdict::Invalid(format!("sessions never came Up: {why}, while {excuse}"))
            }
        };
    }
    if let Some((on_dut, total)) = e.fast_path_on_dut_cpus {
        // Sessions Up on the wire and no frame through the program: the
        // fast path never engaged, the DUT's doing.
        if total == 0 {
            return Verdict::Fail(
                "the fast path judged no BFD frame while the sessions were Up".into(),
            );
        }
        if on_dut * 100 < total * PLACEMENT_SHARE_PERCENT {
            return Verdict::Invalid(format!(
                "the fast path did not run on the DUT's CPUs ({on_dut} of {total} BFD frames)"
            ));
        }
    }
    if let Some(ms) = e.spoiling_peer_detection(expect) {
        return Verdict::Invalid(format!(
            "the peer declared the DUT dead {ms:.2} ms after the DUT's last packet on the wire, before its detection time: the peer host stalled ({:.0} ms hypervisor steal on its CPUs)",
            e.peer_steal_ms
        ));
    }
    if let Some(silence) = e.fault_peer_host_stall() {
        return Verdict::Invalid(format!(
            "the peer sent nothing for {:.2} ms while both sides were Up, a detection time, and its phase's fault does not explain it: the peer host stalled ({:.0} ms hypervisor steal on its CPUs)",
            silence.ms(),
            e.peer_steal_ms
        ));
    }
    for p in &e.phases {
        if let Some(required) = p.canary_required_ms {
            if p.canary_stall_ms < required {
                return Verdict::Invalid(format!(
                    "the stress did not bite in phase {}: the canary's longest stall was {:.1} ms, below {required} ms",
                    p.phase, p.canary_stall_ms
                ));
            }
        }
        if p.packets == 0 {
            return Verdict::Invalid(format!(
                "no DUT packets on the capture in phase {}",
                p.phase
            ));
        }
    }
    // Each fault's checks: a fault that did not bite says nothing (invalid);
    // a DUT that broke a rule under it fails, beside any broken limit.
    // Late packets under a fault, each inside a disturbance that accounts
    // for it, are excused as a plain phase's gaps are (by default).
    let mut fault_failures = Vec::new();
    let mut fault_excused = Vec::new();
    for p in &e.phases {
        match e.fault_breach(p) {
            None => {}
            Some(super::faults::FaultBreach::Fail(why)) => {
                fault_failures.push(format!("phase {}: {why}", p.phase))
            }
            Some(super::faults::FaultBreach::Excused(_, gaps))
                if expect.excused_gaps == ExcusedGaps::Pass =>
            {
                let phase = |g: ExcusedGap| ExcusedGap {
                    phase: p.phase.clone(),
                    ..g
                };
                fault_excused.extend(gaps.into_iter().map(phase));
            }
            Some(breach) => {
                return Verdict::Invalid(format!("phase {}: {}", p.phase, breach.why()));
            }
        }
    }
    let passed = |mut plain_excused: Vec<ExcusedGap>| {
        plain_excused.extend(fault_excused.iter().cloned());
        match plain_excused.is_empty() {
            true => Verdict::Pass,
            false => Verdict::Excused(plain_excused),
        }
    };
    let flaps = e.own_flaps();
    let max = e.plain_max_ms();
    if !fault_failures.is_empty() {
        return Verdict::Fail(fault_failures.join("; "));
    }
    // The DUT told the truth about a silent peer: excused, unless the
    // excuse leaves too little (`Evidence::excuse_spoils`).
    if let Some(ms) = e.silent_peer_detections_ms.first() {
        if e.excuse_spoils(expect) {
            return Verdict::Invalid(format!(
                "the peer sent nothing for {ms:.2} ms, a detection time, and the DUT's first Down declared it dead: the peer host stalled ({:.0} ms hypervisor steal on its CPUs)",
                e.peer_steal_ms
            ));
        }
    }
    if expect.positive_control {
        return if flaps > 0 {
            Verdict::Pass
        } else {
            Verdict::Invalid(format!(
                "positive control: it must flap under this load and did not (max gap {max:.2} ms): the stress did not bite"
            ))
        };
    }
    let broken = broken_limits(expect, e);
    if broken.is_empty() {
        return passed(Vec::new());
    }
    // Limits broken in a run whose peer fell silent for a detection time:
    // the window says nothing about the DUT (run again).
    if let Some(ms) = e.peer_stalls_ms.first() {
        return Verdict::Invalid(format!(
            "{}, and the peer sent nothing for {ms:.2} ms while both sides were Up, a detection time: the peer host stalled ({:.0} ms hypervisor steal on its CPUs)",
            broken.join(", "),
            e.peer_steal_ms
        ));
    }
    // Gaps over the gap limit, each inside a disturbance measured in it
    // that accounts for its excess, and nothing else broken: a pass with
    // those gaps listed, if the scenario accepts it.
    if let Some(excused) = excused_gaps(expect, e) {
        if expect.excused_gaps == ExcusedGaps::Pass {
            return passed(excused);
        }
    }
    // A stall the DUT never saw coming: the hypervisor took its CPU. It
    // excuses only what it could have caused, inside the gap it fell in.
    if let Some(stolen) = steal_explains(expect, e) {
        return Verdict::Invalid(format!(
            "{} while the hypervisor stole, stalled or froze {stolen:.0} ms of the DUT's CPUs inside the gaps over the limit",
            broken.join(", "),
        ));
    }
    Verdict::Fail(broken.join(", "))
}

/// Whether a run is worth repeating once: spoiled by its environment, not
/// by the DUT: the peer host stalled, or the DUT's limits broke only in
/// gaps the hypervisor's steal, placed inside them, can account for.
pub fn spoiled(expect: &Expectation, e: &Evidence) -> bool {
    // A pass, gaps excused or not, is no reason to run again.
    if e.capture_died_early || judge(expect, e).passed() {
        return false;
    }
    // Sessions that never came Up: worth a second run only when the judge
    // found them excused (the peer died, or steal inside the bring-up).
    if e.up_before_phases.is_err() {
        return matches!(judge(expect, e), Verdict::Invalid(_));
    }
    if e.spoiling_peer_detection(expect).is_some()
        || e.fault_peer_host_stall().is_some()
        || (!e.silent_peer_detections_ms.is_empty() && e.excuse_spoils(expect))
        || e.fault_spoiled_by_steal()
    {
        return true;
    }
    if !broken_limits(expect, e).is_empty() && !e.peer_stalls_ms.is_empty() {
        return true;
    }
    // Steal excuses only what would otherwise fail (not what is invalid
    // for another reason, a dropping capture say).
    let mut without_steal = e.clone();
    for gap in &mut without_steal.long_gaps {
        gap.stolen_ms = 0.0;
        gap.stalled_ms = 0.0;
        gap.frozen_ms = 0.0;
    }
    steal_explains(expect, e).is_some()
        && !broken_limits(expect, e).is_empty()
        && matches!(judge(expect, &without_steal), Verdict::Fail(_))
}

/// The DUT's gaps over its gap limit when every one of them lies inside a
/// disturbance measured in that very gap that accounts for its excess
/// (`LongGap::excuse_beyond`) and no other limit is broken: its flaps
/// within theirs (a flap is never excused this way). `None` when any gap
/// over the limit is unexplained, or when the limit is below the gaps
/// kept one by one (`KEPT_FROM_INTERVALS`): a gap between the two could
/// not be placed.
fn excused_gaps(expect: &Expectation, e: &Evidence) -> Option<Vec<ExcusedGap>> {
    let limit = expect.max_gap_ms?;
    if e.plain_max_ms() <= limit || limit < KEPT_FROM_INTERVALS * e.interval_ms() {
        return None;
    }
    let other_limits = Expectation {
        max_gap_ms: None,
        ..expect.clone()
    };
    if !broken_limits(&other_limits, e).is_empty() {
        return None;
    }
    let covered = covered_beyond(e, limit)?;
    let excused = covered.into_iter().map(|(g, by, disturbed_ms)| ExcusedGap {
        phase: g.phase.clone(),
        gap_ms: g.gap_ms,
        end_ns: g.end_ns,
        by: by.into(),
        disturbed_ms,
    });
    Some(excused.collect())
}

/// Every DUT gap over `bar_ms` with the disturbance measured inside it
/// that accounts for its excess (`LongGap::excuse_beyond`): `None` when
/// one has none, or when no gap over the bar is on record (the broken
/// limit is then not a gap a disturbance could have stretched: a flap the
/// wire does not explain).
fn covered_beyond(e: &Evidence, bar_ms: f64) -> Option<Vec<(&LongGap, &'static str, f64)>> {
    let over = e.long_gaps.iter().filter(|g| g.gap_ms > bar_ms);
    let covered = over
        .map(|g| g.excuse_beyond(bar_ms).map(|(by, ms)| (g, by, ms)))
        .collect::<Option<Vec<_>>>()?;
    (!covered.is_empty()).then_some(covered)
}

/// Whether a disturbance placed in time (steal, freeze, an idle CPU's
/// canary stall) can have caused every DUT gap over what it had to hold
/// (the gap limit if one is broken, else the detection time: a flap needs
/// a gap beyond it), each by what was measured inside that very gap
/// (`covered_beyond`). Returns the disturbance that did.
fn steal_explains(expect: &Expectation, e: &Evidence) -> Option<f64> {
    let max = e.plain_max_ms();
    let bar = match expect.max_gap_ms {
        Some(limit) if max > limit => limit,
        _ => e.detection_ms,
    };
    let covered = covered_beyond(e, bar)?;
    Some(covered.iter().map(|(g, _, _)| g.disturbed_ms()).sum())
}

fn broken_limits(expect: &Expectation, e: &Evidence) -> Vec<String> {
    let flaps = e.own_flaps();
    let max = e.plain_max_ms();
    let mut broken = Vec::new();
    if let Some(limit) = expect.max_flaps {
        if flaps > limit {
            broken.push(format!("{flaps} flaps (limit {limit})"));
        }
    }
    if let Some(limit) = expect.max_gap_ms {
        if max > limit {
            broken.push(format!("max gap {max:.2} ms (limit {limit} ms)"));
        }
    }
    if let Some(Err(why)) = &e.control_plane_uninterrupted {
        broken.push(why.clone());
    }
    broken.extend(broken_echo(expect, e));
    broken.extend(broken_auth(expect, e));
    broken.extend(broken_demand(expect, e));
    broken
}

/// The Demand mode expectation, phase by phase: the asker set D, the other
/// side fell silent as asked (RFC 5880 6.8.7), and the asker verified the
/// path with Polls the other side answered (6.6).
fn broken_demand(expect: &Expectation, e: &Evidence) -> Vec<String> {
    let Some(asker) = expect.demand else {
        return Vec::new();
    };
    let mut broken = Vec::new();
    for p in e.phases.iter().filter(|p| p.plain()) {
        let of = |side: &str| p.demand.iter().find(|d| d.side == side);
        for (side, other, asks) in [
            ("dut", "peer", asker != DemandAsker::Peer),
            ("peer", "dut", asker != DemandAsker::Dut),
        ] {
            if !asks {
                continue;
            }
            let (Some(me), Some(them)) = (of(side), of(other)) else {
                broken.push(format!(
                    "phase {}: no control packets of both sides on the wire",
                    p.phase
                ));
                continue;
            };
            if me.demand_packets == 0 {
                broken.push(format!(
                    "phase {}: the {side} never set D ({} packets)",
                    p.phase, me.packets
                ));
            }
            if them.silences == 0 {
                broken.push(format!(
                    "phase {}: the {other} never fell silent as the {side} asked ({} packets)",
                    p.phase, them.packets
                ));
            }
            if me.polls == 0 || them.finals == 0 {
                broken.push(format!(
                    "phase {}: the {side}'s verification Polls ({}) got {} Finals",
                    p.phase, me.polls, them.finals
                ));
            }
        }
    }
    broken
}

/// The authentication expectation, phase by phase and side by side: no
/// control packet without the configured type and key, and a meticulous
/// sender's numbers one up each time (RFC 5880 6.7.3).
fn broken_auth(expect: &Expectation, e: &Evidence) -> Vec<String> {
    let Some(want) = expect.auth else {
        return Vec::new();
    };
    let mut broken = Vec::new();
    for p in e.phases.iter().filter(|p| p.plain()) {
        for side in ["dut", "peer"] {
            let Some(a) = p.auth.iter().find(|a| a.side == side) else {
                broken.push(format!(
                    "phase {}: no control packet of the {side} on the wire",
                    p.phase
                ));
                continue;
            };
            if a.authenticated != a.packets {
                broken.push(format!(
                    "phase {}: {} of the {side}'s {} control packets without authentication",
                    p.phase,
                    a.packets - a.authenticated,
                    a.packets
                ));
            }
            if a.types != [want.auth_type] || a.key_ids != [want.key_id] {
                broken.push(format!(
                    "phase {}: the {side} sent Auth Types {:?} and Key IDs {:?} (configured {} and {})",
                    p.phase, a.types, a.key_ids, want.auth_type, want.key_id
                ));
            }
            if want.meticulous && a.sequence_same + a.sequence_other > 0 {
                broken.push(format!(
                    "phase {}: the {side}'s meticulous sequence numbers repeated {} times and jumped {} times",
                    p.phase, a.sequence_same, a.sequence_other
                ));
            }
        }
    }
    broken
}

/// The echo expectations, phase by phase (RFC 5880 6.4, 6.8.9).
fn broken_echo(expect: &Expectation, e: &Evidence) -> Vec<String> {
    let mut broken = Vec::new();
    for p in e.phases.iter().filter(|p| p.plain()) {
        // One side's echoes in both families together.
        let of = |who: &str| {
            p.echo
                .iter()
                .filter(|x| x.originator == who)
                .fold(EchoFigures::default(), |a, x| EchoFigures {
                    sent: a.sent + x.sent,
                    lost: a.lost + x.lost,
                    ..a
                })
        };
        let peer = of("peer");
        match expect.peer_echo {
            Some(PeerEcho::Reflected) if peer.sent == 0 || peer.lost > 0 => broken.push(format!(
                "phase {}: the peer's echoes, {} sent, {} lost (each must come back)",
                p.phase, peer.sent, peer.lost
            )),
            Some(PeerEcho::Absent) if peer.sent > 0 => broken.push(format!(
                "phase {}: the peer sent {} echoes to a DUT that advertises Required Min Echo RX 0",
                p.phase, peer.sent
            )),
            _ => {}
        }
        let own = of("dut");
        if expect.own_echo && (own.sent == 0 || own.lost > 0) {
            broken.push(format!(
                "phase {}: the DUT's echoes, {} sent, {} lost (each must come back)",
                p.phase, own.sent, own.lost
            ));
        }
    }
    broken
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
