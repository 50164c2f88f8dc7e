//! A DUT's verdict from what was measured outside it: its capture (every
//! phase sliced out of it, every fault's phase walked packet by packet)
//! and the witnesses' records (canary, freeze, steal), which excuse a gap
//! only when they were measured inside it. Whatever the site, this is the
//! one place a DUT is judged ([`judge::judge`] holds the rules).

use super::faults::{self};
use super::judge;
use super::mirror::{self};
use super::{daemons, figures, readiness, worst_of_families, INTERRUPTED};
use crate::manifest::evidence::Evidence;
use crate::manifest::figures::PhaseFigures;
use crate::manifest::verdict::Verdict;
use crate::manifest::{DutOutcome, FamilyOutcome, PhaseRecord};
use crate::scenario::{DutImplementation, DutSpec, Family, Scenario};
use anyhow::{Context, Result};
use linecard_capture_analyzer::model::FlowResult;
use linecard_capture_analyzer::{Options, Phase};
use std::sync::atomic::Ordering;

/// What a DUT's run measured, for [`judge_dut`]: the capture, and the
/// evidence taken beside it outside the engine.
pub(crate) struct Measured {
    pub pairs: Vec<daemons::Pair>,
    pub captured: crate::procs::CaptureOutcome,
    /// The capture ran to the end of the phases.
    pub capture_alive: bool,
    /// The canary's stalls on the DUT's CPUs.
    pub stalls: Vec<crate::canary::Stall>,
    /// When no CPU of the DUT's could run anything (the freeze witness).
    pub freezes: Vec<crate::canary::Stall>,
    /// When the other CPUs could run nothing either (the same witness
    /// there): with a freeze of the DUT's at the same instants, the
    /// machine's.
    pub rest_freezes: Vec<crate::canary::Stall>,
    /// The hypervisor's steal on the DUT's CPUs, placed in time.
    pub steal: crate::steal::StealTrace,
    /// Every session Up in both daemons' own words before the phases.
    pub up: Result<(), String>,
    pub up_at: i64,
    pub bring_up: crate::manifest::evidence::BringUp,
    pub steal_ms: f64,
    pub peer_steal_ms: f64,
    pub fast_path_on_dut_cpus: Option<(u64, u64)>,
    pub responder: Option<String>,
    pub control_plane_uninterrupted: Option<Result<String, String>>,
    pub connection_outages: Vec<crate::manifest::evidence::ConnectionOutage>,
}

/// The sessions' timing and who is who on the capture.
struct Sides {
    dut: Vec<String>,
    peer: Vec<String>,
    detection_ms: f64,
    interval_ms: f64,
    /// The phases without a fault, as (start, end) ns: a fault's phase has
    /// Downs by design, the checks of the others do not.
    plain: Vec<(i64, i64)>,
}

impl Sides {
    fn in_plain(&self, t: i64) -> bool {
        self.plain.iter().any(|&(a, b)| (a..b).contains(&t))
    }
}

