//! A stand-in [`Site`] for the tests: it starts no process and needs no
//! root. Its daemons say Up at once; its capture, when finished, is the
//! one a steady 3 x 10 ms session would have left on the wire over the
//! real time the run took, with the silences the test scripts; its canary
//! stalls inside each stress process's life when the test says the stress
//! bit. The runner and the judge then run exactly as on the lab, on that
//! capture, so a test asserts what the product would conclude.

use super::{BfdDaemon, CaptureRun, DutDir, Prepared, Process, Recorder, Role, Site};
use crate::procs::CaptureOutcome;
use crate::run::daemons::{EngineView, Pair};
use crate::scenario::{DutSpec, Scenario};
use crate::sys::unix_ns;
use anyhow::Result;
use linecard_api::BackendKind;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

const DUT: [u8; 4] = [192, 0, 2, 1];
const PEER: [u8; 4] = [192, 0, 2, 2];
const MS: i64 = 1_000_000;

/// What the stand-in's world does during the run.
#[derive(Default)]
struct Script {
    /// The DUT sends nothing for this long, this far after the capture
    /// started.
    dut_silent: Option<(Duration, Duration)>,
    /// The canary stalls 40 ms in each stress process's life.
    stress_bites: bool,
    /// `linecardd backends --json` says so.
    unavailable: Option<String>,
}

/// What the run asked of the site, for the tests to check.
#[derive(Default)]
struct Log {
    started: Vec<String>,
    capture_started_ns: i64,
    /// Each stress process's life (start, stop).
    stress: Vec<(i64, i64)>,
}

struct MockSite {
    script: Script,
    log: Rc<RefCell<Log>>,
}

impl MockSite {
    fn new(script: Script) -> Self {
        Self {
            script,
            log: Rc::default(),
        }
    }

    fn started(&self, what: &str) {
        self.log.borrow_mut().started.push(what.to_string());
    }
}

impl Site for MockSite {
    fn dut_cpus(&self) -> &[usize] {
        &[1]
    }

    fn peer_cpus(&self) -> Vec<usize> {
        vec![0]
    }

    fn unavailable(&self, _backend: BackendKind) -> Result<Option<String>> {
        Ok(self.script.unavailable.clone())
    }

    fn prepare_dut(&self, _: &Scenario, _: &DutSpec, _: &DutDir) -> Result<Prepared> {
        Ok(Prepared {
            pairs: vec![Pair {
                dut: DUT.into(),
                peer: PEER.into(),
            }],
            sched_rt_runtime_us: Some(950_000),
            _held: Vec::new(),
        })
    }

    fn start_capture(&self, dir: &DutDir) -> Result<Box<dyn CaptureRun>> {
        self.started("capture");
        let started_ns = unix_ns();
        self.log.borrow_mut().capture_started_ns = started_ns;
        let silent = self.script.dut_silent.map(|(after, length)| {
            let from = started_ns + after.as_nanos() as i64;
            (from, from + length.as_nanos() as i64)
        });
        Ok(Box::new(MockCapture {
            path: dir.local.join("capture.pcap"),
            started_ns,
            dut_silent: silent,
        }))
    }

