//! FRR bfdd drives linecardd over its dataplane protocol (issue 9): an
//! unmodified bfdd 8.4.4 in the DUT's namespace (`--dplaneaddr`, server
//! mode) hands its session to linecardd, which runs it on the xdp backend
//! against an FRR bfdd peer. Everything asserted about the session is seen
//! on the observer's capture or in FRR's own words; the engine's counters
//! are only compared with them.

use crate::common::*;
use linecard_capture_analyzer::model::FlowResult;
use linecard_capture_analyzer::{analyze, Options, Phase};
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::{start_frr_bfdd, start_frr_bfdd_program, vtysh};
use linecard_harness::scenario::programs::Programs;
use std::path::Path;
use std::time::{Duration, Instant};

/// bfdd's dataplane listener, on loopback inside the DUT's namespace.
const DPLANE: &str = "127.0.0.1:50744";
/// Our source ports (RFC 5881 section 4) start here; bfdd's own software
/// sessions take 49152 upward.
const OUR_PORTS: u16 = 60_000;

/// `show bfd peers json` (or another show command) of the DUT-side bfdd.
fn frr_json(vty: &Path, command: &str) -> serde_json::Value {
    let out = vtysh(DUT.namespace, vty, &[command]).unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// Configures the DUT-side bfdd's peer (vtysh, as an operator would).
fn configure_peer(vty: &Path, lines: &[&str]) {
    let peer = format!("peer {} local-address {}", PEER.ipv4, DUT.ipv4);
    let mut commands = vec!["configure terminal", "bfd", peer.as_str()];
    commands.extend_from_slice(lines);
    let out = vtysh(DUT.namespace, vty, &commands).unwrap();
    assert!(
        out.status.success(),
        "vtysh {commands:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits (bounded) until `check` holds on bfdd's single peer.
fn wait_frr(
    vty: &Path,
    what: &str,
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let peers = frr_json(vty, "show bfd peers json");
        if let Some(peer) = peers.as_array().and_then(|a| a.first()) {
            if check(peer) {
                return peer.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "bfdd: {what} not reached: {peers:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The DUT's control plane: bfdd with the DUT -> peer session, handing it
/// to whichever dataplane connects.
fn start_control_plane(dir: &Path) -> linecard_harness::procs::Daemon {
    start_frr_bfdd_program(
        &Programs::default().bfdd(),
        "control",
        DUT.namespace,
        Some(&spec::cpuset_dir(spec::REST_CPUSET)),
        dir,
        &[session_3x10(DUT.ipv4, PEER.ipv4)],
        &["--dplaneaddr".into(), format!("ipv4:{DPLANE}")],
    )
    .unwrap()
}

/// The DUT -> peer direction sent from linecardd's ports.
/// What the fast path transmitted so far: its replies (REPLIED, every
/// CPU) and its own clock's packets.
fn fast_path_sent(socket: &std::path::Path) -> u64 {
    let drops = ctl(socket, &["drops"]);
    fast_path_verdicts(&drops, linecard_common::bfd::verdict::REPLIED)
        + drops["fast_path"]["own_clock_sent"].as_u64().unwrap()
}

fn ours_on(flows: &[FlowResult]) -> &FlowResult {
    flows
        .iter()
        .find(|f| f.src == DUT.ipv4 && f.dst == PEER.ipv4 && f.src_port >= OUR_PORTS)
        .unwrap_or_else(|| panic!("no DUT -> peer packets from linecardd's ports"))
}

#[test]
fn frr_bfdd_drives_the_xdp_engine_over_its_dataplane_protocol() {
    if !privileged("frr_bfdd_drives_the_xdp_engine_over_its_dataplane_protocol") {
        return;
    }
    retrying_invalid("frr-dataplane", drive_once);
}

/// One run; `Err` means invalid, not failed.
fn drive_once() -> Result<(), String> {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("frr-dataplane");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let dut_cpu = dut_cpu();
    let mut peer = start_frr_bfdd(
        "peer",
        PEER.namespace,
        Some(&rest),
        &dir,
        &[session_3x10(PEER.ipv4, DUT.ipv4)],
    )
    .unwrap();
    // FRR daemons started in the same second draw the same discriminators
    // (docs/frr-dataplane.md); a my/your mix-up must not hide.
    std::thread::sleep(Duration::from_millis(1100));
    let mut control = start_control_plane(&dir);
    let vty = dir.join("control");
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let mut dut = start_linecardd(
        &dir,
        &socket,
        &format!("cpu = {dut_cpu}\nfrr_dataplane = \"{DPLANE}\"\n"),
        &[],
    );

    // Readiness: the engine runs bfdd's session, Up; bfdd says Up too.
    let ours = wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "bfdd's session Up",
        |s| s.len() == 1 && s[0]["state"] == "up" && s[0]["polling"] == false,
    )[0]
    .clone();
    let frr = wait_frr(&vty, "status up", |p| p["status"] == "up");
    let witness = CpuWitness::start(&dir, 60);
    let steal_witness = StealWitness::start(&dir, 60);
    let up_ns = epoch_ns();
    assert_eq!(ours["backend"], "xdp", "{ours:#}");
    assert_eq!(
        frr["id"], ours["local_discr"],
        "bfdd's discriminator is the one on the wire"
    );
    assert_eq!(frr["remote-id"], ours["remote"]["discr"], "{frr:#}");
    assert_ne!(frr["id"], frr["remote-id"]);
    assert_eq!(frr["remote-transmit-interval"], 10, "{frr:#}");
    assert_eq!(frr["remote-detect-multiplier"], 3, "{frr:#}");

    let steady_s = env_seconds("LINECARD_IDLE_SECONDS", 10);
    let sent_before = fast_path_sent(&socket);
    std::thread::sleep(Duration::from_secs(steady_s));
    let steady_end = epoch_ns();
    let sent_in_steady = fast_path_sent(&socket) - sent_before;

    // A timer change in FRR's configuration reaches the wire as a Poll
    // Sequence on the same session (DP_ADD_SESSION is an update).
    for ms in ["50", "10"] {
        let tx = format!("transmit-interval {ms}");
        let rx = format!("receive-interval {ms}");
        configure_peer(&vty, &[&tx, &rx]);
        let us = ms.parse::<u64>().unwrap() * 1000;
        wait_sessions(
            &socket,
            &mut dut,
            Duration::from_secs(3),
            "the new timers",
            |s| {
                s.len() == 1
                    && s[0]["desired_min_tx_us"] == us
                    && s[0]["polling"] == false
                    && s[0]["local_discr"] == ours["local_discr"]
            },
        );
    }
    let change_end = epoch_ns();

    // Counters sweeps: bfdd busy-waits on each reply; repeated sweeps must
    // keep the connection (bfdd 8.4.4's input buffer bug).
    let mut last_input = 0;
    for sweep in 0..8 {
        let counters = frr_json(&vty, "show bfd peers counters json");
        let input = counters[0]["control-packet-input"]
            .as_u64()
            .unwrap_or_else(|| panic!("sweep {sweep}: no counters: {counters:#}"));
        assert!(
            input > last_input,
            "sweep {sweep}: input {input} after {last_input}"
        );
        last_input = input;
        std::thread::sleep(Duration::from_millis(300));
    }
    let engine = ctl(&socket, &["list", "--json"])["sessions"][0].clone();
    assert_eq!(
        engine["state"], "up",
        "the counters sweeps cost the session"
    );

    // `shutdown` in FRR is AdminDown on the wire (RFC 5880 6.8.16); `no
    // shutdown` brings the same session back Up.
    let admin_start = epoch_ns();
    configure_peer(&vty, &["shutdown"]);
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(3),
        "AdminDown",
        |s| s.len() == 1 && s[0]["state"] == "admin_down",
    );
    wait_frr(&vty, "status shutdown", |p| p["status"] == "shutdown");
    configure_peer(&vty, &["no shutdown"]);
    wait_sessions(&socket, &mut dut, Duration::from_secs(5), "Up again", |s| {
        s.len() == 1
            && s[0]["state"] == "up"
            && s[0]["polling"] == false
            && s[0]["local_discr"] == ours["local_discr"]
    });
    wait_frr(&vty, "status up again", |p| p["status"] == "up");
    let admin_end = epoch_ns();

    // `no peer` deletes the session from the engine, AdminDown on the wire.
    let out = vtysh(
        DUT.namespace,
        &vty,
        &[
            "configure terminal",
            "bfd",
            &format!("no peer {} local-address {}", PEER.ipv4, DUT.ipv4),
        ],
    )
    .unwrap();
    assert!(out.status.success());
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(3),
        "the session deleted",
        |s| s.is_empty(),
    );
    std::thread::sleep(Duration::from_millis(100));
    let end_ns = epoch_ns();
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert!(
        !log.contains("connection lost"),
        "the dataplane connection dropped:\n{log}"
    );
    let steal = steal_witness.finish();
    let stalls = witness.finish();
    let status = dut.stop().unwrap();
    assert!(status.success(), "linecardd exited with {status}");
    control.stop().unwrap();
    peer.stop().unwrap();
    let pcap = capture.finish().unwrap();

    let window = |name: &str, start_ns, end_ns| Phase {
        name: name.into(),
        start_ns,
        end_ns,
    };
    let a = analyze(
        std::slice::from_ref(&pcap),
        &Options {
            phases: vec![
                window("steady", up_ns, steady_end),
                window("change", steady_end, change_end),
                window("admin", admin_start, admin_end),
                window("all", 0, end_ns),
            ],
            timeline: false,
        },
        None,
    )
    .unwrap();
    let from_dut = |f: &&FlowResult| f.src == DUT.ipv4 && f.dst == PEER.ipv4;
    // bfdd's own software session (ports from 49152, before we connected)
    // must be silent once the engine runs the session.
    for f in a
        .all
        .flows
        .iter()
        .filter(from_dut)
        .filter(|f| f.src_port < OUR_PORTS)
    {
        assert!(
            f.last_ts_ns < up_ns,
            "bfdd transmitted from port {} after handing the session over",
            f.src_port
        );
    }
    let steady = ours_on(&a.phases[0].result.flows);
    let change = ours_on(&a.phases[1].result.flows);
    // A flap is excused only by a disturbance inside the gap that made it.
    if steady.flaps + change.flaps > 0 {
        let gaps = [gaps_over(steady, 30.0), gaps_over(change, 30.0)].concat();
        if let Some(why) = disturbed_inside(&gaps, &steal, &stalls) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("invalid run: a flap after {why}"));
        }
    }
    assert_eq!(steady.flaps, 0, "{:?}", steady.flap_events);
    assert!(
        steady.packets as i64 > (steady_end - up_ns) / 20_000_000,
        "{} packets in {} ms",
        steady.packets,
        (steady_end - up_ns) / 1_000_000
    );
    // The fast path sent them: its replies (the RX-clocked signature on
    // the wire: most answer the peer within 2 ms) and its own clock where
    // a peer's packet came too soon after ours to be answered (RFC 5880
    // 6.8.7: 131 of 1121 here once).
    assert!(
        steady.reply_latency_ms.count * 4 >= steady.packets * 3,
        "only {} of {} packets answered the peer within 2 ms",
        steady.reply_latency_ms.count,
        steady.packets
    );
    assert!(
        sent_in_steady * 100 >= steady.packets * 95,
        "the fast path sent {sent_in_steady} of the {} packets on the capture",
        steady.packets
    );
    assert_eq!(change.flaps, 0, "{:?}", change.flap_events);
    assert!(change.polls >= 2, "{} Poll Sequences", change.polls);
    let admin = ours_on(&a.phases[2].result.flows);
    assert!(
        admin.flap_events.iter().any(|e| {
            e.to_state == linecard_capture_analyzer::decode::State::AdminDown && e.diag == 7
        }),
        "no AdminDown (diag 7) on the wire after `shutdown`: {:?}",
        admin.flap_events
    );
    assert_eq!(
        admin.last_state,
        Some(linecard_capture_analyzer::decode::State::Up)
    );
    let all = ours_on(&a.all.flows);
    assert_eq!(
        all.last_state,
        Some(linecard_capture_analyzer::decode::State::AdminDown),
        "the deleted session said goodbye"
    );
    eprintln!(
        "frr-dataplane: steady p50 {:.2} p99 {:.2} max {:.2} ms over {} packets; {} Polls; counters input {last_input}",
        steady.gap_ms.p50, steady.gap_ms.p99, steady.gap_ms.max, steady.packets, change.polls
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Hold mode: bfdd restarts twice; the wire must show nothing.
#[test]
fn hold_mode_keeps_the_session_across_two_bfdd_restarts() {
    if !privileged("hold_mode_keeps_the_session_across_two_bfdd_restarts") {
        return;
    }
    retrying_invalid("hold", hold_once);
}

/// One run; `Err` means invalid, not failed.
fn hold_once() -> Result<(), String> {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("frr-hold");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let mut peer = start_frr_bfdd(
        "peer",
        PEER.namespace,
        Some(&rest),
        &dir,
        &[session_3x10(PEER.ipv4, DUT.ipv4)],
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let mut control = start_control_plane(&dir);
    let vty = dir.join("control");
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let mut dut = start_linecardd(
        &dir,
        &socket,
        &format!(
            "cpu = {}\nfrr_dataplane = \"{DPLANE}\"\nfrr_hold_seconds = 10\n",
            dut_cpu()
        ),
        &[],
    );
    let steady =
        |s: &[serde_json::Value]| s.len() == 1 && s[0]["state"] == "up" && s[0]["polling"] == false;
    let ours = wait_sessions(&socket, &mut dut, Duration::from_secs(10), "Up", steady)[0].clone();
    wait_frr(&vty, "status up", |p| p["status"] == "up");
    let witness = CpuWitness::start(&dir, 60);
    let steal_witness = StealWitness::start(&dir, 60);
    let held_from = epoch_ns();
    for restart in 1..=2 {
        control.stop().unwrap();
        // bfdd draws its discriminators from the second it starts in.
        std::thread::sleep(Duration::from_millis(1100));
        control = start_control_plane(&dir);
        let frr = wait_frr(&vty, "status up after the restart", |p| p["status"] == "up");
        let now = wait_sessions(&socket, &mut dut, Duration::from_secs(5), "Up", steady)[0].clone();
        assert_eq!(
            now["local_discr"], ours["local_discr"],
            "restart {restart}: the session on the wire was recreated"
        );
        assert_eq!(
            frr["remote-id"], ours["remote"]["discr"],
            "restart {restart}: {frr:#}"
        );
    }
    // Past the adoption grace period: nothing was swept.
    std::thread::sleep(Duration::from_secs(4));
    let held_to = epoch_ns();
    let steal = steal_witness.finish();
    let stalls = witness.finish();
    let list = ctl(&socket, &["list", "--json"]);
    assert_eq!(
        list["sessions"].as_array().map_or(0, Vec::len),
        1,
        "{list:#}"
    );
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert_eq!(log.matches("session kept").count(), 2, "{log}");
    dut.stop().unwrap();
    control.stop().unwrap();
    peer.stop().unwrap();
    let pcap = capture.finish().unwrap();
    let a = analyze(
        std::slice::from_ref(&pcap),
        &Options {
            phases: vec![Phase {
                name: "restarts".into(),
                start_ns: held_from,
                end_ns: held_to,
            }],
            timeline: false,
        },
        None,
    )
    .unwrap();
    let flows = &a.phases[0].result.flows;
    for f in flows {
        eprintln!(
            "{}:{} -> {}:{}: {} packets, {} flaps, {} polls, max gap {:.2} ms",
            f.src, f.src_port, f.dst, f.dst_port, f.packets, f.flaps, f.polls, f.gap_ms.max
        );
    }
    let ours = ours_on(flows);
    let late = flows.iter().any(|f| f.flaps > 0 || f.gap_ms.max >= 30.0);
    if late {
        let gaps: Vec<(i64, i64)> = flows.iter().flat_map(|f| gaps_over(f, 30.0)).collect();
        if let Some(why) = disturbed_inside(&gaps, &steal, &stalls) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("invalid run: a flap or a 30 ms gap after {why}"));
        }
    }
    assert_eq!(ours.flaps, 0, "{:?}", ours.flap_events);
    assert_eq!(ours.polls, 0, "a Poll storm on the wire");
    assert!(ours.gap_ms.max < 30.0, "max gap {} ms", ours.gap_ms.max);
    for f in flows {
        assert_eq!(
            f.flaps, 0,
            "{}:{} -> {}: {:?}",
            f.src, f.src_port, f.dst, f.flap_events
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A peer configured in FRR without a local address (bfdd sends none: we
/// choose the source by route), over IPv6 (served from userspace on the
/// xdp engine), added through vtysh after linecardd attached.
#[test]
fn bfdd_without_a_local_address_over_ipv6() {
    if !privileged("bfdd_without_a_local_address_over_ipv6") {
        return;
    }
    retrying_invalid("ipv6", ipv6_once);
}

fn ipv6_once() -> Result<(), String> {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("frr-ipv6");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let mut peer = start_frr_bfdd(
        "peer",
        PEER.namespace,
        Some(&rest),
        &dir,
        &[session_3x10(PEER.ipv6, DUT.ipv6)],
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let mut control = start_frr_bfdd_program(
        &Programs::default().bfdd(),
        "control",
        DUT.namespace,
        Some(&rest),
        &dir,
        &[],
        &["--dplaneaddr".into(), format!("ipv4:{DPLANE}")],
    )
    .unwrap();
    let vty = dir.join("control");
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let mut dut = start_linecardd(
        &dir,
        &socket,
        &format!("cpu = {}\nfrr_dataplane = \"{DPLANE}\"\n", dut_cpu()),
        &[],
    );
    // bfdd lists the dataplane once linecardd is attached.
    linecard_harness::run::daemons::wait_dataplane_attached(&vty).unwrap();
    let peer_line = format!("peer {}", PEER.ipv6);
    let out = vtysh(
        DUT.namespace,
        &vty,
        &[
            "configure terminal",
            "bfd",
            &peer_line,
            "receive-interval 10",
            "transmit-interval 10",
        ],
    )
    .unwrap();
    assert!(out.status.success());
    let ours = wait_sessions(&socket, &mut dut, Duration::from_secs(10), "Up", |s| {
        s.len() == 1 && s[0]["state"] == "up" && s[0]["polling"] == false
    })[0]
        .clone();
    assert_eq!(
        ours["local"], DUT.ipv6,
        "the source chosen by route: {ours:#}"
    );
    let frr = wait_frr(&vty, "status up", |p| p["status"] == "up");
    assert_eq!(frr["id"], ours["local_discr"]);
    let witness = CpuWitness::start(&dir, 30);
    let steal_witness = StealWitness::start(&dir, 30);
    let up_ns = epoch_ns();
    std::thread::sleep(Duration::from_secs(3));
    let end_ns = epoch_ns();
    let steal = steal_witness.finish();
    let stalls = witness.finish();
    dut.stop().unwrap();
    control.stop().unwrap();
    peer.stop().unwrap();
    let pcap = capture.finish().unwrap();
    let a = analyze(
        std::slice::from_ref(&pcap),
        &Options {
            phases: vec![Phase {
                name: "up".into(),
                start_ns: up_ns,
                end_ns,
            }],
            timeline: false,
        },
        None,
    )
    .unwrap();
    let flow = a.phases[0]
        .result
        .flows
        .iter()
        .find(|f| f.src == DUT.ipv6 && f.dst == PEER.ipv6 && f.src_port >= OUR_PORTS)
        .expect("no IPv6 packets from linecardd's ports");
    if flow.flaps > 0 || flow.gap_ms.max >= 30.0 {
        if let Some(why) = disturbed_inside(&gaps_over(flow, 30.0), &steal, &stalls) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(format!("invalid run: {} flaps after {why}", flow.flaps));
        }
    }
    assert_eq!(flow.flaps, 0, "{:?}", flow.flap_events);
    assert!(flow.gap_ms.max < 30.0, "max gap {} ms", flow.gap_ms.max);
    assert!(flow.packets > 100, "{} packets in 3 s", flow.packets);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