/// Analyses a DUT's capture (every phase sliced out of it) and gives
/// `outcome` its evidence and verdict; the phases are `outcome.phases`.
pub(crate) fn judge_dut(
    scenario: &Scenario,
    dut: &DutSpec,
    outcome: &mut DutOutcome,
    measured: Measured,
) -> Result<()> {
    let m = measured;
    let dir = m
        .captured
        .path
        .parent()
        .context("the capture is in the DUT's directory")?
        .to_path_buf();
    let s = &scenario.sessions;
    let interval_ms = f64::from(s.tx_interval_ms.max(s.rx_interval_ms));
    // One pass over the capture: every phase sliced out of it, its files
    // written, and the packet-by-packet walk's sinks fed.
    let interval_ns = (interval_ms * 1e6) as u64;
    let mut long = mirror::LongGaps::new((interval_ns as f64 * mirror::KEPT_FROM_INTERVALS) as u64);
    let mut rows = faults::Rows::default();
    let phases: Vec<Phase> = outcome.phases.iter().map(PhaseRecord::window).collect();
    let analysis = crate::analysis_files::analyse(
        std::slice::from_ref(&m.captured.path),
        &Options {
            phases,
            timeline: false,
        },
        Some(&dir.join("analysis")),
        vec![&mut long, &mut rows],
    )?;
    let sides = Sides {
        dut: m.pairs.iter().map(|p| p.dut.to_string()).collect(),
        peer: m.pairs.iter().map(|p| p.peer.to_string()).collect(),
        detection_ms: f64::from(s.multiplier) * interval_ms,
        interval_ms,
        plain: outcome
            .phases
            .iter()
            .filter(|p| p.fault.is_none())
            .map(|p| (p.start_ns, p.end_ns))
            .collect(),
    };
    let up_before_phases = readiness::on_the_wire(
        m.up,
        &analysis.all.flows,
        (&sides.dut, &sides.peer),
        outcome
            .phases
            .first()
            .map_or(i64::MAX, |p| p.start_ns)
            .min(m.up_at),
        m.pairs.len(),
        sides.detection_ms,
    );
    let phase_figures = |pairs: &[daemons::Pair]| -> Vec<PhaseFigures> {
        outcome
            .phases
            .iter()
            .zip(&analysis.phases)
            .zip(&scenario.phases)
            .map(|((record, result), phase)| {
                figures::figures_of(record, &result.result, phase, pairs, &m.stalls, &m.steal)
            })
            .collect()
    };
    let mut figures = phase_figures(&m.pairs);
    // Dual-stack: each family's sessions alone (faults need one session,
    // so these carry no fault figures).
    let family_figures: Vec<(Family, Vec<PhaseFigures>)> = if s.dual_stack {
        Family::BOTH
            .iter()
            .map(|&family| {
                let of_family: Vec<daemons::Pair> = (m.pairs.iter())
                    .filter(|p| Family::of(p.dut) == family)
                    .cloned()
                    .collect();
                (family, phase_figures(&of_family))
            })
            .collect()
    } else {
        Vec::new()
    };
    let (premature_peer_detections_ms, silent_peer_detections_ms) =
        detections(&analysis.all.flows, &sides, &long);
    let (unstressed, successors) = mirror::phase_windows(&outcome.phases, &scenario.phases);
    let witnesses = mirror::Witnesses {
        steal: &m.steal,
        freezes: &m.freezes,
        rest_freezes: &m.rest_freezes,
        stalls: &m.stalls,
        unstressed,
        successors,
    };
    let walked = walk_the_wire(
        &analysis.all.flows,
        (&long, &rows),
        &sides,
        &witnesses,
        (&outcome.phases, scenario),
        &mut figures,
    );
    let evidence = Evidence {
        capture_died_early: m.captured.died_early || !m.capture_alive,
        capture_dropped: m.captured.dropped_by_kernel,
        up_before_phases,
        bring_up: Some(m.bring_up),
        fast_path_on_dut_cpus: m.fast_path_on_dut_cpus,
        responder: m.responder,
        softirq_not_in_force: crate::softirq_threads::not_in_force(
            dut.ksoftirqd_priority,
            &(outcome.phases.iter())
                .map(|p| (p.name.as_str(), p.softirq_threads.as_slice()))
                .collect::<Vec<_>>(),
        ),
        steal_ms: m.steal_ms,
        peer_steal_ms: m.peer_steal_ms,
        premature_peer_detections_ms,
        silent_peer_detections_ms,
        peer_stalls_ms: walked.peer_stalls_ms,
        detection_ms: sides.detection_ms,
        interval_ms: Some(sides.interval_ms),
        control_plane_uninterrupted: m.control_plane_uninterrupted,
        long_gaps: walked.long_gaps,
        long_gaps_left_out: 0,
        connection_outages: m.connection_outages,
        phases: figures,
    };
    give_verdict(scenario, dut, outcome, family_figures, evidence);
    Ok(())
}

/// How long after a silence expired the DUT's Down may reach the wire and
/// still be that silence's detection: the sweep fires at the expiry and
/// the responder sends (1.77-1.86 ms at 256 sessions under L4, measured).
const DOWN_AFTER_EXPIRY_NS: i64 = 5_000_000;

