//! `linecard compare RUN_A RUN_B`: two runs side by side, typically two
//! builds of one DUT through the same scenario, and whether B is worse
//! than A beyond what chance gives one build run twice.
//!
//! Every DUT and phase both runs measured is a row: flaps, p50, p99,
//! p99.9, max, gaps over budget, the DUT's CPU cost, each side by side.
//! Two figures are tested, each an event count over an exposure: the
//! flaps over the phase's seconds, and the gaps over budget (longer than
//! the detection time) over the DUT's gaps. The test is exact and
//! one-sided: given the events of both runs, under "B is no worse" each
//! falls in B with the share of the exposure B had (a conditional
//! binomial test, the exact comparison of two Poisson rates); its
//! p-value is stated. B is worse when a test's p-value is under
//! [`ALPHA`] divided by the number of tests made (Bonferroni), and B's
//! rate is the higher. Gap quantiles and CPU cost are shown, not tested:
//! a p99 moved by 0.1 ms between two runs of one build is run-to-run
//! spread, and one run gives no spread to judge it by.

use crate::gate::load_manifest;
use crate::manifest::figures::PhaseFigures;
use crate::manifest::{DutOutcome, Manifest};
use crate::scenario::programs::ProgramRecord;
use anyhow::Result;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The family-wise chance of calling two runs of one build different.
pub const ALPHA: f64 = 0.01;

/// One run as compared.
#[derive(Clone, Debug, Serialize)]
pub struct RunRef {
    pub dir: PathBuf,
    pub scenario: String,
    pub run_id: String,
    pub status: String,
    /// Every DUT's programs, by DUT label.
    pub programs: Vec<(String, Vec<ProgramRecord>)>,
}

/// One phase's figures of one run, as compared.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Figures {
    pub flaps: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub over_budget: u64,
    /// The DUT's packets in the phase (its gaps, within one per session).
    pub packets: u64,
    pub seconds: f64,
    /// The DUT daemon's CPU, ms per second of the phase.
    pub engine_cpu_ms_per_s: Option<f64>,
}

/// One test: events in A and B, their exposures, the p-value of "B is no
/// worse", and whether B is worse at the corrected level.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Test {
    pub metric: &'static str,
    pub a: u64,
    pub b: u64,
    pub exposure_a: f64,
    pub exposure_b: f64,
    pub p_value: f64,
    pub worse: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub dut: String,
    pub phase: String,
    pub a: Figures,
    pub b: Figures,
    pub tests: Vec<Test>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub a: RunRef,
    pub b: RunRef,
    pub rows: Vec<Row>,
    /// DUT and phase measured in one run only (or in neither).
    pub not_compared: Vec<String>,
    /// The level each test was held to: [`ALPHA`] / the number of tests.
    pub level: f64,
    /// B is worse than A in some row beyond chance.
    pub b_worse: bool,
}

impl Comparison {
    /// The tests that found B worse, with their rows.
    pub fn regressions(&self) -> impl Iterator<Item = (&Row, &Test)> {
        self.rows
            .iter()
            .flat_map(|r| r.tests.iter().filter(|t| t.worse).map(move |t| (r, t)))
    }
}

/// P(X >= b) for X ~ Binomial(n, q): the one-sided p-value of `b` events
/// of `n` falling in B when each would with probability `q`.
pub fn binomial_tail(b: u64, n: u64, q: f64) -> f64 {
    if b == 0 {
        return 1.0;
    }
    if b > n || q <= 0.0 {
        return 0.0;
    }
    if q >= 1.0 {
        return 1.0;
    }
    // ln C(n, b) q^b (1-q)^(n-b), then the terms above it by their ratio.
    let ln_choose: f64 = (1..=b).map(|i| ((n - b + i) as f64 / i as f64).ln()).sum();
    let mut term = (ln_choose + b as f64 * q.ln() + (n - b) as f64 * (1.0 - q).ln()).exp();
    let mut sum = 0.0;
    for x in b..=n {
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
        term *= (n - x) as f64 / (x + 1) as f64 * q / (1.0 - q);
    }
    sum.min(1.0)
}

/// The exact one-sided test of "B's rate is no higher than A's" for `a`
/// and `b` events over exposures `ea` and `eb`.
fn rate_test(metric: &'static str, (a, ea): (u64, f64), (b, eb): (u64, f64)) -> Test {
    let p_value = if ea <= 0.0 || eb <= 0.0 {
        1.0
    } else {
        binomial_tail(b, a + b, eb / (ea + eb))
    };
    Test {
        metric,
        a,
        b,
        exposure_a: ea,
        exposure_b: eb,
        p_value,
        worse: false,
    }
}

