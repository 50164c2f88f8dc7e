//! The xdp backend under L4 (real-time hogs on the DUT's CPU) against FRR
//! bfdd in the same DUT position, with the peer killed before the end:
//! detection in the kernel while userspace is starved. The bake-off's other
//! rows run through `linecard run scenarios/ci.toml` (tests/run.rs).
//! Duration: `LINECARD_XDP_STRESS_SECONDS` (default 20).

mod common;

/// The xdp backend's bound under L4: 0 flaps is the claim; the RX-clocked
/// tail follows the stressed CPU's softirq latency (10.4-13.3 ms in five
/// 60 s bake-off runs here, 18.5 ms in a sixth).
const MAX_GAP_MS: f64 = 20.0;

use common::*;
use linecard_capture_analyzer::{analyze, analyze_file, Options, Phase};
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::{start_frr_bfdd, Daemon};
use std::process::Command;
use std::time::{Duration, Instant};
use std::time::{SystemTime, UNIX_EPOCH};

/// What runs in the DUT position.
#[derive(Clone, Copy)]
enum Dut<'a> {
    Linecardd(&'a str),
    Frr,
}

struct Row {
    label: String,
    kill: Option<KillResult>,
    /// Share of the fast path's replies sent on the DUT's CPUs (xdp only).
    replies_on_dut_cpus: Option<(u64, u64)>,
    flaps: u64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    packets: u64,
    /// The DUT's gaps above 12 ms before any kill, each with the steal the
    /// witness placed inside it and whether it followed the peer's own
    /// silence (said, never an excuse: see `run::mirror`).
    long_gaps: Vec<linecard_harness::run::mirror::LongGap>,
}

impl Row {
    /// Whether steal measured inside every gap over `limit_ms` can excuse
    /// this row's broken limit (there must be such a gap).
    fn excused_by_steal(&self, limit_ms: f64) -> bool {
        let over: Vec<_> = self
            .long_gaps
            .iter()
            .filter(|g| g.gap_ms > limit_ms)
            .collect();
        !over.is_empty() && over.iter().all(|g| g.stolen_ms > 0.0)
    }
}

/// One run: FRR in the peer, linecardd with `backend` in the DUT, L4 on the
/// DUT's CPU for `seconds`, capture on the DUT's bridge port.
fn run(label: &str, dut_kind: Dut, seconds: u64) -> Row {
    run_with_kill(label, dut_kind, seconds, None)
}

/// What the kill of the peer under stress showed.
#[derive(Debug)]
struct KillResult {
    /// The kernel's detection instant after the peer's last packet, ms.
    kernel_ms: f64,
    /// The DUT's Down on the wire after the peer's last packet, ms.
    wire_ms: Option<f64>,
}

