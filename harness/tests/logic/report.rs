//! `linecard report` on a hand-built run around a real capture (the
//! committed FRR-vs-FRR fixture: idle, then L3 with 8 flaps): the Markdown
//! carries the figures the analyzer derives from that capture, and the HTML
//! opens in a real headless browser (Debian's chromium) without console
//! errors and with every plot laid out on the page.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../capture-analyzer/tests/fixtures/frr-vs-frr-idle-then-l3.pcap")
}

const L3_START: i64 = 1_796_021_587_029_287_094;
const L3_END: i64 = 1_796_021_596_365_847_720;

/// A run directory as `linecard run` writes it, one DUT, the fixture as its
/// capture (the manifest's figures are placeholders the report must not
/// need: it re-derives plots from the capture).
fn hand_built_run(dir: &Path) -> PathBuf {
    let run = dir.join("fixture").join("20261130T000000Z");
    std::fs::create_dir_all(run.join("frr")).unwrap();
    std::fs::copy(fixture(), run.join("frr/capture.pcap")).unwrap();
    let phase = |profile: &str, flaps: u64, max: f64| {
        serde_json::json!({
            "phase": format!("{profile}#{}", usize::from(profile == "L3")), "profile": profile, "packets": 900, "flaps": flaps,
            "p50_ms": 8.7, "p99_ms": 10.1, "p999_ms": 10.2, "max_ms": max, "over_budget": flaps,
            "canary_stall_ms": 40.0, "canary_required_ms": null
        })
    };
    let manifest = serde_json::json!({
        "schema_version": 1,
        "scenario": {
            "name": "fixture", "description": "FRR bfdd against FRR bfdd, idle then L3 (committed fixture)",
            "provider": "local", "peer": "frr", "peer_rt_priority": 20,
            "sessions": {"ipv6": false, "tx_interval_ms": 10, "rx_interval_ms": 10, "multiplier": 3},
            "phases": [], "duts": [], "file": "hand-built"
        },
        "run_id": "20261130T000000Z",
        "status": "complete",
        "host": {
            "provider": "local", "kernel": "6.18", "online_cpus": [0, 1], "dut_cpus": [1],
            "sched_rt_runtime_us": 950000, "placement_share_on_dut_cpus": 1.0, "git_revision": "test",
            "linecard_version": "0.1.0", "tools": []
        },
        "duts": [{
            "label": "FRR bfdd 8.4.4",
            "spec": {"label": "FRR bfdd 8.4.4", "implementation": "frr", "rt_throttling": "shipped",
                     "expect": {"positive_control": true, "max_flaps": null, "max_gap_ms": null}, "engine": ""},
            "verdict": {"status": "pass"},
            "capture": "frr/capture.pcap",
            "evidence": {
                "capture_died_early": false, "capture_dropped": 0, "up_before_phases": {"Ok": null},
                "fast_path_on_dut_cpus": null, "steal_ms": 0.0,
                "phases": [phase("idle", 0, 10.2), phase("L3", 8, 62.0)]
            },
            "phases": [
                {"name": "idle#0", "profile": "idle", "start_ns": L3_START - 10_000_000_000, "end_ns": L3_START, "stress_ng": null},
                {"name": "L3#1", "profile": "L3", "start_ns": L3_START, "end_ns": L3_END, "stress_ng": "stress-ng --cpu 1 --timer 1"}
            ],
            "sched_rt_runtime_us": 950000,
            "spoiled_attempts": []
        }]
    });
    std::fs::write(
        run.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    run
}

fn report(run: &Path, out: &Path) -> Vec<PathBuf> {
    let output = linecard(&[
        "report",
        run.to_str().unwrap(),
        "--format",
        "md,html,json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_exit(&output, 0, "linecard report");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(PathBuf::from)
        .collect()
}

/// Compares `actual` with the committed `tests/snapshots/NAME`;
/// `LINECARD_UPDATE_SNAPSHOTS=1` rewrites it instead (review the diff).
fn snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("LINECARD_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (LINECARD_UPDATE_SNAPSHOTS=1 writes it)",
            path.display()
        )
    });
    if expected != actual {
        let new = path.with_extension("new");
        std::fs::write(&new, actual).unwrap();
        panic!(
            "{} differs from the output; the output is in {}",
            path.display(),
            new.display()
        );
    }
}

