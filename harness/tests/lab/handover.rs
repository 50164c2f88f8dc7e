//! A hitless restart (issue 39): 64 xdp sessions at 3 x 10 ms against FRR
//! bfdd, handed from one linecardd process to the next twice, and a
//! handover refused.
//!
//! 1. Take-over: `linecardd --config FILE --take-over` starts beside the
//!    running engine, which pins its maps and attachments, hands over and
//!    exits once the new one's responder is armed. The same build: the
//!    running program is kept, nothing loaded or verified.
//! 2. Restart: `linecardd ctl handover` (as SIGUSR2), the engine exits,
//!    and a plain `linecardd --config FILE` adopts; the kernel answers
//!    alone meanwhile.
//! 3. Refused: a record another build wrote (its layout altered): the
//!    reason in the log and AdminDown from every session, not a timeout.
//!
//! On the capture (the observer's port facing the DUT), for 1 and 2: no
//! state change in either direction of any session and no gap reaching
//! the detection time; in both daemons' words: the same discriminators,
//! "adopted 64 sessions" twice, FRR counted no Down. The gaps beside the
//! steady engine's are printed; the timing claim is the restart
//! scenario's (`scenarios/restart.toml`, `engine_handover`).

use crate::common::*;
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::model::FlowResult;
use linecard_capture_analyzer::{analyze, Options, Phase};
use linecard_harness::lab::spec::{self, PEER};
use linecard_harness::procs::start_frr_bfdd;
use std::collections::BTreeMap;
use std::time::Duration;

const SESSIONS: usize = 64;

/// The DUT's file: its handover pinned on the lab's engine BPF filesystem
/// (`ip netns exec` hides /sys/fs/bpf).
fn dut_config(socket: &std::path::Path) -> String {
    let mut config = format!(
        "[engine]\ncontrol_socket = \"{}\"\nhandover_dir = \"{}/handover-{}\"\n",
        socket.display(),
        spec::ENGINE_BPFFS,
        std::process::id()
    );
    for i in 0..SESSIONS {
        config.push_str(&format!(
            "\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\ntx_interval_ms = 10\nrx_interval_ms = 10\n\
             multiplier = 3\nbackend = \"xdp\"\ninterface = \"eth0\"\n",
            pair_peer_address(i),
            pair_dut_address(i),
        ));
    }
    config
}

