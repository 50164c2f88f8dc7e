//! `linecard run` on the scenarios of what goes beyond the reference,
//! shortened, end to end on the local lab: IPv6 from the kernel, 1024
//! sessions, the echo function, authentication. Each is run and judged
//! by the product; what is asserted here is what makes it a measurement.

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// The lab's DUT namespace.
const DUT_NS: &str = linecard_harness::lab::spec::DUT.namespace;

/// Runs a committed scenario with its phases shortened to 4 s idle and
/// 6 s L4 (the run must come out complete; the naive control flaps
/// within it); returns the manifest, or
/// `None` when it stayed invalid under the hypervisor's steal
/// ([`inconclusive`]).
fn run_shortened(scenario: &str, results: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(repo().join(format!("scenarios/{scenario}.toml")))
        .unwrap()
        .replace("seconds = 10", "seconds = 4")
        .replace("seconds = 30", "seconds = 6");
    assert!(
        text.contains("seconds = 4") && text.contains("seconds = 6"),
        "{scenario}: the phases moved"
    );
    let file = results.join(format!("{scenario}.toml"));
    std::fs::write(&file, text).unwrap();
    let meter = StealMeter::start();
    let out = linecard(&[
        "run",
        file.to_str().unwrap(),
        "--profiles",
        repo().join("stress-profiles").to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
        "--json",
    ]);
    let dir = run_dir(results, scenario);
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap_or_default()
    );
    if inconclusive_run(scenario, &dir, &meter) {
        return None;
    }
    assert_exit(
        &out,
        0,
        &format!("linecard run {scenario} ({})", dir.display()),
    );
    Some(stdout_json(&out))
}

/// IPv6 on the kernel path (issue 6): the xdp backend answers an IPv6 FRR
/// peer from the kernel, RX-clocked (its p50 is the peer's), 0 flaps under
/// L4 with every fast-path frame on the DUT's CPU, while the naive
/// positive control flaps. FRR's kernel drops a reply whose UDP checksum
/// is wrong, so a session that stays Up proves the checksum.
#[test]
fn an_ipv6_peer_is_answered_from_the_kernel_under_l4() {
    if !privileged("an_ipv6_peer_is_answered_from_the_kernel") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("run-ipv6-xdp");
    let Some(manifest) = run_shortened("ipv6-xdp", &results) else {
        return;
    };
    let (naive, xdp) = (dut(&manifest, "naive"), dut(&manifest, "xdp"));
    assert!(
        phase(naive, "L4")["flaps"].as_u64().unwrap() > 0,
        "naive held under L4: the load did not bite"
    );
    assert!(passed(xdp), "{xdp:#}");
    assert!(phase(xdp, "L4")["canary_stall_ms"].as_f64().unwrap() >= 30.0);
    assert_eq!(phase(xdp, "L4")["flaps"], 0);
    let on_dut = xdp["evidence"]["fast_path_on_dut_cpus"].as_array().unwrap();
    assert!(
        on_dut[1].as_u64().unwrap() > 500 && on_dut[0] == on_dut[1],
        "the fast path did not answer on the DUT's CPU: {on_dut:?}"
    );
    // RX-clocked: the FRR peer's 75-100 % jitter, not our own 10 ms.
    let p50 = phase(xdp, "idle")["p50_ms"].as_f64().unwrap();
    assert!(p50 < 9.5, "p50 {p50} ms: not RX-clocked");
    let _ = std::fs::remove_dir_all(&results);
}

