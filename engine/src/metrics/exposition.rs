//! A [`Snapshot`] and the kernel's rows as OpenMetrics text (names by the
//! conventions: a `linecard_` prefix, base units, `_seconds`, `_total` on
//! counters).
//!
//! Written here rather than through prometheus-client's encoder, which
//! renders every line's label set anew: 19 ms per scrape at 1024 sessions
//! (11 MB, release build), 2.3 % of a CPU at 1 Hz. Each session's labels
//! are rendered once here and copied into its ~80 lines. The format is
//! held to the crate's by a test that renders the same families both ways
//! (`writes_what_prometheus_client_writes`), and to Prometheus by the lab
//! test that scrapes it (`harness/tests/lab/metrics.rs`).
//!
//! Each session's gaps come from one plane, named by the `path` label:
//! `kernel` on the xdp backend (the fast path hears every valid packet
//! first, and its replies are where our packets leave), `userspace` on the
//! others. The over-budget counters are sums of the ratio histogram's
//! buckets beyond 0.5, 0.8 and 1.0 of the detection time: alert on them
//! (`increase(linecard_bfd_gap_over_budget_total{threshold="0.8"}[5m]) >
//! 0`), not on a percentile, which stays healthy while the maximum pulls
//! routes.

use super::openmetrics::{escape, float, HistogramNames, Text};
use super::{KernelMaps, KernelRow, SessionRow, Snapshot, WindowMax};
use linecard_common::gaps::{
    gap_bucket, GapHistogram, GAP_BOUNDS_NS, OVER_BUDGET_TENTHS, RATIO_BUCKETS,
};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The text a scrape returns; it closes the kernel's scrape window (the
/// loop closed its own when it took the snapshot).
pub fn encode(snapshot: &Snapshot, mut kernel: Option<&mut KernelMaps>) -> String {
    let window = kernel.as_deref_mut().and_then(KernelMaps::close_window);
    let kernel = kernel.as_deref();
    let rows = snapshot
        .sessions
        .iter()
        .map(|row| {
            let kernel_row = row.kernel_slot.and_then(|slot| kernel?.row(slot, window));
            (row.clone(), kernel_row)
        })
        .collect();
    encode_rows(snapshot, rows)
}

/// [`encode`] with the kernel's rows already read (tests give them).
pub fn encode_rows(snapshot: &Snapshot, rows: Vec<(SessionRow, Option<KernelRow>)>) -> String {
    let sessions: Vec<Session> = rows
        .iter()
        .map(|(row, kernel)| Session {
            row,
            labels: session_labels(row),
            gaps: gaps_of(row, kernel),
            kernel: kernel.as_ref(),
        })
        .collect();
    // About 11 KiB a session: sized once rather than grown.
    let mut text = Text(String::with_capacity(4096 + 11 * 1024 * sessions.len()));
    write_sessions(&mut text, &sessions, snapshot.detailed_sessions);
    write_process(&mut text, snapshot);
    text.0.push_str("# EOF\n");
    text.0
}

/// A session as the writer needs it: its labels rendered once.
struct Session<'a> {
    row: &'a SessionRow,
    /// `local="..",peer="..",family="..",hop="..",backend=".."`.
    labels: String,
    gaps: Option<Gaps>,
    kernel: Option<&'a KernelRow>,
}

/// A session's gaps as one plane measured them: receive, then transmit.
struct Gaps {
    /// `kernel` or `userspace`.
    path: &'static str,
    histograms: [GapHistogram; 2],
    /// Each direction's largest gap since the previous scrape.
    window: [WindowMax; 2],
}

fn session_labels(row: &SessionRow) -> String {
    let family = if row.peer.is_ipv6() { "ipv6" } else { "ipv4" };
    let hop = if row.multihop { "multi" } else { "single" };
    let mut labels = String::with_capacity(96);
    let _ = write!(
        labels,
        "local=\"{}\",peer=\"{}\",family=\"{family}\",hop=\"{hop}\",backend=\"{}\"",
        row.local,
        row.peer,
        escape(&row.backend)
    );
    labels
}