fn figures(d: &DutOutcome, p: &PhaseFigures) -> Figures {
    let record = d.phases.iter().find(|r| r.name == p.phase);
    let seconds = record.map_or(0.0, |r| (r.end_ns - r.start_ns) as f64 / 1e9);
    Figures {
        flaps: p.flaps,
        p50_ms: p.p50_ms,
        p99_ms: p.p99_ms,
        p999_ms: p.p999_ms,
        max_ms: p.max_ms,
        over_budget: p.over_budget.unwrap_or(0),
        packets: p.packets,
        seconds,
        engine_cpu_ms_per_s: record
            .and_then(|r| r.cpu.as_ref())
            .filter(|c| c.seconds > 0.0)
            .and_then(|c| Some(c.engine_cpu_ms? / c.seconds)),
    }
}

fn run_ref(dir: &Path, m: &Manifest) -> RunRef {
    RunRef {
        dir: dir.to_path_buf(),
        scenario: m.scenario.name.clone(),
        run_id: m.run_id.clone(),
        status: m.status.to_string(),
        programs: m
            .duts
            .iter()
            .map(|d| (d.label.clone(), d.programs.clone()))
            .collect(),
    }
}

/// Compares two runs' manifests.
pub fn compare_manifests(a: (&Path, &Manifest), b: (&Path, &Manifest)) -> Comparison {
    let mut rows = Vec::new();
    let mut not_compared = Vec::new();
    for da in &a.1.duts {
        let db = b.1.duts.iter().find(|d| d.label == da.label);
        let phases_a = da.evidence.iter().flat_map(|e| &e.phases);
        for pa in phases_a {
            let pb = db.and_then(|db| {
                let phases = db.evidence.iter().flat_map(|e| &e.phases);
                phases
                    .clone()
                    .find(|p| p.phase == pa.phase)
                    .map(|p| (db, p))
            });
            match pb {
                Some((db, pb)) => {
                    let (fa, fb) = (figures(da, pa), figures(db, pb));
                    let tests = vec![
                        rate_test("flaps", (fa.flaps, fa.seconds), (fb.flaps, fb.seconds)),
                        rate_test(
                            "gaps over budget",
                            (fa.over_budget, fa.packets as f64),
                            (fb.over_budget, fb.packets as f64),
                        ),
                    ];
                    rows.push(Row {
                        dut: da.label.clone(),
                        phase: pa.phase.clone(),
                        a: fa,
                        b: fb,
                        tests,
                    });
                }
                None => not_compared.push(format!("{} {} (A only)", da.label, pa.phase)),
            }
        }
        if da.evidence.as_ref().is_none_or(|e| e.phases.is_empty()) {
            not_compared.push(format!("{} (nothing measured in A)", da.label));
        }
    }
    for db in &b.1.duts {
        if !a.1.duts.iter().any(|d| d.label == db.label) {
            not_compared.push(format!("{} (B only)", db.label));
        }
    }
    let count = rows.iter().map(|r| r.tests.len()).sum::<usize>().max(1);
    let level = ALPHA / count as f64;
    for test in rows.iter_mut().flat_map(|r| &mut r.tests) {
        let higher = test.b as f64 * test.exposure_a > test.a as f64 * test.exposure_b;
        test.worse = higher && test.p_value < level;
    }
    let b_worse = rows.iter().flat_map(|r| &r.tests).any(|t| t.worse);
    Comparison {
        a: run_ref(a.0, a.1),
        b: run_ref(b.0, b.1),
        rows,
        not_compared,
        level,
        b_worse,
    }
}

/// Compares the runs in two run directories.
pub fn compare(a: &Path, b: &Path) -> Result<Comparison> {
    let (ma, mb) = (load_manifest(a)?, load_manifest(b)?);
    if ma.scenario.name != mb.scenario.name {
        anyhow::bail!(
            "{} is a run of {:?}, {} of {:?}: compare two runs of one scenario",
            a.display(),
            ma.scenario.name,
            b.display(),
            mb.scenario.name
        );
    }
    Ok(compare_manifests((a, &ma), (b, &mb)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binomial_tail_is_exact_on_small_cases() {
        // 5 of 5 events in B at even odds: 1/32.
        assert!((binomial_tail(5, 5, 0.5) - 1.0 / 32.0).abs() < 1e-12);
        // At least 1 of 2: 3/4.
        assert!((binomial_tail(1, 2, 0.5) - 0.75).abs() < 1e-12);
        assert_eq!(binomial_tail(0, 7, 0.5), 1.0);
        // Large n stays finite and tiny where it should.
        let p = binomial_tail(900, 1000, 0.5);
        assert!(p > 0.0 && p < 1e-100, "{p}");
    }

    #[test]
    fn a_few_late_gaps_either_way_are_not_a_difference_and_many_are() {
        // Two runs of one build: 1 and 3 gaps over budget of ~400 each.
        let same = rate_test("gaps over budget", (1, 400.0), (3, 410.0));
        assert!(same.p_value > 0.05, "{same:?}");
        // The regressed build: 40 of 400.
        let worse = rate_test("gaps over budget", (0, 400.0), (40, 400.0));
        assert!(worse.p_value < 1e-10, "{worse:?}");
    }
}
