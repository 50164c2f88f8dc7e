//! `linecard analyze` as a user runs it: exit codes, JSON contract, files.

use crate::common::*;
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../capture-analyzer/tests/fixtures/frr-vs-frr-idle-then-l3.pcap")
}

#[test]
fn json_contract_on_a_real_capture() {
    let out = linecard(&["analyze", fixture().to_str().unwrap(), "--json"]);
    assert_exit(&out, 0, "analyze");
    let json = stdout_json(&out);
    assert_eq!(json["schema_version"], 1);
    let flows = json["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    for f in flows {
        for key in [
            "src",
            "dst",
            "src_port",
            "dst_port",
            "packets",
            "flaps",
            "over_budget",
            "first_ts",
            "last_ts",
        ] {
            assert!(!f[key].is_null(), "flow lacks {key}: {f}");
        }
        for dist in ["gap_ms", "up_gap_ms"] {
            for q in ["p50", "p99", "p999", "max"] {
                assert!(f[dist][q].as_f64().is_some(), "flow lacks {dist}.{q}");
            }
        }
    }
}

#[test]
fn out_and_plots_write_their_files() {
    let dir = std::env::temp_dir().join(format!("linecard-analyze-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = linecard(&[
        "analyze",
        fixture().to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--plots",
        dir.join("plots").to_str().unwrap(),
    ]);
    assert_exit(&out, 0, "analyze --out --plots");
    let packets = std::fs::read_to_string(dir.join("packets.csv")).unwrap();
    // One header plus one row per control packet of the fixture.
    assert_eq!(packets.lines().count(), 1 + 1285 + 1312);
    assert_eq!(
        std::fs::read_to_string(dir.join("flows.csv"))
            .unwrap()
            .lines()
            .count(),
        3
    );
    for parquet in ["packets.parquet", "flows.parquet"] {
        assert!(
            std::fs::read(dir.join(parquet))
                .unwrap()
                .starts_with(b"PAR1"),
            "{parquet} is not Parquet"
        );
    }
    let analysis: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("analysis.json")).unwrap()).unwrap();
    assert_eq!(analysis["flows"][0]["packets"], 1285);
    for plot in ["gap-ccdf.svg", "gap-timeline.svg", "session-maxima.svg"] {
        let svg = std::fs::read_to_string(dir.join("plots").join(plot)).unwrap();
        assert!(
            svg.starts_with("<svg")
                && ["<polyline", "<circle", "<rect"]
                    .iter()
                    .any(|m| svg.contains(m)),
            "{plot} has no marks"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_input_is_exit_2_with_a_clear_message() {
    let missing = linecard(&["analyze", "/nonexistent/capture.pcap"]);
    assert_exit(&missing, 2, "missing file");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot open"));
    let text = std::env::temp_dir().join(format!("linecard-not-pcap-{}", std::process::id()));
    std::fs::write(&text, "hello").unwrap();
    let garbage = linecard(&["analyze", text.to_str().unwrap()]);
    let _ = std::fs::remove_file(&text);
    assert_exit(&garbage, 2, "not a capture");
    assert!(String::from_utf8_lossy(&garbage.stderr).contains("not a pcap or pcapng file"));
    let bad_phase = linecard(&["analyze", fixture().to_str().unwrap(), "--phase", "x=5,1"]);
    assert_exit(&bad_phase, 2, "phase ending before it starts");
}