/// The peer's Downs for an expired detection time within the plain
/// phases that came before the detection time had passed on the wire
/// (ms after our last packet), and each session's first Down of the DUT's
/// there if it came after the peer had sent nothing for that time: a true
/// detection of a peer that fell silent (the silence's length). Only each
/// session's first: after a flap the peer's slow rate while not Up (RFC
/// 5880 6.8.3) makes long silences of its own that say nothing about its
/// host.
fn detections(
    flows: &[FlowResult],
    sides: &Sides,
    long: &mirror::LongGaps,
) -> (Vec<f64>, Vec<f64>) {
    let premature: Vec<f64> = flows
        .iter()
        .filter(|f| sides.peer.contains(&f.src))
        .flat_map(|f| &f.flap_events)
        .filter(|ev| sides.in_plain(ev.at_ns))
        .filter_map(|ev| ev.detection_latency_ms)
        // 1 ms of tolerance for the capture's own timestamping.
        .filter(|&ms| ms < sides.detection_ms - 1.0)
        .collect();
    let detection_ns = (sides.detection_ms * 1e6) as i64;
    let silent: Vec<f64> = (0..flows.len())
        .filter(|&i| sides.dut.contains(&flows[i].src))
        .filter_map(|i| {
            let first = (flows[i].flap_events.iter())
                .filter(|ev| sides.in_plain(ev.at_ns))
                .min_by_key(|ev| ev.at_ns)?;
            // Their silence as the capture shows it before our Down; or,
            // where their late packet reached the wire while our Down was
            // on its way, the silence that expired just before it.
            let told = first
                .detection_latency_ms
                .filter(|&ms| ms >= sides.detection_ms - 1.0);
            let expired = reverse_flow(flows, i).is_some_and(|r| {
                long.expired_before(r, first.at_ns, detection_ns, DOWN_AFTER_EXPIRY_NS)
            });
            told.or(expired.then_some(sides.detection_ms))
        })
        .collect();
    (premature, silent)
}

/// The flow the other way of flow `i` (the same service), if captured.
fn reverse_flow(flows: &[FlowResult], i: usize) -> Option<usize> {
    flows.iter().position(|f| {
        f.src == flows[i].dst && f.dst == flows[i].src && f.service == flows[i].service
    })
}

/// What the packet-by-packet walk of the whole capture found.
struct Walked {
    /// The DUT's long gaps in the plain phases, each checked against the
    /// peer's own silence and placed among the witnesses' records.
    long_gaps: Vec<crate::manifest::faults::LongGap>,
    /// The peer's silences of a detection time while both sides were Up,
    /// in the plain phases: it sends on its own clock whatever the DUT
    /// does (RFC 5880 6.8.7), so each is its host's stall (seen in CI:
    /// both sides silent 110 ms at once, the machine itself stalled).
    peer_stalls_ms: Vec<f64>,
}

