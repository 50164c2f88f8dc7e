//! A ladder's table (`sessions.steps`): each DUT at each session count,
//! per phase, with what could run out (the DUT's CPU, the peer's, the
//! capture), and the highest step each DUT held with the reason the next
//! did not. A ceiling without its reason is a silence.

use super::document::{Block, Cell};
use super::summary::{section_blocks, L, R};
use crate::manifest::{DutOutcome, Manifest};

/// `12.3`, or `-` for nothing measured.
fn per_second(ms: Option<f64>, seconds: f64) -> String {
    match ms {
        Some(ms) if seconds > 0.0 => format!("{:.1}", ms / seconds),
        _ => "-".into(),
    }
}

/// The ladder's rows in the order they ran.
fn rungs(m: &Manifest) -> Vec<(&DutOutcome, &crate::scenario::Step)> {
    (m.duts.iter())
        .filter_map(|d| Some((d, d.spec.step.as_ref()?)))
        .collect()
}

/// The ladder's table and its ceilings; nothing for a run without steps.
pub fn section(m: &Manifest) -> Vec<Block> {
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    for (d, step) in rungs(m) {
        let evidence = d.evidence.as_ref();
        let figures = evidence.map_or(&[][..], |e| e.phases.as_slice());
        let dropped = || {
            evidence
                .and_then(|e| e.capture_dropped)
                .map_or("-".to_string(), |n| n.to_string())
        };
        if d.phases.is_empty() {
            // No phase ran: the step ended at its bring-up, and says why.
            let mut row: Vec<Cell> = vec![
                step.label.clone().into(),
                step.sessions.to_string().into(),
                "bring-up".into(),
            ];
            row.extend((0..7).map(|_| Cell::from("-")));
            row.push(dropped().into());
            row.push(d.verdict.describe().into());
            rows.push(row);
        }
        for record in &d.phases {
            let f = figures.iter().find(|f| f.phase == record.name);
            let peer_longest = f
                .and_then(|f| f.intervals.iter().find(|i| i.side == "peer"))
                .and_then(|i| i.longest_ms);
            let cpu = record.cpu.as_ref();
            let peer = record.peer_cpu.as_ref();
            let seconds = cpu.map_or(0.0, |c| c.seconds);
            rows.push(vec![
                step.label.clone().into(),
                step.sessions.to_string().into(),
                record.profile.clone().into(),
                f.map_or("-".into(), |f| f.flaps.to_string()).into(),
                f.map_or("-".into(), |f| f.correlated_flaps.to_string())
                    .into(),
                f.map_or("-".into(), |f| format!("{:.2}", f.max_ms)).into(),
                peer_longest
                    .map_or("-".into(), |ms| format!("{ms:.2}"))
                    .into(),
                per_second(cpu.map(|c| c.softirq_ms), seconds).into(),
                per_second(cpu.and_then(|c| c.engine_cpu_ms), seconds).into(),
                per_second(peer.and_then(|c| c.idle_ms), seconds).into(),
                dropped().into(),
                d.shown_verdict_in(&record.name).into(),
            ]);
        }
    }
    let mut blocks = section_blocks(
        "The ladder (`sessions.steps`): each DUT at each session count, per phase, from the capture: flaps, the most sessions that flapped within 100 ms of each other, the largest gap of the DUT's and the peer's own longest gap; from /proc, in ms per second: the softirq time on the DUT's CPUs and the DUT daemon's CPU, and the idle time left on the peer's CPUs (the peer and the observer's capture share them: its headroom); the frames the capture dropped over the DUT's run; and the DUT's verdict at that step.",
        &[
            ("DUT", L),
            ("sessions", R),
            ("phase", L),
            ("flaps", R),
            ("correlated", R),
            ("max ms", R),
            ("peer's longest ms", R),
            ("DUT softirq ms/s", R),
            ("engine ms/s", R),
            ("peer CPUs idle ms/s", R),
            ("capture drops", R),
            ("verdict", L),
        ],
        rows,
    );
    blocks.extend(ceilings(m).into_iter().map(Block::text));
    blocks
}

