//! Synthetic captures with known gaps, flaps, Poll/Final, echo, IPv4/IPv6,
//! multihop, pcap and pcapng, checked against exact expected values.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::{analyze_files, Phase};
use std::path::{Path, PathBuf};

mod frames;
use frames::*;

#[derive(Clone, Copy)]
struct Bfd {
    state: u8,
    diag: u8,
    poll: bool,
    final_: bool,
    demand: bool,
    mult: u8,
    my: u32,
    your: u32,
    tx_us: u32,
    rx_us: u32,
}

fn up(my: u32, your: u32) -> Bfd {
    Bfd {
        state: 3,
        diag: 0,
        poll: false,
        final_: false,
        demand: false,
        mult: 3,
        my,
        your,
        tx_us: 10_000,
        rx_us: 10_000,
    }
}

fn bfd_bytes(b: &Bfd) -> Vec<u8> {
    let mut p = vec![0u8; 24];
    p[0] = (1 << 5) | b.diag;
    p[1] = (b.state << 6)
        | if b.poll { 0x20 } else { 0 }
        | if b.final_ { 0x10 } else { 0 }
        | if b.demand { 0x02 } else { 0 };
    p[2] = b.mult;
    p[3] = 24;
    p[4..8].copy_from_slice(&b.my.to_be_bytes());
    p[8..12].copy_from_slice(&b.your.to_be_bytes());
    p[12..16].copy_from_slice(&b.tx_us.to_be_bytes());
    p[16..20].copy_from_slice(&b.rx_us.to_be_bytes());
    p
}

#[derive(Clone, Copy)]
#[allow(clippy::enum_variant_names)] // named after the file formats
enum Format {
    PcapMicros,
    PcapNanos,
    PcapNg,
}

fn write_capture(name: &str, format: Format, frames: &[(i64, Vec<u8>)]) -> PathBuf {
    let mut out = Vec::new();
    match format {
        Format::PcapMicros | Format::PcapNanos => {
            let magic: u32 = if matches!(format, Format::PcapNanos) {
                0xa1b2_3c4d
            } else {
                0xa1b2_c3d4
            };
            out.extend_from_slice(&magic.to_le_bytes());
            out.extend_from_slice(&2u16.to_le_bytes());
            out.extend_from_slice(&4u16.to_le_bytes());
            out.extend_from_slice(&[0; 8]);
            out.extend_from_slice(&65535u32.to_le_bytes());
            out.extend_from_slice(&1u32.to_le_bytes());
            for (ts, data) in frames {
                let frac = if matches!(format, Format::PcapNanos) {
                    ts % 1_000_000_000
                } else {
                    ts % 1_000_000_000 / 1000
                };
                out.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
                out.extend_from_slice(&(frac as u32).to_le_bytes());
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend_from_slice(&(data.len() as u32).to_le_bytes());
                out.extend_from_slice(data);
            }
        }
        Format::PcapNg => {
            // One interface in nanoseconds (if_tsresol 9).
            let packets: Vec<(u32, u64, Vec<u8>)> = frames
                .iter()
                .map(|(ts, data)| (0, *ts as u64, data.clone()))
                .collect();
            out = pcapng(&[(9, None)], &packets);
        }
    }
    // Cargo's scratch directory for integration tests, inside target/:
    // nothing is left in /tmp.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("analyzer-synthetic");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, out).unwrap();
    path
}

/// A 3x10 ms session for 10 s: A sends every 10 ms except one 50 ms hole at
/// 5 s; B answers 1 ms after each of A's packets. At 5.05 s A reports Down
/// (diag 1) once, then Up again.
fn session_frames(a: &str, b: &str, port: u16) -> Vec<(i64, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut t = T0;
    for i in 0..1000 {
        if i == 500 {
            t += 40 * MS; // the hole: this gap is 50 ms
        }
        let mut pa = up(1, 2);
        if i == 500 {
            pa.state = 1;
            pa.diag = 1;
        }
        frames.push((t, frame(a, b, 50001, port, &bfd_bytes(&pa))));
        frames.push((t + MS, frame(b, a, 50002, port, &bfd_bytes(&up(2, 1)))));
        t += 10 * MS;
    }
    frames
}

