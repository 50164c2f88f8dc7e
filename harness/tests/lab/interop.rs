//! linecardd's userspace backends against real, unmodified peers (FRR bfdd
//! 8.4.4 and BIRD 2.0.12), IPv4 and IPv6, 3 x 10 ms, measured on a capture
//! taken on the observer's bridge port facing the DUT.
//!
//! One run per backend: bring-up, an idle window (10 s by default,
//! `LINECARD_IDLE_SECONDS` to change), a timer change in both directions,
//! then FRR killed without a farewell.

use crate::common::*;
use linecard_capture_analyzer::analysis::{PacketRecord, PacketSink};
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::{analyze, Options, Phase};
use linecard_harness::lab::spec::{self, DUT, PEER, SPARE};
use linecard_harness::procs::{start_bird, start_frr_bfdd};
use std::net::IpAddr;
use std::time::Duration;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[derive(Default)]
struct FirstUp(std::collections::HashMap<usize, (i64, Option<i64>)>);

impl PacketSink for FirstUp {
    fn control(&mut self, r: &PacketRecord) {
        let entry = self.0.entry(r.flow).or_insert((r.ts_ns, None));
        if r.control.state == State::Up && entry.1.is_none() {
            entry.1 = Some(r.ts_ns);
        }
    }
}

