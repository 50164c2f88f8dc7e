//! The injection matrix (`linecard inject`) against the xdp backend with a
//! live session to FRR bfdd 8.4.4: every case counted in the kernel by its
//! reason, exactly as many as were sent, while the session kept being
//! answered and userspace received none; then a flood of wrong
//! discriminators. On the observer's capture: no flap while the matrix and
//! the flood ran, and the DUT sent nothing to the spare host (the attacker
//! got no answer).

use crate::common::*;
use linecard_capture_analyzer::decode::Service;
use linecard_harness::lab::spec::{self, DUT, PEER, SPARE};
use linecard_harness::procs::start_frr_bfdd;
use std::time::Duration;

const COPIES: u64 = 100;
const FLOOD: u64 = 100_000;

#[test]
fn every_crafted_frame_is_dropped_in_the_kernel_by_its_reason_and_a_flood_flaps_nothing() {
    if !privileged("every_crafted_frame_is_dropped_in_the_kernel") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("inject");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let session = session_3x10(PEER.ipv4, DUT.ipv4);
    let _frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &[session]).unwrap();
    let socket = dir.join("dut.sock");
    let mut dut = start_linecardd(
        &dir,
        &socket,
        "",
        &[DutSession {
            peer: PEER.ipv4.to_string(),
            local: DUT.ipv4.to_string(),
            backend: "xdp",
            interface: Some("eth0"),
        }],
    );
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "the session Up and offloaded",
        |s| s[0]["state"] == "up" && s[0]["offloaded"] == true,
    );
    let capture = capture_dut_port(&dir);
    let start = epoch_ns();
    let out = linecard(&[
        "inject",
        "--socket",
        socket.to_str().unwrap(),
        "--copies",
        &COPIES.to_string(),
        "--flood",
        &FLOOD.to_string(),
        "--json",
    ]);
    let end = epoch_ns();
    std::thread::sleep(Duration::from_millis(100));
    let pcap = capture.finish().unwrap();
    dut.stop().unwrap();
    let matrix = stdout_json(&out);
    eprintln!("{matrix:#}");
    assert_exit(&out, 0, "linecard inject");

    let cases = matrix["cases"].as_array().unwrap();
    // One case per kernel drop reason at least: the matrix covers them all.
    let mut reasons: Vec<u64> = cases.iter().filter_map(|c| c["reason"].as_u64()).collect();
    reasons.sort_unstable();
    reasons.dedup();
    // This session has no authentication: the reasons only an
    // authenticated one can produce are the fast path tests'
    // (bpf-objects/tests/fast_path.rs and verification.rs); and the
    // engine's own reasons are never the kernel's.
    let possible = linecard_common::bfd::DROP_REASONS
        - linecard_common::bfd::drop::ONLY_AUTHENTICATED.len() as u32
        - linecard_common::bfd::drop::ONLY_USERSPACE.len() as u32;
    assert_eq!(
        reasons.len() as u32,
        possible,
        "reasons covered: {reasons:?}"
    );
    for case in cases {
        assert_eq!(case["counted"], COPIES, "{case}");
        assert!(case["control_replies"].as_u64().unwrap() > 0, "{case}");
        assert_eq!(case["reached_userspace"], 0, "{case}");
        assert_eq!(case["reflected"], 0, "{case}");
    }
    // The echo port: this session has no echo function, so neither the
    // peer's self-addressed echo nor a stranger's is turned around.
    let echo_cases: Vec<_> = cases.iter().filter(|c| c["reason"].is_null()).collect();
    assert_eq!(echo_cases.len(), 2, "{echo_cases:?}");
    assert!(echo_cases
        .iter()
        .any(|c| c["case"].as_str().unwrap().contains("peer without echo")));
    let flood = &matrix["flood"];
    assert_eq!(flood["sent"], FLOOD, "{flood}");
    assert_eq!(flood["counted"], FLOOD, "{flood}");
    assert_eq!(flood["reached_userspace"], 0, "{flood}");

    let a = analyze_window(pcap, "matrix", start, end);
    let window = &a.phases[0].result;
    // The precondition: the crafted frames are on the capture (they carry
    // the peer's address, bar the spoofed-source case: all flows to us).
    let from_spare = window
        .flows
        .iter()
        .filter(|f| f.dst == DUT.ipv4)
        .map(|f| f.packets)
        .sum::<u64>();
    eprintln!(
        "inject: {from_spare} crafted BFD frames on the capture; the flood at {:.0} frames/s",
        flood["frames_per_second"].as_f64().unwrap()
    );
    assert!(
        from_spare >= FLOOD,
        "only {from_spare} BFD frames to the DUT on the capture"
    );
    for f in &window.flows {
        assert!(
            f.dst != SPARE.ipv4,
            "the DUT answered the spare host: {} -> {} ({} packets)",
            f.src,
            f.dst,
            f.packets
        );
    }
    let live: Vec<_> = window
        .flows
        .iter()
        .filter(|f| {
            f.service == Service::SingleHop
                && ((f.src == DUT.ipv4 && f.dst == PEER.ipv4)
                    || (f.src == PEER.ipv4 && f.dst == DUT.ipv4))
        })
        .collect();
    // (The crafted frames carry the peer's address too; the one aimed at the
    // multihop port is a flow of its own.)
    assert_eq!(live.len(), 2, "both directions of the live session");
    for f in live {
        assert_eq!(
            f.flaps, 0,
            "{} -> {} flapped: {:?}",
            f.src, f.dst, f.flap_events
        );
    }

    // The same session with the echo function on: the peer's own echo is
    // reflected (the control: the echo branch runs), a stranger's still
    // is not (RFC 5880 6.4: reflect only the session's peer).
    let mut dut = start_linecardd_with(
        &dir,
        &socket,
        "",
        &[DutSession {
            peer: PEER.ipv4.to_string(),
            local: DUT.ipv4.to_string(),
            backend: "xdp",
            interface: Some("eth0"),
        }],
        "echo = true\n",
    );
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "the echo session Up and offloaded",
        |s| s[0]["state"] == "up" && s[0]["offloaded"] == true,
    );
    let out = linecard(&[
        "inject",
        "--socket",
        socket.to_str().unwrap(),
        "--copies",
        &COPIES.to_string(),
        "--json",
    ]);
    dut.stop().unwrap();
    let matrix = stdout_json(&out);
    assert_exit(&out, 0, "linecard inject against an echo session");
    let case = |needle: &str| {
        matrix["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["case"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("no {needle} case: {matrix:#}"))
            .clone()
    };
    let control = case("the peer's self-addressed echo");
    assert_eq!(control["reflected"], COPIES, "{control}");
    let stranger = case("stranger");
    assert_eq!(stranger["counted"], COPIES, "{stranger}");
    assert_eq!(stranger["reflected"], 0, "{stranger}");
    let _ = std::fs::remove_dir_all(&dir);
}
