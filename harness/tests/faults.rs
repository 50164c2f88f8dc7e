//! Faults of the engine itself, measured on the observer's capture, with the
//! xdp backend against FRR bfdd 8.4.4 at 3 x 10 ms:
//!
//! - the engine stopped (SIGSTOP) for 2 s. The dead-man policy: the kernel
//!   answers for the engine only while its responder's heartbeat is younger
//!   than `engine.dead_man_ms`, so the peer declares the session Down one
//!   limit plus one detection time after the stop, and it comes back Up
//!   after SIGCONT. The negative control, the guard off (`dead_man_ms =
//!   0`), must keep the session Up on the wire through the same stop: the
//!   attached program alone would hide a dead control plane.
//! - the engine killed (SIGKILL) and started again: the peer detects it
//!   within its detection time of our last packet, and the new engine
//!   comes Up with a new discriminator.
//! - loss of 1 %, 5 % and 30 % of the peer's frames (the lab's `lc_loss` on
//!   the peer's bridge port, seeded and counted): the drop counters match
//!   the rate and the capture, the DUT declares Down exactly when the peer
//!   fell silent on the wire for a detection time (no premature Down, none
//!   missed), and 30 % must flap (the positive control) while 1 % must not.
//!   Window per level: LINECARD_LOSS_SECONDS (default 10).
//! - the link down for 500 ms and up again (the peer's bridge port): each
//!   side declares Down a detection time after the other's last packet,
//!   and both are Up again within 3 s of the link's return.
//! - the peer restarted (FRR bfdd killed, started again): the DUT detects
//!   it, and comes Up with the new discriminator in Your Discriminator.

mod common;

use common::*;
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::model::{Analysis, FlowResult};
use linecard_common::bfd::verdict;
use linecard_harness::lab::loss::{LossCounts, LossyLink};
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::{start_frr_bfdd, Daemon};
use linecard_harness::run::faults::{self, FaultFigures, Row, Rows};
use std::path::Path;
use std::time::Duration;

/// The limit the test runs with: short, so the stop is short.
const DEAD_MAN_MS: f64 = 300.0;
/// The heartbeat beats every quarter of the limit.
const BEAT_MS: f64 = DEAD_MAN_MS / 4.0;
const DETECTION_MS: f64 = 30.0;
const STOP: Duration = Duration::from_secs(2);
/// Each fault's window opens this long before it, so that it holds the
/// DUT's last packet before the fault, which the peer's detection latency
/// is measured from.
const LEAD_NS: i64 = 100_000_000;

fn start_engine(dir: &Path, name: &str, dead_man_ms: u32) -> (Daemon, std::path::PathBuf) {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("dut.sock");
    let session = DutSession {
        peer: PEER.ipv4.to_string(),
        local: DUT.ipv4.to_string(),
        backend: "xdp",
        interface: Some("eth0"),
    };
    let dut = start_linecardd(
        &dir,
        &socket,
        &format!("dead_man_ms = {dead_man_ms}\n"),
        &[session],
    );
    (dut, socket)
}

fn wait_offloaded(socket: &Path, dut: &mut Daemon, what: &str) -> serde_json::Value {
    wait_sessions(socket, dut, Duration::from_secs(10), what, |s| {
        s[0]["state"] == "up" && s[0]["offloaded"] == true
    })[0]
        .clone()
}

fn verdicts(socket: &Path, which: u32) -> u64 {
    ctl(socket, &["drops"])["fast_path"]["verdicts_per_cpu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cpu| cpu[which as usize].as_u64().unwrap())
        .sum()
}

fn signal(daemon: &Daemon, signal: libc::c_int) {
    // SAFETY: a signal to a process this test started, by PID.
    assert_eq!(
        unsafe { libc::kill(daemon.pid() as libc::pid_t, signal) },
        0
    );
}

/// The flow from `src` to `dst` within the window, if any packet went.
fn flow<'a>(a: &'a Analysis, src: &str, dst: &str) -> Option<&'a FlowResult> {
    a.phases[0]
        .result
        .flows
        .iter()
        .find(|f| f.src == src && f.dst == dst)
}

