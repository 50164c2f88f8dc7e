//! linecardd's OpenMetrics endpoint scraped by a real Prometheus (Debian's
//! `prometheus`, issue 41): two xdp sessions at 10 x 100 ms (a detection
//! time of 1 s) against FRR bfdd. A quiet window first, where no gap may
//! count over budget; then FRR stopped (SIGSTOP) for 850 ms, so that one
//! receive gap per session lands between 0.85 and 0.95 of the detection
//! time: over budget at 0.5 and 0.8, not at 1.0, and no Down. The
//! kernel's histogram must hold the capture's largest peer-to-DUT gap in
//! its highest non-empty bucket, and Prometheus must hold what the
//! endpoint said. Then FRR killed: each session leaves Up once, with
//! Diag 1, in the endpoint's words and in Prometheus's. Before all that,
//! `ctl peers` is held to FRR's own JSON of the same sessions
//! (`frr_json.rs`).

use crate::common::prometheus::*;
use crate::common::*;
use linecard_harness::lab::spec;
use linecard_harness::procs::{start_frr_bfdd, PeerSession};
use std::time::Duration;

const SESSIONS: usize = 2;
/// Where linecardd listens for scrapes, on the DUT namespace's loopback.
const METRICS: &str = "127.0.0.1:19788";
/// How long FRR is stopped: 0.85 of the 1 s detection time.
const STOP_MS: u64 = 850;

/// The endpoint's text.
fn scrape() -> String {
    curl(&[&format!("http://{METRICS}/metrics")])
}

/// The values of the endpoint's samples whose line starts with `name{`
/// and contains every one of `having`.
fn samples(text: &str, name: &str, having: &[&str]) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && having.iter().all(|h| l.contains(h)))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect()
}

