//! Multihop BFD (RFC 5883) on the userspace path (naive) and on the xdp
//! fast path, against FRR bfdd (IPv6,
//! `peer X multihop local-address Y`, minimum TTL 254) and BIRD (IPv4, on
//! the spare host, which sends multihop packets at TTL 64), beside a
//! single-hop session to FRR. On the capture: every multihop packet went
//! to UDP 4784 and ours left at TTL 255. The GTSM relaxation belongs to the
//! multihop sessions alone: while they run, a TTL 200 packet aimed at the
//! single-hop session is dropped on either port, an unconfigured pair is
//! dropped, and a packet below a multihop session's own minimum is
//! dropped (by the session in userspace, by the kernel on the fast path,
//! which also answers the multihop sessions itself).

use crate::common::*;
use linecard_bpf_objects::craft;
use linecard_capture_analyzer::{analyze, Options};
use linecard_common::bfd::drop;
use linecard_harness::lab::spec::{self, DUT, PEER, SPARE};
use linecard_harness::procs::{start_bird, start_frr_bfdd, PeerSession};
use linecard_harness::sys::in_netns;
use std::net::{IpAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const COPIES: u64 = 20;

/// A control packet: state, mult 3, discriminators, 10 ms timers.
fn packet(state: u8, my: u32, your: u32) -> Vec<u8> {
    let mut p = vec![0x20, state << 6, 3, 24];
    p.extend_from_slice(&my.to_be_bytes());
    p.extend_from_slice(&your.to_be_bytes());
    for v in [10_000u32, 10_000, 0] {
        p.extend_from_slice(&v.to_be_bytes());
    }
    p
}

/// Sends `bytes` COPIES times from the spare host's `from` to the DUT's
/// `to`:`port` at TTL (or hop limit) `ttl`.
fn send_from_spare(from: &'static str, to: &'static str, port: u16, ttl: u8, bytes: Vec<u8>) {
    in_netns(SPARE.namespace, move || {
        let from: IpAddr = from.parse().unwrap();
        let socket = UdpSocket::bind((from, 0))?;
        let (level, option) = if from.is_ipv6() {
            (libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS)
        } else {
            (libc::IPPROTO_IP, libc::IP_TTL)
        };
        let ttl = i32::from(ttl);
        // SAFETY: setsockopt with a pointer to a live i32.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                level,
                option,
                (&ttl as *const i32).cast(),
                4,
            )
        };
        assert_eq!(rc, 0);
        for _ in 0..COPIES {
            socket.send_to(&bytes, (to, port))?;
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    })
    .unwrap();
}

fn drops(v: &serde_json::Value, reason: &str) -> u64 {
    v.as_array()
        .unwrap()
        .iter()
        .find(|d| d[0] == reason)
        .map_or(0, |d| d[1].as_u64().unwrap())
}

/// The kernel's drop counter for `reason` (`ctl drops`).
fn kernel_drops(v: &serde_json::Value, reason: u32) -> u64 {
    v["fast_path"]["drops"][reason as usize]
        .as_u64()
        .unwrap_or(0)
}

#[test]
fn multihop_sessions_run_on_the_userspace_path_and_the_gtsm_relaxation_stays_theirs() {
    if !privileged("multihop_sessions_run_on_the_userspace_path") {
        return;
    }
    multihop_run("naive");
}

#[test]
fn multihop_sessions_run_on_the_fast_path_and_the_gtsm_relaxation_stays_theirs() {
    if !privileged("multihop_sessions_run_on_the_fast_path") {
        return;
    }
    multihop_run("xdp");
}

