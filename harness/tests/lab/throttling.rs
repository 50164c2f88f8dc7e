//! The xdp backend's own clock holds through RT throttling
//! (`scenarios/throttling.toml`): under an L4 hog with half of every second
//! RT-throttled, FRR's bfdd stopped 18 ms sixteen times, the faults judge
//! holds every gap of ours while Up to two intervals, and the gate holds
//! the run against `baselines/throttling.toml`. The negative control, the
//! responder at SCHED_FIFO (`engine.sched_deadline = false`), must fail
//! both: a stall that falls into a throttled window is mirrored back whole.

use crate::common::*;

#[test]
fn the_own_clock_is_not_held_by_rt_throttling() {
    if !privileged("the_own_clock_is_not_held_by_rt_throttling") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("rt");
    let scenario = repo().join("scenarios/throttling.toml");
    let Some((out, dir)) = judged_run(&scenario, "throttling", &results, "d", &[]) else {
        return;
    };
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap()
    );
    assert_exit(&out, 0, "the throttling scenario");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let xdp = dut(&manifest, "xdp");
    // Preconditions: the run held RT tasks for half of every second, and
    // the responder ran at SCHED_DEADLINE (the summary says which).
    assert_eq!(xdp["sched_rt_runtime_us"], 500_000, "{xdp:#}");
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("ran at SCHED_DEADLINE"), "{summary}");
    let (gated, _) = gate(&dir, "throttling");
    assert_exit(&gated, 0, "the gate on the throttling scenario");

    let control = results.join("fifo.toml");
    let text = engine_switched(&scenario, "sched_deadline = false", 1);
    std::fs::write(&control, text).unwrap();
    let profiles = repo().join("stress-profiles");
    let Some((out, control_dir)) = judged_run(
        &control,
        "throttling",
        &results,
        "f",
        &["--profiles", profiles.to_str().unwrap()],
    ) else {
        return;
    };
    assert_exit(&out, 1, "the throttling scenario at SCHED_FIFO");
    let summary = std::fs::read_to_string(control_dir.join("summary.md")).unwrap();
    assert!(summary.contains("ran at SCHED_FIFO"), "{summary}");
    // The regression the control exists to show: the stalls' phase fails
    // on the wire. Which rule a throttled responder breaks first (its own
    // clock held, usually; a Down held past its slack) is not asserted.
    let status = std::fs::read_to_string(control_dir.join("status")).unwrap();
    assert!(status.contains("FAIL: phase L4#0"), "{status}");
    let (gated, diff) = gate(&control_dir, "throttling");
    assert_exit(&gated, 1, "the gate at SCHED_FIFO");
    assert!(
        diff.lines().any(|l| l.contains("REGRESSED")
            && l.split_whitespace().nth(2) == Some("L4#0")
            && l.split_whitespace().nth(3) == Some("fault_failures")),
        "the gate did not name the stalls' phase: {diff}"
    );
    let _ = std::fs::remove_dir_all(&results);
}