/// Issue 5's scale: 1024 concurrent sessions (3 x 100 ms, a linecardd rt
/// peer: FRR 8.4.4 does not bring 1024 up here), idle then L4, phases
/// shortened from `scenarios/scale-1024.toml`. The xdp backend must hold
/// every session with the fast path proven on the DUT's CPU and a
/// complete capture; the naive backend, in the same conditions, must flap
/// (positive control), and the stress must bite.
#[test]
fn a_thousand_and_twenty_four_sessions_hold_on_the_fast_path_under_l4() {
    if !privileged("a_thousand_and_twenty_four_sessions_hold") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("run-scale-1024");
    let Some(manifest) = run_shortened("scale-1024", &results) else {
        return;
    };
    let (naive, xdp) = (dut(&manifest, "naive"), dut(&manifest, "xdp"));
    for d in [naive, xdp] {
        assert_eq!(d["evidence"]["capture_dropped"], 0, "{d:#}");
        for p in ["idle", "L4"] {
            assert_eq!(phase(d, p)["sessions"], 1024, "{p}: {d:#}");
        }
        // The precondition: the stress starved the DUT's CPU.
        assert!(
            phase(d, "L4")["canary_stall_ms"].as_f64().unwrap() >= 30.0,
            "the stress did not bite: {d:#}"
        );
    }
    // The positive control flapped under the same load, every session.
    assert!(
        phase(naive, "L4")["sessions_flapped"].as_u64().unwrap() > 0,
        "naive held 1024 sessions under L4: the load did not bite"
    );
    assert!(passed(xdp), "{xdp:#}");
    for p in ["idle", "L4"] {
        assert_eq!(phase(xdp, p)["flaps"], 0, "{p}: {xdp:#}");
        assert_eq!(phase(xdp, p)["sessions_flapped"], 0, "{p}: {xdp:#}");
    }
    let on_dut = xdp["evidence"]["fast_path_on_dut_cpus"].as_array().unwrap();
    assert!(
        on_dut[1].as_u64().unwrap() > 50_000 && on_dut[0] == on_dut[1],
        "the fast path did not run on the DUT's CPU: {on_dut:?}"
    );
    let _ = std::fs::remove_dir_all(&results);
}

