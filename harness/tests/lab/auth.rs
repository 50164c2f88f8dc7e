//! Authentication (RFC 5880 section 6.7) against a real, unmodified BIRD
//! 2.0.12, every type, IPv4 and IPv6, 3 x 10 ms, judged on a capture taken
//! on the observer's bridge port facing the DUT: what the wire shows of
//! each side's authentication, a wrong key refused, a key rolled over, and
//! (through the product's own scenario and gate) a dead peer's session
//! that no impostor keeps alive.

use crate::common::*;
use linecard_api::AuthType;
use linecard_api::AUTH_TYPES;
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::model::{Analysis, FlowResult};
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

/// What the fast path has sent so far (`ctl drops`): its RX-clocked
/// replies, signed in the kernel, and its own clock's packets, signed by
/// the responder thread, both from the shared sequence.
fn kernel_sent(socket: &Path) -> u64 {
    let drops = ctl(socket, &["drops"]);
    fast_path_verdicts(&drops, linecard_common::bfd::verdict::REPLIED)
        + drops["fast_path"]["own_clock_sent"].as_u64().unwrap()
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

/// A genuine session's authentication refused nothing of its peer's,
/// and spent no digest budget on it.
fn assert_refused_nothing(session: &serde_json::Value, what: &str) {
    for reason in [
        "auth_mismatch",
        "auth_failed",
        "auth_sequence",
        "bad_auth",
        "verify_budget",
    ] {
        assert_eq!(drops_of(session, reason), 0, "{what}{reason}: {session:#}");
    }
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

/// Our Downs that each came a detection time (30 ms, 1 ms of tolerance)
/// after BIRD's last packet on the capture are true detections (RFC 5880
/// 6.8.4): BIRD fell silent (seen in CI: 31.3 ms on IPv4 while its IPv6
/// session sent), which says nothing about authentication (`Err`: run
/// again). An early Down, or one without the Diag of a detection, stays
/// the test's failure.
fn peer_fell_silent(side: &str, f: &FlowResult, what: &str) -> Result<(), String> {
    let true_detections = side == "linecardd"
        && f.flap_events
            .iter()
            .all(|ev| ev.detection_latency_ms.is_some_and(|ms| ms >= 29.0));
    if true_detections {
        return Err(format!(
            "{what}: {} flaps, each a Down a detection time after BIRD's last packet: BIRD fell silent",
            f.flaps
        ));
    }
    Ok(())
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
    // On xdp: userspace signs the bring-up, the kernel the steady replies,
    // both from one bfd.XmitAuthSeq.
    let mut dut = start_dut_on("xdp", &dir, &socket, &a, &a, "");
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "both sessions Up",
        up,
    );
    let witness = CpuWitness::start(&dir, 10);
    let replied_before = kernel_sent(&socket);
    let start = epoch_ns();
    std::thread::sleep(Duration::from_secs(2));
    let end = epoch_ns();
    let stalls = witness.finish();
    let kernel_in_window = kernel_sent(&socket) - replied_before;
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
                peer_fell_silent(side, f, &what)?;
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
    // The precondition: the fast path sent (nearly) all of ours in the
    // window, so the capture judged its signatures, not the loop's.
    let ours: u64 = [(DUT.ipv4, PEER.ipv4), (DUT.ipv6, PEER.ipv6)]
        .iter()
        .map(|(d, p)| flow(&analysis, d, p).packets)
        .sum();
    assert!(
        kernel_in_window * 10 >= ours * 9,
        "{kind}: the fast path sent {kernel_in_window} of our {ours} packets in 2 s"
    );
    // And the engine's own account: nothing it refused.
    for s in view["sessions"].as_array().unwrap() {
        assert_refused_nothing(s, &format!("{kind}: "));
        assert_eq!(s["auth"]["auth_type"], kind, "{s:#}");
    }
    eprintln!(
        "{kind}: both families Up, every packet of both sides authenticated as configured, \
         {kernel_in_window} of ours from the fast path"
    );
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

/// `scenarios/impostor.toml` end to end: BIRD killed while the spare
/// host sends as it (guessed keys and replays, `run::impostor`), for rt
/// (verification in userspace) and xdp (in the kernel, before userspace).
/// Each DUT's Down a detection time after BIRD's last genuine packet is the
/// faults judge's to check and the gate's to hold; here, what the engines
/// say they refused, and where. Then the negative control: verification
/// off in both planes (`engine.verify_authentication = false`) must fail
/// the run and the gate, both DUTs taken in by the impostor.
#[test]
fn an_impostor_never_keeps_a_dead_peers_session_up() {
    if !privileged("an_impostor_never_keeps_a_dead_peers_session_up") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("ri");
    let scenario = repo().join("scenarios/impostor.toml");
    let Some((out, dir)) = judged_run(&scenario, "impostor", &results, "i", &[]) else {
        return;
    };
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap()
    );
    assert_exit(&out, 0, "the impostor scenario");
    // The scenario's secret is only in the files the daemons read, and
    // those are their owner's alone; the manifest names the key by its
    // fingerprint.
    let holders = files_holding(&dir, "linecard-auth");
    assert!(
        !holders.is_empty(),
        "the daemons' configurations hold the key: the scan proves something"
    );
    for path in &holders {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let name = path.file_name().unwrap().to_string_lossy();
        assert!(
            mode == 0o600 && (name.ends_with(".toml") || name == "bird.conf"),
            "{} (mode {mode:o}) holds the secret",
            path.display()
        );
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert!(
        manifest["scenario"]["sessions"]["auth"]["secret_sha256_8"].is_string(),
        "{:#}",
        manifest["scenario"]["sessions"]
    );
    for label in ["xdp", "rt"] {
        // Precondition: the impostor was on the wire (the judge holds
        // 100 of its packets at least; it sends 2 every 2 ms for 300 ms).
        let fault = dut(&manifest, label)["evidence"]["phases"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|p| p["fault"].as_object())
            .unwrap()
            .clone();
        let impostor_packets = fault["impostor_packets"].as_u64().unwrap();
        assert!(impostor_packets >= 150, "{fault:?}");
        assert_eq!(
            fault["detections_ms"].as_array().unwrap().len(),
            1,
            "{fault:?}"
        );
        // The engine's account, read at the end of the run: the impostor's
        // packets refused, guesses for their digest or (once the peer's
        // last packets moved bfd.RcvAuthSeq past the guess's number) for
        // their sequence number, replays for their sequence number.
        let view: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(label).join("engine-view.json")).unwrap(),
        )
        .unwrap();
        let session = &view["list"]["sessions"][0];
        let refused = |count: &dyn Fn(&str) -> u64| {
            let (digest, sequence) = (count("auth_failed"), count("auth_sequence"));
            // The guesses past the digest budget are refused uncomputed,
            // in the kernel and in userspace alike (linecard_common::verify):
            // a CI run counted 9 of 288 on xdp.
            let budget = count("verify_budget");
            assert!(
                // All but the few replays let through once the dead peer's
                // window lapsed (5 of 288 in each recorded run).
                digest >= 50
                    && sequence >= 50
                    && digest + sequence + budget + 10 >= impostor_packets,
                "{label}: of the impostor's {impostor_packets} packets on the wire, {digest} refused for their digest, {sequence} for their sequence number, {budget} past the digest budget: {view:#}"
            );
        };
        if label == "xdp" {
            // In the kernel, before userspace.
            refused(&|reason| {
                view["drops"]["fast_path"]["drops_by_reason"][reason]
                    .as_u64()
                    .unwrap_or(0)
            });
            // No guess reached userspace. (A replay may, each time the
            // dead peer's bfd.AuthSeqKnown lapses, RFC 5880 6.8.1: twice
            // the detection time without an accepted packet; 5 of 288
            // passed in each recorded run, as many as 300 ms holds lapses
            // of 60 ms, each re-arming the window. The restarted peer's
            // first packet, Your Discriminator 0 and so judged in
            // userspace, would then fall in that window: likely the one
            // auth_sequence refusal there. Inferred from the counts.)
            assert_eq!(drops_of(session, "auth_failed"), 0, "{session:#}");
        } else {
            refused(&|reason| drops_of(session, reason));
        }
    }
    let (gated, _) = gate(&dir, "impostor");
    assert_exit(&gated, 0, "the gate on the impostor scenario");

    let control = results.join("unverified.toml");
    let text = engine_switched(&scenario, "verify_authentication = false", 2);
    std::fs::write(&control, text).unwrap();
    let profiles = repo().join("stress-profiles");
    let Some((out, control_dir)) = judged_run(
        &control,
        "impostor",
        &results,
        "c",
        &["--profiles", profiles.to_str().unwrap()],
    ) else {
        return;
    };
    assert_exit(&out, 1, "the impostor scenario with verification off");
    let (gated, diff) = gate(&control_dir, "impostor");
    assert_exit(&gated, 1, "the gate with verification off");
    for label in ["xdp", "rt"] {
        assert!(
            diff.lines().any(|l| l.contains("REGRESSED")
                && l.split_whitespace().nth(1) == Some(label)
                && l.split_whitespace().nth(2) == Some("idle#1")
                && l.split_whitespace().nth(3) == Some("fault_failures")),
            "{label}: the gate did not name the impostor's phase: {diff}"
        );
    }
    let _ = std::fs::remove_dir_all(&results);
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
    let mut bird = linecard_harness::procs::start_bird_program(
        &linecard_harness::scenario::programs::Programs::default().bird(),
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
         tx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"xdp\"\ninterface = \"{}\"\n\
         auth = {{ type = \"keyed_sha1\", send_key = 1, keys = [{{ id = 1, secret = \"old-secret\" }}, {{ id = 2, secret = \"new-secret\" }}] }}\n",
        socket.display(),
        dut_cpu(),
        PEER.ipv4,
        DUT.ipv4,
        spec::HOST_IFACE
    );
    let mut dut = start_linecardd_toml(&dir, &config);
    let one_up =
        |s: &[serde_json::Value]| s.len() == 1 && s[0]["state"] == "up" && s[0]["polling"] == false;
    wait_sessions(&socket, &mut dut, Duration::from_secs(10), "Up", one_up);
    let witness = CpuWitness::start(&dir, 10);
    let start = epoch_ns();
    std::thread::sleep(Duration::from_secs(1));
    let replied_before_rollover = kernel_sent(&socket);
    let pair = ["--local", DUT.ipv4, "--peer", PEER.ipv4];
    let mut args = vec!["key"];
    args.extend(pair);
    args.extend(["--send", "2"]);
    ctl(&socket, &args);
    let replied_at_rollover = kernel_sent(&socket);
    std::thread::sleep(Duration::from_secs(1));
    // The fast path signs with the new key: it kept sending after the
    // rollover (~100 in the second), offloaded throughout.
    let replied_after = kernel_sent(&socket) - replied_at_rollover;
    assert!(
        replied_before_rollover >= 50 && replied_after >= 50,
        "fast path: {replied_before_rollover} sent before the rollover, {replied_after} in the second after"
    );
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
    // Our packets switched keys on the wire, the session never noticed,
    // and every one of ours took the next number whichever plane sent it.
    assert_eq!(ours.auth.as_ref().unwrap().key_ids, [1, 2], "{ours:?}");
    let seen = ours.auth.as_ref().unwrap();
    assert_eq!(
        (seen.sequence_next, seen.sequence_other),
        (ours.packets - 1, 0),
        "{ours:?}"
    );
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

/// FRR bfdd's keyed SHA1 (HMAC-SHA1 over the packet with the digest
/// zeroed, FRR issue 23274) as an explicit construction: FRR 8.4.4 in
/// Debian has no authentication, so the peer is a second linecardd (rt)
/// configured with the same `digest = "frr-hmac-sha1"`. The kernel does
/// not compute FRR's digest: it passes the session's packets to userspace,
/// which verifies them, and never answers for it.
#[test]
fn frrs_hmac_sha1_comes_up_verified_in_userspace_on_xdp() {
    in_the_lab("auth_frr_hmac", || {
        let dir = scratch_dir("auth-frr-hmac");
        let auth = "auth = { type = \"keyed_sha1\", digest = \"frr-hmac-sha1\", keys = [{ id = 1, secret = \"frr-secret\" }] }\n";
        let peer_config = format!(
            "[engine]\ncontrol_socket = \"{}\"\n\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\n\
             tx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"rt\"\n{auth}",
            dir.join("peer.sock").display(),
            DUT.ipv4,
            PEER.ipv4
        );
        std::fs::write(dir.join("peer.toml"), peer_config).unwrap();
        let mut peer = Daemon::spawn(
            "linecardd-peer",
            PEER.namespace,
            Some(&spec::cpuset_dir(spec::REST_CPUSET)),
            linecardd().to_str().unwrap(),
            &[
                "--config".to_string(),
                dir.join("peer.toml").display().to_string(),
            ],
            &dir.join("peer.log"),
        )
        .unwrap();
        let capture = capture_dut_port(&dir);
        let socket = dir.join("dut.sock");
        let config = format!(
            "[engine]\ncontrol_socket = \"{}\"\ncpu = {}\n\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\n\
             tx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"xdp\"\ninterface = \"{}\"\n{auth}",
            socket.display(),
            dut_cpu(),
            PEER.ipv4,
            DUT.ipv4,
            spec::HOST_IFACE
        );
        let mut dut = start_linecardd_toml(&dir, &config);
        let one_up = |s: &[serde_json::Value]| s.len() == 1 && s[0]["state"] == "up";
        wait_sessions(&socket, &mut dut, Duration::from_secs(10), "Up", one_up);
        let before = ctl(&socket, &["drops"]);
        let start = epoch_ns();
        std::thread::sleep(Duration::from_secs(1));
        let end = epoch_ns();
        let after = ctl(&socket, &["drops"]);
        let view = ctl(&socket, &["list", "--json"]);
        dut.stop().unwrap();
        peer.stop().unwrap();
        let analysis = analyze_window(capture.finish().unwrap(), "up", start, end);
        use linecard_common::bfd::verdict::{PASSED, REPLIED};
        let moved = |v: u32| fast_path_verdicts(&after, v) - fast_path_verdicts(&before, v);
        // Precondition: the kernel judged the peer's packets (and passed
        // them on); it answered none.
        assert!(moved(PASSED) >= 50, "passed {}: {after:#}", moved(PASSED));
        assert_eq!(moved(REPLIED), 0, "{after:#}");
        let session = &view["sessions"][0];
        assert_refused_nothing(session, "");
        for (src, dst) in [(DUT.ipv4, PEER.ipv4), (PEER.ipv4, DUT.ipv4)] {
            let f = flow(&analysis, src, dst);
            assert!(f.packets >= 50, "{src} -> {dst}: {}", f.packets);
            assert_eq!(f.flaps, 0, "{src} -> {dst}");
            assert_eq!(f.last_state, Some(State::Up), "{src} -> {dst}");
            let seen = f
                .auth
                .clone()
                .unwrap_or_else(|| panic!("{src} -> {dst}: no A bit"));
            assert_eq!((seen.packets, seen.types), (f.packets, vec![4]));
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// `scenarios/flood.toml`, shortened to 20 000 frames in a 12 s L4 phase
/// (the committed runs hold the full 100 000): an impostor floods the live
/// authenticated session with guessed digests and replays while L4 loads
/// the DUT's CPU. The product judges it (every frame refused, on xdp in
/// the kernel with none reaching userspace, no Down on either side) and
/// the gate holds it to `baselines/flood.toml`.
#[test]
fn a_flood_of_forgeries_is_refused_in_the_kernel_and_the_session_holds() {
    if !privileged("a_flood_of_forgeries") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("fl");
    let text = std::fs::read_to_string(repo().join("scenarios/flood.toml")).unwrap();
    let full = "seconds = 44\nfault = { kind = \"flood\", frames = 100000 }";
    assert!(text.contains(full), "flood.toml's phase moved: {text}");
    let scenario = results.join("flood.toml");
    std::fs::write(
        &scenario,
        text.replace(
            full,
            "seconds = 12\nfault = { kind = \"flood\", frames = 20000 }",
        ),
    )
    .unwrap();
    let profiles = repo().join("stress-profiles");
    let Some((out, dir)) = judged_run(
        &scenario,
        "flood",
        &results,
        "f",
        &["--profiles", profiles.to_str().unwrap()],
    ) else {
        return;
    };
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap()
    );
    assert_exit(&out, 0, "the flood scenario");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let fault = dut(&manifest, "xdp")["evidence"]["phases"][1]["fault"].clone();
    // Preconditions: the flood was sent, reached the DUT's port, and the
    // kernel refused it, some frames for their digest (the guesses kept
    // inside the window cost one each).
    let counts = &fault["flood"];
    let sent = counts["sent"].as_u64().unwrap();
    assert!(sent >= 19_000, "{fault:#}");
    assert!(
        fault["impostor_packets"].as_u64().unwrap() * 100 >= sent * 99,
        "{fault:#}"
    );
    assert_eq!(counts["userspace_refused"], 0, "{fault:#}");
    let view: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("xdp/engine-view.json")).unwrap())
            .unwrap();
    let by_reason = &view["drops"]["fast_path"]["drops_by_reason"];
    let count = |reason: &str| by_reason[reason].as_u64().unwrap_or(0);
    let (digest, sequence, budget) = (
        count("auth_failed"),
        count("auth_sequence"),
        count("verify_budget"),
    );
    assert!(
        digest + sequence + budget >= sent,
        "{sent} sent: {digest} refused for their digest, {sequence} for their sequence \
         number, {budget} past the digest budget"
    );
    // The budget was spent and held (linecard_common::verify): the
    // guesses inside the window outran it, and the digests computed for
    // them stayed within its rate (4 per 10 ms interval, 16 at once)
    // over the flood's time bound (twice its pace).
    assert!(
        budget > 0,
        "the flood never spent the budget: {by_reason:#}"
    );
    let flood_s = 2 * sent / (linecard_harness::scenario::FLOOD_FRAMES_PER_MS * 1000) + 1;
    assert!(
        digest <= 16 + 400 * flood_s,
        "{digest} digests computed for forgeries in at most {flood_s} s"
    );
    // And the peer's packets were judged against the digests the sweep
    // computed ahead, not computed one by one.
    let digests = &view["list"]["sessions"][0]["kernel_digests"];
    assert!(
        digests["expected_hits"].as_u64().unwrap() > digests["computed"].as_u64().unwrap(),
        "{digests:#}"
    );
    let (gated, _) = gate(&dir, "flood");
    assert_exit(&gated, 0, "the gate on the flood scenario");
    let _ = std::fs::remove_dir_all(&results);
}

/// Every file under `dir` (captures aside: keyed authentication puts no
/// secret on the wire) whose bytes hold `secret`.
fn files_holding(dir: &Path, secret: &str) -> Vec<std::path::PathBuf> {
    let mut pending = vec![dir.to_path_buf()];
    let mut found = Vec::new();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_none_or(|e| e != "pcap")
            && String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).contains(secret)
        {
            found.push(path);
        }
    }
    found
}