/// The plane whose gaps a session shows, and they; none for a session of
/// the fast path whose kernel figures could not be read (userspace's
/// would mislead: it sees only the packets passed up).
fn gaps_of(row: &SessionRow, kernel: &Option<KernelRow>) -> Option<Gaps> {
    match (row.kernel_slot, kernel) {
        (Some(_), Some(k)) => Some(Gaps {
            path: "kernel",
            histograms: [k.gaps.rx, k.gaps.tx],
            window: k.window,
        }),
        (Some(_), None) => None,
        (None, _) => Some(Gaps {
            path: "userspace",
            histograms: [row.userspace_gaps.rx, row.userspace_gaps.tx],
            window: row.userspace_window,
        }),
    }
}

/// The directions, as [`Gaps`] orders them.
const DIRECTIONS: [&str; 2] = ["receive", "transmit"];

/// The seconds buckets' `le` labels.
fn seconds_les() -> Vec<String> {
    (GAP_BOUNDS_NS.iter())
        .map(|&ns| format!("le=\"{}\"", float(ns as f64 / 1e9)))
        .chain(["le=\"+Inf\"".to_string()])
        .collect()
}

/// The ratio buckets' `le` labels as exposed: at most 0.1 (a gap of none
/// included), 0.2, ... 1.0, +Inf.
fn ratio_les() -> Vec<String> {
    (1..RATIO_BUCKETS)
        .map(|i| match i + 1 == RATIO_BUCKETS {
            true => "le=\"+Inf\"".to_string(),
            false => format!("le=\"{}\"", float(i as f64 / 10.0)),
        })
        .collect()
}

/// The ratio buckets' counts, not cumulative, as [`ratio_les`] names them.
fn ratio_counts(h: &GapHistogram) -> Vec<u64> {
    let mut counts = h.ratio[1..].to_vec();
    counts[0] += h.ratio[0];
    counts
}

/// What a histogram family shows of one direction's histogram: (sum,
/// count, bucket counts, not cumulative).
type HistogramOf = fn(&GapHistogram) -> (f64, u64, Vec<u64>);

/// The seconds histogram's exemplar: the window's largest gap, on its
/// bucket, with the wall-clock time it ended (OpenMetrics exemplar
/// syntax), so that it can be found in a capture.
fn window_exemplar(window: WindowMax) -> Option<(usize, String)> {
    let (gap_ns, at_ns) = window?;
    // The time from its integer ns: an f64 of Unix seconds keeps only
    // a quarter of a microsecond.
    let at = format!(
        "{}.{:09}",
        at_ns.div_euclid(1_000_000_000),
        at_ns.rem_euclid(1_000_000_000)
    );
    let at = at.trim_end_matches('0').trim_end_matches('.');
    let text = format!("# {{}} {} {at}", float(gap_ns as f64 / 1e9));
    Some((gap_bucket(gap_ns), text))
}

/// A histogram family of one direction: a series per session for the
/// first `detailed` sessions, then one per timer class, backend and plane
/// for the rest (the cardinality bound: each series is ~15 lines of
/// text). `exemplars`: whether its series carry the window's largest gap.
fn histogram_family(
    text: &mut Text,
    sessions: &[Session],
    detailed: usize,
    names: &HistogramNames,
    direction: usize,
    of: HistogramOf,
    exemplars: bool,
) {
    let mut classes: BTreeMap<(&str, &str, &str), GapHistogram> = BTreeMap::new();
    for (i, s) in sessions.iter().enumerate() {
        let Some(gaps) = &s.gaps else {
            continue;
        };
        let histogram = &gaps.histograms[direction];
        if i < detailed {
            let labels = format!("{},path=\"{}\"", s.labels, gaps.path);
            let exemplar = exemplars
                .then(|| window_exemplar(gaps.window[direction]))
                .flatten();
            text.histogram(names, &labels, of(histogram), exemplar);
        } else {
            let key = (
                s.row.timer_class.as_str(),
                s.row.backend.as_str(),
                gaps.path,
            );
            classes.entry(key).or_default().add(histogram);
        }
    }
    for ((timer_class, backend, path), h) in classes {
        let labels = format!(
            "timer_class=\"{}\",backend=\"{}\",path=\"{path}\"",
            escape(timer_class),
            escape(backend)
        );
        text.histogram(names, &labels, of(&h), None);
    }
}

