//! The suite's judgement: each check a pure function of the trace, citing
//! the rule it holds the DUT to. Timing windows allow [`TOLERANCE_NS`]
//! beyond the RFC's bounds; a window broken only inside a freeze of the
//! machine (the freeze witness) is inconclusive, not failed.

use super::packet::State;
use super::script::{BASE_INTERVAL_US, PEER_DISCR};
use super::trace::{heard, sent, stuck, Event, Probe, Step, Trace};
use crate::canary::Stall;

mod timers;

/// Slack on every timing bound: 5 % of the session's 50 ms interval.
pub const TOLERANCE_NS: i64 = 2_500_000;
const MS: i64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// Not judged: the script could not set the check up, or a freeze of
    /// the machine fell inside the only gaps that broke a window.
    Inconclusive,
}

/// One check's outcome.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    pub id: String,
    /// The section(s) the check holds the DUT to.
    pub rfc: String,
    /// A timing window (under load only some designs are expected to hold
    /// it); the others are the protocol's logic.
    pub timing: bool,
    pub verdict: Verdict,
    /// What was seen, with numbers.
    pub detail: String,
}

struct Judge<'a> {
    trace: &'a Trace,
    freezes: &'a [Stall],
    out: Vec<Outcome>,
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// The DUT's packets arriving at or after `from_ns`: (time, is a Final).
fn packets_from(events: &[Event], from_ns: i64) -> Vec<(i64, bool)> {
    heard(events)
        .filter(|(at, _)| *at >= from_ns)
        .map(|(at, p)| (at, p.final_))
        .collect()
}

/// The DUT's periodic packets (Finals answer Polls off the timer, RFC
/// 5880 6.5) arriving at or after `from_ns`.
fn periodic_from(events: &[Event], from_ns: i64) -> Vec<i64> {
    heard(events)
        .filter(|(at, p)| *at >= from_ns && !p.final_)
        .map(|(at, _)| at)
        .collect()
}

/// The first Final the DUT sent in `events` at or after `from_ns`.
fn first_final(events: &[Event], from_ns: i64) -> Option<i64> {
    heard(events)
        .find(|(at, p)| *at >= from_ns && p.final_)
        .map(|(at, _)| at)
}

/// Gaps between consecutive times, as (start, end).
fn gaps(times: &[i64]) -> Vec<(i64, i64)> {
    times.windows(2).map(|w| (w[0], w[1])).collect()
}

impl Judge<'_> {
    fn record(&mut self, id: &str, rfc: &str, timing: bool, verdict: Verdict, detail: String) {
        self.out.push(Outcome {
            id: id.into(),
            rfc: rfc.into(),
            timing,
            verdict,
            detail,
        });
    }

    /// Records every check of `checks` (id, section, timing) as
    /// inconclusive when the script could not set `step` up; whether it
    /// could not.
    fn unjudged(&mut self, step: Step, checks: &[(&str, &str, bool)]) -> bool {
        let Some(why) = self.stuck_in(step) else {
            return false;
        };
        for (id, rfc, timing) in checks {
            self.record(id, rfc, *timing, Verdict::Inconclusive, why.clone());
        }
        true
    }

    /// `events` of a step the script could not complete, or `None` when
    /// the step ran.
    fn stuck_in(&self, step: Step) -> Option<String> {
        let events = self.trace.step(step);
        if events.is_empty() {
            return Some(format!("the script never reached step {step:?}"));
        }
        stuck(events).map(|why| format!("the script was stuck: {why}"))
    }

    /// The DUT's packets against a periodic window [lo, hi]: no two
    /// periodic packets closer than `lo` (a Final goes off the timer,
    /// 6.5), and no silence longer than `hi` between any two packets (a
    /// Final counts at the peer like any other). A silence over `hi` by no
    /// more than the freeze inside it (+1 ms) makes the check
    /// inconclusive, never passed.
    fn window(
        &mut self,
        id: &str,
        rfc: &str,
        packets: &[(i64, bool)],
        (lo, hi): (i64, i64),
        min_gaps: usize,
        what: &str,
    ) {
        let periodic: Vec<i64> = packets.iter().filter(|p| !p.1).map(|p| p.0).collect();
        let all: Vec<i64> = packets.iter().map(|p| p.0).collect();
        let short_gaps: Vec<i64> = gaps(&periodic).iter().map(|(a, b)| b - a).collect();
        let silences = gaps(&all);
        if short_gaps.len() < min_gaps {
            let detail = format!(
                "{} gaps of the DUT's {what} (at least {min_gaps} needed)",
                short_gaps.len()
            );
            return self.record(id, rfc, true, Verdict::Fail, detail);
        }
        let shortest = *short_gaps.iter().min().expect("checked non-empty above");
        let longest = silences.iter().map(|(a, b)| b - a).max().unwrap_or(0);
        let too_short = short_gaps.iter().filter(|g| **g < lo).count();
        let mut too_long = 0;
        let mut excused = 0;
        for (a, b) in &silences {
            if b - a > hi {
                let frozen = crate::freeze::frozen_within_ms(self.freezes, *a, *b);
                if ms(b - a - hi) <= frozen + 1.0 {
                    excused += 1;
                } else {
                    too_long += 1;
                }
            }
        }
        let verdict = match (too_short + too_long, excused) {
            (0, 0) => Verdict::Pass,
            (0, _) => Verdict::Inconclusive,
            _ => Verdict::Fail,
        };
        let detail = format!(
            "{} gaps of the DUT's {what}: {:.2}-{:.2} ms against {:.2}-{:.2} ms; {too_short} too short, {too_long} too long{}",
            short_gaps.len(),
            ms(shortest),
            ms(longest),
            ms(lo),
            ms(hi),
            if excused > 0 {
                format!(", {excused} too long inside a freeze of the machine")
            } else {
                String::new()
            }
        );
        self.record(id, rfc, true, verdict, detail);
    }
}