/// Per DUT of the ladder: the highest step it held with every step below
/// it, and the first it did not, with the verdict's reason.
pub fn ceilings(m: &Manifest) -> Vec<String> {
    let mut labels: Vec<&str> = Vec::new();
    for (_, step) in rungs(m) {
        if !labels.contains(&step.label.as_str()) {
            labels.push(&step.label);
        }
    }
    labels
        .into_iter()
        .map(|label| {
            let steps: Vec<_> = rungs(m)
                .into_iter()
                .filter(|(_, s)| s.label == label)
                .collect();
            if steps.iter().any(|(d, _)| d.spec.expect.positive_control) {
                // Its pass is a flap: there is no ceiling to hold.
                let each: Vec<String> = (steps.iter())
                    .map(|(d, s)| match d.verdict.passed() {
                        true => format!("{} flapped", s.sessions),
                        false => format!("{} {}", s.sessions, d.verdict.describe()),
                    })
                    .collect();
                return format!(
                    "{label} is the positive control (it must flap at every step): {}.",
                    each.join("; ")
                );
            }
            let held = steps.iter().take_while(|(d, _)| d.verdict.passed()).count();
            match (
                held.checked_sub(1).map(|i| steps[i].1.sessions),
                steps.get(held),
            ) {
                (Some(top), None) => {
                    format!("{label}: held at every step of this run, through {top} sessions.")
                }
                (Some(top), Some((d, s))) => format!(
                    "{label}: holds through {top} sessions; at {} it did not: {}",
                    s.sessions,
                    d.verdict.describe()
                ),
                (None, Some((d, s))) => format!(
                    "{label}: held no step; at {} sessions: {}",
                    s.sessions,
                    d.verdict.describe()
                ),
                (None, None) => format!("{label}: no step ran."),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::document::markdown;
    use super::*;

    /// A DUT's row at `sessions` of the ladder, with `verdict` and one L4
    /// phase whose figures and costs are given.
    fn row(
        label: &str,
        sessions: usize,
        control: bool,
        verdict: serde_json::Value,
    ) -> serde_json::Value {
        serde_json::json!({
            "label": format!("{label}@{sessions}"),
            "spec": {"label": format!("{label}@{sessions}"), "implementation": "frr", "rt_throttling": "shipped",
                     "expect": {"positive_control": control, "max_flaps": 0, "max_gap_ms": 20.0}, "engine": "",
                     "step": {"label": label, "sessions": sessions}},
            "verdict": verdict,
            "evidence": {
                "capture_died_early": false, "capture_dropped": 7, "up_before_phases": {"Ok": null},
                "fast_path_on_dut_cpus": null, "steal_ms": 0.0, "detection_ms": 30.0, "interval_ms": 10.0,
                "phases": [{"phase": "L4#0", "profile": "L4", "packets": 900, "flaps": 2,
                            "p50_ms": 8.7, "p99_ms": 10.1, "p999_ms": 10.2, "max_ms": 12.345,
                            "sessions": sessions, "sessions_flapped": 1, "correlated_flaps": 1,
                            "over_budget": 0, "canary_stall_ms": 40.0, "canary_required_ms": null,
                            "intervals": [{"side": "peer", "legal_ms": 10.0, "gaps": 10, "shortest_ms": 9.0,
                                           "longest_ms": 10.5, "too_soon": 0, "late": 0}]}]
            },
            "phases": [{"name": "L4#0", "profile": "L4", "start_ns": 0, "end_ns": 10_000_000_000i64,
                        "stress_ng": null,
                        "cpu": {"engine_cpu_ms": 500.0, "softirq_ms": 2000.0, "idle_ms": 1000.0, "seconds": 10.0},
                        "peer_cpu": {"engine_cpu_ms": 100.0, "softirq_ms": 300.0, "idle_ms": 4000.0, "seconds": 10.0}}],
            "sched_rt_runtime_us": 950000, "spoiled_attempts": []
        })
    }

    fn manifest(duts: Vec<serde_json::Value>) -> Manifest {
        let manifest = serde_json::json!({
            "schema_version": 1,
            "scenario": {"name": "scale-ladder", "description": "t", "provider": "local", "peer": "linecardd",
                         "peer_rt_priority": 0, "phases": [], "duts": [], "file": "t",
                         "sessions": {"count": 256, "steps": [64, 128, 256], "ipv6": false,
                                      "tx_interval_ms": 10, "rx_interval_ms": 10, "multiplier": 3}},
            "run_id": "20261208T000000Z", "status": "invalid: xdp@256",
            "host": {"provider": "local", "kernel": "6.1", "online_cpus": [0, 1], "dut_cpus": [1],
                     "sched_rt_runtime_us": 950000, "placement_share_on_dut_cpus": 1.0,
                     "git_revision": "t", "linecard_version": "0", "tools": []},
            "duts": duts,
        });
        crate::gate::parse_manifest("t", &manifest.to_string()).unwrap()
    }

    fn pass() -> serde_json::Value {
        serde_json::json!({"status": "pass"})
    }

    #[test]
    fn the_ceiling_is_the_last_step_held_with_every_one_below_and_the_next_one_s_reason() {
        let dropped =
            serde_json::json!({"status": "invalid", "why": "the capture dropped 7 packets"});
        let m = manifest(vec![
            row("naive", 64, true, pass()),
            row("xdp", 64, false, pass()),
            row("naive", 128, true, pass()),
            row("xdp", 128, false, pass()),
            row("xdp", 256, false, dropped.clone()),
        ]);
        assert_eq!(
            ceilings(&m),
            vec![
                "naive is the positive control (it must flap at every step): 64 flapped; 128 flapped.".to_string(),
                "xdp: holds through 128 sessions; at 256 it did not: INVALID: the capture dropped 7 packets"
                    .to_string(),
            ]
        );
        // Per phase: flaps, correlated, max, the peer's longest gap, the
        // DUT's softirq and engine, the peer's idle, the capture's drops.
        let text = markdown(&section(&m));
        assert!(
            text.contains(
                "| xdp | 256 | L4 | 2 | 1 | 12.35 | 10.50 | 200.0 | 50.0 | 400.0 | 7 | INVALID"
            ),
            "{text}"
        );
        // A step that never reached its phases says so, with its reason.
        let failed = serde_json::json!({"status": "fail", "why": "sessions never came Up"});
        let mut never_up = row("xdp", 512, false, failed);
        never_up["phases"] = serde_json::json!([]);
        let text = markdown(&section(&manifest(vec![never_up])));
        assert!(
            text.contains(
                "| xdp | 512 | bring-up | - | - | - | - | - | - | - | 7 | FAIL: sessions never came Up |"
            ),
            "{text}"
        );
        let all_held = manifest(vec![
            row("xdp", 64, false, pass()),
            row("xdp", 128, false, pass()),
        ]);
        assert_eq!(
            ceilings(&all_held),
            vec!["xdp: held at every step of this run, through 128 sessions."]
        );
        let none_held = manifest(vec![row("xdp", 64, false, dropped)]);
        assert!(ceilings(&none_held)[0].starts_with("xdp: held no step; at 64 sessions: INVALID"));
        // A run without steps has no ladder.
        assert!(section(&manifest(Vec::new())).is_empty());
    }
}
