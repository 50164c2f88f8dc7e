//! One phase's figures from its slice of the capture: the DUT's gaps and
//! flaps over the run's sessions, echo, authentication and Demand mode per
//! side, and the disturbances measured beside them.

use crate::manifest::figures::{AuthFigures, DemandFigures, EchoFigures, IntervalFigures};
use crate::manifest::PhaseRecord;
use crate::run::correlated;
use crate::run::daemons;
use crate::run::PhaseFigures;
use crate::scenario::Family;
use crate::scenario::PhaseSpec;
use std::net::IpAddr;

/// One phase's figures over `pairs`' sessions, from its slice of the
/// capture.
pub(super) fn figures_of(
    record: &PhaseRecord,
    window: &linecard_capture_analyzer::model::WindowResult,
    phase: &PhaseSpec,
    pairs: &[daemons::Pair],
    stalls: &[crate::canary::Stall],
    steal: &crate::steal::StealTrace,
) -> PhaseFigures {
    let flows = &window.flows;
    // One row per originator and family: each session's echoes come from
    // its own address (the analyzer's sender).
    let echo = window
        .echo
        .iter()
        .filter_map(|e| {
            let (originator, address) = pairs.iter().find_map(|p| {
                if e.sender == p.dut.to_string() {
                    Some(("dut", p.dut))
                } else if e.sender == p.peer.to_string() {
                    Some(("peer", p.peer))
                } else {
                    None
                }
            })?;
            Some(EchoFigures {
                originator: originator.into(),
                family: Family::of(address).name().into(),
                sent: e.sent,
                returned: e.returned,
                lost: e.lost,
                rtt_max_ms: e.rtt_ms.max,
                send_gap_max_ms: e.send_gap_ms.max,
                send_gap_p99_ms: e.send_gap_ms.p99,
            })
        })
        .collect();
    let dut_flows: Vec<_> = flows
        .iter()
        .filter(|f| pairs.iter().any(|p| f.src == p.dut.to_string()))
        .collect();
    let auth = auth_figures(flows, pairs);
    let demand = demand_figures(flows, pairs);
    let intervals = interval_figures(flows, pairs);
    // Per session: the flaps either side showed, and when.
    let per_session: Vec<(u64, Vec<i64>)> = pairs
        .iter()
        .map(|p| {
            let of = |src: IpAddr, dst: IpAddr| {
                flows
                    .iter()
                    .find(|f| f.src == src.to_string() && f.dst == dst.to_string())
            };
            let both = [of(p.dut, p.peer), of(p.peer, p.dut)];
            let flaps = both.iter().flatten().map(|f| f.flaps).max().unwrap_or(0);
            let at = both
                .iter()
                .flatten()
                .flat_map(|f| f.flap_events.iter().map(|e| e.at_ns))
                .collect();
            (flaps, at)
        })
        .collect();
    let fold = |pick: fn(&linecard_capture_analyzer::model::FlowResult) -> f64| {
        dut_flows.iter().map(|f| pick(f)).fold(0.0, f64::max)
    };
    let mut p50s: Vec<f64> = dut_flows.iter().map(|f| f.gap_ms.p50).collect();
    p50s.sort_by(f64::total_cmp);
    PhaseFigures {
        phase: record.name.clone(),
        profile: record.profile.clone(),
        packets: dut_flows.iter().map(|f| f.packets).sum(),
        flaps: per_session.iter().map(|(n, _)| n).sum(),
        // One session: its own figures. Several: the median
        // session's p50 and the worst session's tail.
        p50_ms: p50s.get(p50s.len() / 2).copied().unwrap_or(0.0),
        p99_ms: fold(|f| f.gap_ms.p99),
        p999_ms: fold(|f| f.gap_ms.p999),
        max_ms: fold(|f| f.gap_ms.max),
        over_budget: Some(dut_flows.iter().map(|f| f.over_budget).sum()),
        sessions: pairs.len(),
        sessions_flapped: per_session.iter().filter(|(n, _)| *n > 0).count(),
        correlated_flaps: correlated(
            &per_session
                .iter()
                .map(|(_, at)| at.clone())
                .collect::<Vec<_>>(),
            CORRELATION_WINDOW_NS,
        ),
        canary_stall_ms: crate::canary::longest_stall_ms(stalls, record.start_ns, record.end_ns),
        canary_required_ms: phase.profile.canary_min_stall_ms,
        stolen_ms: steal.within(record.start_ns, record.end_ns),
        stressed: record.stress_ng.is_some(),
        fault: None,
        echo,
        auth,
        demand,
        intervals,
    }
}