/// The legal window of a periodic gap at `interval_us` (RFC 5880 6.8.7:
/// reduced by 0-25 %, Detect Mult 3), with the tolerance.
fn jitter_window(interval_us: u32) -> (i64, i64) {
    let interval = i64::from(interval_us) * 1_000;
    (interval * 3 / 4 - TOLERANCE_NS, interval + TOLERANCE_NS)
}

/// Every check of the suite on `trace`, in the script's order.
pub fn judge(trace: &Trace, freezes: &[Stall]) -> Vec<Outcome> {
    let mut j = Judge {
        trace,
        freezes,
        out: Vec::new(),
    };
    well_formed(&mut j);
    not_up(&mut j);
    handshake(&mut j);
    steady(&mut j);
    polls(&mut j);
    probes(&mut j);
    timers::min_rx_changes(&mut j);
    timers::dut_changes(&mut j);
    timers::slower_peer(&mut j);
    timers::multiplier(&mut j);
    timers::detection(&mut j);
    timers::admin_down(&mut j);
    j.out
}

fn well_formed(j: &mut Judge) {
    let all = &j.trace.events;
    let total = heard(all).count();
    let bad: Vec<String> = heard(all)
        .filter(|(_, p)| {
            p.version != 1
                || p.multipoint
                || p.detect_mult == 0
                || p.my_discr == 0
                || p.length != 24
                || p.authenticated
        })
        .take(3)
        .map(|(_, p)| format!("{p:?}"))
        .collect();
    let verdict = if total == 0 {
        Verdict::Fail
    } else if bad.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    j.record(
        "well-formed",
        "RFC 5880 4.1, 6.8.7",
        false,
        verdict,
        format!("{total} packets from the DUT; malformed: {bad:?}"),
    );
    let both = heard(all).filter(|(_, p)| p.poll && p.final_).count();
    j.record(
        "never-poll-and-final",
        "RFC 5880 6.8.7",
        false,
        if both == 0 && total > 0 {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        format!("{both} of {total} packets with both P and F"),
    );
    let off: Vec<(u8, u16)> = all
        .iter()
        .filter_map(|e| match e {
            Event::Heard {
                ttl, source_port, ..
            } if *ttl != 255 || *source_port < 49_152 => Some((*ttl, *source_port)),
            _ => None,
        })
        .collect();
    let mut kinds = off.clone();
    kinds.sort_unstable();
    kinds.dedup();
    j.record(
        "ttl-and-source-port",
        "RFC 5881 4, 5",
        false,
        if off.is_empty() && total > 0 { Verdict::Pass } else { Verdict::Fail },
        format!(
            "{} of {total} packets not at TTL 255 from a port in 49152-65535; (TTL, port) seen: {:?}",
            off.len(),
            &kinds[..kinds.len().min(4)]
        ),
    );
}

fn not_up(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.3, 6.8.7";
    let checks = [
        ("slow-rate-while-not-up", RFC, false),
        (
            "discard-your-discr-zero",
            Probe::YourDiscrZero.section(),
            false,
        ),
    ];
    if j.unjudged(Step::NotUp, &checks) {
        return;
    }
    let events = j.trace.step(Step::NotUp);
    // Before the probe: a DUT that takes it is Up after it.
    let probed_at = sent(events)
        .find(|(_, _, p)| *p == Some(Probe::YourDiscrZero))
        .map_or(i64::MAX, |x| x.0);
    let packets: Vec<(i64, u32)> = heard(events)
        .filter(|(at, _)| *at < probed_at)
        .map(|(at, p)| (at, p.desired_min_tx_us))
        .collect();
    let slowest_advertised = packets.iter().map(|p| p.1).min().unwrap_or(0);
    let times: Vec<i64> = packets.iter().map(|p| p.0).collect();
    let shortest = gaps(&times).iter().map(|(a, b)| b - a).min();
    let verdict = match shortest {
        None => Verdict::Fail,
        Some(g) if g >= 750 * MS - TOLERANCE_NS && slowest_advertised >= 1_000_000 => Verdict::Pass,
        Some(_) => Verdict::Fail,
    };
    j.record(
        "slow-rate-while-not-up",
        RFC,
        false,
        verdict,
        format!(
            "{} packets while not Up; Desired Min TX advertised >= {} us (1,000,000 required); shortest gap {} (750 ms required)",
            packets.len(),
            slowest_advertised,
            shortest.map_or("none".into(), |g| format!("{:.1} ms", ms(g)))
        ),
    );
    // The probe: an Init with Your Discriminator 0 would take a Down DUT
    // to Up if it were accepted.
    let probed = sent(events).find(|(_, _, p)| *p == Some(Probe::YourDiscrZero));
    let (verdict, detail) = match probed {
        None => (Verdict::Inconclusive, "the probe was not sent".to_string()),
        Some((at, _, _)) => {
            let after: Vec<State> = heard(events)
                .filter(|(t, _)| *t > at)
                .map(|(_, p)| p.state)
                .collect();
            if after.is_empty() {
                (
                    Verdict::Inconclusive,
                    "no packet from the DUT after the probe".into(),
                )
            } else if after.iter().all(|s| *s == State::Down) {
                (
                    Verdict::Pass,
                    format!("still Down in {} packets after it", after.len()),
                )
            } else {
                (
                    Verdict::Fail,
                    format!("the DUT took it: states after it {after:?}"),
                )
            }
        }
    };
    let detail = format!("{}: {detail}", Probe::YourDiscrZero.rule());
    j.record(
        "discard-your-discr-zero",
        Probe::YourDiscrZero.section(),
        false,
        verdict,
        detail,
    );
}

fn handshake(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.2, 6.8.6, 6.8.7";
    if let Some(why) = j.stuck_in(Step::Handshake) {
        return j.record(
            "three-way-handshake",
            RFC,
            false,
            Verdict::Inconclusive,
            why,
        );
    }
    let events = j.trace.step(Step::Handshake);
    let first_sent = |state: State| {
        sent(events)
            .find(|(_, p, probe)| probe.is_none() && p.state == state)
            .map(|(at, _, _)| at)
    };
    let first_heard = |state: State| {
        heard(events)
            .find(|(_, p)| p.state == state)
            .map(|(at, _)| at)
    };
    let our_down = first_sent(State::Down);
    let our_up = first_sent(State::Up)
        .into_iter()
        .chain(first_sent(State::Init))
        .min();
    let (dut_init, dut_up) = (first_heard(State::Init), first_heard(State::Up));
    let wrong_discr = heard(events)
        .filter(|(_, p)| p.state != State::Down && p.your_discr != PEER_DISCR)
        .count();
    // Up only once we said Init or Up; Init (if it passed through it)
    // only once we said Down. A DUT that hears our Init first may go from
    // Down to Up directly: that is the table too.
    let order_ok = match (our_up, dut_up) {
        (Some(u), Some(up)) => {
            u < up && dut_init.is_none_or(|i| our_down.is_some_and(|d| d < i) && i < up)
        }
        _ => false,
    };
    j.record(
        "three-way-handshake",
        RFC,
        false,
        if order_ok && wrong_discr == 0 { Verdict::Pass } else { Verdict::Fail },
        format!(
            "our Down at {:?}, DUT Init at {:?}, our Init/Up at {:?}, DUT Up at {:?} (ms into the step); {wrong_discr} packets not naming our discriminator",
            our_down.map(|t| ms(t - events[0].at_ns())),
            dut_init.map(|t| ms(t - events[0].at_ns())),
            our_up.map(|t| ms(t - events[0].at_ns())),
            dut_up.map(|t| ms(t - events[0].at_ns())),
        ),
    );
}

fn steady(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.7";
    if let Some(why) = j.stuck_in(Step::Steady) {
        return j.record("jitter-window", RFC, true, Verdict::Inconclusive, why);
    }
    let events = j.trace.step(Step::Steady);
    let times = periodic_from(events, events[0].at_ns());
    j.window(
        "jitter-window",
        RFC,
        &packets_from(events, events[0].at_ns()),
        jitter_window(BASE_INTERVAL_US),
        20,
        "periodic packets at 50 ms",
    );
    // Jittered, not merely in the window: 6.8.7 draws per packet.
    let mut lengths: Vec<i64> = gaps(&times).iter().map(|(a, b)| b - a).collect();
    lengths.sort_unstable();
    if lengths.len() >= 20 {
        let spread = lengths[lengths.len() * 9 / 10] - lengths[lengths.len() / 10];
        j.record(
            "jittered",
            RFC,
            false,
            if spread >= 2_500_000 {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            format!(
                "the middle 80 % of gaps spans {:.2} ms (2.5 ms, 5 % of the interval, required)",
                ms(spread)
            ),
        );
    } else {
        // Too few packets to see a spread: the timing windows say why.
        let detail = format!("{} gaps (20 needed to see a spread)", lengths.len());
        j.record("jittered", RFC, false, Verdict::Inconclusive, detail);
    }
}

fn polls(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.5";
    if let Some(why) = j.stuck_in(Step::Polls) {
        return j.record("final-answers-poll", RFC, true, Verdict::Inconclusive, why);
    }
    let events = j.trace.step(Step::Polls);
    // Each Poll sequence starts at the first P after a Final (or the step).
    let mut starts = Vec::new();
    let mut answered = true;
    for e in events {
        match e {
            Event::Sent {
                at_ns,
                packet,
                probe: None,
            } if packet.poll && answered => {
                starts.push(*at_ns);
                answered = false;
            }
            Event::Heard { packet, .. } if packet.final_ => answered = true,
            _ => {}
        }
    }
    let latencies: Vec<Option<i64>> = starts
        .iter()
        .map(|s| first_final(events, *s).map(|f| f - s))
        .collect();
    let limit = i64::from(BASE_INTERVAL_US) * 1_000 / 2;
    let late = latencies
        .iter()
        .filter(|l| l.is_none_or(|l| l > limit))
        .count();
    j.record(
        "final-answers-poll",
        RFC,
        true,
        if starts.len() >= 3 && late == 0 { Verdict::Pass } else { Verdict::Fail },
        format!(
            "{} Polls; Finals after {:?} ms (half the interval, {:.0} ms, allowed: \"without respect to the transmission timer\")",
            starts.len(),
            latencies.iter().map(|l| l.map(|l| (ms(l) * 100.0).round() / 100.0)).collect::<Vec<_>>(),
            ms(limit)
        ),
    );
}

fn probes(j: &mut Judge) {
    let ids: Vec<String> = Probe::WHILE_UP
        .iter()
        .map(|p| format!("discard-{}", p.name()))
        .collect();
    let checks: Vec<(&str, &str, bool)> = Probe::WHILE_UP
        .iter()
        .zip(&ids)
        .map(|(p, id)| (id.as_str(), p.section(), false))
        .collect();
    if j.unjudged(Step::Probes, &checks) {
        return;
    }
    let events = j.trace.step(Step::Probes);
    for probe in Probe::WHILE_UP {
        let id = format!("discard-{}", probe.name());
        let Some(first) = sent(events)
            .find(|(_, _, p)| *p == Some(probe))
            .map(|x| x.0)
        else {
            j.record(
                &id,
                probe.section(),
                false,
                Verdict::Inconclusive,
                "not sent".into(),
            );
            continue;
        };
        let next = sent(events)
            .find(|(at, _, p)| *at > first && p.is_some_and(|p| p != probe))
            .map_or(i64::MAX, |x| x.0);
        let last_copy = sent(events)
            .filter(|(_, _, p)| *p == Some(probe))
            .map(|x| x.0)
            .max()
            .unwrap_or(first);
        let after: Vec<(i64, State, u8)> = heard(events)
            .filter(|(at, _)| *at > first && *at < next)
            .map(|(at, p)| (at, p.state, p.diag))
            .collect();
        let fell = after.iter().find(|(_, s, _)| *s != State::Up);
        let seen_after = after.iter().filter(|(at, _, _)| *at > last_copy).count();
        let (verdict, detail) = match fell {
            Some((at, state, diag)) => (
                Verdict::Fail,
                format!(
                    "the DUT took it: {state:?} (Diag {diag}) {:.1} ms after the first copy",
                    ms(at - first)
                ),
            ),
            None if seen_after >= 2 => (
                Verdict::Pass,
                format!("still Up in the {seen_after} packets after the last copy"),
            ),
            None => (
                Verdict::Inconclusive,
                format!("{seen_after} packets from the DUT after the probe"),
            ),
        };
        j.record(
            &id,
            probe.section(),
            false,
            verdict,
            format!("{}: {detail}", probe.rule()),
        );
    }
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