#[test]
fn gaps_flaps_and_budget_exact_in_every_format() {
    for (name, format) in [
        ("us.pcap", Format::PcapMicros),
        ("ns.pcap", Format::PcapNanos),
        ("ng.pcapng", Format::PcapNg),
    ] {
        let path = write_capture(
            name,
            format,
            &session_frames("192.0.2.1", "192.0.2.2", 3784),
        );
        let a = analyze_files(&[path], &[]).unwrap();
        assert_eq!(a.schema_version, 1);
        assert_eq!(a.all.flows.len(), 2, "{name}");
        let fa = &a.all.flows[0];
        assert_eq!(
            (fa.src.as_str(), fa.dst.as_str(), fa.src_port, fa.dst_port),
            ("192.0.2.1", "192.0.2.2", 50001, 3784)
        );
        assert_eq!(fa.packets, 1000);
        assert_eq!(fa.gap_ms.count, 999);
        assert!(close(fa.gap_ms.p50, 10.0), "{name}: p50 {}", fa.gap_ms.p50);
        assert!(close(fa.gap_ms.p99, 10.0), "{name}: p99 {}", fa.gap_ms.p99);
        assert_eq!(fa.gap_ms.max, 50.0, "{name}: the max is exact");
        assert_eq!(fa.gap_ms.longest[0].ended_at_ns, T0 + 5040 * MS);
        assert_eq!(fa.flaps, 1);
        assert_eq!(fa.flap_events[0].to_state, State::Down);
        assert_eq!(fa.flap_events[0].diag, 1);
        // Up-to-Up gaps exclude the two around the Down packet.
        assert_eq!(fa.up_gap_ms.count, 997);
        assert_eq!(fa.up_gap_ms.max, 10.0);
        // Budget 3 x max(10, 10) ms = 30 ms: only the 50 ms hole exceeds it.
        assert_eq!(fa.budget_ms, Some(30.0));
        assert_eq!(fa.over_budget, 1);
        // B answered each of A's packets 1 ms later: the RX-clocked signature.
        let fb = &a.all.flows[1];
        assert_eq!(fb.reply_latency_ms.count, 1000);
        assert!(close(fb.reply_latency_ms.max, 1.0));
        assert_eq!(fb.flaps, 0);
        // The session: one downtime episode, started by A, closed 1 packet later.
        let s = &a.all.sessions[0];
        assert_eq!(s.flaps, 1);
        assert_eq!(s.downtimes[0].first_down_sender, "192.0.2.1");
        assert_eq!(s.downtimes[0].downtime_ms, Some(10.0));
        assert_eq!(s.max_gap_ms, 50.0);
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    }
}

/// RFC 5880 6.6: A asks for Demand mode from 1 s to 4 s (D on its packets
/// every 10 ms), and polls once a second; B goes quiet 2 ms after A's first
/// D, answers each Poll with a Final 1 ms later, and resumes its periodic
/// packets 15 ms after A's first packet without D.
fn demand_frames() -> Vec<(i64, Vec<u8>)> {
    let (a, b) = ("192.0.2.1", "192.0.2.2");
    let mut frames = Vec::new();
    let asks = |t: i64| (T0 + 1000 * MS..T0 + 4000 * MS).contains(&t);
    let mut t = T0;
    while t < T0 + 5000 * MS {
        let mut pa = up(1, 2);
        pa.demand = asks(t);
        // A's verification Polls: at 2 s and 3 s, answered at once.
        pa.poll = t == T0 + 2000 * MS || t == T0 + 3000 * MS;
        frames.push((t, frame(a, "192.0.2.2", 50001, 3784, &bfd_bytes(&pa))));
        if pa.poll {
            let mut fin = up(2, 1);
            fin.final_ = true;
            frames.push((t + MS, frame(b, a, 50002, 3784, &bfd_bytes(&fin))));
        }
        t += 10 * MS;
    }
    // B's periodic packets: until A's first D (plus 2 ms), and again from
    // 15 ms after A stopped asking.
    let mut t = T0 + 5 * MS;
    while t < T0 + 5000 * MS {
        if t <= T0 + 1002 * MS || t >= T0 + 4015 * MS {
            frames.push((t, frame(b, a, 50002, 3784, &bfd_bytes(&up(2, 1)))));
        }
        t += 10 * MS;
    }
    frames.sort_by_key(|(ts, _)| *ts);
    frames
}

