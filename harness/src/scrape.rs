//! The engine's own view during a run (issue 41): `linecard engine-scrape`
//! reads a linecardd's OpenMetrics endpoint once a second, as any
//! scraper would (HTTP, not its crate), and keeps of each scrape what the
//! report sets beside the capture: per session its state, its departures
//! from Up, and each direction's gap histogram, largest gap and the scrape
//! window's largest with when it ended (the exemplar). One JSON line per
//! scrape, written as it happens, so that a killed scraper keeps what it
//! read. A scrape that failed is a line with its error, never a gap in
//! the record.
//!
//! The figures are the engine's: never a verdict's. [`phase_views`] puts
//! them beside the wire's per phase, and says where the two disagree: the
//! engine's blind spot, which the endpoint exists to show.

use crate::manifest::engine_view::PhaseEngineView;
use crate::manifest::figures::PhaseFigures;
use crate::manifest::PhaseRecord;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// One scrape: when it was taken (CLOCK_REALTIME ns), and what it held.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Scrape {
    pub at_ns: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionScrape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One session in a scrape.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SessionScrape {
    pub local: String,
    pub peer: String,
    /// `kernel` or `userspace`: the plane that measured the gaps.
    pub path: String,
    /// RFC 5880 4.1's code (3: Up).
    pub state: u8,
    /// Departures from Up since the engine started, every diagnostic.
    pub downs: u64,
    pub receive: DirectionScrape,
    pub transmit: DirectionScrape,
}

/// One direction's gaps of a session in a scrape.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DirectionScrape {
    /// Cumulative counts by finite upper bound, s (JSON has no +Inf).
    pub buckets: Vec<(f64, u64)>,
    /// Every gap recorded (the +Inf bucket).
    pub count: u64,
    pub max_s: f64,
    /// The largest gap since the endpoint's previous scrape, and when it
    /// ended (Unix s), from the bucket's exemplar.
    pub window_max_s: f64,
    pub window_max_at_s: Option<f64>,
    /// Gaps over 0.8 of the detection time they ran against.
    pub over_budget_08: u64,
}

/// Reads `address` once a second for `seconds`, appending each scrape to
/// `out`.
pub fn run(address: SocketAddr, seconds: u64, out: &Path) -> Result<()> {
    let mut file =
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let start = Instant::now();
    for k in 0..seconds {
        std::thread::sleep(
            (start + Duration::from_secs(k)).saturating_duration_since(Instant::now()),
        );
        let at_ns = crate::sys::unix_ns();
        let scrape = match fetch(address) {
            Ok(text) => Scrape {
                at_ns,
                sessions: parse(&text),
                error: None,
            },
            Err(e) => Scrape {
                at_ns,
                sessions: Vec::new(),
                error: Some(format!("{e:#}")),
            },
        };
        writeln!(file, "{}", serde_json::to_string(&scrape)?)?;
        file.flush()?;
    }
    Ok(())
}

/// `GET /metrics` on `address`: the body.
pub fn fetch(address: SocketAddr) -> Result<String> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(500))
        .with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: linecard\r\nConnection: close\r\n\r\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let (head, body) = reply
        .split_once("\r\n\r\n")
        .context("a reply without a head")?;
    anyhow::ensure!(
        head.starts_with("HTTP/1.1 200"),
        "{}",
        head.lines().next().unwrap_or_default()
    );
    Ok(body.to_string())
}

/// The read of a scrape file; a line that does not parse (a scraper
/// killed mid-write) is skipped.
pub fn read(path: &Path) -> Vec<Scrape> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The labels of a sample line, and the rest after them: `name{a="b",..}
/// rest`.
fn labels(line: &str) -> Option<(&str, BTreeMap<&str, &str>, &str)> {
    let (name, rest) = line.split_once('{')?;
    let (inside, after) = rest.split_once("} ")?;
    let mut map = BTreeMap::new();
    // linecardd's label values hold no `",` (addresses, names, numbers).
    for pair in inside.split("\",") {
        let (key, value) = pair.split_once("=\"")?;
        map.insert(key, value.trim_end_matches('"'));
    }
    Some((name, map, after))
}

