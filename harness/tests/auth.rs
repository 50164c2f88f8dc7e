//! Authentication (RFC 5880 section 6.7) against a real, unmodified BIRD
//! 2.0.12, every type, IPv4 and IPv6, 3 x 10 ms, judged on a capture taken
//! on the observer's bridge port facing the DUT: what the wire shows of
//! each side's authentication, a wrong key refused, and a dead peer's
//! session that no forged or replayed packet keeps alive.

mod common;

use common::*;
use linecard_bpf_objects::craft;
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::model::{Analysis, FlowResult};
use linecard_engine::config::AUTH_TYPES;
use linecard_engine::wire::{AuthSection, AuthType, Diagnostic, Repr};
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::{start_bird, Daemon, PeerSession};
use linecard_harness::scenario::SessionAuth;
use std::path::Path;
use std::time::Duration;

const KEY_ID: u8 = 3;

fn auth(kind: &str, secret: &str) -> SessionAuth {
    SessionAuth {
        kind: kind.into(),
        key_id: KEY_ID,
        secret: secret.into(),
    }
}

/// BIRD in the peer's namespace with an IPv4 and an IPv6 session to the
/// DUT, authenticated with `auth`.
fn start_peer(dir: &Path, auth: &SessionAuth) -> Daemon {
    let session = |local: &str, peer: &str| PeerSession {
        auth: Some(auth.clone()),
        ..session_3x10(local, peer)
    };
    start_bird(
        "bird",
        PEER.namespace,
        Some(&spec::cpuset_dir(spec::REST_CPUSET)),
        dir,
        PEER.ipv4.parse().unwrap(),
        &[session(PEER.ipv4, DUT.ipv4), session(PEER.ipv6, DUT.ipv6)],
    )
    .unwrap()
}

/// linecardd (rt) with the two sessions to BIRD, each with its own auth.
fn start_dut(dir: &Path, socket: &Path, v4: &SessionAuth, v6: &SessionAuth) -> Daemon {
    start_dut_on("rt", dir, socket, v4, v6, "")
}

/// The same on `backend`: with `xdp`, the kernel verifies every packet
/// before userspace sees it.
fn start_dut_on(
    backend: &str,
    dir: &Path,
    socket: &Path,
    v4: &SessionAuth,
    v6: &SessionAuth,
    engine_extra: &str,
) -> Daemon {
    let mut config = format!(
        "[engine]\ncontrol_socket = \"{}\"\ncpu = {}\n{engine_extra}",
        socket.display(),
        dut_cpu()
    );
    // The fast path attaches to the session's interface.
    let interface = if backend == "xdp" {
        format!("interface = \"{}\"\n", spec::HOST_IFACE)
    } else {
        String::new()
    };
    for (local, peer, a) in [(DUT.ipv4, PEER.ipv4, v4), (DUT.ipv6, PEER.ipv6, v6)] {
        config.push_str(&format!(
            "\n[[session]]\npeer = \"{peer}\"\nlocal = \"{local}\"\ntx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"{backend}\"\n{interface}\
             auth = {{ type = \"{}\", keys = [{{ id = {}, secret = \"{}\" }}] }}\n",
            a.kind, a.key_id, a.secret
        ));
    }
    start_linecardd_toml(dir, &config)
}

fn flow<'a>(analysis: &'a Analysis, src: &str, dst: &str) -> &'a FlowResult {
    let window = &analysis.phases[0].result;
    window
        .flows
        .iter()
        .filter(|f| f.src == src && f.dst == dst)
        .max_by_key(|f| f.packets)
        .unwrap_or_else(|| panic!("no flow {src} -> {dst} on the wire: {:?}", window.flows))
}

fn drops_of(session: &serde_json::Value, reason: &str) -> u64 {
    session["drops"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d[0] == reason)
        .and_then(|d| d[1].as_u64())
        .unwrap_or(0)
}

fn up(sessions: &[serde_json::Value]) -> bool {
    sessions.len() == 2
        && sessions
            .iter()
            .all(|s| s["state"] == "up" && s["polling"] == false)
}

#[test]
fn every_type_interoperates_with_bird_on_the_wire() {
    in_the_lab("auth_every_type", || {
        for &(kind, auth_type) in &AUTH_TYPES {
            retrying_invalid(kind, || every_type_once(kind, auth_type));
        }
    });
}

