//! `linecard gate RUN_DIR --baseline FILE`: the CI regression gate. Compares
//! each gated DUT's capture figures (per plain phase: max gap, p99.9,
//! flaps, gaps over the detect budget; per fault phase: the fault rules it
//! broke) with a committed baseline.
//!
//! The rule, documented in `baselines/README.md`: a baseline records, per
//! DUT, phase and metric, the values of repeated runs (their spread) and a
//! slack; a value regresses when it exceeds the worst recorded value plus
//! the slack. A run that is not `complete` cannot pass the gate: a failed
//! or invalid run proves nothing either way.

use crate::manifest::Manifest;
use anyhow::{bail, Context, Result};
use linecard_api::InputError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The figures the gate compares, by their name in baseline files: the
/// capture's figures of a plain phase, and of a fault's phase the number
/// of its rules the DUT broke (`run::faults::judge`: a late or missed
/// Down, a peer that never saw a stopped engine go, no recovery) and the
/// median of its Downs' delays after the peer's last packet.
pub const METRICS: [&str; 6] = [
    "max_gap_ms",
    "p999_ms",
    "flaps",
    "over_budget",
    "fault_failures",
    "detection_p50_ms",
];

/// The figures of a fault's phase; every other metric is a plain phase's.
const FAULT_METRICS: [&str; 2] = ["fault_failures", "detection_p50_ms"];

/// A phase's detection median is a figure only with this many Downs of
/// ours in it: the fault judge holds each Down to 3 ms, and a median of a
/// handful cannot tell a sweep at the deadline from one on a 0.5 ms
/// period (`engine.xdp_sweep_fixed_period`, the negative control), whose
/// Downs land anywhere up to a period late.
pub const MIN_DETECTIONS: usize = 5;

/// Whether `metric` is a figure of a phase with (or without) a fault: a
/// fault's phase is judged by its own rules, not by gaps it caused.
fn gated_in(metric: &str, fault_phase: bool) -> bool {
    FAULT_METRICS.contains(&metric) == fault_phase
}

/// The metrics' names for an error message.
fn metric_names() -> String {
    let (last, rest) = METRICS.split_last().expect("metrics");
    format!("{} or {last}", rest.join(", "))
}

/// The median of `values` (`None` when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    })
}

/// The baseline format this linecard writes and reads: version 2 records
/// the runs it came from, the slack's reason and a seal.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    pub schema_version: u32,
    pub scenario: String,
    /// How the values were obtained (runs, machine), for the reader.
    pub provenance: String,
    /// The run ids the observed values come from, in order.
    pub recorded_from: Vec<String>,
    /// Why the slack is what it is (a parameter of the recording, never a
    /// later edit).
    pub slack_reason: String,
    /// A digest of everything above and every check, written by
    /// `linecard baseline`: a value edited by hand breaks it, and the gate
    /// refuses the file (record again instead).
    pub seal: String,
    #[serde(rename = "check")]
    pub checks: Vec<Check>,
}

impl Baseline {
    /// FNV-1a (64 bit) over the recorded content in a fixed order: not a
    /// defence against forgery, a tripwire against hand edits.
    fn compute_seal(&self) -> String {
        let mut text = format!(
            "{}\n{}\n{}\n{:?}\n{}\n",
            self.schema_version,
            self.scenario,
            self.provenance,
            self.recorded_from,
            self.slack_reason
        );
        for c in &self.checks {
            text.push_str(&format!(
                "{}|{}|{}|{:?}|{:?}\n",
                c.dut, c.phase, c.metric, c.observed, c.slack
            ));
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in text.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        format!("fnv1a64:{hash:016x}")
    }
}

#[derive(Debug, Deserialize, Serialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub dut: String,
    /// The phase's profile name (`L4`), or `profile#index` when a scenario
    /// runs one profile twice.
    pub phase: String,
    pub metric: String,
    /// The values of repeated runs on the baseline's machine.
    pub observed: Vec<f64>,
    /// Allowed above the worst observed value.
    pub slack: f64,
}