/// Walks the whole capture packet by packet, from what the analysis's
/// sinks kept of it: the DUT's long gaps, the peer's stalls, and each
/// fault's phase (its figures go into `figures`).
fn walk_the_wire(
    flows: &[FlowResult],
    (long, rows): (&mirror::LongGaps, &faults::Rows),
    sides: &Sides,
    witnesses: &mirror::Witnesses,
    (records, scenario): (&[PhaseRecord], &Scenario),
    figures: &mut [PhaseFigures],
) -> Walked {
    let dut_flows: Vec<usize> = (0..flows.len())
        .filter(|&i| sides.dut.contains(&flows[i].src) && sides.peer.contains(&flows[i].dst))
        .collect();
    let reverse = |i: usize| reverse_flow(flows, i);
    let mut long_gaps: Vec<crate::manifest::faults::LongGap> = (sides.plain.iter())
        .flat_map(|&(start, end)| mirror::judge_gaps(long, &dut_flows, reverse, start, end))
        .collect();
    let place_disturbances = |gap: &mut crate::manifest::faults::LongGap| {
        witnesses.place(gap);
        let ended_in = records
            .iter()
            .find(|r| (r.start_ns..r.end_ns).contains(&gap.end_ns));
        gap.phase = ended_in.map(|r| r.name.clone()).unwrap_or_default();
    };
    long_gaps.iter_mut().for_each(place_disturbances);
    // Each fault's phase, walked packet by packet.
    let who: Vec<faults::Side> = flows
        .iter()
        .map(|f| {
            if sides.dut.contains(&f.src) {
                faults::Side::Ours
            } else if f.src_port == faults::IMPOSTOR_PORT {
                faults::Side::Impostor
            } else {
                faults::Side::Peer
            }
        })
        .collect();
    let timers = (sides.detection_ms, sides.interval_ms);
    let peer_stalls_ms: Vec<f64> = (sides.plain.iter())
        .flat_map(|&(start, end)| {
            faults::walk(&rows.0, &who, (start, end), (start, start), timers).peer_silences
        })
        .map(|silence| silence.ms())
        .collect();
    for ((record, spec), figures) in records.iter().zip(&scenario.phases).zip(figures) {
        let (Some(applied), Some(fault)) = (&record.fault, &spec.fault) else {
            continue;
        };
        let phase = (record.start_ns, record.end_ns);
        let window = (applied.start_ns, applied.end_ns);
        let mut f = if dut_flows.len() > 1 {
            // Many sessions (a handover): each walked on its own packets,
            // the figures kept those of the worst.
            worst_session(dut_flows.iter().map(|&ours| {
                let pair = [Some(ours), reverse(ours)];
                let own: Vec<faults::Row> = (rows.0.iter())
                    .filter(|r| pair.contains(&Some(r.flow)))
                    .cloned()
                    .collect();
                faults::walk(&own, &who, phase, window, timers)
            }))
        } else {
            faults::walk(&rows.0, &who, phase, window, timers)
        };
        f.sessions_judged = dut_flows.len().max(1) as u64;
        f.fault = Some(fault.clone());
        f.stressed = record.stress_ng.is_some();
        f.late_up_gaps.iter_mut().for_each(place_disturbances);
        f.frames_seen = applied.frames_seen;
        f.frames_dropped = applied.frames_dropped;
        f.flood = applied.flood.clone();
        figures.fault = Some(f);
    }
    Walked {
        long_gaps,
        peer_stalls_ms,
    }
}

/// Of each session's figures in a fault's phase, the worst: one that broke
/// a rule if any did (a Down either side, a new discriminator, a late
/// packet of ours), else the one with our longest gap.
fn worst_session(
    each: impl Iterator<Item = crate::manifest::faults::FaultFigures>,
) -> crate::manifest::faults::FaultFigures {
    let broke = |f: &crate::manifest::faults::FaultFigures| {
        !f.peer_detections_ms.is_empty()
            || f.peer_first_down_ms.is_some()
            || !f.detections_ms.is_empty()
            || f.our_discr_before != f.our_discr_after
            || !f.late_up_gaps.is_empty()
    };
    each.max_by(|a, b| {
        (broke(a), a.up_gap_max_ms)
            .partial_cmp(&(broke(b), b.up_gap_max_ms))
            .unwrap_or(std::cmp::Ordering::Equal)
    })
    .unwrap_or_default()
}

/// The DUT's verdict from its evidence (and each family's, dual stack),
/// given to `outcome` with the evidence.
fn give_verdict(
    scenario: &Scenario,
    dut: &DutSpec,
    outcome: &mut DutOutcome,
    family_figures: Vec<(Family, Vec<PhaseFigures>)>,
    evidence: Evidence,
) {
    // Authenticated sessions are the fast path's while it signs
    // (`xdp_sign`, on unless switched off as the negative control).
    let fast_path = |family: Family| match &dut.implementation {
        DutImplementation::Linecardd { backend } | DutImplementation::FrrDataplane { backend } => {
            daemons::offloads(*backend, &dut.engine)
                && (scenario.sessions.auth.is_none() || dut.engine.xdp_sign_on())
                && scenario.sessions.demand.is_none()
                && dut.offload_only.is_none_or(|f| f == family)
        }
        DutImplementation::Frr => false,
    };
    outcome.families = family_figures
        .into_iter()
        .map(|(family, phases)| FamilyOutcome {
            family,
            fast_path: fast_path(family),
            verdict: judge::judge(
                &dut.expect_for(family),
                &evidence.with_phases(phases.clone()),
            ),
            phases,
        })
        .collect();
    outcome.verdict = if INTERRUPTED.load(Ordering::Relaxed) {
        Verdict::Fail("interrupted".into())
    } else if dut.per_family.is_empty() {
        judge::judge(&dut.expect, &evidence)
    } else {
        worst_of_families(&outcome.families)
    };
    outcome.evidence = Some(evidence);
}