fn write_sessions(text: &mut Text, sessions: &[Session], detailed: usize) {
    let name = "linecard_bfd_session_state";
    text.family(
        name,
        "The session's state as RFC 5880 4.1 codes it: 0 AdminDown, 1 Down, 2 Init, 3 Up",
        None,
        "gauge",
    );
    for s in sessions {
        text.sample(name, "", &s.labels, "", &(s.row.state as i64).to_string());
    }
    text.family(
        "linecard_bfd_session_down",
        "Transitions out of Up, by the diagnostic they carried (RFC 5880 4.1)",
        None,
        "counter",
    );
    for s in sessions {
        for (diag, count) in &s.row.downs {
            let diag = serde_json::to_value(diag)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| diag.bits().to_string());
            let extra = format!("diag=\"{}\"", escape(&diag));
            text.sample(
                "linecard_bfd_session_down_total",
                "",
                &s.labels,
                &extra,
                &count.to_string(),
            );
        }
    }
    let name = "linecard_bfd_session_last_down_timestamp_seconds";
    text.family(
        name,
        "When the session last left Up (Unix time), with the diagnostic it carried",
        Some("seconds"),
        "gauge",
    );
    for s in sessions {
        if let Some((at_ns, diag)) = s.row.last_down {
            let extra = format!("diag=\"{}\"", diag.bits());
            text.sample(name, "", &s.labels, &extra, &float(at_ns as f64 / 1e9));
        }
    }
    for (name, help, kernel_count, userspace_count) in [
        (
            "linecard_bfd_packets_received",
            "Valid control packets heard, by the plane that heard them (on the xdp backend the kernel hears every one first; userspace those it passed up)",
            (|k: &KernelRow| k.received) as fn(&KernelRow) -> u64,
            (|r: &SessionRow| r.userspace_in) as fn(&SessionRow) -> u64,
        ),
        (
            "linecard_bfd_packets_sent",
            "Control packets sent, by the plane that sent them (kernel: RX-clocked replies)",
            |k: &KernelRow| k.replied,
            |r: &SessionRow| r.userspace_out,
        ),
    ] {
        text.family(name, help, None, "counter");
        let total = format!("{name}_total");
        for s in sessions {
            let count = userspace_count(s.row);
            text.count(&total, "", &s.labels, "path=\"userspace\"", count);
            if let Some(k) = s.kernel {
                text.count(&total, "", &s.labels, "path=\"kernel\"", kernel_count(k));
            }
        }
    }
    for (index, direction) in DIRECTIONS.into_iter().enumerate() {
        let against = if direction == "receive" {
            "our detection time"
        } else {
            "the peer's detection time"
        };
        let name = format!("linecard_bfd_{direction}_gap_seconds");
        text.family(
            &name,
            &format!(
                "Gaps between the session's {direction}d packets, measured by the plane in `path`; the exemplar is the largest since the previous scrape, with when it ended"
            ),
            Some("seconds"),
            "histogram",
        );
        let names = HistogramNames::new(&name, seconds_les());
        let seconds: HistogramOf = |h| (h.sum_ns as f64 / 1e9, h.count, h.seconds.to_vec());
        histogram_family(text, sessions, detailed, &names, index, seconds, true);
        let name = format!("linecard_bfd_{direction}_gap_detection_ratio");
        text.family(
            &name,
            &format!("Each {direction} gap as a fraction of {against} it ran against (RFC 5880 6.8.4), each rounded up to a thousandth"),
            None,
            "histogram",
        );
        let names = HistogramNames::new(&name, ratio_les());
        let ratio: HistogramOf = |h| {
            (
                h.ratio_sum_permille as f64 / 1000.0,
                h.ratio.iter().sum(),
                ratio_counts(h),
            )
        };
        histogram_family(text, sessions, detailed, &names, index, ratio, false);
        for (name, help, value) in [
            (
                format!("linecard_bfd_{direction}_gap_max_seconds"),
                format!("The largest {direction} gap since the engine started"),
                (|g: &Gaps, i: usize| g.histograms[i].max_ns) as fn(&Gaps, usize) -> u64,
            ),
            (
                format!("linecard_bfd_{direction}_gap_window_max_seconds"),
                format!("The largest {direction} gap since the endpoint's previous scrape, whoever made it (0: none)"),
                |g: &Gaps, i: usize| g.window[i].map_or(0, |(gap, _)| gap),
            ),
        ] {
            text.family(&name, &help, Some("seconds"), "gauge");
            for s in sessions {
                if let Some(gaps) = &s.gaps {
                    let extra = format!("path=\"{}\"", gaps.path);
                    let seconds = float(value(gaps, index) as f64 / 1e9);
                    text.sample(&name, "", &s.labels, &extra, &seconds);
                }
            }
        }
    }
    text.family(
        "linecard_bfd_gap_over_budget",
        "Gaps longer than `threshold` of the detection time they ran against: receive gaps against ours, transmit gaps against the peer's",
        None,
        "counter",
    );
    for s in sessions {
        let Some(gaps) = &s.gaps else {
            continue;
        };
        for (direction, h) in DIRECTIONS.into_iter().zip(&gaps.histograms) {
            for tenths in OVER_BUDGET_TENTHS {
                let extra = format!(
                    "path=\"{}\",direction=\"{direction}\",threshold=\"{:.1}\"",
                    gaps.path,
                    tenths as f64 / 10.0
                );
                let count = h.over_budget(tenths);
                text.count(
                    "linecard_bfd_gap_over_budget_total",
                    "",
                    &s.labels,
                    &extra,
                    count,
                );
            }
        }
    }
}