/// Each side's periodic gaps against its legal interval (RFC 5880 6.8.7),
/// over its sessions' control flows.
fn interval_figures(
    flows: &[linecard_capture_analyzer::model::FlowResult],
    pairs: &[daemons::Pair],
) -> Vec<IntervalFigures> {
    let merge = |a: Option<f64>, b: Option<f64>, pick: fn(f64, f64) -> f64| match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    };
    ["dut", "peer"]
        .into_iter()
        .map(|side| {
            let mut figures = IntervalFigures {
                side: side.into(),
                ..Default::default()
            };
            for flow in side_flows(flows, pairs, side) {
                let i = &flow.interval;
                figures.legal_ms = merge(figures.legal_ms, i.legal_ms, f64::max);
                figures.gaps += i.gaps;
                figures.shortest_ms = merge(figures.shortest_ms, i.shortest_ms, f64::min);
                figures.longest_ms = merge(figures.longest_ms, i.longest_ms, f64::max);
                figures.too_soon += i.too_soon;
                figures.late += i.late;
            }
            figures
        })
        .collect()
}

/// One side's (`dut` or `peer`) control flows over `pairs`' sessions.
fn side_flows<'a>(
    flows: &'a [linecard_capture_analyzer::model::FlowResult],
    pairs: &'a [daemons::Pair],
    side: &'a str,
) -> impl Iterator<Item = &'a linecard_capture_analyzer::model::FlowResult> + 'a {
    use linecard_capture_analyzer::decode::Service;
    flows.iter().filter(move |f| {
        f.service != Service::Echo
            // Never the peer's, whatever address it claims.
            && f.src_port != super::faults::IMPOSTOR_PORT
            && pairs.iter().any(|p| {
                let (from, to) = if side == "dut" {
                    (p.dut, p.peer)
                } else {
                    (p.peer, p.dut)
                };
                f.src == from.to_string() && f.dst == to.to_string()
            })
    })
}

/// Each side's control packets over `pairs`' sessions and their
/// authentication, from the capture's flows.
fn auth_figures(
    flows: &[linecard_capture_analyzer::model::FlowResult],
    pairs: &[daemons::Pair],
) -> Vec<AuthFigures> {
    let mut all = Vec::new();
    for side in ["dut", "peer"] {
        let mut figures = AuthFigures {
            side: side.into(),
            ..Default::default()
        };
        for flow in side_flows(flows, pairs, side) {
            figures.packets += flow.packets;
            let Some(a) = &flow.auth else { continue };
            figures.authenticated += a.packets;
            for (all, some) in [
                (&mut figures.types, &a.types),
                (&mut figures.key_ids, &a.key_ids),
            ] {
                all.extend(
                    some.iter()
                        .filter(|v| !all.contains(v))
                        .copied()
                        .collect::<Vec<_>>(),
                );
                all.sort_unstable();
            }
            figures.sequence_next += a.sequence_next;
            figures.sequence_same += a.sequence_same;
            figures.sequence_other += a.sequence_other;
        }
        if figures.packets > 0 {
            all.push(figures);
        }
    }
    all
}

/// Each side's control packets over `pairs`' sessions and what they show
/// of Demand mode, from the capture's flows.
fn demand_figures(
    flows: &[linecard_capture_analyzer::model::FlowResult],
    pairs: &[daemons::Pair],
) -> Vec<DemandFigures> {
    ["dut", "peer"]
        .into_iter()
        .map(|side| {
            side_flows(flows, pairs, side).fold(
                DemandFigures {
                    side: side.into(),
                    ..Default::default()
                },
                |mut d, f| {
                    d.packets += f.packets;
                    d.demand_packets += f.demand_packets;
                    d.silences += f.demand_silence_ms.count;
                    d.silence_max_ms = d.silence_max_ms.max(f.demand_silence_ms.max);
                    d.polls += f.polls;
                    d.finals += f.poll_final_ms.count;
                    d.final_max_ms = d.final_max_ms.max(f.poll_final_ms.max);
                    d
                },
            )
        })
        .filter(|d| d.packets > 0)
        .collect()
}

/// Flaps of different sessions closer than this share a cause (a stall of
/// the DUT, not of one session): 100 ms, beyond a 3 x 10 ms detection time
/// and its jitter.
const CORRELATION_WINDOW_NS: i64 = 100_000_000;