#[test]
fn the_markdown_report_carries_the_table_and_the_quality_section() {
    let dir = scratch_dir("report-md");
    let run = hand_built_run(&dir);
    let files = report(&run, &dir.join("out"));
    assert_eq!(files.len(), 3, "{files:?}");
    let md = std::fs::read_to_string(&files[0]).unwrap();
    snapshot(
        "report-fixture.md",
        &md.replace(dir.to_str().unwrap(), "<DIR>"),
    );
    assert!(
        md.contains("| FRR bfdd 8.4.4 | L3 | 8 | 8.70 | 10.10 | 10.20 | 62.00 | 8 | flapped (positive control) |"),
        "{md}"
    );
    assert!(md.contains("frr/capture.pcap`"), "{md}");
    assert!(
        md.contains("### Measurement quality\n\nNo warnings."),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[2]).unwrap()).unwrap();
    assert_eq!(json[0]["manifest"]["duts"][0]["label"], "FRR bfdd 8.4.4");
    // Side by side: two runs give a comparison table.
    let both = linecard(&[
        "report",
        run.to_str().unwrap(),
        run.to_str().unwrap(),
        "--format",
        "md",
        "--out",
        dir.join("out2").to_str().unwrap(),
    ]);
    assert_exit(&both, 0, "two runs");
    let path = String::from_utf8_lossy(&both.stdout).trim().to_string();
    let md = std::fs::read_to_string(path).unwrap();
    assert!(md.contains("## Side by side (flaps / max gap ms)"), "{md}");
    assert!(
        md.contains("| FRR bfdd 8.4.4 | L3 | 8 / 62.00 | 8 / 62.00 |"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_report_of_a_missing_run_is_an_input_error() {
    let out = linecard(&["report", "/nonexistent/run", "--out", "/tmp"]);
    assert_exit(&out, 2, "a missing run directory");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a run directory"));
}

/// Measures the page from inside the browser: appended to a copy of the
/// report (the report itself carries no script), it records how many plots
/// there are and how many were laid out at a visible size with drawn
/// shapes.
const PROBE: &str = r#"<script>
(function () {
  var plots = Array.prototype.slice.call(document.querySelectorAll('figure.plot svg'));
  var visible = plots.filter(function (s) {
    var r = s.getBoundingClientRect();
    return r.width > 200 && r.height > 100 && s.querySelectorAll('path, polyline, line, rect, circle').length > 10;
  });
  document.body.setAttribute('data-probe', JSON.stringify({ plots: plots.length, visible: visible.length }));
})();
</script></body>"#;

#[test]
fn the_html_report_renders_in_headless_chromium_with_its_plots_visible() {
    let browser = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(browser) = browser else {
        if std::env::var_os("LINECARD_REQUIRE_PRIVILEGED").is_some_and(|v| v == "1") {
            panic!("chromium is not installed (scripts/install-deps.sh installs it)");
        }
        eprintln!("skipped: chromium is not installed");
        return;
    };
    let dir = scratch_dir("report-html");
    let run = hand_built_run(&dir);
    let files = report(&run, &dir.join("out"));
    let html = std::fs::read_to_string(&files[1]).unwrap();
    assert!(!html.contains("<script"), "the report is script-free");
    // Namespace URIs (xmlns) are names, not fetches; nothing may be loaded.
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(
            !html.contains(fetch),
            "the report needs no network: {fetch}"
        );
    }
    let probed = dir.join("probed.html");
    std::fs::write(&probed, html.replace("</body>", PROBE)).unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", probed.display()))
        .env("HOME", &dir)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {stderr}");
    // Precondition: the browser really rendered the page and ran the probe.
    let probe = dom
        .split("data-probe=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("the probe did not run; chromium said: {stderr}"))
        .replace("&quot;", "\"");
    let probe: serde_json::Value = serde_json::from_str(&probe).unwrap();
    eprintln!("probe: {probe}");
    assert_eq!(probe["plots"], 2, "gap CCDF and gap time series: {probe}");
    assert_eq!(
        probe["visible"], probe["plots"],
        "every plot laid out and drawn: {probe}"
    );
    let console: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The README and `docs/` publish measured tables only from committed
/// runs: each is regenerated from the run directory its marker names and
/// must agree with it; a number edited by hand fails the check (exit 1,
/// the line named), and a marker naming a run that is not committed is an
/// input error (exit 2).
#[test]
fn the_readme_tables_agree_with_the_evidence_they_name() {
    let mut published = 0;
    for doc in std::fs::read_dir(repo().join("docs")).unwrap() {
        let doc = doc.unwrap().path();
        if doc.extension().is_some_and(|e| e == "md") {
            let out = linecard(&["tables", doc.to_str().unwrap(), "--check"]);
            assert_exit(
                &out,
                0,
                &format!("linecard tables {} --check", doc.display()),
            );
            let text = std::fs::read_to_string(&doc).unwrap();
            published += text.matches("<!-- evidence: ").count();
        }
    }
    // Precondition: the results page publishes its tables this way.
    assert!(
        published >= 10,
        "{published} evidence-marked tables in docs/"
    );
    let readme = repo().join("README.md");
    let out = linecard(&["tables", readme.to_str().unwrap(), "--check"]);
    assert_exit(&out, 0, "linecard tables README.md --check");
    let text = std::fs::read_to_string(&readme).unwrap();
    // Precondition: the README publishes tables this way at all.
    let marked = text.matches("<!-- evidence: ").count();
    assert!(marked >= 1, "no evidence-marked table in the README");
    // A copy beside the same evidence, one figure changed by hand.
    let dir = scratch_dir("readme-tables");
    std::os::unix::fs::symlink(repo().join("docs"), dir.join("docs")).unwrap();
    let at = text.find("<!-- evidence: ").unwrap();
    let row = at + text[at..].find("\n| ").unwrap() + 1;
    let row = row + text[row..].find('\n').unwrap() + 1; // past the header
    let row = row + text[row..].find('\n').unwrap() + 1; // past the rule
    let line_end = row + text[row..].find('\n').unwrap();
    let edited_line = text[row..line_end].replacen(" | ", " | 9", 2);
    let tampered = format!("{}{edited_line}{}", &text[..row], &text[line_end..]);
    assert_ne!(tampered, text);
    std::fs::write(dir.join("README.md"), &tampered).unwrap();
    let out = linecard(&["tables", dir.join("README.md").to_str().unwrap(), "--check"]);
    assert_exit(&out, 1, "a hand-edited table");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("differs from the evidence"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Regenerating restores the evidence's figures.
    let out = linecard(&["tables", dir.join("README.md").to_str().unwrap()]);
    assert_exit(&out, 0, "regenerating");
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        text
    );
    // A run that is not there.
    std::fs::write(
        dir.join("README.md"),
        "<!-- evidence: docs/evidence/none/19700101T000000Z -->\n<!-- /evidence -->\n",
    )
    .unwrap();
    let out = linecard(&["tables", dir.join("README.md").to_str().unwrap(), "--check"]);
    assert_exit(&out, 2, "a table without its evidence");
    let _ = std::fs::remove_dir_all(&dir);
}
