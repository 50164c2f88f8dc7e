//! `linecard compare` for people: which builds ran, the verdict with the
//! tests behind it, and every compared row as "A -> B" (Markdown; HTML
//! adds each DUT's gap CCDFs of both runs overlaid on one plot).

use super::document::{self, Align, Block, Cell, Inline, Table};
use crate::compare::{Comparison, RunRef, Test};
use crate::report::RunView;
use anyhow::Result;

/// The comparison in Markdown.
pub fn markdown(c: &Comparison) -> String {
    document::markdown(&blocks(c))
}

/// The comparison in Markdown without its title, for a page that embeds
/// it (`linecard tables`).
pub fn markdown_body(c: &Comparison) -> String {
    document::markdown(&blocks(c)[1..])
}

/// The comparison as one self-contained HTML page, each DUT's last-phase
/// gap CCDF of A and B overlaid (from `views`, the two runs loaded).
pub fn html(c: &Comparison, views: [&RunView; 2]) -> Result<String> {
    let mut out = blocks(c);
    let sessions = &views[0].manifest.scenario.sessions;
    let detection_ms = f64::from(sessions.multiplier) * sessions.tx_interval_ms as f64;
    let mut lines = Vec::new();
    for (name, view) in ["A", "B"].iter().zip(views) {
        for (label, points) in &view.bakeoff {
            lines.push((format!("{label}, {name}"), points.clone()));
        }
    }
    if !lines.is_empty() {
        out.push(Block::Heading(2, "The gaps of both runs".into()));
        out.push(Block::Figure {
            name: "compare-ccdf.svg".into(),
            svg: crate::plots::bakeoff_ccdf(&lines, detection_ms)?,
            caption: "Each DUT's transmit gaps in its last phase, A and B: the share of gaps longer than x; a line reaching the detection time is a flap at the peer.".into(),
        });
    }
    Ok(document::html("linecard compare", &out))
}

fn run_line(name: &str, r: &RunRef) -> String {
    format!(
        "{name}: {} (run {} of {}, {})",
        r.dir.display(),
        r.run_id,
        r.scenario,
        r.status
    )
}

/// Each DUT's own programs (its role starts with `dut`), for the runs'
/// lines.
fn builds(r: &RunRef) -> Vec<String> {
    r.programs
        .iter()
        .flat_map(|(dut, programs)| {
            programs
                .iter()
                .filter(|p| p.role.starts_with("dut"))
                .map(move |p| {
                    format!(
                        "{dut}: {} {} (sha256 {}; {})",
                        p.role.trim_start_matches("dut "),
                        p.path.display(),
                        p.sha256.get(..16).unwrap_or(&p.sha256),
                        p.version
                    )
                })
        })
        .collect()
}

fn p_value(t: &Test) -> String {
    if t.a + t.b == 0 {
        "-".into()
    } else if t.p_value < 1e-12 {
        "< 1e-12".into()
    } else {
        format!("{:.2e}", t.p_value)
    }
}

/// `p = 3.04e-5`, or `p < 1e-12`.
fn p_is(t: &Test) -> String {
    let p = p_value(t);
    if p.starts_with('<') {
        format!("p {p}")
    } else {
        format!("p = {p}")
    }
}