#[test]
fn demand_mode_silences_are_asked_for_and_kept_apart_from_the_gaps() {
    let path = write_capture("demand.pcap", Format::PcapNanos, &demand_frames());
    let mut csv = linecard_capture_analyzer::export::PacketCsv::new(Vec::new()).unwrap();
    let a = linecard_capture_analyzer::analyze(
        std::slice::from_ref(&path),
        &Default::default(),
        Some(&mut csv),
    )
    .unwrap();
    let fa = a.all.flows.iter().find(|f| f.src == "192.0.2.1").unwrap();
    let fb = a.all.flows.iter().find(|f| f.src == "192.0.2.2").unwrap();
    assert_eq!(fa.demand_packets, 300, "A asked for 3 s at 10 ms");
    assert_eq!(fb.demand_packets, 0);
    assert_eq!(fa.demand_silence_ms.count, 0, "nobody asked A to stop");
    // B's silences: from its last packet (0.995 s) to the first Final
    // (2.001 s), to the second (3.001 s), and to its first packet after A
    // stopped asking (4.015 s).
    assert_eq!(fb.demand_silence_ms.count, 3);
    assert_eq!(fb.demand_silence_ms.max, 1014.0);
    assert!(close(fb.demand_silence_ms.p50, 1006.0));
    // What is judged of that last one: 15 ms since A's first packet
    // without D. Nothing else is over 10 ms, and nothing over budget.
    assert!(close(fb.gap_ms.max, 15.0), "{}", fb.gap_ms.max);
    assert_eq!(fb.over_budget, 0);
    assert_eq!((fa.flaps, fb.flaps), (0, 0));
    // The Polls and their Finals, as ever.
    assert_eq!(fa.polls, 2);
    assert_eq!(fb.poll_final_ms.count, 2);
    assert!(close(fa.gap_ms.max, 10.0));
    // The per-packet export carries both: D on A's packets, and the
    // asked-for silence on the B packet that ended each.
    let csv = String::from_utf8(csv.finish().unwrap()).unwrap();
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (flow, demand, silence) = (col("flow"), col("demand"), col("demand_silence"));
    let a_flow = a
        .all
        .flows
        .iter()
        .position(|f| f.src == "192.0.2.1")
        .unwrap();
    let (mut d_rows, mut silence_rows) = (0, Vec::new());
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        let from_a = cells[flow] == a_flow.to_string();
        if cells[demand] == "1" {
            assert!(from_a, "D on a packet of B: {row}");
            d_rows += 1;
        }
        if cells[silence] == "1" {
            assert!(!from_a, "A was never asked to stop: {row}");
            silence_rows.push(row.to_string());
        }
    }
    assert_eq!(d_rows, 300);
    assert_eq!(silence_rows.len(), 3, "{silence_rows:?}");

    // The same capture without D: B's silences are a 1 s hole each.
    let plain: Vec<(i64, Vec<u8>)> = demand_frames()
        .into_iter()
        .map(|(t, mut f)| {
            let at = f.len() - 24 + 1;
            f[at] &= !0x02;
            (t, f)
        })
        .collect();
    let path = write_capture("no-demand.pcap", Format::PcapNanos, &plain);
    let a = analyze_files(&[path], &[]).unwrap();
    let fb = a.all.flows.iter().find(|f| f.src == "192.0.2.2").unwrap();
    assert_eq!(fb.demand_silence_ms.count, 0);
    assert!(
        fb.gap_ms.max > 990.0 && fb.over_budget == 3,
        "{:?}",
        fb.gap_ms
    );
}

