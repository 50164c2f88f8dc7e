//! Parquet exports read back with polars equal the CSV/JSON model.
#![cfg(feature = "parquet")]

use linecard_capture_analyzer::export::parquet::{write_flows, PacketParquet};
use linecard_capture_analyzer::{analyze, Options};
use polars::prelude::*;
use std::path::PathBuf;

#[test]
fn parquet_round_trip_matches_the_model() {
    let capture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/frr-vs-frr-idle-then-l3.pcap");
    let dir = std::env::temp_dir().join(format!("linecard-parquet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut sink = PacketParquet::create(&dir.join("packets.parquet")).unwrap();
    let analysis = analyze(&[capture], &Options::default(), Some(&mut sink)).unwrap();
    sink.finish().unwrap();
    write_flows(&analysis, &dir.join("flows.parquet")).unwrap();

    let packets = ParquetReader::new(std::fs::File::open(dir.join("packets.parquet")).unwrap())
        .finish()
        .unwrap();
    let total: u64 = analysis.all.flows.iter().map(|f| f.packets).sum();
    assert_eq!(packets.height() as u64, total);
    let flows = ParquetReader::new(std::fs::File::open(dir.join("flows.parquet")).unwrap())
        .finish()
        .unwrap();
    assert_eq!(flows.height(), analysis.all.flows.len());
    let max = flows
        .column("gap_max_ms")
        .unwrap()
        .f64()
        .unwrap()
        .get(0)
        .unwrap();
    assert_eq!(max, analysis.all.flows[0].gap_ms.max);
    // Every gap in the packet table is at most the flow's exact maximum.
    let gaps = packets.column("gap_ns").unwrap().u64().unwrap();
    let largest = gaps.into_iter().flatten().max().unwrap();
    let flow_max = analysis
        .all
        .flows
        .iter()
        .map(|f| f.gap_ms.max)
        .fold(0.0, f64::max);
    assert_eq!(largest as f64 / 1e6, flow_max);
    let _ = std::fs::remove_dir_all(&dir);
}
