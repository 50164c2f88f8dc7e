//! pcapng's clocks: every timestamp resolution and offset gives the same
//! times, and a time that leaves i64 nanoseconds is an input error naming
//! its block, never a wrapped time or an overflow panic.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
use std::path::Path;

mod frames;
use frames::*;

fn analyze_bytes(bytes: Vec<u8>) -> Result<linecard_capture_analyzer::model::Analysis, String> {
    linecard_capture_analyzer::analyze_reader(
        "crafted.pcapng",
        Box::new(std::io::Cursor::new(bytes)),
        &linecard_capture_analyzer::Options {
            phases: Vec::new(),
            timeline: false,
        },
    )
    .map_err(|e| e.to_string())
}

/// Every pcapng clock: microseconds (the default), nanoseconds, seconds
/// (if_tsresol 0), a power of two, and a whole-second offset; each packet
/// 10 ms after the last, on two interfaces. Also the fuzz corpus's seeds.
fn pcapng_clocks() -> Vec<(&'static str, Vec<u8>)> {
    let bfd = |my: u32| {
        let mut p = vec![0x20, 0xc0, 3, 24];
        p.extend_from_slice(&my.to_be_bytes());
        p.extend_from_slice(&1u32.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0x27, 0x10, 0, 0, 0x27, 0x10, 0, 0, 0, 0]);
        frame("192.0.2.1", "192.0.2.2", 50001, 3784, &p)
    };
    let t0_s = (T0 / 1_000_000_000) as u64;
    let run = |units_per_s: u64, offset_s: u64| -> Vec<(u32, u64, Vec<u8>)> {
        (0..4u64)
            .map(|i| {
                let units = (t0_s - offset_s) * units_per_s + i * units_per_s / 100;
                ((i % 2) as u32, units, bfd(7))
            })
            .collect()
    };
    vec![
        ("micro", pcapng(&[(6, None), (6, None)], &run(1_000_000, 0))),
        (
            "nano",
            pcapng(&[(9, None), (9, None)], &run(1_000_000_000, 0)),
        ),
        (
            "seconds",
            pcapng(
                &[(0, None), (0, None)],
                &[(0, t0_s, bfd(7)), (1, t0_s + 1, bfd(7))],
            ),
        ),
        (
            "binary",
            pcapng(&[(0x80 | 20, None), (0x80 | 20, None)], &run(1 << 20, 0)),
        ),
        (
            "offset",
            pcapng(
                &[(6, Some(1_000_000)), (6, Some(1_000_000))],
                &run(1_000_000, 1_000_000),
            ),
        ),
    ]
}

#[test]
fn every_pcapng_clock_gives_the_same_times() {
    for (name, bytes) in pcapng_clocks() {
        let a = analyze_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let flow = &a.all.flows[0];
        assert_eq!(flow.first_ts_ns, T0, "{name}");
        if name != "seconds" {
            assert_eq!(flow.packets, 4, "{name}");
            assert!(close(flow.gap_ms.max, 10.0), "{name}: {}", flow.gap_ms.max);
        }
    }
}

/// Timestamps that leave i64 nanoseconds (if_tsresol 0 with a time near
/// 2^63 units, an if_tsoffset of 2^62 s, a resolution no u64 counts) are
/// an input error naming the block and its byte offset, in every build,
/// never a wrapped time or an overflow panic.
#[test]
fn a_pcapng_time_that_does_not_fit_is_an_error_naming_its_block() {
    let frame = || frame("192.0.2.1", "192.0.2.2", 50001, 3784, &[0x20; 24]);
    // The section header is 28 bytes, one interface without an offset 32.
    let cases = [
        (
            pcapng(&[(0, None)], &[(0, (1 << 63) - 1, frame())]),
            "enhanced packet block at byte 60",
        ),
        (
            pcapng(&[(0, Some(1 << 62))], &[(0, 1 << 62, frame())]),
            "enhanced packet block at byte 72",
        ),
        (
            pcapng(&[(6, Some(1 << 62))], &[(0, 1_000, frame())]),
            "enhanced packet block at byte 72",
        ),
        (
            pcapng(&[(6, Some(i64::MIN))], &[(0, 1_000, frame())]),
            "enhanced packet block at byte 72",
        ),
        (
            pcapng(&[(0x80 | 64, None)], &[(0, 1, frame())]),
            "interface description block at byte 28: if_tsresol 0xc0",
        ),
        (
            pcapng(&[(20, None)], &[(0, 1, frame())]),
            "interface description block at byte 28: if_tsresol 0x14",
        ),
    ];
    for (bytes, said) in cases {
        let e = analyze_bytes(bytes).expect_err(said);
        assert!(e.contains(said), "{e}");
    }
}

/// The capture fuzz target starts from every pcapng clock and every time
/// that does not fit: committed seeds, checked here so that they cannot
/// drift from the cases above (`LINECARD_WRITE_SEEDS=1` writes them).
#[test]
fn the_capture_fuzz_corpus_holds_the_pcapng_cases() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/capture");
    let frame = || frame("192.0.2.1", "192.0.2.2", 50001, 3784, &[0x20; 24]);
    let mut seeds = pcapng_clocks();
    seeds.push((
        "seconds-near-2-63",
        pcapng(&[(0, None)], &[(0, (1 << 63) - 1, frame())]),
    ));
    seeds.push((
        "offset-2-62",
        pcapng(&[(6, Some(1 << 62))], &[(0, 1_000, frame())]),
    ));
    seeds.push((
        "binary-2-64",
        pcapng(&[(0x80 | 64, None)], &[(0, 1, frame())]),
    ));
    for (name, bytes) in seeds {
        let path = corpus.join(format!("pcapng-{name}"));
        if std::env::var_os("LINECARD_WRITE_SEEDS").is_some() {
            std::fs::write(&path, &bytes).unwrap();
        }
        assert_eq!(
            std::fs::read(&path).ok().as_ref(),
            Some(&bytes),
            "{}: run this test with LINECARD_WRITE_SEEDS=1",
            path.display()
        );
    }
}