#[test]
fn ipv6_multihop_and_phases() {
    let path = write_capture(
        "v6.pcap",
        Format::PcapNanos,
        &session_frames("2001:db8::1", "2001:db8::2", 4784),
    );
    let phases = [
        Phase {
            name: "first".into(),
            start_ns: T0,
            end_ns: T0 + 4 * 1000 * MS,
        },
        Phase {
            name: "hole".into(),
            start_ns: T0 + 4 * 1000 * MS,
            end_ns: T0 + 6 * 1000 * MS,
        },
    ];
    let a = analyze_files(&[path], &phases).unwrap();
    let f = &a.all.flows[0];
    assert_eq!((f.src.as_str(), f.dst_port), ("2001:db8::1", 4784));
    assert_eq!(serde_json::to_value(f.service).unwrap(), "multi-hop");
    assert_eq!(a.phases[0].result.flows[0].gap_ms.max, 10.0);
    assert_eq!(a.phases[0].result.flows[0].flaps, 0);
    assert_eq!(a.phases[1].result.flows[0].gap_ms.max, 50.0);
    assert_eq!(a.phases[1].result.flows[0].flaps, 1);
}

#[test]
fn poll_final_latency_and_detection_latency() {
    let (a, b) = ("192.0.2.1", "192.0.2.2");
    let mut frames = Vec::new();
    let mut t = T0;
    for i in 0..200 {
        let mut pa = up(1, 2);
        pa.poll = (100..103).contains(&i); // a Poll sequence of three packets
        frames.push((t, frame(a, b, 50001, 3784, &bfd_bytes(&pa))));
        let mut pb = up(2, 1);
        pb.final_ = i == 102; // answered on the third
        frames.push((t + 3 * MS, frame(b, a, 50002, 3784, &bfd_bytes(&pb))));
        t += 10 * MS;
    }
    // A falls silent; B declares it dead 30.5 ms after A's last packet.
    let mut pb = up(2, 1);
    pb.state = 1;
    pb.diag = 1;
    frames.push((
        t - 10 * MS + 30 * MS + MS / 2,
        frame(b, a, 50002, 3784, &bfd_bytes(&pb)),
    ));
    let path = write_capture("poll.pcap", Format::PcapNanos, &frames);
    let r = analyze_files(&[path], &[]).unwrap();
    assert_eq!(r.all.flows[0].polls, 1);
    assert!(
        close(r.all.flows[1].poll_final_ms.max, 23.0),
        "{:?}",
        r.all.flows[1].poll_final_ms
    );
    let detection = &r.all.flows[1].detection_latency_ms;
    assert_eq!(detection.count, 1);
    assert!(close(detection.max, 30.5), "{detection:?}");
}

/// `count` self-addressed echoes of 192.0.2.1 every 10 ms, echo `i` back
/// 0.2 ms later when `returned(i)`.
fn echo_frames(count: u32, returned: impl Fn(u32) -> bool) -> Vec<(i64, Vec<u8>)> {
    let a = "192.0.2.1";
    let mut frames = Vec::new();
    for i in 0..count {
        let payload = i.to_be_bytes().repeat(4);
        let t = T0 + i64::from(i) * 10 * MS;
        frames.push((t, frame(a, a, 49152, 3785, &payload)));
        if returned(i) {
            frames.push((t + 200_000, frame(a, a, 49152, 3785, &payload)));
        }
    }
    frames
}

#[test]
fn echo_round_trips_and_losses() {
    let frames = echo_frames(200, |i| i % 10 != 0);
    let path = write_capture("echo.pcap", Format::PcapNanos, &frames);
    let r = analyze_files(&[path], &[]).unwrap();
    let e = &r.all.echo[0];
    // Every tenth never returns: the first second's ten are lost (past the
    // 1 s timeout before the capture ends), the last second's ten pending.
    assert_eq!((e.sent, e.returned, e.lost, e.pending), (200, 180, 10, 10));
    assert!(close(e.rtt_ms.max, 0.2));
    assert!(close(e.send_gap_ms.max, 10.0), "{:?}", e.send_gap_ms);
}

