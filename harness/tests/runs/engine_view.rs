//! The engine's own view during `scenarios/smoke.toml` (issue 41), held
//! against the wire: Debian's `prometheus` scrapes the DUT's endpoint
//! beside the run's own scraper. For the xdp DUT under L4, the receive
//! histogram Prometheus holds gained its highest gap in the bucket that
//! contains the capture's largest peer-to-DUT gap between the same two
//! scrapes; for the naive control, which must flap (the precondition),
//! the engine's departures from Up, in the run's scrapes and in
//! Prometheus, equal the flaps on the capture.

use crate::common::prometheus::*;
use crate::common::*;

/// Where every DUT linecardd of a run serves its metrics (the runner's
/// `DUT_METRICS`), in the lab's DUT namespace.
const DUT_METRICS: &str = "127.0.0.1:19788";
/// The smoke scenario's peer address on the lab.
const LAB_PEER: &str = "192.0.2.2";

#[test]
fn during_smoke_the_engine_s_view_matches_the_wire_in_prometheus_and_in_the_run() {
    if !privileged("during_smoke_the_engine_s_view_matches_the_wire") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let results = scratch_dir("ev");
    // Shortened as the SSH hosts' smoke is: idle 3 s, L4 9 s, which still
    // starve the naive control.
    let text = std::fs::read_to_string(repo().join("scenarios/smoke.toml")).unwrap();
    let scenario = results.join("smoke.toml");
    std::fs::write(
        &scenario,
        with_phase_seconds(&text, &[("idle", 3), ("L4", 9)]),
    )
    .unwrap();
    let mut prometheus_daemon = start_prometheus(&results, DUT_METRICS);
    let profiles = repo().join("stress-profiles");
    let judged = judged_run(
        &scenario,
        "smoke",
        &results,
        "e",
        &["--profiles", profiles.to_str().unwrap()],
    );
    let Some((out, dir)) = judged else {
        prometheus_daemon.stop().unwrap();
        return;
    };
    assert_exit(&out, 0, "the smoke scenario");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();

    // The naive control: the engine's departures from Up, phase by phase
    // from the run's scrapes, are the capture's flaps.
    let naive = dut(&manifest, "naive");
    let sum = |key: &str, of: &serde_json::Value| -> u64 {
        of.as_array()
            .unwrap()
            .iter()
            .map(|p| p[key].as_u64().unwrap())
            .sum()
    };
    let wire_flaps = sum("flaps", &naive["evidence"]["phases"]);
    assert!(wire_flaps > 0, "the positive control did not flap");
    let view = &naive["engine_view"];
    assert_eq!(
        view.as_array().map(Vec::len),
        Some(2),
        "an engine view per phase: {naive:#}"
    );
    assert_eq!(
        sum("engine_downs", view),
        wire_flaps,
        "the naive engine's departures from Up against the capture's flaps: {view:#}"
    );
    // And in Prometheus: the naive engine's Downs by the end of its run
    // (every diagnostic's series at its largest), the capture's flaps.
    let naive_end_ns = (naive["phases"].as_array().unwrap().iter())
        .map(|p| p["end_ns"].as_i64().unwrap())
        .max()
        .unwrap();
    let naive_start_ns = naive["phases"][0]["start_ns"].as_i64().unwrap();
    let span_s = (naive_end_ns - naive_start_ns) / 1_000_000_000 + 30;
    let data = api(
        "query",
        &[
            (
                "query",
                format!(
                    r#"sum(max_over_time(linecard_bfd_session_down_total{{backend="naive"}}[{span_s}s]))"#
                ),
            ),
            ("time", (naive_end_ns as f64 / 1e9 + 1.5).to_string()),
        ],
    )
    .expect("Prometheus answered");
    let prometheus_downs: f64 = data["result"][0]["value"][1]
        .as_str()
        .unwrap_or_else(|| panic!("no naive Downs in Prometheus: {data:#}"))
        .parse()
        .unwrap();
    assert_eq!(
        prometheus_downs, wire_flaps as f64,
        "the naive engine's Downs in Prometheus against the capture's flaps"
    );

    // xdp under L4: Prometheus's receive histogram between its first and
    // last scrape inside the phase, against the capture between them.
    let xdp = dut(&manifest, "xdp");
    let l4 = (xdp["phases"].as_array().unwrap().iter())
        .find(|p| p["profile"] == "L4")
        .unwrap();
    let (start_ns, end_ns) = (
        l4["start_ns"].as_i64().unwrap(),
        l4["end_ns"].as_i64().unwrap(),
    );
    // The raw samples, each at its scrape's time (a range vector).
    let span_s = (end_ns - start_ns) / 1_000_000_000 + 1;
    let data = api(
        "query",
        &[
            (
                "query",
                format!(r#"linecard_bfd_receive_gap_seconds_bucket{{backend="xdp"}}[{span_s}s]"#),
            ),
            ("time", (end_ns as f64 / 1e9).to_string()),
        ],
    )
    .expect("Prometheus answered");
    // Per bucket: its upper bound and (scrape time s, cumulative count),
    // the scrapes inside the phase only.
    let mut buckets: Vec<(f64, Vec<(f64, f64)>)> = (data["result"].as_array().unwrap().iter())
        .map(|series| {
            let le = series["metric"]["le"].as_str().unwrap();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            let samples = (series["values"].as_array().unwrap().iter())
                .map(|v| {
                    (
                        v[0].as_f64().unwrap(),
                        v[1].as_str().unwrap().parse().unwrap(),
                    )
                })
                .filter(|&(t, _): &(f64, f64)| t * 1e9 >= start_ns as f64)
                .collect();
            (le, samples)
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(
        buckets.len() >= 2 && buckets[0].1.len() >= 5,
        "Prometheus holds the xdp histogram over L4: {data:#}"
    );
    let (first, last) = (buckets[0].1[0].0, buckets[0].1.last().unwrap().0);
    let gained: Vec<(f64, f64)> = (buckets.iter())
        .map(|(le, samples)| (*le, samples.last().unwrap().1 - samples[0].1))
        .collect();
    let total = gained.last().unwrap().1;
    assert!(total > 100.0, "gaps recorded over L4: {gained:?}");
    let top = gained.iter().position(|&(_, n)| n == total).unwrap();
    let (low, high) = (
        if top == 0 { 0.0 } else { gained[top - 1].0 },
        gained[top].0,
    );
    // The capture between the same two scrapes.
    let pcap = dir.join(xdp["capture"].as_str().unwrap());
    let analysis = analyze_window(pcap, "L4", (first * 1e9) as i64, (last * 1e9) as i64);
    let wire_max_s = (analysis.phases[0].result.flows.iter())
        .filter(|f| f.src == LAB_PEER)
        .map(|f| f.gap_ms.max / 1e3)
        .fold(0.0, f64::max);
    assert!(
        low < wire_max_s && wire_max_s <= high,
        "the capture's largest peer-to-DUT gap {wire_max_s} s is not in Prometheus's highest bucket ({low}, {high}]: {gained:?}"
    );
    prometheus_daemon.stop().unwrap();
    let _ = std::fs::remove_dir_all(&results);
}