/// The echo function against FRR bfdd, an IPv4 and an IPv6 session (RFC
/// 5880 6.4): the xdp DUT reflects every one of FRR's IPv4 echoes in the
/// kernel, idle and under L4; rt, which advertises Required Min Echo RX 0,
/// gets none from the same FRR configuration (6.8.9), which the xdp run
/// proves was sending; FRR sends no IPv6 echo (its IPv6 echo is FRR-only);
/// both DUTs' own echoes, IPv4 and IPv6, come back through the peer's
/// forwarding. Under L4 the DUT's originator (a normal-priority thread)
/// stalls for most of a second, visible on the capture as a send gap, and
/// the sessions hold: echo is advisory, never the state machine's input.
#[test]
fn the_echo_scenario_reflects_in_the_kernel_negotiates_and_stays_advisory() {
    if !privileged("the_echo_scenario") {
        return;
    }
    let _lock = lock_lab();
    // The DUT's host does not forward: what turns the peer's echoes around
    // is the fast path, not the kernel's routing.
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let forwarding = Command::new("ip")
        .args(["netns", "exec", DUT_NS, "sysctl", "-n"])
        .args(["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&forwarding.stdout),
        "0\n0\n",
        "the DUT's namespace forwards"
    );
    let results = scratch_dir("ec");
    // Every figure below is a count per phase: idle 6 s and L4 12 s hold
    // FRR's 500-odd echoes per phase as the shipped 10 s and 20 s do.
    let text = std::fs::read_to_string(repo().join("scenarios/echo.toml")).unwrap();
    let scenario = results.join("echo.toml");
    std::fs::write(
        &scenario,
        with_phase_seconds(&text, &[("idle", 6), ("L4", 12)]),
    )
    .unwrap();
    let profiles = repo().join("stress-profiles");
    let Some((out, dir)) = judged_run(
        &scenario,
        "echo",
        &results,
        "e",
        &["--profiles", profiles.to_str().unwrap()],
    ) else {
        return;
    };
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    eprintln!("{summary}");
    assert_exit(&out, 0, "the echo scenario");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let echo = |label: &str, phase: usize, who: &str, family: &str| {
        dut(&manifest, label)["evidence"]["phases"][phase]["echo"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["originator"] == who && e["family"] == family)
            .cloned()
            .unwrap_or(serde_json::json!({"sent": 0, "returned": 0, "lost": 0}))
    };
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
    let (xdp, rt) = ("xdp, reflecting", "rt, RT throttling off, not reflecting");
    for phase in [0, 1] {
        let peer = echo(xdp, phase, "peer", "IPv4");
        assert!(
            n(&peer, "sent") > 500,
            "FRR's echoes to xdp, phase {phase}: {peer}"
        );
        assert_eq!(
            n(&peer, "returned"),
            n(&peer, "sent"),
            "all reflected: {peer}"
        );
        let none = echo(rt, phase, "peer", "IPv4");
        assert_eq!(
            n(&none, "sent"),
            0,
            "FRR sent echoes to rt (RMERx 0): {none}"
        );
        for label in [xdp, rt] {
            let v6 = echo(label, phase, "peer", "IPv6");
            assert_eq!(
                n(&v6, "sent"),
                0,
                "FRR's IPv6 echo is FRR-only: {label}: {v6}"
            );
            for family in ["IPv4", "IPv6"] {
                let own = echo(label, phase, "dut", family);
                assert!(
                    n(&own, "sent") > 0,
                    "{label}'s own {family} echoes, phase {phase}: {own}"
                );
                assert_eq!(n(&own, "lost"), 0, "{label}: {own}");
            }
        }
    }
    // bfdd's echo-mode over the dataplane: linecardd reflects FRR's echoes
    // and originates its own at bfdd's interval.
    let driven = "FRR bfdd driving xdp";
    for phase in [0, 1] {
        let peer = echo(driven, phase, "peer", "IPv4");
        assert!(n(&peer, "sent") > 500, "{driven}, phase {phase}: {peer}");
        // Every one reflected: none lost, and at most the one in flight
        // when the phase's window closed not yet back (fresh-clone CI: 1142
        // of 1143 returned, 0 lost).
        assert_eq!(n(&peer, "lost"), 0, "{peer}");
        assert!(
            n(&peer, "sent").saturating_sub(n(&peer, "returned")) <= 1,
            "{peer}"
        );
        let own = echo(driven, phase, "dut", "IPv4");
        assert!(
            n(&own, "sent") > 0,
            "{driven}'s own echoes, phase {phase}: {own}"
        );
        assert_eq!(n(&own, "lost"), 0, "{own}");
    }
    // Under L4 the originator stalled (its echoes' gaps on the wire), and
    // the sessions did not flap: the stall did not feed the state machine.
    let stalled = echo(xdp, 1, "dut", "IPv4");
    assert!(
        stalled["send_gap_max_ms"].as_f64().unwrap() > 100.0,
        "the originator was not starved under L4: {stalled}"
    );
    let l4 = &dut(&manifest, xdp)["evidence"]["phases"][1];
    assert!(l4["canary_stall_ms"].as_f64().unwrap() > 500.0, "{l4}");
    assert_eq!(l4["flaps"], 0, "{l4}");
    // The engine's own account agrees with the capture: a starved
    // originator judges its returns by the kernel's receive stamps, so it
    // does not take its own lateness for lost echoes.
    let view: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("xdp-reflecting/engine-view.json")).unwrap(),
    )
    .unwrap();
    for s in view["list"]["sessions"].as_array().unwrap() {
        let e = &s["echo"];
        assert!(e["sent"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(e["lost"], 0, "the engine counted echoes lost: {s}");
        assert!(
            e["max_send_gap_us"].as_u64().unwrap() > 100_000,
            "the engine did not see its own stall: {s}"
        );
    }
    assert!(
        summary.contains("| xdp, reflecting | L4 | peer IPv4 |"),
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&results);
}

/// The fast path's echo reflection over IPv6 too, against linecardd's own
/// self-addressed echoes (FRR sends none over IPv6): xdp reflects every
/// one in both families, idle and under L4; rt, which advertises 0, gets
/// none from the same peer.
#[test]
fn the_fast_path_reflects_self_addressed_echoes_in_both_families() {
    if !privileged("the_fast_path_reflects_self_addressed_echoes") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("el");
    let Some((out, dir)) = judged_run(
        &repo().join("scenarios/echo-linecardd.toml"),
        "echo-linecardd",
        &results,
        "l",
        &[],
    ) else {
        return;
    };
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    eprintln!("{summary}");
    assert_exit(&out, 0, "the echo-linecardd scenario");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let peer_echo = |label: &str, phase: usize, family: &str| {
        dut(&manifest, label)["evidence"]["phases"][phase]["echo"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["originator"] == "peer" && e["family"] == family)
            .cloned()
    };
    for phase in [0, 1] {
        for family in ["IPv4", "IPv6"] {
            let e = peer_echo("xdp, reflecting", phase, family)
                .unwrap_or_else(|| panic!("no {family} echoes to xdp in phase {phase}"));
            assert!(e["sent"].as_u64().unwrap() > 200, "{e}");
            assert_eq!(e["returned"], e["sent"], "every one reflected: {e}");
            assert!(
                peer_echo("rt, not reflecting", phase, family).is_none(),
                "the peer sent echoes to rt, which advertises 0"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&results);
}

#[test]
fn the_auth_scenario_authenticates_every_packet_of_both_sides() {
    if !privileged("the_auth_scenario") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("au");
    // Counts per phase and one flapping positive control: idle 4 s and L4
    // 10 s hold them as the shipped 10 s and 20 s do (the control flapped
    // 12 times in 12 s of L4).
    let text = std::fs::read_to_string(repo().join("scenarios/auth.toml")).unwrap();
    let scenario = results.join("auth.toml");
    std::fs::write(
        &scenario,
        with_phase_seconds(&text, &[("idle", 3), ("L4", 6)]),
    )
    .unwrap();
    let profiles = repo().join("stress-profiles");
    let Some((out, dir)) = judged_run(
        &scenario,
        "auth",
        &results,
        "a",
        &["--profiles", profiles.to_str().unwrap()],
    ) else {
        return;
    };
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    eprintln!("{summary}");
    assert_exit(&out, 0, "the auth scenario");
    assert!(
        summary.contains("Authentication on the capture"),
        "{summary}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    for label in [
        "rt, RT throttling off",
        "xdp, signed in the kernel",
        "xdp, signing off (positive control)",
    ] {
        for (phase, profile) in [(0, "idle"), (1, "L4")] {
            let figures = &dut(&manifest, label)["evidence"]["phases"][phase]["auth"];
            for side in ["dut", "peer"] {
                let a = figures
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["side"] == side)
                    .unwrap_or_else(|| panic!("{label} {profile}: no {side} packets"));
                let packets = a["packets"].as_u64().unwrap();
                assert!(packets > 50, "{label} {profile} {side}: {a}");
                assert_eq!(a["authenticated"], packets, "{label} {profile} {side}: {a}");
                assert_eq!(
                    a["types"],
                    serde_json::json!([5]),
                    "{label} {profile} {side}"
                );
                assert_eq!(
                    a["key_ids"],
                    serde_json::json!([1]),
                    "{label} {profile} {side}"
                );
                assert_eq!(
                    (a["sequence_same"].as_u64(), a["sequence_other"].as_u64()),
                    (Some(0), Some(0)),
                    "{label} {profile} {side}: meticulous numbers go up by one: {a}"
                );
            }
        }
    }
    // Signed in the kernel: held under L4, and the kernel sent our
    // packets (RX-clocked replies or its own clock), not the loop.
    let xdp = dut(&manifest, "xdp, signed in the kernel");
    assert!(passed(xdp), "{xdp}");
    for phase in 0..2 {
        assert_eq!(
            xdp["evidence"]["phases"][phase]["flaps"].as_u64(),
            Some(0),
            "{xdp}"
        );
    }
    // The positive control: with signing off, authenticated sessions on
    // xdp run from its normal-priority loop, and L4 starved it.
    let control = dut(&manifest, "xdp, signing off (positive control)");
    assert!(
        control["evidence"]["phases"][1]["flaps"].as_u64().unwrap() > 0,
        "{control}"
    );
    let _ = std::fs::remove_dir_all(&results);
}