/// One run. `Err` means invalid (not failed): the hypervisor stole time from
/// the DUT's CPU in the idle window where a flap happened, or the detection
/// of the killed peer was late while the DUT's CPU was stalled or stolen.
fn interop(backend: &str) -> Result<(), String> {
    if !privileged(&format!("interop_{backend}")) {
        return Ok(());
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    // 10 s: a functional window (Up, no flap); idle timing over minutes is
    // the runs' (scenarios/ci.toml's idle phase, gated).
    let idle: u64 = env_seconds("LINECARD_IDLE_SECONDS", 10);
    let dir =
        std::env::temp_dir().join(format!("linecard-interop-{backend}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let dut_cpu = dut_cpu();

    let session = session_3x10;
    let mut frr = start_frr_bfdd(
        "frr",
        PEER.namespace,
        Some(&rest),
        &dir,
        &[session(PEER.ipv4, DUT.ipv4), session(PEER.ipv6, DUT.ipv6)],
    )
    .unwrap();
    let mut bird = start_bird(
        "bird",
        SPARE.namespace,
        Some(&rest),
        &dir,
        ip(SPARE.ipv4),
        &[session(SPARE.ipv4, DUT.ipv4), session(SPARE.ipv6, DUT.ipv6)],
    )
    .unwrap();
    let capture = capture_dut_port(&dir);

    let socket = dir.join("dut.sock");
    let sessions: Vec<DutSession> = [
        (DUT.ipv4, PEER.ipv4),
        (DUT.ipv6, PEER.ipv6),
        (DUT.ipv4, SPARE.ipv4),
        (DUT.ipv6, SPARE.ipv6),
    ]
    .into_iter()
    .map(|(local, peer)| DutSession {
        peer: peer.to_string(),
        local: local.to_string(),
        backend,
        interface: None,
    })
    .collect();
    let mut dut = start_linecardd(&dir, &socket, &format!("cpu = {dut_cpu}\n"), &sessions);

    // Readiness: every session Up in the DUT's own view; the capture checks
    // the wire below.
    let all_up = |s: &[serde_json::Value]| {
        s.len() == 4
            && s.iter()
                .all(|s| s["state"] == "up" && s["polling"] == false)
    };
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(5),
        "all sessions Up",
        all_up,
    );
    // The witness tells a late packet from a CPU that was not ours to use.
    let witness = CpuWitness::start(&dir, idle + 30);
    let steal_witness = StealWitness::start(&dir, idle + 30);
    let idle_start = epoch_ns();
    std::thread::sleep(Duration::from_secs(idle));
    let idle_end = epoch_ns();

    // Timer change in both directions on the FRR IPv4 session.
    let pair = ["--local", DUT.ipv4, "--peer", PEER.ipv4];
    for ms in ["50", "10"] {
        let mut args = vec!["set"];
        args.extend(pair);
        args.extend(["--tx-ms", ms, "--rx-ms", ms, "--multiplier", "3"]);
        ctl(&socket, &args);
        wait_sessions(
            &socket,
            &mut dut,
            Duration::from_secs(2),
            "the Poll Sequence to end",
            all_up,
        );
    }
    let change_end = epoch_ns();

    // FRR dies without a farewell; BIRD's sessions are the control group.
    frr.kill().unwrap();
    let frr_down = |s: &[serde_json::Value]| {
        s.iter()
            .filter(|s| s["peer"] == PEER.ipv4 || s["peer"] == PEER.ipv6)
            .all(|s| s["state"] == "down")
    };
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(2),
        "the FRR sessions to go Down",
        frr_down,
    );
    // Everything up to here is the experiment; stopping the DUT sends
    // AdminDown, which takes the peers down deliberately.
    std::thread::sleep(Duration::from_millis(100));
    let experiment_end = epoch_ns();
    let steal = steal_witness.finish();
    let stalls = witness.finish();
    let status = dut.stop().unwrap();
    assert!(
        status.success(),
        "linecardd exited with {status}:\n{}",
        dut.log_tail()
    );
    bird.stop().unwrap();
    let pcap = capture.finish().unwrap();

    let phases = vec![
        Phase {
            name: "idle".into(),
            start_ns: idle_start,
            end_ns: idle_end,
        },
        Phase {
            name: "change".into(),
            start_ns: idle_end,
            end_ns: change_end,
        },
        Phase {
            name: "experiment".into(),
            start_ns: 0,
            end_ns: experiment_end,
        },
    ];
    let mut first_up = FirstUp::default();
    let a = analyze(
        std::slice::from_ref(&pcap),
        &Options {
            phases,
            timeline: false,
        },
        Some(&mut first_up),
    )
    .unwrap();
    let flows = &a.all.flows;
    // Precondition: both directions of all four sessions are on the capture.
    assert_eq!(
        flows.len(),
        8,
        "flows on the capture: {:?}",
        flows.iter().map(|f| (&f.src, &f.dst)).collect::<Vec<_>>()
    );
    let dut_addrs = [DUT.ipv4, DUT.ipv6];
    let from_dut =
        |f: &&linecard_capture_analyzer::model::FlowResult| dut_addrs.contains(&f.src.as_str());
    for (i, f) in flows.iter().enumerate().filter(|(_, f)| from_dut(f)) {
        // RFC 5881: our source ports come from our range, not FRR's 49152+.
        assert!(
            f.src_port >= 60000,
            "{}:{} uses a source port FRR could allocate",
            f.src,
            f.src_port
        );
        let (first, up) = first_up.0[&i];
        let up = up.unwrap_or_else(|| panic!("{} -> {} never sent Up", f.src, f.dst));
        assert!(
            up - first <= 2_000_000_000,
            "{} -> {} took {} ms to come Up",
            f.src,
            f.dst,
            (up - first) / 1_000_000
        );
    }
    let idle = &a.phases[0].result;
    assert!(
        idle.flows.len() == 8
            && idle
                .flows
                .iter()
                .all(|f| f.packets > idle_packets_floor(idle_end - idle_start))
    );
    let late =
        |f: &linecard_capture_analyzer::model::FlowResult| f.flaps > 0 || f.gap_ms.max >= 30.0;
    // Excused only by a disturbance inside each gap that went too long.
    if idle.flows.iter().any(late) {
        let gaps: Vec<(i64, i64)> = idle.flows.iter().flat_map(|f| gaps_over(f, 30.0)).collect();
        if let Some(why) = disturbed_inside(&gaps, &steal, &stalls) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("invalid run: a flap or a 30 ms gap after {why}"));
        }
    }
    for f in &idle.flows {
        assert_eq!(
            f.flaps, 0,
            "{} -> {} flapped while idle: {:?}",
            f.src, f.dst, f.flap_events
        );
        assert_eq!(
            f.over_budget, 0,
            "{} -> {} exceeded the detect budget while idle",
            f.src, f.dst
        );
    }
    for f in idle.flows.iter().filter(|f| from_dut(f)) {
        // 10 ms with RFC 5880 6.8.7 jitter (75-100 %), plus the naive loop's
        // 2 ms tick at most.
        assert!(
            (7.5..=11.0).contains(&f.gap_ms.p50),
            "{} -> {} p50 {} ms",
            f.src,
            f.dst,
            f.gap_ms.p50
        );
        assert!(
            f.gap_ms.max < 30.0,
            "{} -> {} max {} ms",
            f.src,
            f.dst,
            f.gap_ms.max
        );
        eprintln!(
            "{backend} {} -> {}: p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} ms over {} packets",
            f.src, f.dst, f.gap_ms.p50, f.gap_ms.p99, f.gap_ms.p999, f.gap_ms.max, f.packets
        );
    }
    // The timer change ran Poll/Final both times with no Down.
    let change = &a.phases[1].result;
    let ours = change
        .flows
        .iter()
        .find(|f| f.src == DUT.ipv4 && f.dst == PEER.ipv4)
        .unwrap_or_else(|| {
            panic!(
                "no DUT -> FRR IPv4 packets in the change window ({} flows, {} ms)",
                change.flows.len(),
                (change_end - idle_end) / 1_000_000
            )
        });
    let theirs = change
        .flows
        .iter()
        .find(|f| f.src == PEER.ipv4 && f.dst == DUT.ipv4)
        .unwrap();
    assert!(
        ours.polls >= 2,
        "expected two Poll Sequences, saw {}",
        ours.polls
    );
    assert!(
        theirs.poll_final_ms.count >= 2,
        "FRR answered {} Polls with Final",
        theirs.poll_final_ms.count
    );
    assert!(
        change.flows.iter().all(|f| f.flaps == 0),
        "a timer change caused a flap"
    );
    // FRR killed: the DUT says Down (diag 1) within the detection time + 2 ms.
    for peer in [PEER.ipv4, PEER.ipv6] {
        let f = flows.iter().find(|f| from_dut(f) && f.dst == peer).unwrap();
        assert_eq!(f.flaps, 1, "towards {peer}: {:?}", f.flap_events);
        let event = &f.flap_events[0];
        assert_eq!(event.diag, 1, "towards {peer}: {:?}", f.flap_events);
        let latency = event.detection_latency_ms.unwrap();
        let window_start = event.at_ns - (latency * 1e6) as i64;
        if latency > 32.0 {
            if let Some(why) = disturbed_inside(&[(window_start, event.at_ns)], &steal, &stalls) {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "invalid run: {peer} detected {latency:.2} ms after its last packet, after {why}"
                ));
            }
        }
        assert!(
            latency <= 32.0,
            "{peer}: detected {latency} ms after its last packet"
        );
        eprintln!("{backend}: {peer} killed, detected on the wire after {latency:.2} ms");
    }
    // Control group: BIRD's sessions never left Up during the experiment.
    let experiment = &a.phases[2].result;
    let bird_flows: Vec<_> = experiment
        .flows
        .iter()
        .filter(|f| {
            [SPARE.ipv4, SPARE.ipv6].contains(&f.src.as_str())
                || [SPARE.ipv4, SPARE.ipv6].contains(&f.dst.as_str())
        })
        .collect();
    assert_eq!(bird_flows.len(), 4);
    for f in bird_flows {
        assert_eq!(
            f.flaps, 0,
            "{} -> {} flapped: {:?}",
            f.src, f.dst, f.flap_events
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// At least half the packets a 10 ms sender sends in `ns`.
fn idle_packets_floor(ns: i64) -> u64 {
    (ns / 20_000_000) as u64
}

#[test]
fn naive_backend_against_frr_and_bird() {
    retrying_invalid("naive", || interop("naive"));
}

#[test]
fn rt_backend_against_frr_and_bird() {
    retrying_invalid("rt", || interop("rt"));
}