/// The sessions of an exposition, by the families docs/metrics.md names.
pub fn parse(text: &str) -> Vec<SessionScrape> {
    let mut sessions: BTreeMap<(String, String), SessionScrape> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("linecard_bfd_")) {
        let Some((name, labels, after)) = labels(line) else {
            continue;
        };
        let (Some(local), Some(peer)) = (labels.get("local"), labels.get("peer")) else {
            continue;
        };
        let mut values = after.split(' ');
        let value: f64 = values.next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        let session = sessions
            .entry((local.to_string(), peer.to_string()))
            .or_insert_with(|| SessionScrape {
                local: local.to_string(),
                peer: peer.to_string(),
                ..SessionScrape::default()
            });
        let direction =
            |d: &str| -> Option<&str> { name.strip_prefix(&format!("linecard_bfd_{d}_gap_")) };
        match name {
            "linecard_bfd_session_state" => session.state = value as u8,
            "linecard_bfd_session_down_total" => session.downs += value as u64,
            "linecard_bfd_gap_over_budget_total" if labels.get("threshold") == Some(&"0.8") => {
                match labels.get("direction") {
                    Some(&"receive") => session.receive.over_budget_08 = value as u64,
                    Some(&"transmit") => session.transmit.over_budget_08 = value as u64,
                    _ => {}
                }
            }
            _ => {
                for (d, which) in [("receive", false), ("transmit", true)] {
                    let Some(family) = direction(d) else {
                        continue;
                    };
                    if let Some(path) = labels.get("path") {
                        session.path = path.to_string();
                    }
                    let scrape = if which {
                        &mut session.transmit
                    } else {
                        &mut session.receive
                    };
                    match family {
                        "seconds_bucket" => {
                            match labels.get("le") {
                                Some(&"+Inf") => scrape.count = value as u64,
                                Some(le) => match le.parse() {
                                    Ok(le) => scrape.buckets.push((le, value as u64)),
                                    Err(_) => continue,
                                },
                                None => continue,
                            }
                            // `# {} GAP TIME`: the window's largest gap.
                            if values.next() == Some("#") {
                                let rest: Vec<&str> = values.by_ref().collect();
                                scrape.window_max_at_s = rest.get(2).and_then(|t| t.parse().ok());
                            }
                        }
                        "max_seconds" => scrape.max_s = value,
                        "window_max_seconds" => scrape.window_max_s = value,
                        _ => {}
                    }
                }
            }
        }
    }
    sessions.into_values().collect()
}

/// How far the engine's largest gap and the wire's may differ before the
/// view calls it a disagreement: the larger of 1 ms and a tenth (the
/// engine hears a packet after the observer saw it, and sends before).
fn differ(engine_ms: f64, wire_ms: f64) -> bool {
    (engine_ms - wire_ms).abs() > (0.1 * wire_ms.max(engine_ms)).max(1.0)
}

/// Each phase's engine view from `scrapes` (in time order), beside the
/// wire's `figures` of the same phases.
pub fn phase_views(
    scrapes: &[Scrape],
    phases: &[PhaseRecord],
    figures: &[PhaseFigures],
) -> Vec<PhaseEngineView> {
    let answered: Vec<&Scrape> = scrapes.iter().filter(|s| s.error.is_none()).collect();
    let downs = |s: &Scrape| s.sessions.iter().map(|x| x.downs).sum::<u64>();
    phases
        .iter()
        .map(|phase| {
            // Scrape k's window is (k-1, k]: those that reach into the phase.
            let inside: Vec<usize> = (0..answered.len())
                .filter(|&k| {
                    answered[k].at_ns > phase.start_ns
                        && (k == 0 || answered[k - 1].at_ns < phase.end_ns)
                })
                .collect();
            let failed_scrapes = (scrapes.iter())
                .filter(|s| s.error.is_some() && (phase.start_ns..phase.end_ns).contains(&s.at_ns))
                .count();
            let before = inside
                .first()
                .and_then(|&k| k.checked_sub(1))
                .map(|k| answered[k]);
            let last = inside.last().map(|&k| answered[k]);
            // Downs between the scrapes nearest the phase's edges: each
            // counted in one phase, within half a second of its edge.
            let nearest = |t: i64| answered.iter().min_by_key(|s| (s.at_ns - t).abs()).copied();
            let engine_downs = match (nearest(phase.start_ns), nearest(phase.end_ns)) {
                (Some(from), Some(to)) if from.at_ns < phase.start_ns || from.at_ns == to.at_ns => {
                    downs(to).saturating_sub(downs(from))
                }
                // The first scrape came after the phase began: Downs
                // before it were none (the engine starts with none).
                (Some(_), Some(to)) => downs(to),
                _ => 0,
            };
            let largest = |pick: fn(&SessionScrape) -> &DirectionScrape| -> Option<f64> {
                let windows = (inside.iter())
                    .flat_map(|&k| answered[k].sessions.iter().map(|s| pick(s).window_max_s));
                // A maximum since start that grew over the phase is a gap
                // of its windows too.
                let grown = last.into_iter().flat_map(|last| {
                    last.sessions.iter().filter_map(move |s| {
                        let was = before
                            .and_then(|b| b.sessions.iter().find(|x| x.peer == s.peer))
                            .map_or(0.0, |x| pick(x).max_s);
                        (pick(s).max_s > was).then_some(pick(s).max_s)
                    })
                });
                // None: no gap recorded in the phase's windows.
                let max = windows.chain(grown).fold(0.0, f64::max);
                (max > 0.0).then_some(max * 1e3)
            };
            let wire = figures.iter().find(|f| f.phase == phase.name);
            let mut view = PhaseEngineView {
                phase: phase.name.clone(),
                scrapes: inside.len(),
                failed_scrapes,
                path: (last.and_then(|s| s.sessions.first()))
                    .map(|s| s.path.clone())
                    .unwrap_or_default(),
                engine_downs,
                wire_flaps: wire.map_or(0, |w| w.flaps),
                engine_receive_max_ms: largest(|s| &s.receive),
                wire_receive_max_ms: wire
                    .and_then(|w| w.intervals.iter().find(|i| i.side == "peer"))
                    .and_then(|i| i.longest_ms),
                engine_transmit_max_ms: largest(|s| &s.transmit),
                wire_transmit_max_ms: wire.map(|w| w.max_ms),
                disagreements: Vec::new(),
            };
            view.disagreements = disagreements(&view);
            view
        })
        .collect()
}

