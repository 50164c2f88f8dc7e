//! Bad input never changes a session: crafted BFD packets from the spare
//! host are counted by reason while a live session keeps running (its own
//! packet counter must move in the same window), an IPv6 packet behind a
//! destination options header never reaches a session (the same packet
//! without it does: the positive control), and garbage on the control
//! socket gets an error reply while the daemon keeps running.

use crate::common::*;
use linecard_harness::lab::spec::{self, DUT, PEER, SPARE};
use linecard_harness::procs::start_frr_bfdd;
use linecard_harness::sys::in_netns;
use std::io::{BufRead, BufReader, Write};
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const COPIES: u64 = 50;

/// A control packet: Up, mult 3, discriminators as given, 10 ms timers.
fn packet(state: u8, my: u32, your: u32) -> Vec<u8> {
    let mut p = vec![0x20, state << 6, 3, 24];
    p.extend_from_slice(&my.to_be_bytes());
    p.extend_from_slice(&your.to_be_bytes());
    for v in [10_000u32, 10_000, 0] {
        p.extend_from_slice(&v.to_be_bytes());
    }
    p
}

fn send_from_spare(cases: &[(u8, Vec<u8>)]) {
    let cases = cases.to_vec();
    in_netns(SPARE.namespace, move || {
        let socket = UdpSocket::bind((SPARE.ipv4, 0))?;
        for (ttl, bytes) in &cases {
            let ttl = i32::from(*ttl);
            // SAFETY: setsockopt with a pointer to a live i32.
            let rc = unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_TTL,
                    (&ttl as *const i32).cast(),
                    4,
                )
            };
            assert_eq!(rc, 0);
            for _ in 0..COPIES {
                socket.send_to(bytes, (DUT.ipv4, 3784))?;
                // Paced: the test is about classification, not about how
                // large a burst the receive buffer absorbs.
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(())
    })
    .unwrap();
}