impl Check {
    pub fn limit(&self) -> f64 {
        self.observed.iter().copied().fold(f64::MIN, f64::max) + self.slack
    }
}

impl Baseline {
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| InputError::read(&file, e))?;
        Self::parse(&file, &text)
    }

    /// A baseline's text (`file` names it in errors), checked: its schema,
    /// its seal, every metric and value.
    pub fn parse(file: &str, text: &str) -> Result<Self, InputError> {
        let b: Baseline = toml::from_str(text).map_err(|e| InputError::syntax(file, e))?;
        if b.schema_version != SCHEMA_VERSION {
            return Err(InputError::invalid(
                file,
                "schema_version",
                &b.schema_version,
                &format!("this linecard reads version {SCHEMA_VERSION}: record it again with `linecard baseline`"),
            ));
        }
        if b.seal != b.compute_seal() {
            return Err(InputError::invalid(
                file,
                "seal",
                &b.seal,
                "does not match the file's values: edited by hand? Record it again with `linecard baseline RUN_DIR... --slack-ms N --slack-reason ...`",
            ));
        }
        for (i, c) in b.checks.iter().enumerate() {
            if !METRICS.contains(&c.metric.as_str()) {
                return Err(InputError::invalid(
                    file,
                    &format!("check[{i}].metric"),
                    &c.metric,
                    &format!("must be {}", metric_names()),
                ));
            }
            if c.observed.is_empty() || c.observed.iter().any(|v| !v.is_finite() || *v < 0.0) {
                return Err(InputError::invalid(
                    file,
                    &format!("check[{i}].observed"),
                    &format!("{:?}", c.observed),
                    "needs at least one value, none negative",
                ));
            }
            if !(c.slack.is_finite() && c.slack >= 0.0) {
                return Err(InputError::invalid(
                    file,
                    &format!("check[{i}].slack"),
                    &c.slack,
                    "must be 0 or more",
                ));
            }
        }
        Ok(b)
    }
}

/// One comparison.
#[derive(Debug, Serialize, Clone)]
pub struct Comparison {
    pub dut: String,
    pub phase: String,
    pub metric: String,
    /// `None`: the run has no such DUT or phase (a failure: a gate that
    /// cannot find what it gates must not pass).
    pub value: Option<f64>,
    pub worst_observed: f64,
    pub slack: f64,
    pub limit: f64,
    pub passed: bool,
    /// Gaps of this phase the run's verdict excused (`max_gap_ms` only):
    /// counted here, and left out of `value`.
    #[serde(skip_serializing_if = "is_zero")]
    pub excused: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Serialize)]
pub struct GateResult {
    pub run: String,
    pub baseline: String,
    pub run_status: String,
    pub passed: bool,
    pub comparisons: Vec<Comparison>,
}

/// A metric of one phase of one DUT in a run manifest.
/// DUT `dut`'s phase `phase` in a run manifest: by its name, or by its
/// profile when one phase has it.
fn phase_of<'a>(
    manifest: &'a Manifest,
    dut: &str,
    phase: &str,
) -> Option<(
    &'a crate::manifest::DutOutcome,
    &'a crate::manifest::evidence::Evidence,
    &'a crate::manifest::figures::PhaseFigures,
)> {
    let d = manifest.duts.iter().find(|d| d.label == dut)?;
    let e = d.evidence.as_ref()?;
    let p = e.phases.iter().find(|p| {
        p.phase == phase
            || (p.profile == phase && e.phases.iter().filter(|q| q.profile == phase).count() == 1)
    })?;
    Some((d, e, p))
}