/// A phase that opens between an echo's departure and its return: the
/// return is neither a departure nor a loss in that phase (fresh-clone CI:
/// every echo of a run came back on the capture, and a phase still counted
/// one lost, failing the echo scenario).
#[test]
fn an_echo_in_flight_at_a_phase_boundary_is_not_lost() {
    let frames = echo_frames(300, |_| true);
    let path = write_capture("echo-boundary.pcap", Format::PcapNanos, &frames);
    // The second phase opens 0.1 ms after echo 100 left, before its return.
    let boundary = T0 + 100 * 10 * MS + 100_000;
    let phases = [
        Phase {
            name: "before".into(),
            start_ns: T0,
            end_ns: boundary,
        },
        Phase {
            name: "after".into(),
            start_ns: boundary,
            end_ns: T0 + 300 * 10 * MS,
        },
    ];
    let r = analyze_files(&[path], &phases).unwrap();
    let after = &r.phases[1].result.echo[0];
    assert_eq!(
        (after.sent, after.returned, after.lost),
        (199, 199, 0),
        "echo 100's return opened the phase"
    );
    let before = &r.phases[0].result.echo[0];
    assert_eq!((before.sent, before.returned, before.lost), (101, 100, 0));
}

#[test]
fn truncated_capture_yields_what_it_holds_and_a_warning() {
    let path = write_capture(
        "cut.pcap",
        Format::PcapNanos,
        &session_frames("192.0.2.1", "192.0.2.2", 3784),
    );
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let r = analyze_files(&[path], &[]).unwrap();
    assert!(r.files[0].truncated);
    assert!(r.warnings.iter().any(|w| w.code == "truncated-capture"));
    assert_eq!(r.all.flows.iter().map(|f| f.packets).sum::<u64>(), 1999);
}

#[test]
fn a_record_claiming_16_mib_at_the_end_is_a_truncation_not_a_stall() {
    // The record header says 16 MiB (the largest length not called
    // corruption) and the file ends 100 bytes later: the reader grows its
    // buffer only as bytes arrive, keeps every frame before, and says the
    // capture was cut.
    let path = write_capture(
        "claims-16-mib.pcap",
        Format::PcapNanos,
        &session_frames("192.0.2.1", "192.0.2.2", 3784),
    );
    let mut bytes = std::fs::read(&path).unwrap();
    let claimed: u32 = 1 << 24;
    bytes.extend_from_slice(&[0; 8]);
    bytes.extend_from_slice(&claimed.to_le_bytes());
    bytes.extend_from_slice(&claimed.to_le_bytes());
    bytes.extend_from_slice(&[0x5a; 100]);
    std::fs::write(&path, &bytes).unwrap();
    let r = analyze_files(&[path], &[]).unwrap();
    assert!(r.files[0].truncated);
    assert!(r.warnings.iter().any(|w| w.code == "truncated-capture"));
    assert_eq!(r.all.flows.iter().map(|f| f.packets).sum::<u64>(), 2000);
}

#[test]
fn garbage_is_a_clear_error_and_garbage_on_bfd_ports_is_counted() {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("linecard-not-a-capture-{}", std::process::id()));
    std::fs::write(&path, b"this is not a capture at all, just text").unwrap();
    let err = analyze_files(std::slice::from_ref(&path), &[])
        .unwrap_err()
        .to_string();
    let _ = std::fs::remove_file(&path);
    assert!(err.contains("not a pcap or pcapng"), "{err}");

    let frames = vec![
        (
            T0,
            frame("192.0.2.1", "192.0.2.2", 50001, 3784, &[0x40; 24]),
        ),
        (
            T0 + MS,
            frame("192.0.2.1", "192.0.2.2", 50001, 3784, &[0x20; 10]),
        ),
        (
            T0 + 2 * MS,
            frame("192.0.2.1", "192.0.2.2", 50001, 53, &[0; 24]),
        ),
    ];
    let r = analyze_files(
        &[write_capture("junk.pcap", Format::PcapNanos, &frames)],
        &[],
    )
    .unwrap();
    let malformed = serde_json::to_value(&r.all.integrity).unwrap()["malformed"].clone();
    assert_eq!(malformed["bad_version"], 1);
    assert_eq!(malformed["too_short"], 1);
    assert_eq!(r.all.integrity.other_frames, 1);
    assert!(r.all.flows.is_empty());
}