/// The peer's flaps in the window: (ms after `from_ns`, detection latency).
fn peer_downs(a: &Analysis, from_ns: i64) -> Vec<(f64, Option<f64>)> {
    a.phases[0]
        .result
        .flows
        .iter()
        .filter(|f| f.src == PEER.ipv4)
        .flat_map(|f| &f.flap_events)
        .map(|e| ((e.at_ns - from_ns) as f64 / 1e6, e.detection_latency_ms))
        .collect()
}

#[test]
fn a_stopped_engine_goes_down_after_its_dead_man_and_a_killed_one_is_detected() {
    if !privileged("a_stopped_engine_goes_down_after_its_dead_man_and_a_killed_one_is_detected") {
        return;
    }
    retrying_invalid("dead man", dead_man_once);
}

/// One run. `Err` means invalid: the peer host stalled while our engine
/// was stopped. With the responder stopped our session has no own clock,
/// only the kernel's RX-clocked replies, so a peer silent for a detection
/// time finds its own timer expired when it resumes and declares us Down
/// before the dead-man limit (seen in CI: FRR silent 31.0 ms, then Up and
/// Down 24 us apart, 172 ms after SIGSTOP).
fn dead_man_once() -> Result<(), String> {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("faults");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let session = session_3x10(PEER.ipv4, DUT.ipv4);
    let mut frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &[session]).unwrap();
    let capture = capture_dut_port(&dir);

    // 1. Stopped, with the guard.
    let (mut dut, socket) = start_engine(&dir, "guarded", DEAD_MAN_MS as u32);
    wait_offloaded(&socket, &mut dut, "the session Up and offloaded");
    std::thread::sleep(Duration::from_secs(1));
    let replied_before = verdicts(&socket, verdict::REPLIED);
    assert!(
        replied_before > 50,
        "the kernel was not answering: {replied_before}"
    );
    let stopped_at = epoch_ns();
    signal(&dut, libc::SIGSTOP);
    std::thread::sleep(STOP);
    signal(&dut, libc::SIGCONT);
    let continued_at = epoch_ns();
    wait_offloaded(&socket, &mut dut, "the session Up again after SIGCONT");
    let orphaned = verdicts(&socket, verdict::ORPHANED);
    let up_again_at = epoch_ns();
    std::thread::sleep(Duration::from_millis(500));

    // 2. The negative control: the same stop with the guard off.
    dut.stop().unwrap();
    let (mut unguarded, socket) = start_engine(&dir, "unguarded", 0);
    wait_offloaded(
        &socket,
        &mut unguarded,
        "the unguarded session Up and offloaded",
    );
    std::thread::sleep(Duration::from_secs(1));
    let control_stopped_at = epoch_ns();
    signal(&unguarded, libc::SIGSTOP);
    std::thread::sleep(STOP);
    let control_continued_at = epoch_ns();
    signal(&unguarded, libc::SIGCONT);
    let old = wait_offloaded(
        &socket,
        &mut unguarded,
        "the unguarded session after SIGCONT",
    );
    let old_discr = old["local_discr"].as_u64().unwrap();
    assert_eq!(
        verdicts(&socket, verdict::ORPHANED),
        0,
        "the guard is off, yet the kernel orphaned frames"
    );
    std::thread::sleep(Duration::from_millis(500));

    // 3. Killed, then started again.
    let killed_at = epoch_ns();
    unguarded.kill().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let (mut restarted, socket) = start_engine(&dir, "restarted", DEAD_MAN_MS as u32);
    let new = wait_offloaded(&socket, &mut restarted, "the restarted engine's session Up");
    let new_discr = new["local_discr"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let end = epoch_ns();
    let pcap = capture.finish().unwrap();
    restarted.stop().unwrap();
    frr.stop().unwrap();

    // The guarded stop, on the wire.
    let a = analyze_window(pcap.clone(), "stopped", stopped_at - LEAD_NS, up_again_at);
    let downs = peer_downs(&a, stopped_at);
    eprintln!("guarded stop: the peer's state changes (ms after SIGSTOP, detection): {downs:?}; orphaned {orphaned}");
    let (first_ms, detection) = *downs
        .first()
        .unwrap_or_else(|| panic!("the peer never declared the stopped engine Down: {a:#?}"));
    let first_down_ns = stopped_at + (first_ms * 1e6) as i64;
    // Up to the peer's first Down only: its slow packets after it would
    // crowd the longest gaps.
    let before = analyze_window(
        pcap.clone(),
        "before the Down",
        stopped_at - LEAD_NS,
        first_down_ns + 1,
    );
    let peer_stall = flow(&before, PEER.ipv4, DUT.ipv4).and_then(|f| {
        f.gap_ms.longest.iter().find(|g| {
            g.gap_ms >= 2.0 * DETECTION_MS / 3.0
                && (0..=2_000_000).contains(&(first_down_ns - g.ended_at_ns))
        })
    });
    if let Some(stall) = peer_stall {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "invalid run: the peer sent nothing for {:.2} ms just before declaring us Down {first_ms:.2} ms after SIGSTOP (its host stalled)",
            stall.gap_ms
        ));
    }
    assert!(orphaned > 0, "the kernel never orphaned a frame");
    // The last beat came about one period before the stop (a poll's
    // timeout: allow half a period more); the kernel
    // stops answering at the limit after it, the peer one detection time
    // later (1 ms for the sweep and the capture's timestamps).
    assert!(
        (DEAD_MAN_MS - 1.5 * BEAT_MS + DETECTION_MS..=DEAD_MAN_MS + DETECTION_MS + 15.0)
            .contains(&first_ms),
        "the peer declared the stopped engine Down {first_ms:.2} ms after SIGSTOP (limit {DEAD_MAN_MS} ms)"
    );
    let latency = detection.expect("the peer's Down says Control Detection Time Expired");
    assert!(
        (DETECTION_MS - 1.0..DETECTION_MS + 2.0).contains(&latency),
        "the peer's detection came {latency:.2} ms after our last packet"
    );
    let ours = flow(&a, DUT.ipv4, PEER.ipv4).expect("the DUT's packets");
    assert!(
        ours.last_ts_ns > continued_at,
        "the DUT sent nothing after SIGCONT"
    );

    // The control: the program kept the stopped engine Up on the wire.
    let c = analyze_window(
        pcap.clone(),
        "stopped, unguarded",
        control_stopped_at,
        control_continued_at,
    );
    let ours = flow(&c, DUT.ipv4, PEER.ipv4).expect("the DUT's packets while stopped");
    eprintln!(
        "unguarded stop: {} packets from the stopped DUT, max gap {:.2} ms, peer flaps {:?}",
        ours.packets,
        ours.gap_ms.max,
        peer_downs(&c, control_stopped_at)
    );
    assert!(
        peer_downs(&c, control_stopped_at).is_empty() && ours.gap_ms.max < DETECTION_MS,
        "the negative control: without the guard the stopped engine must stay Up on the wire"
    );
    assert!(
        ours.packets > 100,
        "the kernel answered {} times in 2 s",
        ours.packets
    );

    // The kill, on the wire.
    let k = analyze_window(pcap, "killed", killed_at - LEAD_NS, end);
    let downs = peer_downs(&k, killed_at);
    eprintln!("killed: the peer's state changes (ms after SIGKILL, detection): {downs:?}; discriminator {old_discr} -> {new_discr}");

    let (first_ms, detection) = *downs.first().expect("the peer never detected the kill");
    let latency = detection.expect("the peer's Down says Control Detection Time Expired");
    assert!(
        first_ms < DETECTION_MS + 15.0 && (DETECTION_MS - 1.0..DETECTION_MS + 2.0).contains(&latency),
        "the peer detected the killed engine {first_ms:.2} ms after SIGKILL, {latency:.2} ms after its last packet"
    );
    assert_ne!(
        old_discr, new_discr,
        "the restarted engine reused its discriminator"
    );
    assert!(
        k.phases[0]
            .result
            .flows
            .iter()
            .any(|f| f.src == DUT.ipv4 && f.last_state == Some(State::Up)),
        "the restarted engine's session is not Up on the wire"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Every control packet of the capture, and which flows are ours.
fn packets_of(pcap: &Path) -> (Vec<Row>, Vec<bool>) {
    let mut rows = Rows::default();
    let all = linecard_capture_analyzer::analyze(
        &[pcap.to_path_buf()],
        &linecard_capture_analyzer::Options {
            phases: Vec::new(),
            timeline: false,
        },
        Some(&mut rows),
    )
    .unwrap();
    let from_dut = all.all.flows.iter().map(|f| f.src == DUT.ipv4).collect();
    (rows.0, from_dut)
}

/// The capture walked within [start, end), the fault being the window.
fn walk(rows: &[Row], from_dut: &[bool], start: i64, end: i64) -> FaultFigures {
    faults::walk(rows, from_dut, (start, end), (start, end), DETECTION_MS)
}

fn ip_link(port: &str, updown: &str) {
    let status = std::process::Command::new("ip")
        .args(["-n", spec::OBSERVER_NS, "link", "set", port, updown])
        .status()
        .unwrap();
    assert!(status.success(), "ip link set {port} {updown}");
}

/// The first packet of each side in state Up at or after `from`, ns.
fn up_again(rows: &[Row], from_dut: &[bool], from: i64) -> (Option<i64>, Option<i64>) {
    let first = |dut: bool| {
        rows.iter()
            .find(|r| r.ts_ns >= from && from_dut[r.flow] == dut && r.state == State::Up)
            .map(|r| r.ts_ns)
    };
    (first(true), first(false))
}

#[test]
fn a_link_flap_and_a_restarted_peer_are_detected_and_recovered() {
    if !privileged("a_link_flap_and_a_restarted_peer_are_detected_and_recovered") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("link");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let session = || session_3x10(PEER.ipv4, DUT.ipv4);
    let mut frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &[session()]).unwrap();
    let capture = capture_dut_port(&dir);
    let (mut dut, socket) = start_engine(&dir, "dut", 1000);
    wait_offloaded(&socket, &mut dut, "the session Up and offloaded");
    std::thread::sleep(Duration::from_millis(500));

    // The link down for 500 ms.
    let down_at = epoch_ns();
    ip_link(PEER.bridge_port, "down");
    std::thread::sleep(Duration::from_millis(500));
    let link_up_at = epoch_ns();
    ip_link(PEER.bridge_port, "up");
    let before_restart = wait_offloaded(
        &socket,
        &mut dut,
        "the session Up again after the link came back",
    );
    let old_peer_discr = before_restart["remote"]["discr"].as_u64().unwrap() as u32;
    std::thread::sleep(Duration::from_millis(500));

    // The peer restarted.
    let killed_at = epoch_ns();
    frr.kill().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut frr = start_frr_bfdd("frr2", PEER.namespace, Some(&rest), &dir, &[session()]).unwrap();
    let after_restart = wait_offloaded(&socket, &mut dut, "the session Up with the restarted peer");
    let new_peer_discr = after_restart["remote"]["discr"].as_u64().unwrap() as u32;
    std::thread::sleep(Duration::from_millis(500));
    let pcap = capture.finish().unwrap();
    dut.stop().unwrap();
    frr.stop().unwrap();

    let (rows, from_dut) = packets_of(&pcap);
    // The link flap: our Down a detection time after the peer's last
    // packet (the capture on our port still sees ours).
    let flap = walk(&rows, &from_dut, down_at - LEAD_NS, link_up_at);
    eprintln!(
        "link down: our detections {:.2?} ms after the peer's last packet, missed {:?}",
        flap.detections_ms, flap.missed_ms
    );
    assert_eq!(
        flap.detections_ms.len(),
        1,
        "one Down of ours for the link flap"
    );
    assert!(
        (DETECTION_MS - 1.0..=DETECTION_MS + 3.0).contains(&flap.detections_ms[0]),
        "our Down came {:.2} ms after the peer's last packet",
        flap.detections_ms[0]
    );
    let (ours_up, peers_up) = up_again(&rows, &from_dut, link_up_at);
    let recovered_ms = |at: Option<i64>| at.map(|t| (t - link_up_at) as f64 / 1e6);
    eprintln!(
        "link up: ours Up again after {:.1?} ms, the peer's after {:.1?} ms",
        recovered_ms(ours_up),
        recovered_ms(peers_up)
    );
    for side in [ours_up, peers_up] {
        assert!(
            recovered_ms(side).is_some_and(|ms| ms < 3000.0),
            "not Up within 3 s of the link's return"
        );
    }

    // The restarted peer: detected, then the new discriminator followed.
    let restart = walk(
        &rows,
        &from_dut,
        killed_at - LEAD_NS,
        killed_at + 200_000_000,
    );
    eprintln!(
        "peer killed: our detections {:.2?} ms after its last packet; its discriminator {old_peer_discr:#x} -> {new_peer_discr:#x}",
        restart.detections_ms
    );
    assert_eq!(
        restart.detections_ms.len(),
        1,
        "one Down of ours for the killed peer"
    );
    assert!((DETECTION_MS - 1.0..=DETECTION_MS + 3.0).contains(&restart.detections_ms[0]));
    assert_ne!(
        old_peer_discr, new_peer_discr,
        "the restarted bfdd kept its discriminator"
    );
    let last_of_ours = rows
        .iter()
        .rev()
        .find(|r| from_dut[r.flow] && r.state == State::Up)
        .expect("our Up packets");
    assert_eq!(
        last_of_ours.your_discr, new_peer_discr,
        "our Up packets name the new discriminator on the wire"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn loss_on_the_link_is_detected_exactly_when_the_peer_falls_silent() {
    if !privileged("loss_on_the_link_is_detected_exactly_when_the_peer_falls_silent") {
        return;
    }
    retrying_invalid("loss", loss_once);
}

/// One run. `Err` means invalid: a timing rule broke while the witness saw
/// the DUT's CPU stalled, or the peer fell silent for a detection time at
/// 1 % loss (its host stalled: three frames in a row lost is a one in 10^6
/// event).
fn loss_once() -> Result<(), String> {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let seconds = env_seconds("LINECARD_LOSS_SECONDS", 10);
    let dir = scratch_dir("loss");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let session = session_3x10(PEER.ipv4, DUT.ipv4);
    let mut frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &[session]).unwrap();
    let capture = capture_dut_port(&dir);
    let (mut dut, socket) = start_engine(&dir, "dut", 1000);
    let witness = CpuWitness::start(&dir, 4 * seconds + 60);
    let mut windows = Vec::new();
    for (percent, seed) in [(1.0, 11), (5.0, 12), (30.0, 13)] {
        wait_offloaded(
            &socket,
            &mut dut,
            "the session Up and offloaded before the loss",
        );
        let link = LossyLink::attach(&PEER, percent / 100.0, seed).unwrap();
        // The window is the counters' own (attaching takes a while).
        let before = link.counts().unwrap();
        let start = epoch_ns();
        std::thread::sleep(Duration::from_secs(seconds));
        let end = epoch_ns();
        let after = link.counts().unwrap();
        drop(link);
        let counts = LossCounts {
            seen: after.seen - before.seen,
            dropped: after.dropped - before.dropped,
        };
        windows.push((percent, counts, start, end));
    }
    wait_offloaded(&socket, &mut dut, "the session Up again after the loss");
    // How the responder ran: a late Down points at it first.
    let responder = ctl(&socket, &["drops"])["fast_path"]["responder"].clone();
    eprintln!("responder: {responder}");
    let pcap = capture.finish().unwrap();
    dut.stop().unwrap();
    frr.stop().unwrap();
    let stalls = witness.finish();

    let (rows, from_dut) = packets_of(&pcap);
    for (percent, counts, start, end) in windows {
        let v = walk(&rows, &from_dut, start, end);
        let w = analyze_window(pcap.clone(), "loss", start, end);
        let ours = flow(&w, DUT.ipv4, PEER.ipv4).expect("the DUT's packets");
        let rate = percent / 100.0;
        let share = counts.dropped as f64 / counts.seen as f64;
        eprintln!(
            "{percent} % loss: {} of {} peer frames dropped ({:.2} %), {} on the capture; our longest gap while Up {:.2} ms; the DUT's detections (ms after the peer's last packet) {:.2?}, missed {:?}; the peer's detections {:.2?}",
            counts.dropped,
            counts.seen,
            share * 100.0,
            v.peer_packets,
            ours.up_gap_ms.max,
            v.detections_ms,
            v.missed_ms,
            v.peer_detections_ms
        );
        assert!(
            counts.seen > 50 * seconds,
            "only {} peer frames judged",
            counts.seen
        );
        // The drops are the rate's, within five standard deviations.
        let sigma = (rate * (1.0 - rate) / counts.seen as f64).sqrt();
        assert!(
            (share - rate).abs() <= 5.0 * sigma + 0.002,
            "{percent} %: dropped {share:.4} of the frames"
        );
        // The capture holds what passed (a frame or two either side: the
        // counters and the clock are read one after the other).
        let passed = counts.seen - counts.dropped;
        assert!(
            v.peer_packets.abs_diff(passed) <= 3,
            "{percent} %: {} peer packets on the capture, {passed} passed the program",
            v.peer_packets
        );
        // The timing rules: each Down of ours a detection time after the
        // peer's last packet, none missed; the peer never timed out on us
        // (only its frames are lost: ours all reach it, our Down included;
        // before our Down kept the peer's discriminator, FRR discarded it
        // and timed out 30 ms after our last Up packet, 12-13 times at
        // 30 %); our own clock covers every lost frame, one interval at
        // most (1.1 until session 9) (measured 11.56-11.62 ms; 27.18-27.91 ms while the kernel's
        // sweep was armed a pass after the offload; two intervals allow for
        // this VM's stalls).
        let mut broken: Vec<String> = v
            .detections_ms
            .iter()
            .filter(|&&ms| !(DETECTION_MS - 1.0..=DETECTION_MS + 3.0).contains(&ms))
            .map(|ms| format!("our Down {ms:.2} ms after the peer's last packet"))
            .collect();
        if !v.missed_ms.is_empty() {
            broken.push(format!("missed silences of {:?} ms", v.missed_ms));
        }
        if !v.peer_detections_ms.is_empty() {
            broken.push(format!(
                "the peer timed out on us {:.2?} ms after our last packet",
                v.peer_detections_ms
            ));
        }
        if ours.up_gap_ms.max >= 20.0 {
            broken.push(format!(
                "our own gap while Up reached {:.2} ms",
                ours.up_gap_ms.max
            ));
        }
        if !broken.is_empty() {
            let stalled = stalls
                .iter()
                .filter(|s| s.to_unix_ns > start && s.from_unix_ns < end)
                .map(|s| s.ms())
                .fold(0.0, f64::max);
            if stalled >= 5.0 {
                return Err(format!(
                    "{percent} %: {} while the DUT's CPU stalled {stalled:.1} ms",
                    broken.join(", ")
                ));
            }
            panic!("{percent} %: {}", broken.join(", "));
        }
        match percent as u32 {
            1 if !v.detections_ms.is_empty() => {
                return Err(format!(
                    "1 % loss: the peer fell silent for a detection time {} times (three frames in a row lost is a one in 10^6 event): its host stalled",
                    v.detections_ms.len()
                ))
            }
            30 => assert!(
                !v.detections_ms.is_empty(),
                "30 % loss: the positive control did not flap"
            ),
            _ => {}
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
