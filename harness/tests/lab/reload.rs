//! A config reload on a running linecardd (issue 39): 64 xdp sessions at
//! 3 x 10 ms against FRR bfdd, then the file changed to add one session,
//! remove one and retime one, and `linecardd ctl reload`. On the capture
//! (the observer's port facing the DUT): the removed session's last word
//! is AdminDown, the added one comes Up in both directions, the retimed
//! one runs a Poll Sequence that FRR answers with Final, and the other 61
//! show nothing: no Poll, no state change, no gap near the detection time.
//! Then SIGHUP with the file unchanged changes nothing, and a reload that
//! changes `[engine]`, or of a file that does not validate, is refused
//! whole.

use crate::common::*;
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::model::FlowResult;
use linecard_capture_analyzer::{analyze, Options, Phase};
use linecard_harness::lab::spec::{self, PEER};
use linecard_harness::procs::start_frr_bfdd;
use std::time::Duration;

/// Sessions the DUT runs before and after the reload.
const SESSIONS: usize = 64;
/// Index of the session the reload removes, the one it retimes, and the
/// one it adds (configured at FRR from the start, Down until then).
const REMOVED: usize = 0;
const RETIMED: usize = 1;
const ADDED: usize = SESSIONS;

fn dut_config(socket: &std::path::Path, engine_extra: &str, sessions: &[(usize, u32)]) -> String {
    let mut config = format!(
        "[engine]\ncontrol_socket = \"{}\"\n{engine_extra}",
        socket.display()
    );
    for (i, ms) in sessions {
        config.push_str(&format!(
            "\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\ntx_interval_ms = {ms}\nrx_interval_ms = {ms}\n\
             multiplier = 3\nbackend = \"xdp\"\ninterface = \"eth0\"\n",
            pair_peer_address(*i),
            pair_dut_address(*i),
        ));
    }
    config
}