/// `kill_before_end`: kill the peer (no farewell) this long before the
/// stress ends; statistics then cover the window before the kill.
fn run_with_kill(
    label: &str,
    dut_kind: Dut,
    seconds: u64,
    kill_before_end: Option<Duration>,
) -> Row {
    let dir = std::env::temp_dir().join(format!(
        "linecard-stress-{}-{}",
        label.replace(' ', "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let dut_cpuset = spec::cpuset_dir(spec::DUT_CPUSET);
    let dut_cpu = std::fs::read_to_string(dut_cpuset.join("cpuset.cpus"))
        .unwrap()
        .trim()
        .to_string();
    let witness = StealWitness::start(&dir, seconds + 60);
    let session = session_3x10(PEER.ipv4, DUT.ipv4);
    let mut frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &[session]).unwrap();
    let socket = dir.join("dut.sock");
    let dut_cpu_list = spec::parse_cpu_list(&dut_cpu).unwrap();
    let mut dut = match dut_kind {
        Dut::Linecardd(backend) => {
            let session = DutSession {
                peer: PEER.ipv4.to_string(),
                local: DUT.ipv4.to_string(),
                backend,
                interface: (backend == "xdp").then_some("eth0"),
            };
            let engine = format!("cpu = {dut_cpu}\nrt_priority = 90\n");
            let mut dut = start_linecardd(&dir, &socket, &engine, &[session]);
            wait_sessions(
                &socket,
                &mut dut,
                Duration::from_secs(5),
                "the session Up",
                |s| {
                    s[0]["state"] == "up"
                        && s[0]["polling"] == false
                        && (backend != "xdp" || s[0]["offloaded"] == true)
                },
            );
            dut
        }
        Dut::Frr => {
            let reverse = session_3x10(DUT.ipv4, PEER.ipv4);
            let dut = start_frr_bfdd(
                "frr-dut",
                DUT.namespace,
                Some(&dut_cpuset),
                &dir,
                &[reverse],
            )
            .unwrap();
            // Readiness in FRR's own JSON view (bounded, no fixed sleep).
            let vty = dir.join("frr-dut");
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut dut = dut;
            loop {
                assert!(
                    dut.running(),
                    "FRR bfdd in the DUT position exited:\n{}",
                    dut.log_tail()
                );
                let out = Command::new("ip")
                    .args(["netns", "exec", DUT.namespace, "vtysh", "--vty_socket"])
                    .arg(&vty)
                    .args(["-c", "show bfd peers json"])
                    .output()
                    .unwrap();
                let peers: serde_json::Value =
                    serde_json::from_slice(&out.stdout).unwrap_or_default();
                if peers[0]["status"] == "up" {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "FRR in the DUT position not Up within 5 s: {peers}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            dut
        }
    };
    let capture = capture_dut_port(&dir);
    // L4: one CPU hog at SCHED_FIFO 50 per DUT CPU, bounded by --timeout.
    let stress_args: Vec<String> = [
        "--cpu",
        "1",
        "--sched",
        "fifo",
        "--sched-prio",
        "50",
        "--timeout",
        &format!("{seconds}s"),
        "--quiet",
    ]
    .map(String::from)
    .to_vec();
    let mut stress = Daemon::spawn(
        "stress-ng",
        DUT.namespace,
        Some(&dut_cpuset),
        "stress-ng",
        &stress_args,
        &dir.join("stress.log"),
    )
    .unwrap();
    let started = Instant::now();
    let limit = started + Duration::from_secs(seconds + 10);
    let kill_at = kill_before_end.map(|before| started + Duration::from_secs(seconds) - before);
    let mut killed_at_unix: Option<i64> = None;
    while stress.running() {
        assert!(Instant::now() < limit, "stress-ng outlived its timeout");
        if kill_at.is_some_and(|t| Instant::now() >= t) && killed_at_unix.is_none() {
            killed_at_unix = Some(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as i64,
            );
            frr.kill().unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
    let pcap = capture.finish().unwrap();
    let kernel_detection_unix = killed_at_unix.and_then(|_| {
        ctl(&socket, &["list", "--json"])["sessions"][0]["kernel_detection_unix_ns"].as_i64()
    });
    let replies_on_dut_cpus = matches!(dut_kind, Dut::Linecardd("xdp")).then(|| {
        let reply = ctl(&socket, &["drops"]);
        let per_cpu = reply["fast_path"]["verdicts_per_cpu"]
            .as_array()
            .unwrap()
            .clone();
        let replied = |cpu: &serde_json::Value| cpu[2].as_u64().unwrap();
        let total: u64 = per_cpu.iter().map(replied).sum();
        let on_dut: u64 = per_cpu
            .iter()
            .enumerate()
            .filter(|(c, _)| dut_cpu_list.contains(c))
            .map(|(_, v)| replied(v))
            .sum();
        (on_dut, total)
    });
    dut.stop().unwrap();
    let full = analyze_file(&pcap).unwrap();
    let mut long = linecard_harness::run::mirror::LongGaps::new(12_000_000);
    let whole = analyze(
        std::slice::from_ref(&pcap),
        &Options {
            phases: Vec::new(),
            timeline: false,
        },
        Some(&mut long),
    )
    .unwrap();
    let flow_from = |src: &str| whole.all.flows.iter().position(|f| f.src == src);
    let (dut_flow, peer_flow) = (flow_from(DUT.ipv4), flow_from(PEER.ipv4));
    let steal = witness.finish();
    let mut long_gaps = dut_flow.map_or(Vec::new(), |d| {
        linecard_harness::run::mirror::judge_gaps(
            &long,
            &[d],
            |_| peer_flow,
            0,
            killed_at_unix.unwrap_or(i64::MAX),
        )
    });
    for gap in &mut long_gaps {
        gap.stolen_ms = steal.within(gap.start_ns(), gap.end_ns);
    }
    let kill = killed_at_unix.map(|_| {
        let peer_last = full
            .all
            .flows
            .iter()
            .find(|f| f.src == PEER.ipv4)
            .unwrap()
            .last_ts_ns;
        let kernel_ms = (kernel_detection_unix.expect("the kernel reported the silence")
            - peer_last) as f64
            / 1e6;
        let wire_ms = full
            .all
            .flows
            .iter()
            .find(|f| f.src == DUT.ipv4)
            .and_then(|f| f.flap_events.iter().find(|e| e.at_ns > peer_last))
            .map(|e| (e.at_ns - peer_last) as f64 / 1e6);
        KillResult { kernel_ms, wire_ms }
    });
    // With a kill, the statistics cover the stressed window before it.
    let analysis = match killed_at_unix {
        Some(at) => {
            let phases = vec![Phase {
                name: "before the kill".into(),
                start_ns: 0,
                end_ns: at,
            }];
            let mut a = analyze(
                std::slice::from_ref(&pcap),
                &Options {
                    phases,
                    timeline: false,
                },
                None,
            )
            .unwrap();
            a.all = a.phases.remove(0).result;
            a
        }
        None => full,
    };
    let f = analysis
        .all
        .flows
        .iter()
        .find(|f| f.src == DUT.ipv4)
        .unwrap_or_else(|| panic!("{label}: no DUT packets on the capture"));
    // Flaps as either side saw them: the peer leaving Up is the DUT's fault.
    let flaps = analysis
        .all
        .flows
        .iter()
        .map(|f| f.flaps)
        .max()
        .unwrap_or(0);
    let row = Row {
        label: label.into(),
        kill,
        replies_on_dut_cpus,
        flaps,
        p50: f.gap_ms.p50,
        p99: f.gap_ms.p99,
        p999: f.gap_ms.p999,
        max: f.gap_ms.max,
        packets: f.packets,
        long_gaps,
    };
    assert!(row.packets > 0);
    let _ = std::fs::remove_dir_all(&dir);
    row
}

#[test]
fn l4_xdp_against_frr_in_the_dut_position() {
    if !privileged("l4_xdp_against_frr_in_the_dut_position") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    // 20 s: the 60 s claim is the bake-off's (scenarios/bakeoff.toml).
    let seconds: u64 = env_seconds("LINECARD_XDP_STRESS_SECONDS", 20);
    let frr = run("FRR bfdd 8.4.4", Dut::Frr, seconds);
    // The peer is killed 5 s before the stress ends: detection under L4.
    let xdp_run = || {
        run_with_kill(
            "linecardd xdp (normal priority)",
            Dut::Linecardd("xdp"),
            seconds,
            Some(Duration::from_secs(5)),
        )
    };
    // A late packet is excused only by steal the witness placed inside the
    // very gap that went over the limit (a flap needs a gap over the
    // detection time): such a run is repeated once, and a second one is
    // inconclusive.
    let spoiled = |row: &Row| {
        (row.flaps > 0 && row.excused_by_steal(30.0))
            || (row.flaps == 0 && row.max > MAX_GAP_MS && row.excused_by_steal(MAX_GAP_MS))
    };
    let mut xdp = xdp_run();
    if spoiled(&xdp) {
        eprintln!(
            "invalid run: max {:.2} ms, {} flaps, steal inside the late gaps: {:?}; running again once",
            xdp.max, xdp.flaps, xdp.long_gaps
        );
        xdp = xdp_run();
        if spoiled(&xdp) {
            inconclusive(
                "l4_xdp_against_frr_in_the_dut_position",
                &format!(
                    "twice a late gap with steal inside it: max {:.2} ms, {} flaps: {:?}",
                    xdp.max, xdp.flaps, xdp.long_gaps
                ),
                &StealMeter::start(),
            );
            return;
        }
    }
    if xdp.max > MAX_GAP_MS {
        eprintln!(
            "xdp max {:.2} ms; the DUT's long gaps (with the steal inside each, and whether each followed the peer's silence): {:?}",
            xdp.max, xdp.long_gaps
        );
    }
    eprintln!("L4 for {seconds} s on the DUT's CPU, 3 x 10 ms against FRR bfdd 8.4.4, DUT -> peer gaps (ms):");
    eprintln!(
        "{:<34} {:>6} {:>7} {:>7} {:>7} {:>8}",
        "DUT", "flaps", "p50", "p99", "p99.9", "max"
    );
    for r in [&frr, &xdp] {
        eprintln!(
            "{:<34} {:>6} {:>7.2} {:>7.2} {:>7.2} {:>8.2}",
            r.label, r.flaps, r.p50, r.p99, r.p999, r.max
        );
    }
    let (on_dut, total) = xdp.replies_on_dut_cpus.unwrap();
    eprintln!("fast-path replies on the DUT's CPUs: {on_dut} of {total}");
    let kill = xdp.kill.as_ref().unwrap();
    eprintln!(
        "peer killed under L4: the kernel declared it silent {:.2} ms after its last packet; the Down reached the wire after {}",
        kill.kernel_ms,
        kill.wire_ms.map_or("(not within the capture)".to_string(), |ms| format!("{ms:.2} ms"))
    );
    assert!(
        kill.kernel_ms <= 35.0,
        "kernel detection under L4 took {} ms",
        kill.kernel_ms
    );
    // The first Down leaves from the responder thread (SCHED_FIFO 90, above
    // the hogs), woken by the kernel's event: 30.3 ms measured. Bound: one
    // 50 ms slice of this kernel's fair server (normal tasks' 50 ms per
    // second, which preempts every real-time task) on top of 35 ms. Without
    // the responder the Down waited for the normal-priority loop: 35-508 ms.
    let wire_ms = kill.wire_ms.expect("no Down on the capture after the kill");
    assert!(
        wire_ms <= 85.0,
        "the Down reached the wire {wire_ms} ms after the peer's last packet"
    );
    // Positive control: the stress must make FRR flap in the same conditions.
    assert!(
        frr.flaps > 0,
        "FRR bfdd did not flap under L4: the stress did not bite"
    );
    // Precondition: the fast path ran, and on the DUT's (stressed) CPUs.
    assert!(
        total > 0 && on_dut * 100 >= total * 95,
        "replies on the DUT's CPUs: {on_dut} of {total}"
    );
    assert_eq!(xdp.flaps, 0, "the xdp backend flapped under L4");
    // Its own clock fills a peer's silence: a gap over the limit is ours
    // whatever the peer did (RFC 5880 6.8.7).
    assert!(
        xdp.max <= MAX_GAP_MS,
        "xdp max gap {} ms under L4: {:?}",
        xdp.max,
        xdp.long_gaps
    );
    // The RX-clocked signature: our p50 is the peer's jittered clock, not 10 ms.
    assert!(xdp.p50 < 9.5, "p50 {} ms is not RX-clocked", xdp.p50);
}