/// Rewrites an Ethernet frame's link layer for another link type.
fn relink(frame: &[u8], link: u32) -> Vec<u8> {
    let ethertype = &frame[12..14];
    let network = &frame[14..];
    let mut out = Vec::new();
    match link {
        // Ethernet with an 802.1Q tag.
        1 => {
            out.extend_from_slice(&frame[..12]);
            out.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
            out.extend_from_slice(ethertype);
        }
        // Linux cooked v1: packet type, ARPHRD, address length, address, protocol.
        113 => {
            out.extend_from_slice(&[0, 0, 0, 1, 0, 6]);
            out.extend_from_slice(&frame[6..12]);
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(ethertype);
        }
        // Linux cooked v2: protocol, reserved, ifindex, ARPHRD, type, length, address.
        276 => {
            out.extend_from_slice(ethertype);
            out.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 6]);
            out.extend_from_slice(&frame[6..12]);
            out.extend_from_slice(&[0, 0]);
        }
        101 => {}
        _ => unreachable!(),
    }
    out.extend_from_slice(network);
    out
}

#[test]
fn every_link_type_decodes_to_the_same_flows() {
    let frames = session_frames("192.0.2.1", "192.0.2.2", 3784);
    for link in [1u32, 113, 276, 101] {
        let relinked: Vec<_> = frames.iter().map(|(t, f)| (*t, relink(f, link))).collect();
        let path = write_capture(&format!("link{link}.pcap"), Format::PcapNanos, &relinked);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[20..24].copy_from_slice(&link.to_le_bytes());
        std::fs::write(&path, bytes).unwrap();
        let r = analyze_files(&[path], &[]).unwrap();
        assert_eq!(r.all.flows.len(), 2, "link type {link}");
        assert_eq!(r.all.flows[0].packets, 1000, "link type {link}");
        assert_eq!(r.all.flows[0].gap_ms.max, 50.0, "link type {link}");
        assert_eq!(r.all.integrity.other_frames, 0, "link type {link}");
    }
}

#[test]
fn two_files_merge_by_timestamp() {
    // One file per observer port: each direction captured separately.
    let frames = session_frames("192.0.2.1", "192.0.2.2", 3784);
    let (a, b): (Vec<_>, Vec<_>) = frames.into_iter().partition(|(_, f)| f[29] == 1);
    let pa = write_capture("dir-a.pcap", Format::PcapNanos, &a);
    let pb = write_capture("dir-b.pcapng", Format::PcapNg, &b);
    let r = analyze_files(&[pa, pb], &[]).unwrap();
    assert_eq!(r.files.len(), 2);
    assert_eq!(r.files[0].frames + r.files[1].frames, 2000);
    // Reply latency needs both directions interleaved in time order.
    assert_eq!(
        r.all
            .flows
            .iter()
            .map(|f| f.reply_latency_ms.count)
            .sum::<u64>(),
        1000
    );
}

/// `b` with a keyed authentication section (type, key ID, sequence; the
/// digest bytes are arbitrary: the analyzer holds no keys).
fn keyed_bytes(b: &Bfd, auth_type: u8, key_id: u8, sequence: u32) -> Vec<u8> {
    let digest = if auth_type >= 4 { 20 } else { 16 };
    let mut p = bfd_bytes(b);
    p[1] |= 0x04;
    p.extend_from_slice(&[auth_type, 8 + digest, key_id, 0]);
    p.extend_from_slice(&sequence.to_be_bytes());
    p.extend(std::iter::repeat_n(0xa5, usize::from(digest)));
    p[3] = p.len() as u8;
    p
}

