//! The gate's verdict for people (the readable diff) and for CI (JUnit
//! XML), from one [`GateResult`].

use super::document::esc;
use crate::gate::{Comparison, GateResult};

/// The readable diff: every regression first, then what held.
pub fn text(r: &GateResult) -> String {
    let mut out = format!("gate: {} against {}\n", r.run, r.baseline);
    if r.run_status != "complete" {
        out.push_str(&format!(
            "  the run is not complete ({}): it cannot pass the gate\n",
            r.run_status
        ));
    }
    let line = |c: &Comparison| {
        let value = c.value.map_or("missing".to_string(), |v| format!("{v:.2}"));
        format!(
            "  {:<10} {:<24} {:<8} {:<14} {:>9} {} limit {:.2} (worst observed {:.2} + slack {:.2})\n",
            if c.passed { "ok" } else { "REGRESSED" },
            c.dut,
            c.phase,
            c.metric,
            value,
            if c.passed { "<=" } else { "> " },
            c.limit,
            c.worst_observed,
            c.slack
        ) + &excused(c)
    };
    for c in r.comparisons.iter().filter(|c| !c.passed) {
        out.push_str(&line(c));
    }
    for c in r.comparisons.iter().filter(|c| c.passed) {
        out.push_str(&line(c));
    }
    out.push_str(if r.passed {
        "gate: PASSED\n"
    } else {
        "gate: FAILED\n"
    });
    out
}

/// The gaps the run's verdict excused in a comparison's phase, said after
/// its line (left out of its value).
fn excused(c: &Comparison) -> String {
    match c.excused {
        0 => String::new(),
        n => format!(
            "             {n} gap{} over the DUT's limit excused by a disturbance measured inside it\n",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// JUnit XML: one test case per comparison, plus the run's status.
pub fn junit(r: &GateResult) -> String {
    let failures = r.comparisons.iter().filter(|c| !c.passed).count()
        + usize::from(r.run_status != "complete");
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"linecard gate\" tests=\"{}\" failures=\"{failures}\">\n",
        r.comparisons.len() + 1
    );
    out.push_str("  <testcase classname=\"run\" name=\"status complete\">");
    if r.run_status != "complete" {
        out.push_str(&format!("<failure message=\"{}\"/>", esc(&r.run_status)));
    }
    out.push_str("</testcase>\n");
    for c in &r.comparisons {
        out.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{} {}\">",
            esc(&c.dut),
            esc(&c.phase),
            esc(&c.metric)
        ));
        if !c.passed {
            let value = c.value.map_or("missing".to_string(), |v| format!("{v:.3}"));
            out.push_str(&format!(
                "<failure message=\"{value} above limit {:.3} (worst observed {:.3} + slack {:.3})\"/>",
                c.limit, c.worst_observed, c.slack
            ));
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("</testsuite>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(value: Option<f64>, status: &str) -> GateResult {
        GateResult {
            run: "r".into(),
            baseline: "b".into(),
            run_status: status.into(),
            passed: false,
            comparisons: vec![Comparison {
                dut: "xdp".into(),
                phase: "L4#1".into(),
                metric: "max_gap_ms".into(),
                value,
                worst_observed: 14.0,
                slack: 1.0,
                limit: 15.0,
                passed: value.is_some_and(|v| v <= 15.0),
                excused: 0,
            }],
        }
    }

    #[test]
    fn the_diff_names_what_regressed_and_by_how_much() {
        let text = text(&result(Some(21.53), "complete"));
        assert!(text.contains("REGRESSED  xdp"), "{text}");
        assert!(
            text.contains("21.53 >  limit 15.00 (worst observed 14.00 + slack 1.00)"),
            "{text}"
        );
        assert!(!text.contains("excused"), "{text}");
        let mut excused = result(Some(12.0), "complete");
        excused.comparisons[0].excused = 2;
        let text = super::text(&excused);
        assert!(
            text.contains("2 gaps over the DUT's limit excused"),
            "{text}"
        );
        let missing = super::text(&result(None, "failed: xdp: FAIL: 3 flaps"));
        assert!(missing.contains("missing"), "{missing}");
        assert!(missing.contains("cannot pass the gate"), "{missing}");
    }

    #[test]
    fn junit_has_a_failure_per_regression_and_for_an_incomplete_run() {
        let xml = junit(&result(Some(21.53), "invalid: <steal>"));
        assert!(xml.contains("failures=\"2\""), "{xml}");
        assert!(xml.contains("message=\"invalid: &lt;steal&gt;\""), "{xml}");
        assert!(xml.contains("21.530 above limit 15.000"), "{xml}");
    }
}
