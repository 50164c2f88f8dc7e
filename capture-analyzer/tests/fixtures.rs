//! A real FRR-against-FRR capture from the lab, checked against an
//! independent calculation (`tests/independent.py`, its own pcap parser)
//! on packets, p50, p99, max and flaps for every flow.

use linecard_capture_analyzer::analyze_file;
use std::path::Path;
use std::process::Command;

#[test]
fn frr_capture_agrees_with_an_independent_calculation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let capture = dir.join("fixtures/frr-vs-frr-idle-then-l3.pcap");
    let output = Command::new("python3")
        .arg(dir.join("independent.py"))
        .arg(&capture)
        .output()
        .expect("python3 is required for this test (apt-get install python3)");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let expected = expected.as_array().unwrap();

    let analysis = analyze_file(&capture).unwrap();
    // Precondition: the fixture holds what it claims (two flows, flaps).
    assert_eq!(analysis.all.flows.len(), 2);
    assert_eq!(expected.len(), 2);
    let mut total_flaps = 0;
    for want in expected {
        let got = analysis
            .all
            .flows
            .iter()
            .find(|f| {
                f.src == want["src"] && f.src_port == want["src_port"].as_u64().unwrap() as u16
            })
            .unwrap_or_else(|| panic!("flow {want} missing"));
        let name = format!("{}:{}", got.src, got.src_port);
        assert_eq!(
            got.packets,
            want["packets"].as_u64().unwrap(),
            "{name} packets"
        );
        assert_eq!(got.flaps, want["flaps"].as_u64().unwrap(), "{name} flaps");
        let max = want["max"].as_f64().unwrap();
        assert!(
            (got.gap_ms.max - max).abs() < 1e-6,
            "{name} max {} vs {max}",
            got.gap_ms.max
        );
        for q in ["p50", "p99"] {
            let (g, w) = (
                serde_json::to_value(&got.gap_ms).unwrap()[q]
                    .as_f64()
                    .unwrap(),
                want[q].as_f64().unwrap(),
            );
            // The analyzer's histogram keeps 3 significant digits.
            assert!((g - w).abs() <= w * 0.001 + 0.001, "{name} {q}: {g} vs {w}");
        }
        total_flaps += got.flaps;
    }
    assert!(
        total_flaps > 0,
        "the fixture must contain the flaps it was taken for"
    );
}