#[test]
fn authentication_types_keys_and_sequence_steps_per_flow() {
    let (a, b) = ("192.0.2.1", "192.0.2.2");
    let mut frames = Vec::new();
    // a: meticulous keyed SHA1, +1 each packet across the 32-bit wrap,
    // then a key rollover (ID 1 -> 2). b: keyed MD5 that repeats each
    // number twice, then one step back (a replay on the wire).
    for i in 0..100u32 {
        let t = T0 + i64::from(i) * 10 * MS;
        let key = if i < 50 { 1 } else { 2 };
        let seq = (u32::MAX - 10).wrapping_add(i);
        frames.push((
            t,
            frame(a, b, 49152, 3784, &keyed_bytes(&up(1, 2), 5, key, seq)),
        ));
        let back = if i == 99 { 90 } else { i / 2 };
        frames.push((
            t + MS,
            frame(b, a, 49153, 3784, &keyed_bytes(&up(2, 1), 2, 7, back)),
        ));
    }
    // And one flow without authentication.
    for i in 0..10 {
        frames.push((
            T0 + i * 10 * MS,
            frame(a, "192.0.2.3", 49154, 3784, &bfd_bytes(&up(3, 4))),
        ));
    }
    frames.sort_by_key(|(t, _)| *t);
    let path = write_capture("auth.pcap", Format::PcapNanos, &frames);
    let r = analyze_files(&[path], &[]).unwrap();
    let flow = |src: &str, dst: &str| {
        r.all
            .flows
            .iter()
            .find(|f| f.src == src && f.dst == dst)
            .unwrap()
    };
    let sha = flow(a, b).auth.clone().unwrap();
    assert_eq!(
        (sha.packets, &sha.types[..], &sha.key_ids[..]),
        (100, &[5][..], &[1, 2][..])
    );
    assert_eq!(
        (sha.sequence_next, sha.sequence_same, sha.sequence_other),
        (99, 0, 0)
    );
    let md5 = flow(b, a).auth.clone().unwrap();
    assert_eq!(
        (md5.packets, &md5.types[..], &md5.key_ids[..]),
        (100, &[2][..], &[7][..])
    );
    // 0,0,1,1,...,49,49 then 90: 49 steps up, 50 repeats, and the leap.
    assert_eq!(
        (md5.sequence_next, md5.sequence_same, md5.sequence_other),
        (49, 49, 1)
    );
    assert!(flow(a, "192.0.2.3").auth.is_none());
}

/// RFC 5880 6.8.7 on the wire, asymmetric timers: A sends every 10 ms and
/// asks for 50 (Required Min RX); B must send no more often than every
/// 37.5-50 ms, and A's own interval is max(its 10, B's Required Min RX 10).
#[test]
fn each_direction_is_judged_against_its_own_legal_interval() {
    let a_pkt = |t: i64| {
        let mut p = up(1, 2);
        p.rx_us = 50_000;
        (
            t,
            frame("192.0.2.1", "192.0.2.2", 50001, 3784, &bfd_bytes(&p)),
        )
    };
    let b_pkt = |t: i64| {
        (
            t,
            frame("192.0.2.2", "192.0.2.1", 50002, 3784, &bfd_bytes(&up(2, 1))),
        )
    };
    let mut frames = Vec::new();
    for i in 0..100 {
        frames.push(a_pkt(T0 + i * 10 * MS));
    }
    // B: 40 ms, 45 ms, then one 20 ms gap (too soon) and one 60 ms (late).
    let mut t = T0 + MS;
    for gap in [40, 45, 40, 20, 45, 60, 40, 45] {
        frames.push(b_pkt(t));
        t += gap * MS;
    }
    frames.push(b_pkt(t));
    frames.sort_by_key(|f| f.0);
    let path = write_capture("asymmetric.pcap", Format::PcapNanos, &frames);
    let a = analyze_files(&[path], &[]).unwrap();
    let fa = a.all.flows.iter().find(|f| f.src == "192.0.2.1").unwrap();
    let fb = a.all.flows.iter().find(|f| f.src == "192.0.2.2").unwrap();
    // A: 10 ms gaps against max(10, B's 10) = 10 ms: none out of place.
    assert_eq!(fa.interval.legal_ms, Some(10.0));
    assert_eq!((fa.interval.too_soon, fa.interval.late), (0, 0));
    // The first gap began before B had said its Required Min RX: unjudged.
    assert_eq!(fa.interval.gaps, 98);
    // B: against max(10, A's 50) = 50 ms: one too soon, one late.
    assert_eq!(fb.interval.legal_ms, Some(50.0));
    assert_eq!(fb.interval.gaps, 8);
    assert_eq!((fb.interval.too_soon, fb.interval.late), (1, 1));
    assert_eq!(fb.interval.shortest_ms, Some(20.0));
    assert_eq!(fb.interval.longest_ms, Some(60.0));
    assert_eq!(fb.interval.longest_share, Some(1.2));
}