    fn start_peer(
        &self,
        _: &Scenario,
        _: &DutSpec,
        _: &[Pair],
        _: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>> {
        self.started("peer");
        Ok(Box::new(MockDaemon))
    }

    fn start_dut(
        &self,
        _: &Scenario,
        _: &DutSpec,
        _: &[Pair],
        _: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>> {
        self.started("dut");
        Ok(Box::new(MockDaemon))
    }

    fn start_recorder(&self, recorder: Recorder, _: u64, _: &DutDir) -> Result<Box<dyn Process>> {
        self.started(recorder.name());
        Ok(Box::new(MockStress {
            until: None,
            started_ns: 0,
            log: None,
        }))
    }

    /// The canary's record: a 40 ms stall in each stress process's life
    /// when the stress bit; the witnesses saw nothing.
    fn fetch_record(&self, recorder: Recorder, dir: &DutDir) -> Result<PathBuf> {
        let path = dir.local.join(recorder.record());
        let mut text = String::new();
        if recorder == Recorder::Canary && self.script.stress_bites {
            for &(start, _) in &self.log.borrow().stress {
                let from = start + 300 * MS;
                text.push_str(&format!(
                    "{{\"from_unix_ns\":{from},\"to_unix_ns\":{}}}\n",
                    from + 40 * MS
                ));
            }
        }
        std::fs::write(&path, text)?;
        Ok(path)
    }

    fn start_stress(
        &self,
        name: &str,
        args: &[String],
        _: &DutDir,
        _: &Path,
    ) -> Result<Box<dyn Process>> {
        self.started(name);
        // It runs for its `--timeout`, as stress-ng would.
        let seconds: u64 = args
            .iter()
            .skip_while(|a| *a != "--timeout")
            .nth(1)
            .and_then(|t| t.trim_end_matches('s').parse().ok())
            .unwrap_or(0);
        Ok(Box::new(MockStress {
            until: Some(std::time::Instant::now() + Duration::from_secs(seconds)),
            started_ns: unix_ns(),
            log: Some(self.log.clone()),
        }))
    }

    fn proc_stat(&self, _: Role, _: Option<u32>) -> (String, Option<String>) {
        (
            "cpu0 1 0 1 100 0 0 0 0 0 0\ncpu1 1 0 1 100 0 0 0 0 0 0\n".into(),
            None,
        )
    }
}

/// A stress process (or a recorder: no `until`) that was never started.
struct MockStress {
    until: Option<std::time::Instant>,
    started_ns: i64,
    log: Option<Rc<RefCell<Log>>>,
}

impl Process for MockStress {
    fn running(&mut self) -> bool {
        self.until.is_none_or(|t| std::time::Instant::now() < t)
    }

    fn stop(&mut self) -> Result<()> {
        if let Some(log) = self.log.take() {
            log.borrow_mut().stress.push((self.started_ns, unix_ns()));
        }
        Ok(())
    }
}

/// A daemon that says every session is Up.
struct MockDaemon;

impl BfdDaemon for MockDaemon {
    fn pid(&self) -> u32 {
        std::process::id()
    }
    fn exited(&mut self) -> bool {
        false
    }
    fn sessions_up(&mut self, _: usize) -> Result<(), String> {
        Ok(())
    }
    fn kill(&mut self) -> Result<()> {
        Ok(())
    }
    fn stop_hard(&mut self) -> Result<()> {
        Ok(())
    }
    fn stop(&mut self) -> Result<()> {
        Ok(())
    }
    fn engine_view(&self) -> Option<EngineView> {
        None
    }
    fn fast_path_frames_on(&self, _: &[usize]) -> Option<(u64, u64)> {
        None
    }
    fn fast_path_responder(&self) -> Option<String> {
        None
    }
    fn control_plane_uninterrupted(&self, _: usize, _: u64) -> Option<Result<String, String>> {
        None
    }
}

/// The capture a steady session leaves: the DUT's packet every 10 ms, the
/// peer's 5 ms after each, both Up, from start to finish; the DUT's
/// missing in the scripted silence.
struct MockCapture {
    path: PathBuf,
    started_ns: i64,
    dut_silent: Option<(i64, i64)>,
}

impl CaptureRun for MockCapture {
    fn running(&mut self) -> bool {
        true
    }

    fn finish(self: Box<Self>) -> Result<CaptureOutcome> {
        let end = unix_ns();
        let silent = |t: i64| self.dut_silent.is_some_and(|(a, b)| (a..b).contains(&t));
        let mut frames = Vec::new();
        let mut t = self.started_ns;
        while t < end {
            if !silent(t) {
                frames.push((t, frame(DUT, PEER, &up(1, 2))));
            }
            frames.push((t + 5 * MS, frame(PEER, DUT, &up(2, 1))));
            t += 10 * MS;
        }
        std::fs::write(&self.path, pcap(&frames))?;
        Ok(CaptureOutcome {
            path: self.path,
            died_early: false,
            dropped_by_kernel: Some(0),
        })
    }
}

/// A BFD control packet in Up, 3 x 10 ms.
fn up(my: u32, your: u32) -> Vec<u8> {
    let mut p = vec![0x20, 3 << 6, 3, 24];
    p.extend_from_slice(&my.to_be_bytes());
    p.extend_from_slice(&your.to_be_bytes());
    p.extend_from_slice(&10_000u32.to_be_bytes());
    p.extend_from_slice(&10_000u32.to_be_bytes());
    p.extend_from_slice(&0u32.to_be_bytes());
    p
}

/// Ethernet, IPv4 (TTL 255, RFC 5881 5) and UDP to port 3784.
fn frame(src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut f = vec![
        0x02, 0, 0, 0, 0, dst[3], 0x02, 0, 0, 0, 0, src[3], 0x08, 0x00,
    ];
    f.extend_from_slice(&[0x45, 0xc0]);
    f.extend_from_slice(&((28 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 255, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&49152u16.to_be_bytes());
    f.extend_from_slice(&3784u16.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// A nanosecond pcap of Ethernet frames.
fn pcap(frames: &[(i64, Vec<u8>)]) -> Vec<u8> {
    // The nanosecond magic, version 2.4.
    let mut out = 0xa1b2_3c4d_u32.to_le_bytes().to_vec();
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    for word in [0u32, 0, 65_535, 1] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    for (t, f) in frames {
        for word in [
            t / 1_000_000_000,
            t % 1_000_000_000,
            f.len() as i64,
            f.len() as i64,
        ] {
            out.extend_from_slice(&(word as u32).to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
    use super::*;
    use crate::manifest::verdict::Verdict;
    use crate::manifest::DutOutcome;
    use crate::profile::Profile;

    /// Two one-second phases, idle then L4, one DUT held to 0 flaps and
    /// 15 ms gaps.
    fn scenario() -> Scenario {
        let text = r#"
schema_version = 1
name = "mock"
description = "the stand-in site"
[peer]
implementation = "frr"
[[phase]]
profile = "idle"
seconds = 1
[[phase]]
profile = "L4"
seconds = 1
[[dut]]
label = "xdp"
implementation = "linecardd"
backend = "xdp"
max_flaps = 0
max_gap_ms = 15.0
"#;
        let profiles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../stress-profiles");
        Scenario::parse("mock.toml", text, &|name| {
            Profile::load(&profiles.join(format!("{name}.toml"))).map_err(|e| e.to_string())
        })
        .unwrap()
    }

    /// Runs the scenario's DUT on a stand-in with `script`; the outcome and
    /// what the site was asked to start.
    fn run(test: &str, script: Script) -> (DutOutcome, Vec<String>) {
        let scenario = scenario();
        let site = MockSite::new(script);
        let run_dir = std::env::temp_dir().join(format!("lc-mock-{}-{test}", std::process::id()));
        let outcome =
            crate::run::dut::run_dut(&site, &scenario, &scenario.duts[0], &run_dir, "xdp");
        let _ = std::fs::remove_dir_all(&run_dir);
        let started = site.log.borrow().started.clone();
        (outcome.unwrap(), started)
    }

    #[test]
    fn a_steady_dut_under_stress_that_bit_passes_every_phase() {
        let (outcome, started) = run(
            "steady",
            Script {
                stress_bites: true,
                ..Script::default()
            },
        );
        assert_eq!(
            outcome.verdict,
            Verdict::Pass,
            "{}",
            outcome.verdict.describe()
        );
        assert_eq!(outcome.phases.len(), 2);
        assert!(outcome.phases[0].stress_ng.is_none());
        assert!(outcome.phases[1]
            .stress_ng
            .as_deref()
            .unwrap()
            .contains("--sched fifo"));
        // The capture first, then the peer, the DUT, the witnesses, the
        // engine's scraper, and the L4 phase's stress.
        assert_eq!(
            started,
            [
                "capture",
                "peer",
                "dut",
                "canary",
                "freeze-witness",
                "rest-freeze-witness",
                "steal-witness",
                "engine-scrape",
                "stress-1-0"
            ]
        );
        let evidence = outcome.evidence.unwrap();
        let max = evidence.phases[1].max_ms;
        assert!((9.0..=11.0).contains(&max), "max gap {max} ms");
    }

    #[test]
    fn a_dut_silent_past_its_detection_time_fails() {
        let (outcome, _) = run(
            "silent",
            Script {
                dut_silent: Some((Duration::from_millis(1400), Duration::from_millis(60))),
                stress_bites: true,
                ..Script::default()
            },
        );
        let Verdict::Fail(why) = &outcome.verdict else {
            panic!("not a failure: {}", outcome.verdict.describe());
        };
        // The 60 ms silence between two of its 10 ms packets.
        assert!(why.contains("max gap 70.00 ms"), "{why}");
    }

    #[test]
    fn stress_that_did_not_bite_leaves_the_run_inconclusive() {
        let (outcome, _) = run("no-bite", Script::default());
        let Verdict::Invalid(why) = &outcome.verdict else {
            panic!("not invalid: {}", outcome.verdict.describe());
        };
        assert!(why.contains("did not bite"), "{why}");
    }

    #[test]
    fn an_unavailable_backend_starts_nothing() {
        let (outcome, started) = run(
            "unavailable",
            Script {
                unavailable: Some("no XDP here".into()),
                ..Script::default()
            },
        );
        assert_eq!(outcome.verdict, Verdict::Unavailable("no XDP here".into()));
        assert!(started.is_empty(), "{started:?}");
    }
}