/// Where the engine's view and the wire's differ, in words.
fn disagreements(v: &PhaseEngineView) -> Vec<String> {
    let mut out = Vec::new();
    if v.scrapes == 0 {
        return vec!["no scrape answered in the phase".to_string()];
    }
    if v.engine_downs != v.wire_flaps {
        out.push(format!(
            "the engine left Up {} times, the wire shows {} flaps",
            v.engine_downs, v.wire_flaps
        ));
    }
    // The wire's gaps are between Up packets; the engine's include the
    // slow rate while not Up (RFC 5880 6.8.3): not comparable then.
    if v.engine_downs > 0 || v.wire_flaps > 0 {
        out.push("gaps not compared: the session left Up".to_string());
        return out;
    }
    for (what, engine, wire) in [
        ("receive", v.engine_receive_max_ms, v.wire_receive_max_ms),
        ("transmit", v.engine_transmit_max_ms, v.wire_transmit_max_ms),
    ] {
        if let (Some(engine), Some(wire)) = (engine, wire) {
            if differ(engine, wire) {
                out.push(format!(
                    "largest {what} gap: {engine:.2} ms in the engine's words, {wire:.2} ms on the wire"
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# TYPE linecard_bfd_session_state gauge
linecard_bfd_session_state{local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp"} 3
linecard_bfd_session_down_total{local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",diag="control_detection_time_expired"} 2
linecard_bfd_session_down_total{local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",diag="neighbor_signaled_session_down"} 1
linecard_bfd_receive_gap_seconds_bucket{le="0.01",local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",path="kernel"} 5
linecard_bfd_receive_gap_seconds_bucket{le="0.015",local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",path="kernel"} 7 # {} 0.0123 1796684441.2047
linecard_bfd_receive_gap_seconds_bucket{le="+Inf",local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",path="kernel"} 7
linecard_bfd_receive_gap_max_seconds{local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",path="kernel"} 0.02
linecard_bfd_receive_gap_window_max_seconds{local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",path="kernel"} 0.0123
linecard_bfd_transmit_gap_max_seconds{local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",path="kernel"} 0.011
linecard_bfd_gap_over_budget_total{local="10.0.0.1",peer="10.0.0.2",family="ipv4",hop="single",backend="xdp",path="kernel",direction="receive",threshold="0.8"} 4
linecard_bfd_dropped_packets_total{reason="bad_ttl"} 0
# EOF
"#;

    #[test]
    fn a_scrape_keeps_each_session_s_state_downs_and_gaps() {
        let sessions = parse(TEXT);
        assert_eq!(sessions.len(), 1);
        let s = &sessions[0];
        assert_eq!(
            (s.local.as_str(), s.peer.as_str()),
            ("10.0.0.1", "10.0.0.2")
        );
        assert_eq!((s.state, s.downs, s.path.as_str()), (3, 3, "kernel"));
        assert_eq!(s.receive.buckets, [(0.01, 5), (0.015, 7)]);
        assert_eq!(s.receive.count, 7);
        // What it writes, it reads.
        let scrape = Scrape {
            at_ns: 1,
            sessions: sessions.clone(),
            error: None,
        };
        let line = serde_json::to_string(&scrape).unwrap();
        assert_eq!(serde_json::from_str::<Scrape>(&line).unwrap(), scrape);
        assert_eq!(
            (
                s.receive.max_s,
                s.receive.window_max_s,
                s.receive.window_max_at_s
            ),
            (0.02, 0.0123, Some(1796684441.2047))
        );
        assert_eq!((s.receive.over_budget_08, s.transmit.max_s), (4, 0.011));
    }

    /// A scrape at `at_s` seconds of one session with `downs` departures
    /// from Up and a window's largest receive gap of `window_ms`.
    fn scrape(at_s: i64, downs: u64, window_ms: f64, max_ms: f64) -> Scrape {
        Scrape {
            at_ns: at_s * 1_000_000_000,
            sessions: vec![SessionScrape {
                peer: "10.0.0.2".into(),
                path: "userspace".into(),
                downs,
                receive: DirectionScrape {
                    window_max_s: window_ms / 1e3,
                    max_s: max_ms / 1e3,
                    ..DirectionScrape::default()
                },
                ..SessionScrape::default()
            }],
            error: None,
        }
    }

    fn phase(name: &str, from_s: i64, to_s: i64) -> PhaseRecord {
        PhaseRecord {
            name: name.into(),
            profile: name.into(),
            start_ns: from_s * 1_000_000_000,
            end_ns: to_s * 1_000_000_000,
            stress_ng: None,
            fault: None,
            cpu: None,
            peer_cpu: None,
            drops: Vec::new(),
            softirq_threads: Vec::new(),
        }
    }

    #[test]
    fn a_phase_s_view_spans_the_scrapes_whose_windows_reach_into_it() {
        // Phase a is 10-12.5 s, b 12.5-15 s; scrapes each second from 10.
        let scrapes = [
            scrape(10, 0, 9.0, 9.0),
            scrape(11, 0, 12.0, 12.0),
            scrape(12, 0, 9.5, 12.0),
            scrape(13, 1, 31.0, 31.0),
            scrape(14, 1, 10.0, 31.0),
            scrape(15, 1, 9.0, 31.0),
            Scrape {
                at_ns: 14_500_000_000,
                error: Some("connecting: refused".into()),
                ..Scrape::default()
            },
        ];
        let mut scrapes = scrapes.to_vec();
        scrapes.sort_by_key(|s| s.at_ns);
        let wire = |name: &str, flaps, peer_longest| {
            let mut f: PhaseFigures = serde_json::from_value(serde_json::json!({
                "phase": name, "profile": name, "packets": 0, "flaps": flaps,
                "p50_ms": 0.0, "p99_ms": 0.0, "p999_ms": 0.0, "max_ms": 10.0,
                "canary_stall_ms": 0.0, "canary_required_ms": null
            }))
            .unwrap();
            f.intervals.push(crate::manifest::figures::IntervalFigures {
                side: "peer".into(),
                longest_ms: Some(peer_longest),
                ..Default::default()
            });
            f
        };
        let views = phase_views(
            &scrapes,
            &[phase("a", 10, 12), phase("b", 12, 15)].map(|mut p| {
                p.end_ns += 500_000_000;
                p
            }),
            &[wire("a", 0, 40.0), wire("b", 1, 12.0)],
        );
        let a = &views[0];
        // Scrapes 11, 12, 13: 13's window (12-13 s) reaches into a with
        // its 31 ms gap; its Down counts in b, nearer b's scrapes.
        assert_eq!((a.scrapes, a.engine_downs, a.wire_flaps), (3, 0, 0));
        assert_eq!(a.engine_receive_max_ms, Some(31.0));
        assert_eq!(a.failed_scrapes, 0);
        // The wire's 40 ms gap is one the engine did not see.
        assert_eq!(
            a.disagreements,
            ["largest receive gap: 31.00 ms in the engine's words, 40.00 ms on the wire"]
        );
        let b = &views[1];
        // Scrapes 13, 14, 15 (and the refused one, counted).
        assert_eq!((b.scrapes, b.engine_downs, b.failed_scrapes), (3, 1, 1));
        assert_eq!(b.engine_receive_max_ms, Some(31.0));
        // One Down each way; the gaps then span the slow rate.
        assert_eq!(b.disagreements, ["gaps not compared: the session left Up"]);
    }
}