/// Sends `bytes` COPIES times from the spare host to the DUT's IPv6
/// address at hop limit 255, behind an 8-byte destination options header
/// (PadN) when `dest_options`.
fn send_v6_from_spare(bytes: &[u8], dest_options: bool) {
    let bytes = bytes.to_vec();
    in_netns(SPARE.namespace, move || {
        let socket = UdpSocket::bind((SPARE.ipv6, 0))?;
        let fd = socket.as_raw_fd();
        let hops: i32 = 255;
        // SAFETY: setsockopt with pointers to live values of the given size.
        unsafe {
            assert_eq!(
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_UNICAST_HOPS,
                    (&hops as *const i32).cast(),
                    4
                ),
                0
            );
            if dest_options {
                // Next header (the kernel fills it), length 0 (8 bytes),
                // PadN of 4.
                let header: [u8; 8] = [0, 0, 1, 4, 0, 0, 0, 0];
                assert_eq!(
                    libc::setsockopt(
                        fd,
                        libc::IPPROTO_IPV6,
                        libc::IPV6_DSTOPTS,
                        header.as_ptr().cast(),
                        8
                    ),
                    0,
                    "IPV6_DSTOPTS: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
        for _ in 0..COPIES {
            socket.send_to(&bytes, (DUT.ipv6, 3784))?;
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(())
    })
    .unwrap();
}

#[test]
fn crafted_packets_are_counted_and_change_nothing() {
    if !privileged("crafted_packets_are_counted_and_change_nothing") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("bad-input");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let session = session_3x10(PEER.ipv4, DUT.ipv4);
    let _frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &[session]).unwrap();
    let socket = dir.join("dut.sock");
    let session = DutSession {
        peer: PEER.ipv4.to_string(),
        local: DUT.ipv4.to_string(),
        backend: "naive",
        interface: None,
    };
    // A second session, IPv6, facing the spare host (nobody answers it):
    // the target of the extension-header case below.
    let session6 = DutSession {
        peer: SPARE.ipv6.to_string(),
        local: DUT.ipv6.to_string(),
        backend: "naive",
        interface: None,
    };
    let mut dut = start_linecardd(&dir, &socket, "", &[session, session6]);
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(5),
        "the session Up",
        |s| s[0]["state"] == "up" && s[0]["polling"] == false,
    );
    // This test is about the discard rules, not timing: at 3 x 100 ms in
    // both directions (we send slower, FRR detects slower; we receive
    // slower, so our detection follows) a contended machine cannot flap the
    // session, so a transition below can only be a crafted packet's doing.
    ctl(
        &socket,
        &[
            "set",
            "--local",
            DUT.ipv4,
            "--peer",
            PEER.ipv4,
            "--tx-ms",
            "100",
            "--rx-ms",
            "100",
            "--multiplier",
            "3",
        ],
    );
    let before = wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(5),
        "the session Up at 3 x 100 ms",
        |s| {
            s[0]["state"] == "up"
                && s[0]["polling"] == false
                && s[0]["detection_time_us"] == 300_000
        },
    )[0]
    .clone();
    let our_discr = before["local_discr"].as_u64().unwrap() as u32;

    let mut bad_version = packet(3, 7, our_discr);
    bad_version[0] = 0x40;
    let mut zero_mult = packet(3, 7, our_discr);
    zero_mult[2] = 0;
    let mut multipoint = packet(3, 7, our_discr);
    multipoint[1] |= 0x01;
    let mut long_length = packet(3, 7, our_discr);
    long_length[3] = 40;
    let cases = vec![
        (255, bad_version),
        (255, zero_mult),
        (255, multipoint),
        (255, long_length),
        (255, packet(3, 7, our_discr)[..20].to_vec()),
        (255, packet(3, 0, our_discr)),
        (255, packet(3, 7, 0)),
        // Valid packets: our discriminator from the wrong address, a
        // bootstrap from an unconfigured address, and TTL 64 (GTSM).
        (255, packet(3, 7, our_discr)),
        (255, packet(1, 7, 0)),
        (64, packet(1, 7, 0)),
    ];
    send_from_spare(&cases);
    // Wait (bounded) until the engine has classified everything it will.
    let expected_total = COPIES * cases.len() as u64;
    let deadline = Instant::now() + Duration::from_secs(3);
    let drops = loop {
        let drops = ctl(&socket, &["drops"]);
        let total: u64 = drops["drops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d[1].as_u64().unwrap())
            .sum();
        if total >= expected_total || Instant::now() > deadline {
            break drops;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let count = |reason: &str| {
        drops["drops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d[0] == reason)
            .map_or(0, |d| d[1].as_u64().unwrap())
    };
    for (reason, expected) in [
        ("bad_version", COPIES),
        ("zero_multiplier", COPIES),
        ("multipoint", COPIES),
        ("bad_length", COPIES),
        ("truncated", COPIES),
        ("zero_my_discriminator", COPIES),
        ("zero_your_discriminator", COPIES),
        ("no_session", 2 * COPIES),
        ("bad_ttl", COPIES),
    ] {
        assert_eq!(count(reason), expected, "{reason}: {drops}");
    }
    // The "+0" above means something only if the session was alive and
    // receiving in the same window: at 3 x 100 ms the window may need to
    // stretch to the peer's next packet (bounded).
    let received = |s: &serde_json::Value| s["counters"]["packets_in"].as_u64();
    let deadline = Instant::now() + Duration::from_secs(1);
    let after = loop {
        let after = ctl(&socket, &["list", "--json"])["sessions"][0].clone();
        if received(&after) > received(&before) || Instant::now() > deadline {
            break after;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(after["state"], "up");
    assert_eq!(
        after["counters"]["transitions"], before["counters"]["transitions"],
        "a crafted packet changed the session"
    );
    assert!(
        received(&after) > received(&before),
        "the live session must keep receiving"
    );
    assert_eq!(after["remote"]["discr"], before["remote"]["discr"]);

    // IPv6 behind a destination options header (RFC 8200 4.6): a valid
    // bootstrap from the spare host to the IPv6 session is refused as
    // such; the same packet without the header is accepted (the session
    // leaves Down), so the refusal is the header's doing.
    let drops_before = ctl(&socket, &["drops"]);
    send_v6_from_spare(&packet(1, 7, 0), true);
    send_v6_from_spare(&packet(1, 7, 0), false);
    let v6_state = || {
        let list = ctl(&socket, &["list", "--json"]);
        (
            list["sessions"][1]["peer"].clone(),
            list["sessions"][1]["state"].clone(),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    while v6_state().1 == "down" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (peer, state) = v6_state();
    assert_eq!(peer, SPARE.ipv6);
    assert_ne!(
        state, "down",
        "the plain packet (the control) was not accepted"
    );
    let drops_after = ctl(&socket, &["drops"]);
    let count = |d: &serde_json::Value| {
        d["drops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d[0] == "extension_header")
            .map_or(0, |d| d[1].as_u64().unwrap())
    };
    assert_eq!(
        count(&drops_after) - count(&drops_before),
        COPIES,
        "{drops_after}"
    );

    // Garbage on the control socket: an error reply, and the daemon lives.
    for garbage in [
        "hello\n",
        "{\"op\":\"explode\"}\n",
        "{\"op\":\"set\",\"local\":\"x\"}\n",
        "\n",
    ] {
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream.write_all(garbage.as_bytes()).unwrap();
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).unwrap();
        let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert!(reply["error"].is_string(), "{garbage:?} got {reply}");
    }
    assert!(dut.running());
    assert_eq!(
        ctl(&socket, &["list", "--json"])["sessions"][0]["state"],
        "up"
    );

    // Timers out of bounds on `ctl set`: an error reply naming the key and
    // its bound, checked before any arithmetic (4294968 ms once wrapped to
    // 704 us, or panicked a debug build); the session keeps its timers in
    // its own words and on the wire, and the daemon keeps running.
    let capture = capture_dut_port(&dir);
    let window_start = epoch_ns();
    for (tx, rx, mult, said) in [
        (
            "4294968",
            "100",
            "3",
            "tx_interval_ms = 4294968: must be 1 to 60000 milliseconds",
        ),
        (
            "0",
            "100",
            "3",
            "tx_interval_ms = 0: must be 1 to 60000 milliseconds",
        ),
        (
            "100",
            "60001",
            "3",
            "rx_interval_ms = 60001: must be 1 to 60000 milliseconds",
        ),
        ("100", "100", "0", "multiplier = 0: must be 1 to 255"),
    ] {
        let refused = linecard_harness::linecardd::ctl_with(
            &linecardd(),
            &socket,
            &[
                "set",
                "--local",
                DUT.ipv4,
                "--peer",
                PEER.ipv4,
                "--tx-ms",
                tx,
                "--rx-ms",
                rx,
                "--multiplier",
                mult,
            ],
        )
        .expect_err("an out-of-range set must be refused");
        assert!(format!("{refused:#}").contains(said), "{refused:#}");
    }
    // A second of the wire after the refusals: ten of our packets at 100 ms.
    std::thread::sleep(Duration::from_secs(1));
    let window_end = epoch_ns();
    let pcap = capture.finish().unwrap();
    assert!(dut.running(), "{}", dut.log_tail());
    let now = ctl(&socket, &["list", "--json"])["sessions"][0].clone();
    assert_eq!(
        (
            &now["state"],
            &now["desired_min_tx_us"],
            &now["detect_mult"],
            &now["polling"]
        ),
        (
            &serde_json::json!("up"),
            &serde_json::json!(100_000),
            &serde_json::json!(3),
            &serde_json::json!(false)
        ),
        "{now}"
    );
    let wire = analyze_window(pcap, "after the refused sets", window_start, window_end);
    let ours = wire.phases[0]
        .result
        .flows
        .iter()
        .find(|f| f.src == DUT.ipv4 && f.dst == PEER.ipv4)
        .expect("our packets on the wire");
    assert!(ours.packets >= 5, "{} packets", ours.packets);
    assert_eq!(
        (ours.polls, ours.desired_min_tx_ms, ours.detect_mult),
        (0, Some(100.0), Some(3)),
        "the wire after the refused sets"
    );
    dut.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A full `LC_SESSIONS` refuses the next session whole: `ctl add` gets an
/// error naming the map and its capacity, `ctl list` shows no half-added
/// session (once, the table kept it and the kernel dropped its packets: it
/// never came Up and a retry said "already exists"), and after a removal
/// the same add succeeds. 4096 passive sessions (they send nothing until
/// they hear a peer) towards addresses nobody holds fill the map.
#[test]
fn a_full_session_map_refuses_the_next_session_whole() {
    if !privileged("a_full_session_map_refuses_the_next_session_whole") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("full-map");
    let socket = dir.join("dut.sock");
    let capacity = linecard_common::bfd::MAX_SESSIONS as usize;
    let peer = |i: usize| format!("2001:db8::1:{i:x}");
    let mut config = format!("[engine]\ncontrol_socket = \"{}\"\n", socket.display());
    for i in 0..capacity {
        config.push_str(&format!(
            "\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\nbackend = \"xdp\"\ninterface = \"eth0\"\npassive = true\n",
            peer(i),
            DUT.ipv6
        ));
    }
    let mut dut = start_linecardd_toml(&dir, &config);
    let listed = |dut: &mut linecard_harness::procs::Daemon| {
        wait_sessions(
            &socket,
            dut,
            Duration::from_secs(60),
            "the sessions listed",
            |s| !s.is_empty(),
        )
    };
    assert_eq!(
        listed(&mut dut).len(),
        capacity,
        "the map's worth of sessions"
    );
    let add = |i: usize| {
        linecard_harness::linecardd::ctl_with(
            &linecardd(),
            &socket,
            &[
                "add",
                "--local",
                DUT.ipv6,
                "--peer",
                &peer(i),
                "--backend",
                "xdp",
                "--interface",
                "eth0",
            ],
        )
    };
    let refused = add(capacity).expect_err("one session more than LC_SESSIONS holds");
    assert!(
        format!("{refused:#}").contains("LC_SESSIONS (it holds 4096 sessions)"),
        "{refused:#}"
    );
    let sessions = listed(&mut dut);
    assert_eq!(sessions.len(), capacity, "a half-added session is listed");
    assert!(!sessions.iter().any(|s| s["peer"] == peer(capacity)));
    // Room again: the same add succeeds, whole.
    ctl(
        &socket,
        &["remove", "--local", DUT.ipv6, "--peer", &peer(0)],
    );
    add(capacity).unwrap_or_else(|e| panic!("the add after a removal: {e:#}"));
    let sessions = listed(&mut dut);
    assert_eq!(sessions.len(), capacity);
    assert!(sessions.iter().any(|s| s["peer"] == peer(capacity)));
    assert!(dut.running(), "{}", dut.log_tail());
    dut.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The control socket is root's door into the engine. linecardd never
/// deletes what is not a stale socket of its own (a regular file at
/// `control_socket` stops it, untouched), creates the socket mode 0600,
/// and answers only root and its own user: another user is refused by the
/// mode, and still by its credentials (SO_PEERCRED) once the mode is
/// widened by hand.
#[test]
fn the_control_socket_is_private_and_never_replaces_a_file() {
    if !privileged("the_control_socket_is_private") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("control-socket");
    let socket = dir.join("dut.sock");
    let session = || DutSession {
        peer: PEER.ipv4.to_string(),
        local: DUT.ipv4.to_string(),
        backend: "naive",
        interface: None,
    };
    std::fs::write(&socket, "precious\n").unwrap();
    let mut refused = start_linecardd(&dir, &socket, "", &[session()]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while refused.running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!refused.running(), "linecardd ran over a regular file");
    assert!(
        refused.log_tail().contains("exists and is not a socket"),
        "{}",
        refused.log_tail()
    );
    assert_eq!(std::fs::read_to_string(&socket).unwrap(), "precious\n");
    std::fs::remove_file(&socket).unwrap();

    let mut dut = start_linecardd(&dir, &socket, "", &[session()]);
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(5),
        "the socket",
        |s| !s.is_empty(),
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket's mode: {mode:o}");
    // Another user, with a copy of the client it can run wherever the
    // checkout lives.
    let client = dir.join("linecardd");
    std::fs::copy(linecardd(), &client).unwrap();
    let as_nobody = || {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&client)
            .args(["ctl", "--socket", socket.to_str().unwrap(), "list"])
            .output()
            .unwrap()
    };
    let out = as_nobody();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success() && said.contains("Permission denied"),
        "{said}"
    );
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = as_nobody();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success() && said.contains("not allowed"),
        "{said}"
    );
    // Root still is.
    assert_eq!(
        ctl(&socket, &["list", "--json"])["sessions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert!(dut.running());
    dut.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