/// Each session's local discriminator by peer, as `ctl list` says.
fn discriminators(sessions: &[serde_json::Value]) -> BTreeMap<String, u64> {
    sessions
        .iter()
        .map(|s| {
            (
                s["peer"].as_str().unwrap().to_string(),
                s["local_discr"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_handover_keeps_every_session_up_on_the_wire() {
    if !privileged("a_handover_keeps_every_session_up_on_the_wire") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("handover");
    // What a handover test that failed midway left pinned (still attached
    // to the DUT's eth0): the lab's own filesystem, emptied.
    for entry in std::fs::read_dir(spec::ENGINE_BPFFS).unwrap().flatten() {
        if entry.path().is_dir() {
            std::fs::remove_dir_all(entry.path()).unwrap();
        }
    }
    let addresses = AddressPairs::add(SESSIONS);
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let at_frr = addresses.peer_sessions();
    let _frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &at_frr).unwrap();
    let socket = dir.join("dut.sock");
    let mut dut = start_linecardd_toml(&dir, &dut_config(&socket));
    let all_up_and_offloaded = |s: &[serde_json::Value]| {
        s.len() == SESSIONS
            && s.iter()
                .all(|s| s["state"] == "up" && s["offloaded"] == true)
    };
    let before = wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(30),
        "all sessions Up and offloaded",
        all_up_and_offloaded,
    );
    let downs_before = frr_session_downs(&dir, SESSIONS);
    let capture = capture_dut_port(&dir);
    std::thread::sleep(Duration::from_millis(200));
    // The same engine steady, for comparison: as long as a take-over takes.
    let steady_start = epoch_ns();
    std::thread::sleep(Duration::from_millis(2500));

    // 1. A take-over: the next process starts while the running one runs.
    let start = epoch_ns();
    let mut next = start_linecardd_toml_with(&dir, &dut_config(&socket), &["--take-over"]);
    wait_exit(&mut dut, Duration::from_secs(30), "the old engine");
    let handed = epoch_ns();
    let after = wait_sessions(
        &socket,
        &mut next,
        Duration::from_secs(5),
        "all sessions Up and offloaded in the new engine",
        all_up_and_offloaded,
    );
    let adopted = epoch_ns();
    assert_eq!(
        discriminators(&after),
        discriminators(&before),
        "the same discriminators"
    );
    std::thread::sleep(Duration::from_secs(1));
    let took_over_end = epoch_ns();

    // 2. A handover to a process started after the running one exited
    // (SIGUSR2 or `ctl handover`, then a plain start, as a service
    // manager restarts): the kernel answers alone meanwhile.
    let said = ctl(&socket, &["handover"]);
    assert_eq!(said["handed_over"], SESSIONS, "{said}");
    wait_exit(&mut next, Duration::from_secs(5), "the handing-over engine");
    let mut third = start_linecardd_toml(&dir, &dut_config(&socket));
    let again = wait_sessions(
        &socket,
        &mut third,
        Duration::from_secs(30),
        "all sessions Up and offloaded after the restart",
        all_up_and_offloaded,
    );
    assert_eq!(discriminators(&again), discriminators(&before));
    std::thread::sleep(Duration::from_secs(1));
    let restarted_end = epoch_ns();
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert_eq!(
        log.matches(&format!("adopted {SESSIONS} sessions")).count(),
        2,
        "both new engines adopted every session:\n{log}"
    );
    // The same build: the running program kept, nothing verified.
    assert_eq!(
        log.matches("taking over the running program").count(),
        2,
        "both new engines kept the running program:\n{log}"
    );
    let downs_after = frr_session_downs(&dir, SESSIONS);

    // 3. A handover this build refuses: AdminDown to every peer, at once.
    let said = ctl(&socket, &["handover"]);
    assert_eq!(said["handed_over"], SESSIONS, "{said}");
    wait_exit(
        &mut third,
        Duration::from_secs(5),
        "the handing-over engine",
    );
    // As a build with another map layout would find it.
    let record = record_path(&socket);
    let text = std::fs::read_to_string(&record).unwrap();
    std::fs::write(&record, with_layout(&text, 9999)).unwrap();
    let refused_at = epoch_ns();
    let mut fourth = start_linecardd_toml(&dir, &dut_config(&socket));
    wait_sessions(
        &socket,
        &mut fourth,
        Duration::from_secs(10),
        "the refused handover's sessions Up again",
        |s| s.len() == SESSIONS && s.iter().all(|s| s["state"] == "up"),
    );
    fourth.stop().unwrap();
    let pcap = capture.finish().unwrap();
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert!(
        log.contains("refused: its maps hold layout 9999"),
        "the refusal and its reason in the log:\n{log}"
    );
    assert!(
        !std::path::Path::new(&format!(
            "{}/handover-{}",
            spec::ENGINE_BPFFS,
            std::process::id()
        ))
        .exists(),
        "a pinned fast path left behind"
    );

    let a = analyze(
        &[pcap],
        &Options {
            phases: vec![
                Phase {
                    name: "steady".into(),
                    start_ns: steady_start,
                    end_ns: start,
                },
                Phase {
                    name: "take-over".into(),
                    start_ns: start,
                    end_ns: took_over_end,
                },
                Phase {
                    name: "restart".into(),
                    start_ns: took_over_end,
                    end_ns: restarted_end,
                },
                Phase {
                    name: "refused".into(),
                    start_ns: refused_at,
                    end_ns: epoch_ns(),
                },
            ],
            timeline: false,
        },
        None,
    )
    .unwrap();
    let ours = |f: &&FlowResult| {
        f.src
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| (0..SESSIONS).any(|i| pair_dut_address(i) == a))
    };
    for phase in 0..3 {
        let flows = &a.phases[phase].result.flows;
        let name = &a.phases[phase].name;
        assert_eq!(
            flows.len(),
            2 * SESSIONS,
            "{name}: both directions of every session"
        );
        for f in flows {
            let what = format!("{name}: {} -> {}", f.src, f.dst);
            assert_eq!(f.flaps, 0, "{what}: a state change {:?}", f.flap_events);
            assert_eq!(f.up_gap_ms.count, f.gap_ms.count, "{what}: a packet not Up");
            assert!(f.gap_ms.max < 30.0, "{what}: a {} ms gap", f.gap_ms.max);
        }
        let worst = flows
            .iter()
            .filter(ours)
            .map(|f| f.gap_ms.max)
            .fold(0.0, f64::max);
        let theirs = flows
            .iter()
            .filter(|f| !ours(f))
            .map(|f| f.gap_ms.max)
            .fold(0.0, f64::max);
        eprintln!(
            "{name}: {SESSIONS} sessions, largest gap ours {worst:.2} ms, FRR's {theirs:.2} ms"
        );
    }
    assert_eq!(downs_after, downs_before, "FRR counted a Down");
    eprintln!(
        "take-over: the old engine gone {:.1} ms after the new one started, every session placed {:.1} ms later",
        (handed - start) as f64 / 1e6,
        (adopted - handed) as f64 / 1e6
    );
    // Refused: every session of ours said AdminDown (6.8.16) before it
    // came Up again.
    let refused = &a.phases[3].result.flows;
    let said_admin_down = refused
        .iter()
        .filter(|f| f.flap_events.iter().any(|e| e.to_state == State::AdminDown))
        .count();
    assert_eq!(
        said_admin_down, SESSIONS,
        "AdminDown from every session of ours"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (bounded) for `daemon` to exit of its own accord.
fn wait_exit(daemon: &mut linecard_harness::procs::Daemon, limit: Duration, what: &str) {
    let deadline = std::time::Instant::now() + limit;
    while daemon.running() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} still runs after {limit:?}: {}",
            daemon.log_tail()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Where linecardd writes its handover record: beside its socket
/// (docs/engine.md).
fn record_path(socket: &std::path::Path) -> std::path::PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".handover");
    std::path::PathBuf::from(name)
}

/// The record with its layout version replaced.
fn with_layout(text: &str, version: u32) -> String {
    let mut record: serde_json::Value = serde_json::from_str(text).unwrap();
    record["layout_version"] = version.into();
    record.to_string()
}
