//! Detection to the millisecond, idle and under L4 (`scenarios/detection.toml`):
//! the peer (linecardd on rt) killed without a farewell ten times a phase
//! while the DUT runs the xdp backend. The faults judge holds each Down of
//! ours to a detection time after the peer's last packet on the capture,
//! and the gate holds each phase's median against
//! `baselines/detection.toml` (the sweep on its fixed period, the negative
//! control, fails that median on the faults scenario, `--test runs faults::`).
//! Here: what must have happened for those verdicts to mean anything.

use crate::common::*;

#[test]
fn a_killed_peer_is_detected_on_time_kill_after_kill_idle_and_under_l4() {
    if !privileged("a_killed_peer_is_detected_on_time_kill_after_kill") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("rd");
    let Some((out, dir)) = judged_run(
        &repo().join("scenarios/detection.toml"),
        "detection",
        &results,
        "d",
        &[],
    ) else {
        return;
    };
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap()
    );
    assert_exit(&out, 0, "the detection scenario");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let xdp = dut(&manifest, "xdp");
    let phases = xdp["evidence"]["phases"].as_array().unwrap();
    for phase in phases.iter().filter(|p| p["fault"].is_object()) {
        let fault = &phase["fault"];
        // Every kill made us declare the peer Down for an expired
        // detection time (diag 1, on the wire), and every restart came
        // back under a new discriminator.
        assert_eq!(
            fault["detections_ms"].as_array().unwrap().len(),
            10,
            "{}: {fault:#}",
            phase["phase"]
        );
        assert_ne!(fault["peer_discr_before"], fault["peer_discr_after"]);
    }
    // The stress bit: under L4 the canary on the DUT's CPU was kept from
    // running for longer than a detection time.
    let l4 = phases.iter().find(|p| p["profile"] == "L4").unwrap();
    assert!(
        l4["canary_stall_ms"].as_f64().unwrap() > 30.0,
        "L4 never starved the DUT's CPU for a detection time: {l4:#}"
    );
    let (gated, _) = gate(&dir, "detection");
    assert_exit(&gated, 0, "the gate on the detection scenario");
    let _ = std::fs::remove_dir_all(&results);
}