fn blocks(c: &Comparison) -> Vec<Block> {
    let mut out = vec![
        Block::Heading(1, format!("linecard compare: {}", c.a.scenario)),
        Block::text(run_line("A", &c.a)),
        Block::List(builds(&c.a)),
        Block::text(run_line("B", &c.b)),
        Block::List(builds(&c.b)),
    ];
    let regressions: Vec<String> = c
        .regressions()
        .map(|(row, t)| {
            format!(
                "{} {}: {} {} -> {} ({})",
                row.dut,
                row.phase,
                t.metric,
                t.a,
                t.b,
                p_is(t)
            )
        })
        .collect();
    out.push(Block::Paragraph(if c.b_worse {
        vec![
            Inline::Bold("B is worse than A".into()),
            Inline::Text(format!(
                " beyond chance (each test one-sided, at p < {:.1e}: {} overall, Bonferroni over {} tests): {}.",
                c.level,
                crate::compare::ALPHA,
                (crate::compare::ALPHA / c.level).round(),
                regressions.join("; ")
            )),
        ]
    } else {
        vec![
            Inline::Bold("B is not worse than A".into()),
            Inline::Text(format!(
                " beyond chance: no test of flaps or gaps over budget found B's rate higher at p < {:.1e} ({} overall, Bonferroni over {} tests). Quantiles and CPU are shown, not tested.",
                c.level,
                crate::compare::ALPHA,
                (crate::compare::ALPHA / c.level).round()
            )),
        ]
    }));
    let both = |a: String, b: String| -> Cell {
        if a == b {
            a.into()
        } else {
            format!("{a} -> {b}").into()
        }
    };
    let ms = |v: f64| format!("{v:.2}");
    let cpu = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    let rows = c
        .rows
        .iter()
        .map(|r| {
            let verdict = if r.tests.iter().any(|t| t.worse) {
                "B worse"
            } else {
                "not different"
            };
            let mut cells = vec![
                r.dut.clone().into(),
                r.phase.clone().into(),
                both(r.a.flaps.to_string(), r.b.flaps.to_string()),
                both(ms(r.a.p50_ms), ms(r.b.p50_ms)),
                both(ms(r.a.p99_ms), ms(r.b.p99_ms)),
                both(ms(r.a.p999_ms), ms(r.b.p999_ms)),
                both(ms(r.a.max_ms), ms(r.b.max_ms)),
                both(r.a.over_budget.to_string(), r.b.over_budget.to_string()),
                both(cpu(r.a.engine_cpu_ms_per_s), cpu(r.b.engine_cpu_ms_per_s)),
            ];
            cells.extend(r.tests.iter().map(|t| p_value(t).into()));
            cells.push(Cell::Verdict(verdict.into()));
            cells
        })
        .collect();
    out.push(Block::Table(Table::new(
        &[
            ("DUT", Align::Left),
            ("phase", Align::Left),
            ("flaps", Align::Right),
            ("p50 ms", Align::Right),
            ("p99 ms", Align::Right),
            ("p99.9 ms", Align::Right),
            ("max ms", Align::Right),
            ("over budget", Align::Right),
            ("engine CPU ms/s", Align::Right),
            ("p (flaps)", Align::Right),
            ("p (over budget)", Align::Right),
            ("verdict", Align::Left),
        ],
        rows,
    )));
    out.push(Block::text(
        "Each cell is A -> B (one value where they agree): the DUT's transmit gaps on the observer's capture; flaps from either side; gaps over budget are longer than the detection time. p: the chance of B's count or more if B's rate were no higher than A's.",
    ));
    if !c.not_compared.is_empty() {
        out.push(Block::text(format!(
            "Not compared: {}.",
            c.not_compared.join("; ")
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Figures, Row};

    fn figures(flaps: u64, over_budget: u64, max_ms: f64) -> Figures {
        Figures {
            flaps,
            p50_ms: 8.8,
            p99_ms: 10.1,
            p999_ms: 10.2,
            max_ms,
            over_budget,
            packets: 500,
            seconds: 5.0,
            engine_cpu_ms_per_s: Some(12.0),
        }
    }

    fn run(name: &str) -> RunRef {
        RunRef {
            dir: format!("results/smoke/{name}").into(),
            scenario: "smoke".into(),
            run_id: name.into(),
            status: "complete".into(),
            programs: Vec::new(),
        }
    }

    #[test]
    fn the_verdict_names_the_regressed_row_and_metric() {
        let worse = Test {
            metric: "gaps over budget",
            a: 0,
            b: 40,
            exposure_a: 500.0,
            exposure_b: 500.0,
            p_value: 9e-13,
            worse: true,
        };
        let c = Comparison {
            a: run("A"),
            b: run("B"),
            rows: vec![Row {
                dut: "xdp".into(),
                phase: "L4#1".into(),
                a: figures(0, 0, 13.1),
                b: figures(0, 40, 960.2),
                tests: vec![worse],
            }],
            not_compared: vec!["naive (B only)".into()],
            level: 0.005,
            b_worse: true,
        };
        let md = markdown(&c);
        assert!(md.contains("**B is worse than A** beyond chance"), "{md}");
        assert!(
            md.contains("xdp L4#1: gaps over budget 0 -> 40 (p < 1e-12)"),
            "{md}"
        );
        assert!(
            md.contains("| xdp | L4#1 | 0 | 8.80 | 10.10 | 10.20 | 13.10 -> 960.20 | 0 -> 40 | 12.0 | < 1e-12 | B worse |"),
            "{md}"
        );
        assert!(md.contains("Not compared: naive (B only)."), "{md}");
    }
}