fn value(manifest: &Manifest, dut: &str, phase: &str, metric: &str) -> Option<f64> {
    let (d, e, p) = phase_of(manifest, dut, phase)?;
    if !gated_in(metric, p.fault.is_some()) {
        return None;
    }
    Some(match metric {
        "fault_failures" => f64::from(u8::from(matches!(
            e.fault_breach(p),
            Some(crate::run::faults::FaultBreach::Fail(_))
        ))),
        "max_gap_ms" => max_gap_not_excused(d, e, p),
        "p999_ms" => p.p999_ms,
        "flaps" => p.flaps as f64,
        "over_budget" => p.over_budget? as f64,
        "detection_p50_ms" => {
            let detections = &p.fault.as_ref()?.detections_ms;
            if detections.len() < MIN_DETECTIONS {
                return None;
            }
            median(detections)?
        }
        _ => return None,
    })
}

/// A phase's largest gap less those its DUT's excused pass excused: the
/// largest long gap of the phase it did not excuse, or when it excused
/// them all, the most any gap not kept one by one can have been
/// (`KEPT_FROM_INTERVALS` intervals, capped by the phase's max).
fn max_gap_not_excused(
    d: &crate::manifest::DutOutcome,
    e: &crate::manifest::evidence::Evidence,
    p: &crate::manifest::figures::PhaseFigures,
) -> f64 {
    let excused: Vec<i64> = d.verdict.excused_in(&p.phase).map(|g| g.end_ns).collect();
    if excused.is_empty() {
        return p.max_ms;
    }
    let interval_ms = e.interval_ms.unwrap_or(e.detection_ms / 3.0);
    let not_kept = (crate::run::mirror::KEPT_FROM_INTERVALS * interval_ms).min(p.max_ms);
    (e.long_gaps.iter())
        .filter(|g| g.phase == p.phase && !excused.contains(&g.end_ns))
        .map(|g| g.gap_ms)
        .fold(not_kept, f64::max)
}

/// How many of a phase's gaps its DUT's verdict excused (`max_gap_ms`).
fn excused(manifest: &Manifest, dut: &str, phase: &str, metric: &str) -> usize {
    match phase_of(manifest, dut, phase) {
        Some((d, _, p)) if metric == "max_gap_ms" => d.verdict.excused_in(&p.phase).count(),
        _ => 0,
    }
}

pub fn load_manifest(run_dir: &Path) -> Result<Manifest> {
    let path = run_dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{} is not a run directory (no readable manifest.json)",
            run_dir.display()
        )
    })?;
    parse_manifest(&path.display().to_string(), &text)
}

/// A run manifest's text (`file` names it in errors): what `report`,
/// `compare`, `tables` and the gate read of a run directory.
pub fn parse_manifest(file: &str, text: &str) -> Result<Manifest> {
    serde_json::from_str(text).with_context(|| format!("{file}: not a linecard run manifest"))
}

pub fn gate(run_dir: &Path, baseline_path: &Path) -> Result<GateResult> {
    let baseline = Baseline::load(baseline_path)?;
    let manifest = load_manifest(run_dir)?;
    if manifest.scenario.name != baseline.scenario {
        bail!(
            "{} is a baseline for scenario {:?}; {} ran {:?}",
            baseline_path.display(),
            baseline.scenario,
            run_dir.display(),
            manifest.scenario.name
        );
    }
    Ok(gate_manifest(&baseline, &manifest, baseline_path, run_dir))
}

/// The gate's comparisons of one manifest against one baseline (of the
/// same scenario).
pub fn gate_manifest(
    baseline: &Baseline,
    manifest: &Manifest,
    baseline_path: &Path,
    run_dir: &Path,
) -> GateResult {
    let comparisons: Vec<Comparison> = baseline
        .checks
        .iter()
        .map(|c| {
            let v = value(manifest, &c.dut, &c.phase, &c.metric);
            let limit = c.limit();
            Comparison {
                dut: c.dut.clone(),
                phase: c.phase.clone(),
                metric: c.metric.clone(),
                value: v,
                worst_observed: limit - c.slack,
                slack: c.slack,
                limit,
                passed: v.is_some_and(|v| v <= limit),
                excused: excused(manifest, &c.dut, &c.phase, &c.metric),
            }
        })
        .collect();
    let passed = manifest.status.is_complete() && comparisons.iter().all(|c| c.passed);
    GateResult {
        run: run_dir.display().to_string(),
        baseline: baseline_path.display().to_string(),
        run_status: manifest.status.to_string(),
        passed,
        comparisons,
    }
}

