//! `scenarios/handover.toml`, `upgrade.toml` and `handover-bird.toml` end
//! to end (issue 39). The first: 64 xdp sessions at
//! 3 x 10 ms against FRR bfdd, the engine handed over to a new process
//! idle and under L4, each handover phase judged on every session and the
//! run gated against `baselines/handover.toml`. Then its negative control,
//! `handover_adopt = false` (the successor sends the sessions AdminDown
//! and starts them afresh): the run must fail on the handover phase, and
//! the gate with it.

use crate::common::*;
use std::path::{Path, PathBuf};

/// The fault phases of `dut` in a manifest.
fn fault_phases(manifest: &serde_json::Value, label: &str) -> Vec<serde_json::Value> {
    dut(manifest, label)["evidence"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["fault"].is_object())
        .map(|p| p["fault"].clone())
        .collect()
}

/// Runs `scenarios/NAME.toml` into `results/tag` and asserts what every
/// hitless scenario must show: exit 0; `handovers` fault phases, each
/// judging all 64 sessions, each seen Up before and after under one
/// discriminator; a successor's "adopted 64 sessions" per handover in
/// the engine's log; the gate against `baselines/NAME.toml` passed.
/// The run's directory and manifest (None: `judged_run` gave up).
fn hitless_run(
    name: &str,
    results: &Path,
    tag: &str,
    handovers: usize,
) -> Option<(PathBuf, serde_json::Value)> {
    let profiles = repo().join("stress-profiles");
    let profiles = ["--profiles", profiles.to_str().unwrap()];
    let scenario = repo().join(format!("scenarios/{name}.toml"));
    let (out, dir) = judged_run(&scenario, name, results, tag, &profiles)?;
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap()
    );
    assert_exit(&out, 0, name);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let phases = fault_phases(&manifest, "xdp");
    assert_eq!(phases.len(), handovers, "{name}: its handover phases");
    for f in &phases {
        assert_eq!(f["sessions_judged"], 64, "{f:#}");
        assert!(f["our_discr_before"].is_u64(), "{f:#}");
        assert_eq!(f["our_discr_before"], f["our_discr_after"], "{f:#}");
    }
    let log = std::fs::read_to_string(dir.join("xdp/linecardd.log")).unwrap();
    assert_eq!(
        log.matches("adopted 64 sessions").count(),
        handovers,
        "{name}: a successor adopted every session at each handover:\n{log}"
    );
    let (gated, _) = gate(&dir, name);
    assert_exit(&gated, 0, &format!("the gate on {name}"));
    Some((dir, manifest))
}

#[test]
fn the_handover_scenario_keeps_every_session_and_its_control_fails() {
    if !privileged("the_handover_scenario") {
        return;
    }
    let _lock = lock_lab();
    // Short: the daemons' unix sockets live under it (`sun_path`).
    let results = scratch_dir("rh");
    if hitless_run("handover", &results, "h", 2).is_none() {
        return;
    }
    let profiles = repo().join("stress-profiles");
    let profiles = ["--profiles", profiles.to_str().unwrap()];
    let scenario = repo().join("scenarios/handover.toml");

    // The negative control, idle only: the successor adopts nothing.
    let text = std::fs::read_to_string(&scenario).unwrap();
    let l4 = text.find("[[phase]]\nprofile = \"L4\"").unwrap();
    let dut_at = text.find("[[dut]]").unwrap();
    let control = format!("{}{}", &text[..l4], &text[dut_at..]).replace(
        "backend = \"xdp\"\n",
        "backend = \"xdp\"\nengine = { handover_adopt = false }\n",
    );
    assert!(control.contains("handover_adopt = false") && !control.contains("\"L4\""));
    let control_path = results.join("control.toml");
    std::fs::write(&control_path, control).unwrap();
    let Some((out, control_dir)) = judged_run(&control_path, "handover", &results, "c", &profiles)
    else {
        return;
    };
    let status = std::fs::read_to_string(control_dir.join("status")).unwrap();
    assert_exit(&out, 1, "the handover scenario with handover_adopt = false");
    // The handover phase failed, on whichever rule broke first (the
    // successor's AdminDown, or a gap of ours while it started afresh).
    assert!(
        status.contains("phase idle#1: engine handed over to a new process"),
        "{status}"
    );
    let (gated, diff) = gate(&control_dir, "handover");
    assert_exit(&gated, 1, "the gate with handover_adopt = false");
    assert!(
        diff.lines().any(|l| l.contains("REGRESSED")
            && l.split_whitespace().nth(2) == Some("idle#1")
            && l.split_whitespace().nth(3) == Some("fault_failures")
            && !l.contains("missing")),
        "the gate did not measure idle#1's fault_failures over its limit: {diff}"
    );
    let _ = std::fs::remove_dir_all(&results);
}

/// Where `scripts/test.sh` puts the second build, checked to be one.
fn second_build() -> PathBuf {
    let second = repo().join("target/second/linecardd");
    let version = std::process::Command::new(&second)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}: build it with `cargo build -p linecard-engine --bin linecardd --features second-build` and copy target/debug/linecardd there (scripts/test.sh does)",
                second.display()
            )
        });
    // Precondition: another binary, not a copy of this one.
    assert!(
        String::from_utf8_lossy(&version.stdout).contains("second build"),
        "{}: {version:?}",
        second.display()
    );
    second
}

/// `scenarios/upgrade.toml` end to end: the engine handed over to the
/// second build (`target/second/linecardd`, which `scripts/test.sh`
/// builds with the `second-build` feature) idle, then back to this build
/// under L4, every session judged on each, gated against
/// `baselines/upgrade.toml`.
#[test]
fn the_upgrade_scenario_hands_over_to_the_second_build_and_back() {
    if !privileged("the_upgrade_scenario") {
        return;
    }
    let second = second_build();
    let _lock = lock_lab();
    let results = scratch_dir("ru");
    let Some((_, manifest)) = hitless_run("upgrade", &results, "u", 2) else {
        return;
    };
    // The successors ran the builds asked for: the second, then this one.
    let successors: Vec<PathBuf> = dut(&manifest, "xdp")["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["fault"]["successor"].as_str().map(PathBuf::from))
        .map(|p| std::fs::canonicalize(p).unwrap())
        .collect();
    let this = std::fs::canonicalize(repo().join("target/debug/linecardd")).unwrap();
    assert_eq!(
        successors,
        [std::fs::canonicalize(&second).unwrap(), this],
        "the successors' files"
    );
    let _ = std::fs::remove_dir_all(&results);
}

/// `scenarios/handover-bird.toml` end to end: against BIRD, a handover of
/// the same build, an upgrade to the second build and the rollback under
/// L4, each judged on every session, gated against
/// `baselines/handover-bird.toml`.
#[test]
fn handover_and_upgrade_hold_against_bird() {
    if !privileged("handover_and_upgrade_hold_against_bird") {
        return;
    }
    second_build();
    let _lock = lock_lab();
    let results = scratch_dir("rb");
    let Some((_, manifest)) = hitless_run("handover-bird", &results, "b", 3) else {
        return;
    };
    // Precondition: BIRD was the peer.
    assert!(
        manifest.to_string().contains("\"peer bird\""),
        "BIRD is not among the programs the run started"
    );
    let _ = std::fs::remove_dir_all(&results);
}
