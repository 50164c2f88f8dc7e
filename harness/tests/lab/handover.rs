//! A hitless restart (issue 39): 64 xdp sessions at 3 x 10 ms against FRR
//! bfdd, then `linecardd ctl handover` (the running engine pins its fast
//! path and exits without a packet) and a new `linecardd --config` with
//! the same file, which adopts them. On the capture (the observer's port
//! facing the DUT): no state change in either direction of any session,
//! and the longest gap across the handover under the detection time. In
//! both daemons' words: the new engine adopted all 64 under the same
//! discriminators, FRR counted no Down. Then a handover the next build
//! cannot take (its record's layout altered) is refused with the reason
//! and every session is sent AdminDown, not left to time out.

use crate::common::*;
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::{analyze, Options, Phase};
use linecard_harness::lab::spec::{self, PEER};
use linecard_harness::procs::{start_frr_bfdd, PeerSession};
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

/// FRR's count of Downs across its sessions (`show bfd peers counters`).
fn frr_downs(dir: &std::path::Path) -> u64 {
    let out = linecard_harness::procs::vtysh(
        PEER.namespace,
        &dir.join("frr"),
        &["show bfd peers counters json"],
    )
    .unwrap();
    let peers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let peers = peers.as_array().cloned().unwrap_or_default();
    assert_eq!(peers.len(), SESSIONS, "FRR's counters: {peers:#?}");
    peers
        .iter()
        .map(|p| p["session-down"].as_u64().expect("FRR counts session-down"))
        .sum()
}

#[test]
fn a_handover_keeps_every_session_up_on_the_wire() {
    if !privileged("a_handover_keeps_every_session_up_on_the_wire") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("handover");
    let _addresses = AddressPairs::add(SESSIONS);
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let at_frr: Vec<PeerSession> = (0..SESSIONS)
        .map(|i| PeerSession {
            local: pair_peer_address(i),
            peer: pair_dut_address(i),
            tx_ms: 10,
            rx_ms: 10,
            multiplier: 3,
            multihop: false,
            min_ttl: None,
            echo: false,
            auth: None,
        })
        .collect();
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
    let downs_before = frr_downs(&dir);
    let capture = capture_dut_port(&dir);
    std::thread::sleep(Duration::from_secs(1));

    let start = epoch_ns();
    let said = ctl(&socket, &["handover"]);
    assert_eq!(said["handed_over"], SESSIONS, "{said}");
    let status = dut.stop().unwrap();
    assert!(status.success(), "the old engine exited {status}");
    // The next process, as an operator (or systemd) starts it.
    let handed = epoch_ns();
    let mut next = start_linecardd_toml(&dir, &dut_config(&socket));
    let after = wait_sessions(
        &socket,
        &mut next,
        Duration::from_secs(5),
        "all sessions Up and offloaded in the new engine",
        all_up_and_offloaded,
    );
    let adopted = epoch_ns();
    std::thread::sleep(Duration::from_secs(1));
    let end = epoch_ns();
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert!(
        log.contains(&format!("adopted {SESSIONS} sessions")),
        "the new engine's log:\n{log}"
    );
    assert_eq!(
        discriminators(&after),
        discriminators(&before),
        "the same discriminators"
    );
    let downs_after = frr_downs(&dir);

    // A handover this build refuses: AdminDown to every peer, at once.
    let said = ctl(&socket, &["handover"]);
    assert_eq!(said["handed_over"], SESSIONS, "{said}");
    next.stop().unwrap();
    // As a build with another map layout would find it.
    let record = record_path(&socket);
    let text = std::fs::read_to_string(&record).unwrap();
    std::fs::write(&record, with_layout(&text, 9999)).unwrap();
    let refused_at = epoch_ns();
    let mut third = start_linecardd_toml(&dir, &dut_config(&socket));
    wait_sessions(
        &socket,
        &mut third,
        Duration::from_secs(10),
        "the refused handover's sessions Up again",
        |s| s.len() == SESSIONS && s.iter().all(|s| s["state"] == "up"),
    );
    third.stop().unwrap();
    let pcap = capture.finish().unwrap();
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert!(
        log.contains("refused: its maps hold layout 9999"),
        "the refusal and its reason in the log:\n{log}"
    );

    let a = analyze(
        &[pcap],
        &Options {
            phases: vec![
                Phase {
                    name: "handover".into(),
                    start_ns: start,
                    end_ns: end,
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
    let flows = &a.phases[0].result.flows;
    assert_eq!(
        flows.len(),
        2 * SESSIONS,
        "both directions of every session"
    );
    let (mut worst, mut ours) = (0.0f64, 0.0f64);
    for f in flows {
        if f.src.starts_with("192.0.2.1") && f.src.len() == 11 && f.src.as_str() >= "192.0.2.180" {
            ours = ours.max(f.gap_ms.max);
        }
        let what = format!("{} -> {}", f.src, f.dst);
        assert_eq!(f.flaps, 0, "{what}: a state change {:?}", f.flap_events);
        assert_eq!(f.up_gap_ms.count, f.gap_ms.count, "{what}: a packet not Up");
        assert!(f.gap_ms.max < 30.0, "{what}: a {} ms gap", f.gap_ms.max);
        worst = worst.max(f.gap_ms.max);
    }
    assert_eq!(downs_after, downs_before, "FRR counted a Down");
    eprintln!(
        "handover: {SESSIONS} sessions, largest gap {worst:.2} ms either way, {ours:.2} ms ours; old engine gone after {:.1} ms, new one placed every session {:.1} ms later",
        (handed - start) as f64 / 1e6,
        (adopted - handed) as f64 / 1e6
    );
    // Refused: every session of ours said AdminDown (6.8.16) before it
    // came Up again.
    let refused = &a.phases[1].result.flows;
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