/// The largest exemplar over 0.5 s Prometheus holds on the receive-gap
/// buckets of the session whose labels contain `peer_label` between two
/// instants (ns): its value and time, s.
fn exemplar(peer_label: &str, from_ns: i64, to_ns: i64) -> Option<(f64, f64)> {
    let peer = peer_label.split('"').nth(1)?;
    let data = api(
        "query_exemplars",
        &[
            (
                "query",
                format!(r#"linecard_bfd_receive_gap_seconds_bucket{{peer="{peer}"}}"#),
            ),
            ("start", (from_ns as f64 / 1e9).to_string()),
            ("end", (to_ns as f64 / 1e9 + 5.0).to_string()),
        ],
    )?;
    (data.as_array()?.iter())
        .flat_map(|series| series["exemplars"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| {
            let value: f64 = e["value"].as_str()?.parse().ok()?;
            Some((value, e["timestamp"].as_f64()?))
        })
        .filter(|&(value, _)| value > 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

#[test]
fn prometheus_holds_the_fast_path_s_gaps_and_downs_as_the_wire_shows_them() {
    if !privileged("prometheus_holds_the_fast_path_s_gaps_and_downs_as_the_wire_shows_them") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("metrics");
    let pairs = AddressPairs::add(SESSIONS);
    let peer_sessions: Vec<PeerSession> = (pairs.peer_sessions().into_iter())
        .map(|s| PeerSession {
            tx_ms: 100,
            rx_ms: 100,
            multiplier: 10,
            ..s
        })
        .collect();
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let mut frr = start_frr_bfdd(
        "frr",
        spec::PEER.namespace,
        Some(&rest),
        &dir,
        &peer_sessions,
    )
    .unwrap();
    let socket = dir.join("dut.sock");
    let mut config = format!(
        "[engine]\ncontrol_socket = \"{}\"\nmetrics = \"{METRICS}\"\n",
        socket.display()
    );
    for i in 0..SESSIONS {
        config.push_str(&format!(
            "\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\ntx_interval_ms = 100\nrx_interval_ms = 100\n\
             multiplier = 10\nbackend = \"xdp\"\ninterface = \"eth0\"\n",
            pair_peer_address(i),
            pair_dut_address(i)
        ));
    }
    let mut dut = start_linecardd_toml(&dir, &config);
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(30),
        "both sessions Up and offloaded",
        |s| {
            (s.iter())
                .filter(|s| s["state"] == "up" && s["offloaded"] == true)
                .count()
                == SESSIONS
        },
    );
    // The FRR-shaped view of the same sessions, against FRR's own.
    crate::frr_json::ctl_peers_reads_as_frr_s_own(&socket, &dir.join("frr"));
    let capture = capture_dut_port(&dir);
    let mut prometheus_daemon = start_prometheus(&dir, METRICS);
    wait_prometheus(r#"up{job="linecardd"}"#, 1.0, Duration::from_secs(60));

    // The quiet window: gaps measured in the kernel, none over budget.
    // The capture's window opens a second before the quiet scrape, so
    // that it holds the peer's last packet before the stop.
    std::thread::sleep(Duration::from_secs(2));
    let window_start = epoch_ns();
    std::thread::sleep(Duration::from_secs(1));
    let quiet = scrape();
    let kernel = [r#"path="kernel""#, r#"direction="receive""#];
    let rx_counts = samples(
        &quiet,
        "linecard_bfd_receive_gap_seconds_count",
        &[r#"path="kernel""#],
    );
    assert_eq!(rx_counts.len(), SESSIONS, "{quiet}");
    assert!(
        rx_counts.iter().all(|&n| n >= 20.0),
        "the kernel measured: {rx_counts:?}"
    );
    let over = |text: &str, threshold: &str| -> Vec<f64> {
        let t = format!(r#"threshold="{threshold}""#);
        samples(
            text,
            "linecard_bfd_gap_over_budget_total",
            &[kernel[0], kernel[1], &t],
        )
    };
    assert_eq!(
        over(&quiet, "0.5"),
        [0.0; SESSIONS],
        "a quiet window has no gap over budget"
    );

    // FRR stopped for 0.85 of the detection time.
    let frr_pid = frr.pid() as libc::pid_t;
    // SAFETY: signals to the bfdd this test started, by PID.
    unsafe { libc::kill(frr_pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(STOP_MS));
    // SAFETY: as above.
    unsafe { libc::kill(frr_pid, libc::SIGCONT) };
    std::thread::sleep(Duration::from_secs(3));
    let after = scrape();
    let window_end = epoch_ns();
    assert_eq!(over(&after, "0.5"), [1.0; SESSIONS], "{after}");
    assert_eq!(over(&after, "0.8"), [1.0; SESSIONS], "{after}");
    assert_eq!(over(&after, "1.0"), [0.0; SESSIONS], "{after}");
    assert_eq!(
        samples(&after, "linecard_bfd_session_state", &[]),
        [3.0; SESSIONS],
        "still Up"
    );
    // Prometheus holds what the endpoint said.
    wait_prometheus(
        r#"sum(linecard_bfd_gap_over_budget_total{path="kernel",direction="receive",threshold="0.8"})"#,
        SESSIONS as f64,
        Duration::from_secs(10),
    );

    // The capture's largest peer-to-DUT gap of each session between the
    // two scrapes lies in the highest bucket the kernel's histogram
    // gained a gap in over them.
    let pcap = capture.finish().unwrap();
    let analysis = analyze_window(pcap, "stop", window_start, window_end);
    let buckets_of = |text: &str, peer_label: &str| -> Vec<(f64, f64)> {
        (text.lines())
            .filter(|l| {
                l.starts_with("linecard_bfd_receive_gap_seconds_bucket{") && l.contains(peer_label)
            })
            .map(|l| {
                let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                // The count, before any exemplar (`# {} gap time`).
                let value = l.split_once("} ").unwrap().1.split(' ').next().unwrap();
                (le, value.parse().unwrap())
            })
            .collect()
    };
    for i in 0..SESSIONS {
        let (peer, ours) = (
            pair_peer_address(i).to_string(),
            pair_dut_address(i).to_string(),
        );
        let flow = (analysis.phases[0].result.flows.iter())
            .find(|f| f.src == peer && f.dst == ours)
            .unwrap_or_else(|| panic!("no {peer} -> {ours} on the capture"));
        let wire_max_s = flow.gap_ms.max / 1000.0;
        let peer_label = format!(r#"peer="{peer}""#);
        let before = buckets_of(&quiet, &peer_label);
        let buckets: Vec<(f64, f64)> = (buckets_of(&after, &peer_label).into_iter())
            .zip(before)
            .map(|((le, n), (_, was))| (le, n - was))
            .collect();
        let total = buckets.last().unwrap().1;
        // The highest non-empty bucket: the first bound whose cumulative
        // count reaches the total; its lower bound the previous one.
        let top = buckets.iter().position(|&(_, n)| n == total).unwrap();
        let (low, high) = (
            if top == 0 { 0.0 } else { buckets[top - 1].0 },
            buckets[top].0,
        );
        assert!(
            (0.85..0.95).contains(&wire_max_s) && low < wire_max_s && wire_max_s <= high,
            "session {i}: the capture's largest gap {wire_max_s} s is not in ({low}, {high}]"
        );
        // Prometheus holds the scrape window's largest gap as the
        // exemplar of that bucket, with when it ended: the stop, within
        // 2 ms of the wire's figure (the kernel hears the packet after
        // the observer saw it on the bridge).
        let (gap_s, at_s) = exemplar(&peer_label, window_start, window_end)
            .unwrap_or_else(|| panic!("session {i}: no exemplar over 0.5 s in Prometheus"));
        assert!(
            (gap_s - wire_max_s).abs() < 0.002
                && (window_start as f64 / 1e9..window_end as f64 / 1e9).contains(&at_s),
            "session {i}: exemplar {gap_s} s at {at_s} against the wire's {wire_max_s} s"
        );
    }

    // FRR gone without a farewell: each session leaves Up once, Diag 1.
    frr.kill().unwrap();
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "both sessions Down",
        |s| s.iter().all(|s| s["state"] == "down"),
    );
    let downs = samples(
        &scrape(),
        "linecard_bfd_session_down_total",
        &[r#"diag="control_detection_time_expired""#],
    );
    assert_eq!(downs, [1.0; SESSIONS]);
    wait_prometheus(
        r#"sum(linecard_bfd_session_down_total{diag="control_detection_time_expired"})"#,
        SESSIONS as f64,
        Duration::from_secs(10),
    );
    prometheus_daemon.stop().unwrap();
    dut.stop().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `linecard bench metrics`, short: the engine's CPU time with and
/// without a scrape a second, side by side, and a scrape of every session
/// (the README's figure is the full run's, 1024 sessions).
#[test]
fn bench_metrics_prices_a_scrape_beside_none() {
    if !privileged("bench_metrics_prices_a_scrape_beside_none") {
        return;
    }
    // Its engine runs in this namespace: the lab's lock keeps others out.
    let _lock = lock_lab();
    let dir = scratch_dir("benchm");
    let out = linecard(&[
        "bench",
        "metrics",
        "--sessions",
        "16",
        "--seconds",
        "5",
        "--pairs",
        "1",
        "--json",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert_exit(&out, 0, "linecard bench metrics");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["sessions"], 16);
    assert!(report["engine"].as_str().unwrap().starts_with("linecardd "));
    let pair = &report["pairs"][0];
    assert!(
        pair["idle_cpu_ms_per_s"].is_f64() && pair["cost_percent"].is_f64(),
        "{report:#}"
    );
    assert!(report["bytes"].as_u64().unwrap() > 16 * 1000, "{report:#}");
    assert!(report["scrape_ms_p50"].as_f64().unwrap() > 0.0);
    // The engine it started is gone, and went without a panic.
    let config = dir.join("linecardd.toml");
    let left = std::process::Command::new("pgrep")
        .args(["-f", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "left running: {:?}", left.stdout);
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