/// A counter family with one label: a sample per (value, count).
fn counters_by(text: &mut Text, name: &str, help: &str, label: &str, counts: &[(String, u64)]) {
    text.family(name, help, None, "counter");
    let total = format!("{name}_total");
    for (value, count) in counts {
        let labels = format!("{label}=\"{}\"", escape(value));
        text.count(&total, "", &labels, "", *count);
    }
}

/// The process's families: drops, verdicts, the responder's class.
fn write_process(text: &mut Text, snapshot: &Snapshot) {
    counters_by(
        text,
        "linecard_bfd_dropped_packets",
        "Packets refused, by reason (userspace and the fast path summed; no peer label)",
        "reason",
        &snapshot.drops,
    );
    counters_by(
        text,
        "linecard_bfd_fast_path_verdicts",
        "The fast path's verdicts on the frames it judged, summed over CPUs",
        "verdict",
        &snapshot.verdicts,
    );
    if let Some(policy) = &snapshot.responder {
        let name = "linecard_bfd_responder_scheduling";
        text.family(
            name,
            "How the xdp backend's responder thread is scheduled (1 for the policy in force)",
            None,
            "gauge",
        );
        let labels = format!("policy=\"{}\"", escape(policy));
        text.sample(name, "", &labels, "", "1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linecard_api::control::{Diagnostic, State};
    use linecard_common::gaps::SessionGaps;

    const MS: u64 = 1_000_000;

    fn row(kernel_slot: Option<u32>) -> SessionRow {
        SessionRow {
            local: "192.0.2.1".parse().unwrap(),
            peer: "192.0.2.2".parse().unwrap(),
            multihop: false,
            backend: "xdp".into(),
            state: State::Up,
            downs: vec![(Diagnostic::ControlDetectionTimeExpired, 2)],
            last_down: Some((
                1_700_000_000_500_000_000,
                Diagnostic::ControlDetectionTimeExpired,
            )),
            userspace_in: 5,
            userspace_out: 6,
            userspace_gaps: SessionGaps::default(),
            userspace_window: [None, None],
            kernel_slot,
            timer_class: "3x10ms".into(),
        }
    }

    fn detailed(n: usize) -> Snapshot {
        Snapshot {
            detailed_sessions: n,
            ..Snapshot::default()
        }
    }

    /// The line of `text` whose name and labels start with `prefix`.
    fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
    }

    #[test]
    fn a_kernel_measured_session_shows_the_kernel_s_gaps_cumulative_and_over_budget() {
        let mut kernel = KernelRow {
            received: 100,
            replied: 90,
            ..KernelRow::default()
        };
        // 3 x 10 ms: gaps of 9, 10 and 27 ms received (0.3, 0.34, 0.9 of
        // the detection time), one of 11 ms sent.
        for gap in [9 * MS, 10 * MS, 27 * MS] {
            kernel.gaps.rx.record(gap, 30 * MS, 0, 0);
        }
        kernel.gaps.tx.record(11 * MS, 30 * MS, 0, 0);
        // The window's largest receive gap, ended at a known wall time.
        kernel.window = [Some((27 * MS, 1_700_000_001_250_000_000)), None];
        let text = encode_rows(&detailed(1024), vec![(row(Some(0)), Some(kernel))]);
        let labels =
            r#"local="192.0.2.1",peer="192.0.2.2",family="ipv4",hop="single",backend="xdp""#;
        assert!(line(&text, "linecard_bfd_session_state{").ends_with(" 3"));
        assert!(line(&text, "linecard_bfd_session_down_total{")
            .contains(r#"diag="control_detection_time_expired""#));
        // Cumulative buckets: 2 gaps at most 10 ms, all 3 at most 30 ms.
        let bucket_line = |le: &str| {
            line(
                &text,
                &format!(
                    r#"linecard_bfd_receive_gap_seconds_bucket{{le="{le}",{labels},path="kernel"}}"#
                ),
            )
            .split_once("} ")
            .unwrap()
            .1
            .to_string()
        };
        let bucket = |le: &str| bucket_line(le).split(' ').next().unwrap().to_string();
        // The window's largest gap is the exemplar of the bucket holding
        // it, and of no other.
        assert_eq!(bucket_line("0.03"), "3 # {} 0.027 1700000001.25");
        assert_eq!(bucket_line("0.02"), "2");
        let window_max = |direction: &str| {
            line(
                &text,
                &format!(
                    r#"linecard_bfd_{direction}_gap_window_max_seconds{{{labels},path="kernel"}}"#
                ),
            )
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
        };
        assert_eq!(
            (window_max("receive"), window_max("transmit")),
            ("0.027".into(), "0.0".into())
        );
        assert_eq!(
            (
                bucket("0.01"),
                bucket("0.015"),
                bucket("0.03"),
                bucket("+Inf")
            ),
            ("2".into(), "2".into(), "3".into(), "3".into())
        );
        let over = |direction: &str, threshold: &str| {
            line(
                &text,
                &format!(r#"linecard_bfd_gap_over_budget_total{{{labels},path="kernel",direction="{direction}",threshold="{threshold}"}}"#),
            )
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
        };
        assert_eq!(
            (
                over("receive", "0.5"),
                over("receive", "0.8"),
                over("receive", "1.0")
            ),
            ("1".into(), "1".into(), "0".into())
        );
        assert_eq!(over("transmit", "0.5"), "0");
        assert!(line(
            &text,
            &format!(r#"linecard_bfd_receive_gap_max_seconds{{{labels},path="kernel"}}"#)
        )
        .ends_with(" 0.027"));
        assert!(line(
            &text,
            &format!(r#"linecard_bfd_packets_sent_total{{{labels},path="kernel"}}"#)
        )
        .ends_with(" 90"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn without_the_kernel_s_row_a_session_shows_userspace_s_own_gaps() {
        let mut r = row(None);
        r.backend = "naive".into();
        r.userspace_gaps.rx.record(31 * MS, 30 * MS, 0, 0);
        let text = encode_rows(&detailed(1024), vec![(r, None)]);
        assert!(line(&text, "linecard_bfd_gap_over_budget_total{").contains(r#"path="userspace""#));
        assert!(!text.contains(r#"path="kernel""#), "{text}");
        assert!(
            text.contains(r#"direction="receive",threshold="1.0"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn beyond_the_bound_histograms_are_summed_per_timer_class_and_the_rest_stays_per_session() {
        let session = |peer: &str, gap_ms: u64| {
            let mut r = row(None);
            r.backend = "naive".into();
            r.peer = peer.parse().unwrap();
            r.userspace_gaps.rx.record(gap_ms * MS, 30 * MS, 0, 0);
            (r, None)
        };
        let rows = vec![
            session("192.0.2.2", 10),
            session("192.0.2.3", 27),
            session("192.0.2.4", 12),
        ];
        let text = encode_rows(&detailed(1), rows);
        let histogram_series = |peer: &str| {
            text.lines()
                .filter(|l| {
                    l.starts_with("linecard_bfd_receive_gap_seconds_count{")
                        && l.contains(&format!("peer=\"{peer}\""))
                })
                .count()
        };
        assert_eq!(
            (histogram_series("192.0.2.2"), histogram_series("192.0.2.3")),
            (1, 0),
            "{text}"
        );
        let class = line(
            &text,
            r#"linecard_bfd_receive_gap_seconds_count{timer_class="3x10ms",backend="naive",path="userspace"}"#,
        );
        assert!(
            class.ends_with(" 2"),
            "the two beyond the bound, summed: {class}"
        );
        // Every session keeps its maximum and over-budget counters.
        for peer in ["192.0.2.2", "192.0.2.3", "192.0.2.4"] {
            let max = line(
                &text,
                &format!(
                    r#"linecard_bfd_receive_gap_max_seconds{{local="192.0.2.1",peer="{peer}""#
                ),
            );
            assert!(!max.ends_with(" 0.0"), "{max}");
        }
        assert!(text.contains(r#"peer="192.0.2.3",family="ipv4",hop="single",backend="naive",path="userspace",direction="receive",threshold="0.8"} 1"#), "{text}");
    }

    /// The writer's text for a session's gauge, labelled counter and
    /// seconds histogram, line for line what prometheus-client renders for
    /// the same families and values (the format this writer replaced).
    #[test]
    fn writes_what_prometheus_client_writes() {
        use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        use prometheus_client::metrics::MetricType;
        use prometheus_client::registry::{Registry, Unit};

        let mut r = row(None);
        r.backend = "naive".into();
        for gap in [9 * MS, 27 * MS, 700 * MS] {
            r.userspace_gaps.rx.record(gap, 30 * MS, 0, 0);
        }
        let ours = encode_rows(&detailed(1024), vec![(r.clone(), None)]);

        #[derive(Debug)]
        struct Reference(SessionRow);
        impl prometheus_client::collector::Collector for Reference {
            fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
                let r = &self.0;
                let labels: Vec<(&str, String)> = vec![
                    ("local", r.local.to_string()),
                    ("peer", r.peer.to_string()),
                    ("family", "ipv4".into()),
                    ("hop", "single".into()),
                    ("backend", r.backend.clone()),
                ];
                let mut with_path = labels.clone();
                with_path.push(("path", "userspace".into()));
                let state = ConstGauge::new(r.state as i64);
                state.encode(
                    encoder
                        .encode_descriptor(
                            "linecard_bfd_session_state",
                            "The session's state as RFC 5880 4.1 codes it: 0 AdminDown, 1 Down, 2 Init, 3 Up",
                            None,
                            MetricType::Gauge,
                        )?
                        .encode_family(&labels)?,
                )?;
                let sent = ConstCounter::new(r.userspace_out);
                sent.encode(
                    encoder
                        .encode_descriptor(
                            "linecard_bfd_packets_sent",
                            "Control packets sent, by the plane that sent them (kernel: RX-clocked replies)",
                            None,
                            MetricType::Counter,
                        )?
                        .encode_family(&with_path)?,
                )?;
                let h = r.userspace_gaps.rx;
                let buckets: Vec<(f64, u64)> = (GAP_BOUNDS_NS.iter())
                    .map(|&ns| ns as f64 / 1e9)
                    .chain([f64::MAX])
                    .zip(h.seconds)
                    .collect();
                encoder
                    .encode_descriptor(
                        "linecard_bfd_receive_gap",
                        "Gaps between the session's received packets, measured by the plane in `path`; the exemplar is the largest since the previous scrape, with when it ended",
                        Some(&Unit::Seconds),
                        MetricType::Histogram,
                    )?
                    .encode_family(&with_path)?
                    .encode_histogram::<Vec<(&str, String)>>(
                        h.sum_ns as f64 / 1e9,
                        h.count,
                        &buckets,
                        None,
                    )
            }
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Reference(r)));
        let mut theirs = String::new();
        prometheus_client::encoding::text::encode(&mut theirs, &registry).unwrap();
        let mut compared = 0;
        for line in theirs.lines().filter(|l| *l != "# EOF") {
            assert!(
                ours.lines().any(|l| l == line),
                "not written: {line}\n{ours}"
            );
            compared += 1;
        }
        assert!(compared > 20, "{theirs}");
    }
}
