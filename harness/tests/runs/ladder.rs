//! A ladder (`sessions.steps`) and the receive path's switch
//! (`ksoftirqd_priority`), end to end: each step runs its own session
//! count, every phase proves the DUT CPU's softirq thread ran at the
//! priority asked, the summary gives the ladder's ceiling, and the thread
//! is put back as the kernel ships it after the run and after a crash.
//! How high the ladder climbs is `linecard run scenarios/scale-ladder.toml`'s
//! to say, not this test's.

use crate::common::*;
use std::time::{Duration, Instant};

/// Two steps, one short L4 phase, xdp with ksoftirqd at SCHED_FIFO 60.
const LADDER: &str = r#"
schema_version = 1
name = "lt"
description = "a two-step ladder with ksoftirqd raised"
[peer]
implementation = "linecardd"
[sessions]
steps = [2, 8]
[[phase]]
profile = "L4"
seconds = 5
[[dut]]
label = "xdp"
implementation = "linecardd"
backend = "xdp"
ksoftirqd_priority = 60
max_flaps = 0
max_gap_ms = 20.0
"#;

/// `ksoftirqd/CPU`'s policy and RT priority (`/proc/PID/stat`).
fn softirq_thread(cpu: usize) -> (String, u8) {
    let threads = linecard_harness::softirq_threads::find(&[cpu]).unwrap();
    (threads[0].policy.clone(), threads[0].priority)
}

fn shipped() -> (String, u8) {
    ("SCHED_OTHER".into(), 0)
}

#[test]
fn a_ladder_runs_each_step_with_ksoftirqd_raised_and_puts_it_back() {
    if !privileged("a_ladder_runs_each_step") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let cpu = dut_cpu();
    // The precondition: the kernel's own policy before the run.
    assert_eq!(
        softirq_thread(cpu),
        shipped(),
        "ksoftirqd/{cpu} before the run"
    );
    let results = scratch_dir("ladder");
    let scenario = results.join("lt.toml");
    std::fs::write(&scenario, LADDER).unwrap();
    let profiles = repo().join("stress-profiles");
    let profiles = ["--profiles", profiles.to_str().unwrap()];
    let Some((out, dir)) = judged_run(&scenario, "lt", &results, "a", &profiles) else {
        return;
    };
    assert_exit(&out, 0, &format!("the ladder ({})", dir.display()));
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    for (label, sessions) in [("xdp@2", 2), ("xdp@8", 8)] {
        let d = dut(&manifest, label);
        assert_eq!(d["spec"]["step"]["sessions"], sessions, "{d:#}");
        // The step's own count, on the capture.
        assert_eq!(phase(d, "L4")["sessions"], sessions, "{label}: {d:#}");
        let record = &d["phases"][0];
        // The mechanism in force, read at the phase's end from /proc.
        assert_eq!(
            record["softirq_threads"],
            serde_json::json!([{"cpu": cpu, "pid": record["softirq_threads"][0]["pid"],
                                "policy": "SCHED_FIFO", "priority": 60}]),
            "{label}"
        );
        assert!(
            record["peer_cpu"]["idle_ms"].as_f64().is_some(),
            "{label}: no peer headroom recorded: {record:#}"
        );
    }
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        summary.contains("xdp: held at every step of this run, through 8 sessions."),
        "{summary}"
    );
    assert!(summary.contains("ksoftirqd/"), "{summary}");
    // Put back after the run, its record gone.
    assert_eq!(
        softirq_thread(cpu),
        shipped(),
        "ksoftirqd/{cpu} after the run"
    );
    assert!(!std::path::Path::new(linecard_harness::softirq_threads::SAVED).exists());

    // A crash mid-phase: the run killed outright leaves the thread raised,
    // and lab down puts it back from the record the run saved first.
    let crash = results.join("crash");
    let log = results.join("crash.log");
    let mut run = spawn_run(
        &scenario,
        &crash,
        &[profiles[0], profiles[1], "--only", "xdp@2"],
        std::fs::File::create(&log).unwrap().into(),
    );
    let said = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while softirq_thread(cpu) == shipped() {
        assert!(
            Instant::now() < deadline,
            "the run never raised ksoftirqd/{cpu}"
        );
        assert!(
            run.try_wait().unwrap().is_none(),
            "the run ended before raising it: {}",
            said()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(
        softirq_thread(cpu),
        ("SCHED_FIFO".into(), 60),
        "a crash leaves it raised"
    );
    let down = linecard(&["lab", "down"]);
    assert_exit(&down, 0, "lab down");
    assert!(
        String::from_utf8_lossy(&down.stdout).contains(&format!("ksoftirqd/{cpu}")),
        "lab down did not say what it restored: {}",
        String::from_utf8_lossy(&down.stdout)
    );
    assert_eq!(
        softirq_thread(cpu),
        shipped(),
        "ksoftirqd/{cpu} after lab down"
    );
    let _ = std::fs::remove_dir_all(&results);
}
