//! A [`Snapshot`] and the kernel's rows as OpenMetrics text, through
//! `prometheus-client`'s encoder (names by the conventions: a `linecard_`
//! prefix, base units, `_seconds`, `_total` on counters).
//!
//! Each session's gaps come from one plane, named by the `path` label:
//! `kernel` on the xdp backend (the fast path hears every valid packet
//! first, and its replies are where our packets leave), `userspace` on the
//! others. The over-budget counters are sums of the ratio histogram's
//! buckets beyond 0.5, 0.8 and 1.0 of the detection time: alert on them
//! (`increase(linecard_bfd_gap_over_budget_total{threshold="0.8"}[5m]) >
//! 0`), not on a percentile, which stays healthy while the maximum pulls
//! routes.

use super::{KernelMaps, KernelRow, SessionRow, Snapshot};
use linecard_common::gaps::{GapHistogram, GAP_BOUNDS_NS, OVER_BUDGET_TENTHS, RATIO_BUCKETS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;

type Labels = Vec<(&'static str, String)>;

/// The text a scrape returns.
pub fn encode(snapshot: &Snapshot, kernel: Option<&KernelMaps>) -> String {
    let rows = snapshot
        .sessions
        .iter()
        .map(|row| {
            let kernel_row = row.kernel_slot.and_then(|slot| kernel?.row(slot));
            (row.clone(), kernel_row)
        })
        .collect();
    encode_rows(snapshot, rows)
}

/// [`encode`] with the kernel's rows already read (tests give them).
pub fn encode_rows(snapshot: &Snapshot, rows: Vec<(SessionRow, Option<KernelRow>)>) -> String {
    let rows_len = rows.len();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Exposition {
        rows,
        detailed: snapshot.detailed_sessions,
        drops: snapshot.drops.clone(),
        verdicts: snapshot.verdicts.clone(),
        responder: snapshot.responder.clone(),
    }));
    // About 11 KiB a session: sized once rather than grown.
    let mut text = String::with_capacity(4096 + 12 * 1024 * rows_len);
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

#[derive(Debug)]
struct Exposition {
    rows: Vec<(SessionRow, Option<KernelRow>)>,
    /// How many sessions get histograms of their own ([`Snapshot`]).
    detailed: usize,
    drops: Vec<(String, u64)>,
    verdicts: Vec<(String, u64)>,
    responder: Option<String>,
}

/// A session's identity as labels.
fn labels(row: &SessionRow) -> Labels {
    vec![
        ("local", row.local.to_string()),
        ("peer", row.peer.to_string()),
        (
            "family",
            if row.peer.is_ipv6() { "ipv6" } else { "ipv4" }.to_string(),
        ),
        (
            "hop",
            if row.multihop { "multi" } else { "single" }.to_string(),
        ),
        ("backend", row.backend.clone()),
    ]
}

fn with(mut labels: Labels, extra: &[(&'static str, String)]) -> Labels {
    labels.extend_from_slice(extra);
    labels
}

/// The plane whose gaps a session shows, and they; none for a session of
/// the fast path whose kernel figures could not be read (userspace's
/// would mislead: it sees only the packets passed up).
fn gaps_of(
    row: &SessionRow,
    kernel: &Option<KernelRow>,
) -> Option<(&'static str, GapHistogramPair)> {
    match (row.kernel_slot, kernel) {
        (Some(_), Some(k)) => Some(("kernel", (k.gaps.rx, k.gaps.tx))),
        (Some(_), None) => None,
        (None, _) => Some(("userspace", (row.userspace_gaps.rx, row.userspace_gaps.tx))),
    }
}

type GapHistogramPair = (GapHistogram, GapHistogram);

fn seconds_buckets(h: &GapHistogram) -> Vec<(f64, u64)> {
    let mut buckets: Vec<(f64, u64)> = GAP_BOUNDS_NS
        .iter()
        .zip(h.seconds)
        .map(|(&bound, count)| (bound as f64 / 1e9, count))
        .collect();
    buckets.push((f64::MAX, h.seconds[GAP_BOUNDS_NS.len()]));
    buckets
}

/// The ratio buckets as exposed: at most 0.1 (a gap of none included),
/// 0.2, ... 1.0, +Inf.
fn ratio_buckets(h: &GapHistogram) -> Vec<(f64, u64)> {
    (1..RATIO_BUCKETS)
        .map(|i| {
            let bound = if i + 1 == RATIO_BUCKETS {
                f64::MAX
            } else {
                i as f64 / 10.0
            };
            let count = h.ratio[i] + if i == 1 { h.ratio[0] } else { 0 };
            (bound, count)
        })
        .collect()
}

/// Encodes one session's samples of a family.
type EachSession<'a> =
    &'a dyn Fn(&mut MetricEncoder, &SessionRow, &Option<KernelRow>) -> std::fmt::Result;

impl Exposition {
    /// A histogram family: a series per session for the first `detailed`
    /// sessions, then one per timer class, backend and plane for the rest
    /// (the cardinality bound: each series is ~15 lines of text).
    #[allow(clippy::too_many_arguments)]
    fn histogram_family(
        &self,
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        pick: fn(&GapHistogramPair) -> GapHistogram,
        encode: fn(&mut MetricEncoder, &GapHistogram) -> std::fmt::Result,
    ) -> std::fmt::Result {
        let mut family = encoder.encode_descriptor(name, help, unit, MetricType::Histogram)?;
        let mut classes: BTreeMap<(&str, &str, &str), GapHistogram> = BTreeMap::new();
        for (i, (row, kernel)) in self.rows.iter().enumerate() {
            let Some((path, pair)) = gaps_of(row, kernel) else {
                continue;
            };
            if i < self.detailed {
                let labels = with(labels(row), &[("path", path.into())]);
                encode(&mut family.encode_family(&labels)?, &pick(&pair))?;
            } else {
                let key = (row.timer_class.as_str(), row.backend.as_str(), path);
                classes.entry(key).or_default().add(&pick(&pair));
            }
        }
        for ((timer_class, backend, path), h) in classes {
            let labels: Labels = vec![
                ("timer_class", timer_class.to_string()),
                ("backend", backend.to_string()),
                ("path", path.to_string()),
            ];
            encode(&mut family.encode_family(&labels)?, &h)?;
        }
        Ok(())
    }

    /// A family with a sample set per session.
    fn per_session(
        &self,
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        kind: MetricType,
        each: EachSession,
    ) -> std::fmt::Result {
        let mut family = encoder.encode_descriptor(name, help, unit, kind)?;
        for (row, kernel) in &self.rows {
            each(&mut family, row, kernel)?;
        }
        Ok(())
    }
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.per_session(
            &mut encoder,
            "linecard_bfd_session_state",
            "The session's state as RFC 5880 4.1 codes it: 0 AdminDown, 1 Down, 2 Init, 3 Up",
            None,
            MetricType::Gauge,
            &|family, row, _| {
                family
                    .encode_family(&labels(row))?
                    .encode_gauge(&(row.state as i64))
            },
        )?;
        self.per_session(
            &mut encoder,
            "linecard_bfd_session_down",
            "Transitions out of Up, by the diagnostic they carried (RFC 5880 4.1)",
            None,
            MetricType::Counter,
            &|family, row, _| {
                for (diag, count) in &row.downs {
                    let diag = serde_json::to_value(diag)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_else(|| diag.bits().to_string());
                    family
                        .encode_family(&with(labels(row), &[("diag", diag)]))?
                        .encode_counter::<Labels, _, u64>(count, None)?;
                }
                Ok(())
            },
        )?;
        self.per_session(
            &mut encoder,
            "linecard_bfd_session_last_down_timestamp",
            "When the session last left Up (Unix time), with the diagnostic it carried",
            Some(&Unit::Seconds),
            MetricType::Gauge,
            &|family, row, _| {
                let Some((at_ns, diag)) = row.last_down else {
                    return Ok(());
                };
                family
                    .encode_family(&with(labels(row), &[("diag", diag.bits().to_string())]))?
                    .encode_gauge(&(at_ns as f64 / 1e9))
            },
        )?;
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
            self.per_session(&mut encoder, name, help, None, MetricType::Counter, &|family, row, kernel| {
                family
                    .encode_family(&with(labels(row), &[("path", "userspace".into())]))?
                    .encode_counter::<Labels, _, u64>(&userspace_count(row), None)?;
                if let Some(k) = kernel {
                    family
                        .encode_family(&with(labels(row), &[("path", "kernel".into())]))?
                        .encode_counter::<Labels, _, u64>(&kernel_count(k), None)?;
                }
                Ok(())
            })?;
        }
        for (direction, pick) in [
            (
                "receive",
                (|p: &GapHistogramPair| p.0) as fn(&GapHistogramPair) -> GapHistogram,
            ),
            ("transmit", |p: &GapHistogramPair| p.1),
        ] {
            let against = if direction == "receive" {
                "our detection time"
            } else {
                "the peer's detection time"
            };
            self.histogram_family(
                &mut encoder,
                &format!("linecard_bfd_{direction}_gap"),
                &format!("Gaps between the session's {direction}d packets, measured by the plane in `path`"),
                Some(&Unit::Seconds),
                pick,
                |family, h| {
                    family.encode_histogram::<Labels>(
                        h.sum_ns as f64 / 1e9,
                        h.count,
                        &seconds_buckets(h),
                        None,
                    )
                },
            )?;
            self.histogram_family(
                &mut encoder,
                &format!("linecard_bfd_{direction}_gap_detection_ratio"),
                &format!("Each {direction} gap as a fraction of {against} it ran against (RFC 5880 6.8.4), each rounded up to a thousandth"),
                None,
                pick,
                |family, h| {
                    family.encode_histogram::<Labels>(
                        h.ratio_sum_permille as f64 / 1000.0,
                        h.ratio.iter().sum(),
                        &ratio_buckets(h),
                        None,
                    )
                },
            )?;
            self.per_session(
                &mut encoder,
                &format!("linecard_bfd_{direction}_gap_max"),
                &format!("The largest {direction} gap since the engine started"),
                Some(&Unit::Seconds),
                MetricType::Gauge,
                &|family, row, kernel| {
                    let Some((path, pair)) = gaps_of(row, kernel) else {
                        return Ok(());
                    };
                    family
                        .encode_family(&with(labels(row), &[("path", path.into())]))?
                        .encode_gauge(&(pick(&pair).max_ns as f64 / 1e9))
                },
            )?;
        }
        self.per_session(
            &mut encoder,
            "linecard_bfd_gap_over_budget",
            "Gaps longer than `threshold` of the detection time they ran against: receive gaps against ours, transmit gaps against the peer's",
            None,
            MetricType::Counter,
            &|family, row, kernel| {
                let Some((path, (rx, tx))) = gaps_of(row, kernel) else {
                    return Ok(());
                };
                for (direction, h) in [("receive", rx), ("transmit", tx)] {
                    for tenths in OVER_BUDGET_TENTHS {
                        let threshold = format!("{:.1}", tenths as f64 / 10.0);
                        family
                            .encode_family(&with(
                                labels(row),
                                &[
                                    ("path", path.into()),
                                    ("direction", direction.into()),
                                    ("threshold", threshold),
                                ],
                            ))?
                            .encode_counter::<Labels, _, u64>(&h.over_budget(tenths), None)?;
                    }
                }
                Ok(())
            },
        )?;
        let mut drops = encoder.encode_descriptor(
            "linecard_bfd_dropped_packets",
            "Packets refused, by reason (userspace and the fast path summed; no peer label)",
            None,
            MetricType::Counter,
        )?;
        for (reason, count) in &self.drops {
            drops
                .encode_family(&vec![("reason", reason.clone())])?
                .encode_counter::<Labels, _, u64>(count, None)?;
        }
        let mut verdicts = encoder.encode_descriptor(
            "linecard_bfd_fast_path_verdicts",
            "The fast path's verdicts on the frames it judged, summed over CPUs",
            None,
            MetricType::Counter,
        )?;
        for (verdict, count) in &self.verdicts {
            verdicts
                .encode_family(&vec![("verdict", verdict.clone())])?
                .encode_counter::<Labels, _, u64>(count, None)?;
        }
        if let Some(policy) = &self.responder {
            encoder
                .encode_descriptor(
                    "linecard_bfd_responder_scheduling",
                    "How the xdp backend's responder thread is scheduled (1 for the policy in force)",
                    None,
                    MetricType::Gauge,
                )?
                .encode_family(&vec![("policy", policy.clone())])?
                .encode_gauge(&1i64)?;
        }
        Ok(())
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
            kernel.gaps.rx.record(gap, 30 * MS);
        }
        kernel.gaps.tx.record(11 * MS, 30 * MS);
        let text = encode_rows(&detailed(1024), vec![(row(Some(0)), Some(kernel))]);
        let labels =
            r#"local="192.0.2.1",peer="192.0.2.2",family="ipv4",hop="single",backend="xdp""#;
        assert!(line(&text, "linecard_bfd_session_state{").ends_with(" 3"));
        assert!(line(&text, "linecard_bfd_session_down_total{")
            .contains(r#"diag="control_detection_time_expired""#));
        // Cumulative buckets: 2 gaps at most 10 ms, all 3 at most 30 ms.
        let bucket = |le: &str| {
            line(
                &text,
                &format!(
                    r#"linecard_bfd_receive_gap_seconds_bucket{{le="{le}",{labels},path="kernel"}}"#
                ),
            )
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
        };
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
        r.userspace_gaps.rx.record(31 * MS, 30 * MS);
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
            r.userspace_gaps.rx.record(gap_ms * MS, 30 * MS);
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
}