/// Runs `test` (root only) with the lab up and to itself, then takes the
/// lab down.
fn in_the_lab(name: &str, test: impl FnOnce()) {
    if !privileged(name) {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    test();
    assert_exit(&linecard(&["lab", "down"]), 0, "lab down");
}

/// A flap or a late Down is this test's failure unless the witness saw the
/// DUT's CPU stalled 10 ms or more in the window (then `Err`: invalid, run
/// again; authentication is the subject here, the VM's pauses are not).
fn explained(
    stalls: &[linecard_harness::canary::Stall],
    start: i64,
    end: i64,
    what: &str,
) -> Result<(), String> {
    let stall = linecard_harness::canary::longest_stall_ms(stalls, start, end);
    if stall >= 10.0 {
        Err(format!(
            "{what}, and the witness saw the DUT's CPU stalled {stall:.2} ms"
        ))
    } else {
        panic!("{what}, with the DUT's CPU free (longest stall {stall:.2} ms)");
    }
}

fn every_type_once(kind: &str, auth_type: AuthType) -> Result<(), String> {
    let dir = scratch_dir(&format!("auth-{kind}"));
    let secret = format!("lc-{}", kind.len());
    let a = auth(kind, &secret);
    let mut bird = start_peer(&dir, &a);
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let mut dut = start_dut(&dir, &socket, &a, &a);
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "both sessions Up",
        up,
    );
    let witness = CpuWitness::start(&dir, 10);
    let start = epoch_ns();
    std::thread::sleep(Duration::from_secs(2));
    let end = epoch_ns();
    let stalls = witness.finish();
    let view = ctl(&socket, &["list", "--json"]);
    dut.stop().unwrap();
    bird.stop().unwrap();
    let analysis = analyze_window(capture.finish().unwrap(), "up", start, end);

    for (dut_ip, peer_ip) in [(DUT.ipv4, PEER.ipv4), (DUT.ipv6, PEER.ipv6)] {
        for (side, f) in [
            ("linecardd", flow(&analysis, dut_ip, peer_ip)),
            ("BIRD", flow(&analysis, peer_ip, dut_ip)),
        ] {
            let what = format!("{kind}: {side} {} -> {}", f.src, f.dst);
            if f.flaps > 0 {
                explained(&stalls, start, end, &format!("{what}: {} flaps", f.flaps))?;
            }
            // Precondition: the window held a session's worth of traffic.
            assert!(f.packets >= 150, "{what}: {} packets in 2 s", f.packets);
            assert_eq!(f.last_state, Some(State::Up), "{what}");
            let seen = f.auth.clone().unwrap_or_else(|| panic!("{what}: no A bit"));
            assert_eq!(seen.packets, f.packets, "{what}: unauthenticated packets");
            assert_eq!(seen.types, [auth_type.code()], "{what}");
            assert_eq!(seen.key_ids, [KEY_ID], "{what}");
            if auth_type.meticulous() {
                // 6.7.3: one up with every packet.
                assert_eq!(
                    (seen.sequence_next, seen.sequence_same, seen.sequence_other),
                    (f.packets - 1, 0, 0),
                    "{what}"
                );
            }
            if side == "linecardd" && auth_type.digest_len().is_some() {
                // Ours advances with every packet, meticulous or not.
                assert_eq!(seen.sequence_next, f.packets - 1, "{what}");
            }
        }
    }
    // And the engine's own account: nothing it refused.
    for s in view["sessions"].as_array().unwrap() {
        for reason in ["auth_mismatch", "auth_failed", "auth_sequence", "bad_auth"] {
            assert_eq!(drops_of(s, reason), 0, "{kind}: {reason}: {s:#}");
        }
        assert_eq!(s["auth"]["auth_type"], kind, "{s:#}");
    }
    eprintln!("{kind}: both families Up, every packet of both sides authenticated as configured");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_wrong_key_never_brings_a_session_up() {
    if !privileged("auth_wrong_key") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("auth-wrong-key");
    let right = auth("keyed_sha1", "right-secret");
    let mut bird = start_peer(&dir, &right);
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    // IPv4 with the wrong secret; IPv6 with the right one is the control
    // that shows the setup can come Up at all.
    let mut dut = start_dut(&dir, &socket, &auth("keyed_sha1", "wrong-secret"), &right);
    let start = epoch_ns();
    let sessions = wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "the IPv6 control Up and BIRD's IPv4 packets refused",
        |s| {
            s.iter()
                .any(|s| s["peer"] == PEER.ipv6 && s["state"] == "up")
                && s.iter()
                    .any(|s| s["peer"] == PEER.ipv4 && drops_of(s, "auth_failed") >= 2)
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    let end = epoch_ns();
    dut.stop().unwrap();
    bird.stop().unwrap();
    let analysis = analyze_window(capture.finish().unwrap(), "all", start, end);
    let v4 = sessions.iter().find(|s| s["peer"] == PEER.ipv4).unwrap();
    assert_ne!(v4["state"], "up", "{v4:#}");
    // The wire: both sides of IPv4 authenticated and never past Down.
    for (src, dst) in [(DUT.ipv4, PEER.ipv4), (PEER.ipv4, DUT.ipv4)] {
        let f = flow(&analysis, src, dst);
        assert!(f.packets >= 1, "{src} -> {dst}");
        assert_eq!(
            f.auth.as_ref().map(|a| a.packets),
            Some(f.packets),
            "{src} -> {dst}"
        );
        assert_eq!(f.last_state, Some(State::Down), "{src} -> {dst}: {f:?}");
        assert_eq!(f.up_gap_ms.count, 0, "{src} -> {dst} was Up");
    }
    assert_eq!(
        flow(&analysis, PEER.ipv6, DUT.ipv6).last_state,
        Some(State::Up)
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_exit(&linecard(&["lab", "down"]), 0, "lab down");
}

/// Forged and replayed packets from the spare host, as the peer: its
/// addresses, both discriminators, the A bit. `genuine` carries the right
/// key, and so a valid digest, with a sequence number of the past.
fn forgeries(our_discr: u32, peer_discr: u32, last_sequence: u32, secret: &str) -> Vec<Vec<u8>> {
    let packet = |key: &str, sequence: u32| {
        let mut bytes = [0u8; 20];
        bytes[..key.len()].copy_from_slice(key.as_bytes());
        let repr = Repr {
            diag: Diagnostic::NoDiagnostic,
            state: linecard_engine::wire::State::Up,
            poll: false,
            final_: false,
            control_plane_independent: false,
            demand: false,
            detect_mult: 3,
            my_discr: peer_discr,
            your_discr: our_discr,
            desired_min_tx_us: 10_000,
            required_min_rx_us: 10_000,
            required_min_echo_rx_us: 0,
            auth: Some(AuthSection {
                auth_type: AuthType::MeticulousKeyedSha1,
                key_id: KEY_ID,
                sequence: Some(sequence),
                bytes,
                len: 20,
            }),
        };
        let mut frame = from_spare(craft::frame(255, &repr.to_bytes()));
        craft::fix_ipv4_checksum(&mut frame);
        frame
    };
    vec![
        // Without the key: a guessed digest, the next sequence number.
        packet("guessed-secret", last_sequence.wrapping_add(1)),
        // A replay: genuine, 5 behind.
        packet(secret, last_sequence.wrapping_sub(5)),
    ]
}

/// Userspace verification (rt) and the kernel's (xdp): the same forgeries,
/// the same Down; with xdp the forgeries are refused before userspace, by
/// the fast path, and counted there.
#[test]
fn a_dead_peer_is_declared_down_whatever_forgeries_arrive() {
    in_the_lab("auth_forgeries", || {
        for backend in ["rt", "xdp"] {
            retrying_invalid(&format!("forgeries ({backend})"), || {
                forgeries_once(backend, Verification::On)
            })
        }
    });
}

/// The negative control: with verification switched off in both planes
/// (`engine.verify_authentication = false`), the same forgeries keep the
/// dead peer's session Up for as long as they arrive: the test above must
/// fail with it.
#[test]
fn with_verification_off_the_forgeries_keep_a_dead_session_up() {
    in_the_lab("auth_forgeries_unverified", || {
        retrying_invalid("forgeries, verification off", || {
            forgeries_once("xdp", Verification::Off)
        })
    });
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verification {
    On,
    /// The negative control.
    Off,
}

fn forgeries_once(backend: &str, verification: Verification) -> Result<(), String> {
    let dir = scratch_dir("auth-forgeries");
    let secret = "meticulous-1";
    let a = auth("meticulous_keyed_sha1", secret);
    let mut bird = start_peer(&dir, &a);
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let engine_extra = match verification {
        Verification::On => "",
        Verification::Off => "verify_authentication = false\n",
    };
    let mut dut = start_dut_on(backend, &dir, &socket, &a, &a, engine_extra);
    let sessions = wait_sessions(&socket, &mut dut, Duration::from_secs(10), "both Up", up);
    let v4 = sessions.iter().find(|s| s["peer"] == PEER.ipv4).unwrap();
    let our = v4["local_discr"].as_u64().unwrap() as u32;
    let theirs = v4["remote"]["discr"].as_u64().unwrap() as u32;
    let last = v4["auth"]["receive_sequence"].as_u64().unwrap() as u32;
    let frames = forgeries(our, theirs, last, secret);

    // BIRD dies; forgeries arrive every 2 ms for 200 ms from then on.
    let witness = CpuWitness::start(&dir, 10);
    let start = epoch_ns();
    bird.kill().unwrap();
    for _ in 0..100 {
        inject(&frames, 1);
        std::thread::sleep(Duration::from_millis(2));
    }
    let view = ctl(&socket, &["list", "--json"]);
    let kernel = ctl(&socket, &["drops"])["fast_path"].clone();
    let end = epoch_ns();
    let stalls = witness.finish();
    dut.stop().unwrap();
    let analysis = analyze_window(capture.finish().unwrap(), "kill", start - 500_000_000, end);

    let ours = flow(&analysis, DUT.ipv4, PEER.ipv4);
    // BIRD's own flow (its port) and the forgeries' (the crafted 49152).
    let window = &analysis.phases[0].result;
    let forged = window
        .flows
        .iter()
        .find(|f| f.src == PEER.ipv4 && f.src_port == 49152)
        .expect("the forgeries on the wire");
    // The engine's own account of the IPv4 session.
    let v4 = view["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["peer"] == PEER.ipv4)
        .unwrap();
    if verification == Verification::Off {
        // Precondition: the forgeries ran for many detection times.
        assert!(
            forged.last_ts_ns - forged.first_ts_ns > 150_000_000,
            "{forged:?}"
        );
        let early_down = ours
            .flap_events
            .iter()
            .find(|e| e.at_ns < forged.last_ts_ns);
        assert!(
            early_down.is_none() && v4["state"] == "up",
            "unverified, the forgeries still failed to keep the dead session Up (Down at {early_down:?}, state {}): the forgery test would pass without verification",
            v4["state"]
        );
        eprintln!(
            "verification off: {} forged packets kept the dead session Up for {:.0} ms",
            forged.packets,
            (forged.last_ts_ns - forged.first_ts_ns) as f64 / 1e6
        );
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    let down = ours
        .flap_events
        .first()
        .unwrap_or_else(|| panic!("the DUT never went Down: {ours:?}"));
    assert_eq!(down.diag, 1, "Down for another reason: {down:?}");
    let bird_last = window
        .flows
        .iter()
        .filter(|f| f.src == PEER.ipv4 && f.dst == DUT.ipv4 && f.src_port != 49152)
        .map(|f| f.last_ts_ns)
        .max()
        .unwrap();
    // Precondition: the forgeries were on the wire while the detection
    // time ran, and after it.
    assert!(
        forged.first_ts_ns < bird_last + 30_000_000,
        "forgeries came late: {forged:?}"
    );
    assert!(
        forged.last_ts_ns > down.at_ns,
        "forgeries stopped before the Down"
    );
    let latency_ms = (down.at_ns - bird_last) as f64 / 1e6;
    eprintln!(
        "IPv4: Down {latency_ms:.2} ms after BIRD's last packet, {} forged packets on the wire",
        forged.packets
    );
    if latency_ms > 30.0 + 10.0 {
        explained(
            &stalls,
            bird_last,
            down.at_ns,
            &format!("Down {latency_ms:.2} ms after BIRD's last packet (detection time 30 ms)"),
        )?;
    }
    // The engine's account of why: guessed digests and the replay, refused
    // in userspace (rt) or in the kernel before userspace (xdp).
    let by_kernel = |reason: &str| kernel["drops_by_reason"][reason].as_u64().unwrap_or(0);
    if backend == "xdp" {
        // Precondition: the program ran here and passed BIRD's genuine
        // packets up (every packet of an authenticated session goes up).
        let passed: u64 = kernel["verdicts_per_cpu"]
            .as_array()
            .expect("the fast path's counters: was xdp attached?")
            .iter()
            .map(|cpu| {
                cpu[linecard_common::bfd::verdict::PASSED as usize]
                    .as_u64()
                    .unwrap()
            })
            .sum();
        assert!(
            passed > 0,
            "no genuine packet passed the fast path: {kernel:#}"
        );
        assert!(by_kernel("auth_failed") >= 50, "{kernel:#}");
        assert!(by_kernel("auth_sequence") >= 1, "{kernel:#}");
        assert_eq!(
            (drops_of(v4, "auth_failed"), drops_of(v4, "auth_sequence")),
            (0, 0),
            "a forgery reached userspace past the kernel: {v4:#}"
        );
        eprintln!(
            "xdp: the kernel refused {} guessed digests and {} replays; {passed} genuine packets passed",
            by_kernel("auth_failed"),
            by_kernel("auth_sequence")
        );
    } else {
        assert!(drops_of(v4, "auth_failed") >= 50, "{v4:#}");
        assert!(drops_of(v4, "auth_sequence") >= 1, "{v4:#}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_key_rollover_at_run_time_keeps_the_session_up() {
    in_the_lab("auth_key_rollover", || {
        retrying_invalid("rollover", rollover_once)
    });
}

fn rollover_once() -> Result<(), String> {
    let dir = scratch_dir("auth-rollover");
    // BIRD accepts both keys (RFC 5880 6.7.1's rollover: the receiver
    // takes either while the sender switches).
    let old = SessionAuth {
        kind: "keyed_sha1".into(),
        key_id: 1,
        secret: "old-secret".into(),
    };
    let session = |local: &str, peer: &str| PeerSession {
        auth: Some(old.clone()),
        ..session_3x10(local, peer)
    };
    let config = linecard_harness::procs::bird_config(
        PEER.ipv4.parse().unwrap(),
        &[session(PEER.ipv4, DUT.ipv4)],
    );
    let both = config.replace(
        "password \"old-secret\" { id 1; };",
        "password \"old-secret\" { id 1; };\n    password \"new-secret\" { id 2; };",
    );
    assert_ne!(both, config, "BIRD's password line moved:\n{config}");
    let mut bird = linecard_harness::procs::start_bird_config(
        "bird",
        PEER.namespace,
        Some(&spec::cpuset_dir(spec::REST_CPUSET)),
        &dir,
        &both,
    )
    .unwrap();
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let config = format!(
        "[engine]\ncontrol_socket = \"{}\"\ncpu = {}\n\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\n\
         tx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"rt\"\n\
         auth = {{ type = \"keyed_sha1\", send_key = 1, keys = [{{ id = 1, secret = \"old-secret\" }}, {{ id = 2, secret = \"new-secret\" }}] }}\n",
        socket.display(),
        dut_cpu(),
        PEER.ipv4,
        DUT.ipv4
    );
    let mut dut = start_linecardd_toml(&dir, &config);
    let one_up =
        |s: &[serde_json::Value]| s.len() == 1 && s[0]["state"] == "up" && s[0]["polling"] == false;
    wait_sessions(&socket, &mut dut, Duration::from_secs(10), "Up", one_up);
    let witness = CpuWitness::start(&dir, 10);
    let start = epoch_ns();
    std::thread::sleep(Duration::from_secs(1));
    let pair = ["--local", DUT.ipv4, "--peer", PEER.ipv4];
    let mut args = vec!["key"];
    args.extend(pair);
    args.extend(["--send", "2"]);
    ctl(&socket, &args);
    std::thread::sleep(Duration::from_secs(1));
    // A key the session does not hold is refused, and changes nothing.
    let mut bad = vec!["key"];
    bad.extend(pair);
    bad.extend(["--send", "9"]);
    assert!(try_ctl(&socket, &bad).is_none(), "key 9 was accepted");
    let view = ctl(&socket, &["list", "--json"]);
    let end = epoch_ns();
    let stalls = witness.finish();
    dut.stop().unwrap();
    bird.stop().unwrap();
    let analysis = analyze_window(capture.finish().unwrap(), "rollover", start, end);
    assert_eq!(view["sessions"][0]["auth"]["send_key"], 2, "{view:#}");
    let ours = flow(&analysis, DUT.ipv4, PEER.ipv4);
    let theirs = flow(&analysis, PEER.ipv4, DUT.ipv4);
    for f in [ours, theirs] {
        if f.flaps > 0 {
            let what = format!("{} -> {}: {} flaps", f.src, f.dst, f.flaps);
            explained(&stalls, start, end, &what)?;
        }
        assert_eq!(f.last_state, Some(State::Up), "{} -> {}", f.src, f.dst);
        assert_eq!(f.auth.as_ref().map(|a| a.packets), Some(f.packets));
    }
    // Our packets switched keys on the wire, the session never noticed.
    assert_eq!(ours.auth.as_ref().unwrap().key_ids, [1, 2], "{ours:?}");
    assert_eq!(drops_of(&view["sessions"][0], "auth_failed"), 0, "{view:#}");
    eprintln!(
        "rollover: our Key IDs {:?}, BIRD's {:?}, 0 flaps, {} and {} packets",
        ours.auth.as_ref().unwrap().key_ids,
        theirs.auth.as_ref().unwrap().key_ids,
        ours.packets,
        theirs.packets
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