fn multihop_run(backend: &str) {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let fast_path = backend == "xdp";
    let dir = scratch_dir(&format!("multihop-{backend}"));
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let multihop = |local: &str, peer: &str| PeerSession {
        multihop: true,
        ..session_3x10(local, peer)
    };
    let _frr = start_frr_bfdd(
        "frr",
        PEER.namespace,
        Some(&rest),
        &dir,
        &[
            session_3x10(PEER.ipv4, DUT.ipv4),
            multihop(PEER.ipv6, DUT.ipv6),
        ],
    )
    .unwrap();
    let _bird = start_bird(
        "bird",
        SPARE.namespace,
        Some(&rest),
        &dir,
        SPARE.ipv4.parse().unwrap(),
        &[multihop(SPARE.ipv4, DUT.ipv4)],
    )
    .unwrap();
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let timers = format!(
        "tx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"{backend}\"\ninterface = \"eth0\"\n"
    );
    let config = format!(
        "[engine]\ncontrol_socket = \"{}\"\n\
         \n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\n{timers}\
         \n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\nmultihop = true\n{timers}\
         \n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\nmultihop = true\nmin_ttl = 64\n{timers}",
        socket.display(),
        PEER.ipv4,
        DUT.ipv4,
        PEER.ipv6,
        DUT.ipv6,
        SPARE.ipv4,
        DUT.ipv4,
    );
    let mut dut = start_linecardd_toml(&dir, &config);
    let up = wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(15),
        "the single-hop and both multihop sessions Up (and offloaded on the fast path)",
        |s| {
            (0..3).all(|i| {
                s[i]["state"] == "up" && s[i]["polling"] == false && s[i]["offloaded"] == fast_path
            })
        },
    );
    let steady_start = epoch_ns();
    let discr = |i: usize| up[i]["local_discr"].as_u64().unwrap() as u32;
    let (single_hop, to_bird) = (discr(0), discr(2));

    let before = ctl(&socket, &["drops"]);
    // TTL 200 at the single-hop session, on its port: GTSM, before demux.
    send_from_spare(SPARE.ipv4, DUT.ipv4, 3784, 200, packet(3, 7, single_hop));
    // TTL 200 at the single-hop session, on the multihop port, from the
    // single-hop peer's own address (spoofed from the spare host, so that
    // only the hop kind is wrong): a multihop packet names a multihop
    // session or none.
    let mut spoofed = craft::frame_to(4784, 200, &packet(3, 7, single_hop));
    craft::fix_ipv4_checksum(&mut spoofed);
    inject(&[from_spare(spoofed)], COPIES as usize);
    // A bootstrap from an address pair with no session (userspace's call
    // on either path: the fast path hands bootstraps up).
    send_from_spare(SPARE.ipv6, DUT.ipv6, 4784, 200, packet(1, 7, 0));
    // Below the BIRD session's own minimum (64), from its own address.
    send_from_spare(SPARE.ipv4, DUT.ipv4, 4784, 63, packet(3, 7, to_bird));
    // Where each case must be counted, as (what, counted so far).
    let counted = |d: &serde_json::Value, s: &serde_json::Value| -> Vec<(&str, u64)> {
        let delta = |reason: &str| drops(&d["drops"], reason) - drops(&before["drops"], reason);
        let kernel = |reason: u32| kernel_drops(d, reason) - kernel_drops(&before, reason);
        if fast_path {
            vec![
                (
                    "TTL 200 on 3784 and TTL 63 below BIRD's minimum (kernel)",
                    kernel(drop::BAD_TTL),
                ),
                (
                    "the single-hop session named on 4784 (kernel)",
                    kernel(drop::HOP_MISMATCH),
                ),
                ("the unconfigured pair (userspace)", delta("no_session")),
            ]
        } else {
            vec![
                ("TTL 200 on 3784 (GTSM)", delta("bad_ttl")),
                (
                    "the single-hop session named on 4784, and the unconfigured pair",
                    delta("no_session"),
                ),
                (
                    "TTL 63 below BIRD's minimum (by the session)",
                    drops(&s[2]["drops"], "bad_ttl"),
                ),
            ]
        }
    };
    let expected: Vec<u64> = if fast_path {
        vec![2 * COPIES, COPIES, COPIES]
    } else {
        vec![COPIES, 2 * COPIES, COPIES]
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let (counts, sessions) = loop {
        let d = ctl(&socket, &["drops"]);
        let sessions = ctl(&socket, &["list", "--json"])["sessions"].clone();
        let counts: Vec<(&str, u64)> = counted(&d, &sessions);
        let done = counts.iter().zip(&expected).all(|((_, n), e)| n >= e);
        if done || Instant::now() > deadline {
            break (counts, sessions);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for ((what, n), e) in counts.iter().zip(&expected) {
        assert_eq!(n, e, "{backend}: {what}");
    }
    for (i, s) in sessions.as_array().unwrap().iter().enumerate() {
        assert_eq!(s["state"], "up", "session {i}: {s}");
        assert_eq!(
            s["counters"]["transitions"], up[i]["counters"]["transitions"],
            "session {i} changed: {s}"
        );
        assert_eq!(s["remote"]["discr"], up[i]["remote"]["discr"]);
    }
    // Steady for a second more, then the capture.
    std::thread::sleep(Duration::from_secs(1));
    let steady_end = epoch_ns();
    let replied = ctl(&socket, &["drops"]);
    dut.stop().unwrap();
    let pcap = capture.finish().unwrap();
    let analysis = analyze(
        &[pcap],
        &Options {
            phases: vec![linecard_capture_analyzer::Phase {
                name: "steady".into(),
                start_ns: steady_start,
                end_ns: steady_end,
            }],
            timeline: false,
        },
        None,
    )
    .unwrap();
    let flows = &analysis.phases[0].result.flows;
    // The session's flow, not the crafted packets' (another source port).
    let flow = |src: &str, dst: &str| {
        flows
            .iter()
            .filter(|f| f.src == src && f.dst == dst)
            .max_by_key(|f| f.packets)
            .unwrap_or_else(|| panic!("no flow {src} -> {dst} on the capture"))
    };
    let mut ours = 0u64;
    for (src, dst, port, ttl) in [
        (DUT.ipv4, PEER.ipv4, 3784, (255, 255)),
        (PEER.ipv4, DUT.ipv4, 3784, (255, 255)),
        (DUT.ipv6, PEER.ipv6, 4784, (255, 255)),
        (PEER.ipv6, DUT.ipv6, 4784, (255, 255)),
        (DUT.ipv4, SPARE.ipv4, 4784, (255, 255)),
        // BIRD's multihop packets leave at the system's default TTL.
        (SPARE.ipv4, DUT.ipv4, 4784, (64, 64)),
    ] {
        let f = flow(src, dst);
        eprintln!(
            "{backend}: {src} -> {dst}: port {}, TTL {}-{}, {} packets, p50 {:.2} max {:.2} ms, reply latency p50 {:.3} ms, {} flaps",
            f.dst_port, f.ttl_min, f.ttl_max, f.packets, f.gap_ms.p50, f.gap_ms.max, f.reply_latency_ms.p50, f.flaps
        );
        assert_eq!(f.dst_port, port, "{src} -> {dst}: the wrong port");
        assert_eq!((f.ttl_min, f.ttl_max), ttl, "{src} -> {dst}: TTL");
        assert_eq!(f.flaps, 0, "{src} -> {dst} flapped");
        if src == DUT.ipv4 || src == DUT.ipv6 {
            ours += f.packets;
        }
    }
    if fast_path {
        let answered: u64 = replied["fast_path"]["verdicts_per_cpu"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c[2].as_u64().unwrap())
            .sum();
        // Most are replies (295 of 359 here; BIRD's packets, every 7.5-10
        // ms, often come too soon after ours to be answered).
        assert!(
            answered * 2 >= ours,
            "the kernel answered {answered} of our {ours} packets"
        );
        // Sent by the fast path: its replies, and its own clock where a
        // peer's packet came too soon after ours to be answered (RFC 5880
        // 6.8.7) or not at all (the peer stalled). Userspace sent the
        // rest (before the offload): at most a tenth.
        let own_clock = replied["fast_path"]["own_clock_sent"].as_u64().unwrap();
        assert!(
            (answered + own_clock) * 10 >= ours * 9,
            "the fast path sent {answered} replies and {own_clock} own-clock packets of the {ours} on the capture"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
