//! Demand mode (RFC 5880 6.6, issue 11) on the wire: `scenarios/demand.toml`
//! (both sides ask) and the same with only the DUT asking, against a
//! linecardd peer, idle then L4. Every figure is from the observer's
//! capture: who set D, who fell silent, the Polls and their Finals.

use crate::common::*;

/// One side's Demand figures in one phase of a DUT's run.
fn side<'a>(dut: &'a serde_json::Value, profile: &str, who: &str) -> &'a serde_json::Value {
    phase(dut, profile)["demand"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["side"] == who)
        .unwrap_or_else(|| panic!("{profile}: no {who} packets in {dut:#}"))
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap()
}

/// Phase lengths, s: long enough for a handful of one-a-second Polls, and
/// for L4 to starve the naive control.
const IDLE_S: u64 = 5;
const L4_S: u64 = 10;

#[test]
fn demand_mode_silences_who_was_asked_and_every_poll_is_answered() {
    if !privileged("demand_mode_silences_who_was_asked") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("dm");

    // Both sides ask: neither sends periodically, each polls every second.
    // The shipped scenario's phases halved: what is asserted here is
    // counted per second (the scenario itself runs the full length).
    let shortened = results.join("both-ask");
    std::fs::create_dir_all(&shortened).unwrap();
    let text = std::fs::read_to_string(repo().join("scenarios/demand.toml")).unwrap();
    let text = with_phase_seconds(&text, &[("idle", IDLE_S), ("L4", L4_S)]);
    std::fs::write(shortened.join("demand.toml"), &text).unwrap();
    let Some((out, dir)) = judged_run(
        &shortened.join("demand.toml"),
        "demand",
        &results,
        "b",
        &[
            "--profiles",
            repo().join("stress-profiles").to_str().unwrap(),
        ],
    ) else {
        return;
    };
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    eprintln!("{summary}");
    assert_exit(&out, 0, "the demand scenario");
    assert!(summary.contains("Demand mode on the capture"), "{summary}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let rt = dut(&manifest, "rt, RT throttling off");
    for (profile, seconds) in [("idle", IDLE_S), ("L4", L4_S)] {
        // The stress bit where it had to.
        if profile == "L4" {
            assert!(phase(rt, profile)["canary_stall_ms"].as_f64().unwrap() >= 30.0);
        }
        for (me, other) in [("dut", "peer"), ("peer", "dut")] {
            let (mine, theirs) = (side(rt, profile, me), side(rt, profile, other));
            // Precondition: this is Demand mode, not a quiet capture. Every
            // packet carried D, and there are only Polls and Finals: about
            // two a second where 3 x 10 ms sends a hundred.
            let packets = n(&mine["packets"]);
            assert_eq!(
                n(&mine["demand_packets"]),
                packets,
                "{profile} {me}: {mine}"
            );
            assert!(
                packets <= 3 * seconds && packets >= seconds,
                "{profile} {me}: {mine}"
            );
            // A Poll a second, each answered by the other side's Final.
            let polls = n(&mine["polls"]);
            assert!(polls + 1 >= seconds, "{profile} {me}: {mine}");
            assert_eq!(n(&theirs["finals"]), polls, "{profile}: {me}'s Polls");
            // Its silences were asked for, one verification apart.
            assert!(
                n(&mine["silences"]) + 1 >= packets,
                "{profile} {me}: {mine}"
            );
            let longest = mine["silence_max_ms"].as_f64().unwrap();
            assert!((300.0..1100.0).contains(&longest), "{profile} {me}: {mine}");
        }
        assert_eq!(n(&phase(rt, profile)["flaps"]), 0, "{profile}: {rt:#}");
    }
    // The fast path: the peer's Polls answered with Final from the kernel,
    // under L4 too, by an engine whose loop runs at normal priority (its
    // own verification Polls leave late under L4, and are not judged).
    let xdp = dut(&manifest, "xdp");
    for (profile, seconds) in [("idle", IDLE_S), ("L4", L4_S)] {
        let (ours, peer) = (side(xdp, profile, "dut"), side(xdp, profile, "peer"));
        for s in [ours, peer] {
            assert_eq!(n(&s["demand_packets"]), n(&s["packets"]), "{profile}: {s}");
        }
        assert!(n(&peer["polls"]) + 1 >= seconds, "{profile}: {peer}");
        assert_eq!(
            n(&ours["finals"]),
            n(&peer["polls"]),
            "{profile}: the peer's Polls"
        );
        // From the kernel: at once, also while the DUT's own Poll was in
        // progress and its loop starved (withdrawing the fast path for our
        // own Polls handed the peer's to that loop: a 206 ms Final, a flap).
        let slowest = ours["final_max_ms"].as_f64().unwrap();
        assert!(
            slowest < 5.0,
            "{profile}: a Final after {slowest} ms: {ours}"
        );
        assert_eq!(n(&phase(xdp, profile)["flaps"]), 0, "{profile}: {xdp:#}");
    }
    // The positive control: its Finals were late under L4 and it flapped.
    let naive = dut(&manifest, "naive");
    assert!(passed(naive), "{naive:#}");
    assert!(n(&phase(naive, "L4")["flaps"]) > 0, "{naive:#}");
    let (ours, peer) = (side(naive, "L4", "dut"), side(naive, "L4", "peer"));
    let late = ours["final_max_ms"].as_f64().unwrap();
    assert!(
        late > 30.0 || n(&ours["finals"]) < n(&peer["polls"]),
        "the starved loop answered every Poll within {late} ms: {ours}"
    );

    // Only the DUT asks: the peer falls silent but for its Finals, while
    // the DUT goes on sending every 10 ms and its gaps are measured as ever.
    let scenarios = results.join("dut-asks");
    std::fs::create_dir_all(&scenarios).unwrap();
    // Only its idle phase is asserted.
    let text = text.replace("demand = \"both\"", "demand = \"dut\"");
    assert!(text.contains("demand = \"dut\""));
    let text = with_phase_seconds(&text, &[("idle", IDLE_S), ("L4", 0)]);
    std::fs::write(scenarios.join("demand.toml"), text).unwrap();
    let Some((out, dir)) = judged_run(
        &scenarios.join("demand.toml"),
        "demand",
        &results,
        "d",
        &[
            "--profiles",
            repo().join("stress-profiles").to_str().unwrap(),
            "--only",
            "rt, RT throttling off",
        ],
    ) else {
        return;
    };
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap_or_default()
    );
    assert_exit(&out, 0, "the demand scenario, the DUT asking");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let rt = dut(&manifest, "rt, RT throttling off");
    let (ours, peer) = (side(rt, "idle", "dut"), side(rt, "idle", "peer"));
    assert!(
        n(&ours["packets"]) > 90 * IDLE_S,
        "periodic at 10 ms: {ours}"
    );
    assert_eq!(n(&ours["demand_packets"]), n(&ours["packets"]));
    assert_eq!(n(&ours["silences"]), 0, "nobody asked the DUT to stop");
    assert_eq!(n(&peer["demand_packets"]), 0, "the peer does not ask");
    assert!(
        n(&peer["packets"]) <= 30,
        "the peer sends Finals only: {peer}"
    );
    assert_eq!(n(&peer["finals"]), n(&ours["polls"]));
    // The DUT's own gaps are still its periodic ones (a functional check:
    // their bound is a timing claim, judged by the run itself).
    let idle = phase(rt, "idle");
    assert!(idle["p50_ms"].as_f64().unwrap() > 7.0, "{idle}");
    let _ = std::fs::remove_dir_all(&results);
}