#[test]
fn a_reload_changes_only_the_sessions_its_file_changed() {
    if !privileged("a_reload_changes_only_the_sessions_its_file_changed") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("reload");
    let addresses = AddressPairs::add(SESSIONS + 1);
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let at_frr = addresses.peer_sessions();
    let _frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &at_frr).unwrap();
    let socket = dir.join("dut.sock");
    let before: Vec<(usize, u32)> = (0..SESSIONS).map(|i| (i, 10)).collect();
    let mut dut = start_linecardd_toml(&dir, &dut_config(&socket, "", &before));
    let up_and_offloaded = |s: &serde_json::Value| s["state"] == "up" && s["offloaded"] == true;
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(30),
        "all sessions Up and offloaded",
        |s| s.iter().filter(|s| up_and_offloaded(s)).count() == SESSIONS,
    );
    let capture = capture_dut_port(&dir);
    std::thread::sleep(Duration::from_secs(1));

    // The file changes: one session fewer, one more, one at 20 ms.
    let after: Vec<(usize, u32)> = (0..=ADDED)
        .filter(|&i| i != REMOVED)
        .map(|i| (i, if i == RETIMED { 20 } else { 10 }))
        .collect();
    std::fs::write(dir.join("dut.toml"), dut_config(&socket, "", &after)).unwrap();
    let reload_start = epoch_ns();
    let out = std::process::Command::new(linecardd())
        .args(["ctl", "--socket", socket.to_str().unwrap(), "reload"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "ctl reload: {said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        said.trim(),
        "reloaded: 1 added, 1 removed, 1 retimed, 0 rekeyed, 0 restarted, 62 unchanged",
        "the reload's own account"
    );
    let retimed_peer = pair_peer_address(RETIMED).to_string();
    let added_peer = pair_peer_address(ADDED).to_string();
    let removed_peer = pair_peer_address(REMOVED).to_string();
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "the added session Up, the retimed one's Poll ended, the removed one gone",
        |s| {
            s.len() == SESSIONS
                && s.iter()
                    .all(|s| s["state"] == "up" && s["polling"] == false)
                && s.iter().any(|s| s["peer"] == added_peer.as_str())
                && s.iter().all(|s| s["peer"] != removed_peer.as_str())
                && s.iter()
                    .any(|s| s["peer"] == retimed_peer.as_str() && s["desired_min_tx_us"] == 20_000)
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    let reload_end = epoch_ns();

    // SIGHUP with the file as it is: nothing to do, and the log says so.
    // SAFETY: kill(2) on the PID of the linecardd this test started.
    assert_eq!(unsafe { libc::kill(dut.pid() as i32, libc::SIGHUP) }, 0);
    let log = dir.join("linecardd.log");
    let unchanged = format!(
        "reloaded: 0 added, 0 removed, 0 retimed, 0 rekeyed, 0 restarted, {SESSIONS} unchanged"
    );
    wait_for_log(&log, &unchanged, Duration::from_secs(5));
    // An [engine] change is refused whole: ctl reload fails and says why.
    std::fs::write(
        dir.join("dut.toml"),
        dut_config(&socket, "dead_man_ms = 500\n", &after),
    )
    .unwrap();
    let reload = || {
        let out = std::process::Command::new(linecardd())
            .args(["ctl", "--socket", socket.to_str().unwrap(), "reload"])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (ok, said) = reload();
    assert!(
        !ok && said.contains("reload refused") && said.contains("engine.dead_man_ms"),
        "a changed [engine] table: {said}"
    );
    // So is a file that does not validate, naming the key.
    std::fs::write(
        dir.join("dut.toml"),
        dut_config(&socket, "", &after).replace("multiplier = 3", "multiplier = 0"),
    )
    .unwrap();
    let (ok, said) = reload();
    assert!(
        !ok && said.contains("reload refused") && said.contains("multiplier = 0"),
        "an invalid file: {said}"
    );
    let still = wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(1),
        "64 sessions",
        |s| s.len() == SESSIONS,
    );
    assert!(still.iter().all(|s| s["state"] == "up"));
    let pcap = capture.finish().unwrap();
    dut.stop().unwrap();

    let a = analyze(
        &[pcap],
        &Options {
            phases: vec![Phase {
                name: "reload".into(),
                start_ns: reload_start,
                end_ns: reload_end,
            }],
            timeline: false,
        },
        None,
    )
    .unwrap();
    let flows = &a.phases[0].result.flows;
    let flow = |src: std::net::IpAddr, dst: std::net::IpAddr| -> &FlowResult {
        let (src, dst) = (src.to_string(), dst.to_string());
        flows
            .iter()
            .find(|f| f.src == src && f.dst == dst)
            .unwrap_or_else(|| panic!("no {src} -> {dst} packets in the reload window"))
    };
    let ours = |i: usize| flow(pair_dut_address(i), pair_peer_address(i));
    let theirs = |i: usize| flow(pair_peer_address(i), pair_dut_address(i));

    // RFC 5880 6.8.16: the removed session's last word is AdminDown.
    let removed = ours(REMOVED);
    assert_eq!(removed.last_state, Some(State::AdminDown), "{removed:#?}");
    // The added session came Up in both directions.
    for f in [ours(ADDED), theirs(ADDED)] {
        assert_eq!(f.last_state, Some(State::Up), "{} -> {}", f.src, f.dst);
        assert!(
            f.up_gap_ms.count > 0,
            "{} -> {} never Up twice",
            f.src,
            f.dst
        );
    }
    // RFC 5880 6.8.3: the retimed session announced its timers by a Poll
    // that FRR answered with Final, and stayed Up.
    let (poller, answerer) = (ours(RETIMED), theirs(RETIMED));
    assert!(poller.polls >= 1, "no Poll from the retimed session");
    assert!(answerer.poll_final_ms.count >= 1, "FRR sent no Final");
    assert_eq!(
        poller.flaps + answerer.flaps,
        0,
        "the retimed session flapped"
    );
    assert_eq!(poller.desired_min_tx_ms, Some(20.0));
    // The other 61: nothing on the wire but their periodic packets.
    let mut worst: f64 = 0.0;
    for i in (0..SESSIONS).filter(|&i| ![REMOVED, RETIMED].contains(&i)) {
        for f in [ours(i), theirs(i)] {
            let what = format!("untouched {} -> {}", f.src, f.dst);
            assert_eq!(f.polls, 0, "{what}: a Poll");
            assert_eq!(f.flaps, 0, "{what}: a state change {:?}", f.flap_events);
            assert_eq!(f.last_state, Some(State::Up), "{what}");
            assert_eq!(f.up_gap_ms.count, f.gap_ms.count, "{what}: a packet not Up");
            assert_eq!(f.desired_min_tx_ms, Some(10.0), "{what}: timers");
            // Under the detection time (3 x 10 ms) with a margin.
            assert!(f.gap_ms.max < 25.0, "{what}: a {} ms gap", f.gap_ms.max);
            worst = worst.max(f.gap_ms.max);
        }
    }
    eprintln!(
        "reload: 61 untouched sessions, both directions, largest gap {worst:.2} ms over {} ms",
        (reload_end - reload_start) / 1_000_000
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (bounded) until `line` appears in the log at `path`.
fn wait_for_log(path: &std::path::Path, line: &str, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(line) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "`{line}` not logged within {limit:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