/// How much slack a recording gives the gap metrics and the detection
/// medians, and why.
#[derive(Clone, Debug, Default)]
pub struct Slack {
    /// For every phase not named in `per_profile`, ms.
    pub default_ms: f64,
    /// By phase profile (`L4`), ms.
    pub per_profile: Vec<(String, f64)>,
    /// For the detection medians (`detection_p50_ms`), ms: the gap
    /// metrics' slack would hide a sweep half a millisecond late.
    pub detection_ms: Option<f64>,
    pub reason: String,
}

impl Slack {
    fn for_phase(&self, profile: &str) -> f64 {
        self.per_profile
            .iter()
            .find(|(p, _)| p == profile)
            .map_or(self.default_ms, |&(_, ms)| ms)
    }
}

/// A baseline from repeated runs of one scenario: every DUT the scenario
/// judges by limits, with evidence, every phase, every metric, with the slack in ms for the
/// gap metrics (by phase profile) and 0 for the counts.
pub fn record(
    run_dirs: &[std::path::PathBuf],
    slack: &Slack,
    provenance: &str,
) -> Result<Baseline> {
    let manifests = run_dirs
        .iter()
        .map(|d| load_manifest(d))
        .collect::<Result<Vec<_>>>()?;
    let first = manifests.first().context("no run directories")?;
    if let Some(m) = manifests.iter().find(|m| !m.status.is_complete()) {
        bail!(
            "run {} is not complete ({}): a baseline comes from good runs only",
            m.run_id,
            m.status
        );
    }
    if let Some(m) = manifests
        .iter()
        .find(|m| m.scenario.name != first.scenario.name)
    {
        bail!(
            "runs of different scenarios ({} and {})",
            first.scenario.name,
            m.scenario.name
        );
    }
    let mut checks = Vec::new();
    // Only the rows the scenario judges (a flap or gap limit): a measured
    // row has no claim to regress from, and a positive control must flap,
    // which its verdict already enforces.
    for d in first.duts.iter().filter(|d| {
        let e = &d.spec.expect;
        !e.positive_control && (e.max_flaps.is_some() || e.max_gap_ms.is_some())
    }) {
        let Some(e) = &d.evidence else { continue };
        for p in &e.phases {
            for metric in METRICS
                .into_iter()
                .filter(|m| gated_in(m, p.fault.is_some()))
            {
                let values: Vec<Option<f64>> = manifests
                    .iter()
                    .map(|m| value(m, &d.label, &p.phase, metric))
                    .collect();
                // A detection median exists only where the phase had enough
                // Downs: none in every run is no check; some is a scenario
                // too short to record from.
                if metric == "detection_p50_ms" && values.iter().all(Option::is_none) {
                    continue;
                }
                let observed = values.into_iter().collect::<Option<Vec<f64>>>().with_context(|| {
                    if metric == "detection_p50_ms" {
                        format!(
                            "DUT {:?} phase {}: fewer than {MIN_DETECTIONS} Downs of ours in some runs, not in others: lengthen the phase so that every run has them",
                            d.label, p.phase
                        )
                    } else {
                        format!("DUT {:?} phase {} missing in a run", d.label, p.phase)
                    }
                })?;
                let slack = match metric {
                    "detection_p50_ms" => slack.detection_ms.with_context(|| {
                        format!(
                            "DUT {:?} phase {} has a detection median: say its slack with --detection-slack-ms",
                            d.label, p.phase
                        )
                    })?,
                    m if m.ends_with("_ms") => slack.for_phase(&p.profile),
                    _ => 0.0,
                };
                checks.push(Check {
                    dut: d.label.clone(),
                    phase: p.phase.clone(),
                    metric: metric.to_string(),
                    observed,
                    slack,
                });
            }
        }
    }
    let mut baseline = Baseline {
        schema_version: SCHEMA_VERSION,
        scenario: first.scenario.name.clone(),
        provenance: provenance.to_string(),
        recorded_from: manifests.iter().map(|m| m.run_id.clone()).collect(),
        slack_reason: slack.reason.clone(),
        seal: String::new(),
        checks,
    };
    baseline.seal = baseline.compute_seal();
    Ok(baseline)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(metric: &str, observed: &[f64], slack: f64) -> Check {
        Check {
            dut: "xdp".into(),
            phase: "L4#1".into(),
            metric: metric.into(),
            observed: observed.to_vec(),
            slack,
        }
    }

    #[test]
    fn the_limit_is_the_worst_observed_plus_slack() {
        assert_eq!(check("max_gap_ms", &[13.2, 14.0, 13.6], 1.5).limit(), 15.5);
        assert_eq!(check("flaps", &[0.0, 0.0], 0.0).limit(), 0.0);
    }

    fn sealed(checks: Vec<Check>) -> Baseline {
        let mut b = Baseline {
            schema_version: SCHEMA_VERSION,
            scenario: "smoke".into(),
            provenance: "t".into(),
            recorded_from: vec!["20261204T000000Z".into()],
            slack_reason: "test".into(),
            seal: String::new(),
            checks,
        };
        b.seal = b.compute_seal();
        b
    }

    #[test]
    fn a_value_edited_by_hand_breaks_the_seal() {
        let path = std::env::temp_dir().join(format!("lc-baseline-seal-{}", std::process::id()));
        let b = sealed(vec![check("max_gap_ms", &[11.6, 12.2], 5.0)]);
        let text = toml::to_string(&b).unwrap();
        std::fs::write(&path, &text).unwrap();
        assert!(Baseline::load(&path).is_ok());
        std::fs::write(&path, text.replace("slack = 5.0", "slack = 8.0")).unwrap();
        let e = Baseline::load(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(e.contains("seal") && e.contains("edited by hand"), "{e}");
    }

    #[test]
    fn a_fault_phase_is_gated_on_its_rules_and_detection_median_only() {
        for m in METRICS {
            assert_ne!(gated_in(m, true), gated_in(m, false), "{m}");
        }
        assert!(gated_in("detection_p50_ms", true) && gated_in("fault_failures", true));
        assert!(gated_in("max_gap_ms", false) && !gated_in("max_gap_ms", true));
        // The median is robust to the one late Down a VM's stall makes.
        assert_eq!(median(&[30.05, 30.04, 33.4, 30.06, 30.05]), Some(30.05));
        assert_eq!(median(&[30.0, 30.5]), Some(30.25));
        assert_eq!(median(&[]), None);
    }

    /// A complete run of DUT `xdp` (gap limit 15 ms) whose phase L3#1
    /// holds `long_gaps` (gap ms, end ns, frozen ms) and whose verdict is
    /// `verdict`.
    fn run_with(verdict: serde_json::Value, long_gaps: &[(f64, i64, f64)]) -> Manifest {
        let max = long_gaps.iter().map(|g| g.0).fold(10.2, f64::max);
        let gaps: Vec<serde_json::Value> = (long_gaps.iter())
            .map(|&(gap_ms, end_ns, frozen_ms)| {
                serde_json::json!({"gap_ms": gap_ms, "end_ns": end_ns, "mirrors_peer": false,
                                   "frozen_ms": frozen_ms, "phase": "L3#1"})
            })
            .collect();
        let manifest = serde_json::json!({
            "schema_version": 1,
            "scenario": {"name": "ladder", "description": "t", "provider": "local", "peer": "frr",
                         "peer_rt_priority": 20, "phases": [], "duts": [], "file": "t",
                         "sessions": {"ipv6": false, "tx_interval_ms": 10, "rx_interval_ms": 10, "multiplier": 3}},
            "run_id": "20261207T000000Z", "status": "complete",
            "host": {"provider": "local", "kernel": "6.1", "online_cpus": [0, 1], "dut_cpus": [1],
                     "sched_rt_runtime_us": 950000, "placement_share_on_dut_cpus": 1.0,
                     "git_revision": "t", "linecard_version": "0", "tools": []},
            "duts": [{
                "label": "xdp",
                "spec": {"label": "xdp", "implementation": "frr", "rt_throttling": "shipped",
                         "expect": {"positive_control": false, "max_flaps": 0, "max_gap_ms": 15.0}, "engine": ""},
                "verdict": verdict,
                "evidence": {
                    "capture_died_early": false, "capture_dropped": 0, "up_before_phases": {"Ok": null},
                    "fast_path_on_dut_cpus": null, "steal_ms": 0.0, "detection_ms": 30.0, "interval_ms": 10.0,
                    "long_gaps": gaps,
                    "phases": [{"phase": "L3#1", "profile": "L3", "packets": 900, "flaps": 0,
                                "p50_ms": 8.7, "p99_ms": 10.1, "p999_ms": 10.2, "max_ms": max,
                                "over_budget": 0, "canary_stall_ms": 40.0, "canary_required_ms": null}]
                },
                "phases": [], "sched_rt_runtime_us": 950000, "spoiled_attempts": []
            }]
        });
        parse_manifest("t", &manifest.to_string())
            .map_err(|e| format!("{e:#}"))
            .unwrap()
    }

    #[test]
    fn a_gap_the_verdict_excused_is_counted_beside_the_max_not_in_it() {
        let baseline = sealed(vec![Check {
            phase: "L3".into(),
            ..check("max_gap_ms", &[11.5, 12.1], 2.0)
        }]);
        let gate = |m: &Manifest| {
            let r = gate_manifest(&baseline, m, Path::new("b"), Path::new("r"));
            (r.passed, r.comparisons[0].value, r.comparisons[0].excused)
        };
        let excused = serde_json::json!({"status": "excused", "why": [
            {"phase": "L3#1", "gap_ms": 16.08, "end_ns": 5000, "by": "freeze", "disturbed_ms": 6.0}]});
        // The 16.08 ms gap excused, the largest other one 13.1 ms.
        let m = run_with(excused.clone(), &[(16.08, 5000, 6.0), (13.1, 9000, 0.0)]);
        assert_eq!(gate(&m), (true, Some(13.1), 1));
        // Every long gap excused: the rest were under 1.2 intervals.
        assert_eq!(
            gate(&run_with(excused, &[(16.08, 5000, 6.0)])),
            (true, Some(12.0), 1)
        );
        // The same gaps in a plain pass (no excuse): the max, over the limit.
        let plain = run_with(serde_json::json!({"status": "pass"}), &[(16.08, 5000, 6.0)]);
        assert_eq!(gate(&plain), (false, Some(16.08), 0));
    }

    #[test]
    fn the_slack_is_per_phase_profile_with_a_default() {
        let slack = Slack {
            default_ms: 2.0,
            per_profile: vec![("L4".into(), 8.0)],
            detection_ms: None,
            reason: "r".into(),
        };
        assert_eq!(slack.for_phase("L4"), 8.0);
        assert_eq!(slack.for_phase("idle"), 2.0);
    }

    #[test]
    fn a_bad_baseline_names_file_key_and_value() {
        let dir = std::env::temp_dir().join(format!("lc-baseline-{}", std::process::id()));
        std::fs::write(
            &dir,
            toml::to_string(&sealed(vec![check("mean_ms", &[1.0], 0.0)])).unwrap(),
        )
        .unwrap();
        let e = Baseline::load(&dir).unwrap_err().to_string();
        std::fs::remove_file(&dir).unwrap();
        assert!(
            e.ends_with(
                "check[0].metric = mean_ms: must be max_gap_ms, p999_ms, flaps, over_budget, fault_failures or detection_p50_ms"
            ),
            "{e}"
        );
    }
}
