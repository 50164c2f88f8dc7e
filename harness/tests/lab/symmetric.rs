//! Two RX-clocked engines facing each other: linecardd xdp in the DUT and
//! in the peer position. Each answers the other's packets at once, so
//! without care they ping-pong at wire speed or, once both offload after
//! the Poll/Final exchange, both fall silent (measured before the fix: a
//! flap every ~31 ms). The fast path hears but does not answer a packet
//! that follows its own transmission sooner than RFC 5880 6.8.7 allows
//! (75 % of the interval, `common::bfd::reply_floor_ns`), and
//! userspace sends a packet itself when nothing has left for 1.25
//! intervals, saying so in the session's status. Measured on the capture:
//! no meltdown, no silence, no flap.

use crate::common::*;
use linecard_capture_analyzer::{analyze, Options, Phase};
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::Daemon;
use std::time::Duration;

const WINDOW: Duration = Duration::from_secs(8);

#[test]
fn two_rx_clocked_engines_keep_the_session_without_melting_down() {
    if !privileged("two_rx_clocked_engines_keep_the_session_without_melting_down") {
        return;
    }
    retrying_invalid("symmetric", once);
}

fn once() -> Result<(), String> {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    // The peer answers with XDP_TX too: its bridge port needs XDP.
    let _pass = linecard_harness::lab::pass_xdp_tx_from(&PEER).unwrap();
    let dir = scratch_dir("symmetric");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let capture = capture_dut_port(&dir);

    let dut_socket = dir.join("dut.sock");
    let session = |peer: &str, local: &str| DutSession {
        peer: peer.into(),
        local: local.into(),
        backend: "xdp",
        interface: Some("eth0"),
    };
    let mut dut = start_linecardd(&dir, &dut_socket, "", &[session(PEER.ipv4, DUT.ipv4)]);
    let peer_dir = dir.join("peer");
    std::fs::create_dir_all(&peer_dir).unwrap();
    let peer_socket = peer_dir.join("peer.sock");
    std::fs::write(
        peer_dir.join("peer.toml"),
        format!(
            "[engine]\ncontrol_socket = \"{}\"\n\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\ntx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"xdp\"\ninterface = \"eth0\"\n",
            peer_socket.display(),
            DUT.ipv4,
            PEER.ipv4
        ),
    )
    .unwrap();
    let mut peer = Daemon::spawn(
        "linecardd-peer",
        PEER.namespace,
        Some(&rest),
        linecardd().to_str().unwrap(),
        &[
            "--config".into(),
            peer_dir.join("peer.toml").display().to_string(),
        ],
        &peer_dir.join("linecardd.log"),
    )
    .unwrap();
    // Both Up, steady and offloaded: the situation under test. Then at
    // least one side must say that it clocks the session itself.
    let settled = |s: &[serde_json::Value]| {
        s[0]["state"] == "up" && s[0]["polling"] == false && s[0]["offloaded"] == true
    };
    wait_sessions(
        &dut_socket,
        &mut dut,
        Duration::from_secs(5),
        "the DUT's session Up",
        settled,
    );
    wait_sessions(
        &peer_socket,
        &mut peer,
        Duration::from_secs(5),
        "the peer's session Up",
        settled,
    );
    let clocks_itself = |socket: &std::path::Path| {
        try_ctl(socket, &["list", "--json"]).is_some_and(|l| {
            l["sessions"][0]["clock"]
                .as_str()
                .is_some_and(|c| c.contains("RX-clocked too"))
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while !clocks_itself(&dut_socket) && !clocks_itself(&peer_socket) {
        assert!(
            std::time::Instant::now() < deadline,
            "neither side says it clocks the session itself within 3 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let witness = CpuWitness::start(&dir, 30);
    // Both engines are under test: both CPUs matter.
    let cpus: Vec<usize> =
        (0..std::thread::available_parallelism().map_or(2, |n| n.get())).collect();
    let steal_witness = StealWitness::start_on(&dir, 30, &cpus);
    let start = epoch_ns();
    std::thread::sleep(WINDOW);
    let end = epoch_ns();
    let steal = steal_witness.finish();
    let stalls = witness.finish();
    let statuses = [
        ctl(&dut_socket, &["list", "--json"]),
        ctl(&peer_socket, &["list", "--json"]),
    ];
    dut.stop().unwrap();
    peer.stop().unwrap();
    let pcap = capture.finish().unwrap();
    for s in &statuses {
        let s = &s["sessions"][0];
        eprintln!(
            "{} -> {}: clock {}, own clock packets {}, offloaded {}",
            s["local"], s["peer"], s["clock"], s["own_clock_requests"], s["offloaded"]
        );
        assert_eq!(s["offloaded"], true, "both sides keep the fast path: {s:#}");
    }

    let analysis = analyze(
        std::slice::from_ref(&pcap),
        &Options {
            phases: vec![Phase {
                name: "steady".into(),
                start_ns: start,
                end_ns: end,
            }],
            timeline: false,
        },
        None,
    )
    .unwrap();
    let window = &analysis.phases[0].result;
    // Excused only by a disturbance inside each gap that went too long.
    if window
        .flows
        .iter()
        .any(|f| f.flaps > 0 || f.gap_ms.max >= 30.0)
    {
        let gaps: Vec<(i64, i64)> = window
            .flows
            .iter()
            .flat_map(|f| gaps_over(f, 30.0))
            .collect();
        if let Some(why) = disturbed_inside(&gaps, &steal, &stalls) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("invalid run: a flap or a 30 ms gap after {why}"));
        }
    }
    for flow in &window.flows {
        let rate = flow.packets as f64 / WINDOW.as_secs_f64();
        eprintln!(
            "{} -> {}: {} packets ({rate:.0}/s), p50 {:.2} max {:.2} ms, {} flaps",
            flow.src, flow.dst, flow.packets, flow.gap_ms.p50, flow.gap_ms.max, flow.flaps
        );
        // 3 x 10 ms: at most 133 packets/s; a ping-pong is thousands.
        assert!(rate < 150.0, "meltdown: {rate:.0} packets/s");
        // Nobody fell silent: the own clock sends after 11 ms, so at
        // least ~85 packets/s, and never a detection time's silence.
        assert!(
            rate > 80.0 && flow.gap_ms.max < 30.0,
            "silence: {rate:.0} packets/s, max gap {} ms",
            flow.gap_ms.max
        );
        assert_eq!(flow.flaps, 0);
    }
    assert_eq!(window.flows.len(), 2, "both directions on the wire");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
