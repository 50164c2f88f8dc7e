//! The steal witness: places the hypervisor's steal on the DUT's CPUs in
//! time, so that a late packet is excused only by steal measured inside
//! its own gap, never by steal somewhere else in the run.
//!
//! `linecard steal-witness` runs beside the DUT on the *other* CPUs (it must
//! not be starved by the stress it judges) and reads the DUT CPUs' steal
//! column of `/proc/stat` every [`PERIOD`], writing one JSON line each time
//! it changed (and the first and last reading), as it happens, so that a
//! killed witness keeps what it saw. `/proc/stat` counts steal in ticks of
//! 10 ms (USER_HZ 100) and the kernel accounts it at the CPU's next tick,
//! so a reading places stolen time within a tick or two of when it
//! happened; [`StealTrace::within`] widens every window by that much.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::sys::unix_ns;

/// How often the witness reads `/proc/stat`: a fifth of a steal tick.
pub const PERIOD: Duration = Duration::from_millis(2);
/// `/proc/stat`'s unit of steal, ms.
pub const TICK_MS: f64 = 10.0;
/// How far after a gap's end steal stolen inside it may first show (the
/// kernel accounts it at the next tick of a CPU that was gone; a reading
/// comes [`PERIOD`] later at most).
const SHOWS_WITHIN_NS: i64 = 2 * 10_000_000;

/// One reading: the DUT CPUs' steal so far, ms, at a CLOCK_REALTIME instant
/// (the clock the captures are stamped with).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StealReading {
    pub unix_ns: i64,
    pub steal_ms: f64,
}

/// Runs for `length`, writing the steal of `cpus` to `out` as it changes.
pub fn run(cpus: &[usize], length: Duration, out: &Path) -> Result<()> {
    let mut file =
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut stat = std::fs::File::open("/proc/stat").context("opening /proc/stat")?;
    let mut text = String::with_capacity(4096);
    let mut read = |text: &mut String| -> Result<f64> {
        text.clear();
        stat.rewind()?;
        stat.read_to_string(text)?;
        Ok(crate::run::cpu::steal_ms_in(text, cpus))
    };
    let end = Instant::now() + length;
    let mut last = None;
    loop {
        let steal_ms = read(&mut text)?;
        let done = Instant::now() >= end;
        if last != Some(steal_ms) || done {
            let reading = StealReading {
                unix_ns: unix_ns(),
                steal_ms,
            };
            writeln!(file, "{}", serde_json::to_string(&reading)?)?;
            file.flush()?;
            last = Some(steal_ms);
        }
        if done {
            return Ok(());
        }
        std::thread::sleep(PERIOD);
    }
}

/// What a witness saw, in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StealTrace {
    readings: Vec<StealReading>,
}

impl StealTrace {
    pub fn new(mut readings: Vec<StealReading>) -> Self {
        readings.sort_by_key(|r| r.unix_ns);
        Self { readings }
    }

    /// Reads a witness's output; a torn last line (a killed witness) is
    /// skipped, a missing file is an empty trace (no steal can be placed,
    /// so none excuses anything).
    pub fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        Self::new(
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        )
    }

    /// Whether the witness watched at all.
    pub fn is_empty(&self) -> bool {
        self.readings.is_empty()
    }

    /// The steal so far at `t`: the last reading at or before it (the
    /// first reading's value before the trace began).
    fn at(&self, t: i64) -> f64 {
        let i = self.readings.partition_point(|r| r.unix_ns <= t);
        self.readings
            .get(i.saturating_sub(1))
            .map_or(0.0, |r| r.steal_ms)
    }

    /// Steal that can have fallen inside [start, end), ms: what the
    /// counter gained from the last reading before `start` to the first
    /// reading that can show the window's last stolen tick
    /// ([`SHOWS_WITHIN_NS`] after `end`). 0 for an empty trace.
    pub fn within(&self, start_ns: i64, end_ns: i64) -> f64 {
        if self.readings.is_empty() {
            return 0.0;
        }
        (self.at(end_ns + SHOWS_WITHIN_NS) - self.at(start_ns)).max(0.0)
    }

    /// All the steal the trace saw, ms.
    pub fn total_ms(&self) -> f64 {
        match (self.readings.first(), self.readings.last()) {
            (Some(first), Some(last)) => last.steal_ms - first.steal_ms,
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn trace(points: &[(i64, f64)]) -> StealTrace {
        StealTrace::new(
            points
                .iter()
                .map(|&(ms, steal_ms)| StealReading {
                    unix_ns: ms * MS,
                    steal_ms,
                })
                .collect(),
        )
    }

    #[test]
    fn steal_counts_only_inside_the_window_it_fell_in() {
        // 20 ms stolen around t = 500 ms, 2000 ms around t = 30 s.
        let t = trace(&[(0, 100.0), (505, 120.0), (30_000, 2120.0), (60_000, 2120.0)]);
        assert_eq!(t.within(480 * MS, 502 * MS), 20.0);
        // A gap a second later saw none of it, whatever the run's total.
        assert_eq!(t.within(1_480 * MS, 1_502 * MS), 0.0);
        assert_eq!(t.total_ms(), 2020.0);
    }

    #[test]
    fn a_reading_up_to_two_ticks_after_the_gap_still_counts_for_it() {
        let t = trace(&[(0, 0.0), (519, 10.0)]);
        assert_eq!(t.within(490 * MS, 500 * MS), 10.0);
        let late = trace(&[(0, 0.0), (521, 10.0)]);
        assert_eq!(late.within(490 * MS, 500 * MS), 0.0);
    }

    #[test]
    fn no_witness_excuses_nothing() {
        assert_eq!(StealTrace::default().within(0, i64::MAX / 2), 0.0);
        let dir = std::env::temp_dir().join(format!("lc-steal-{}", std::process::id()));
        assert!(StealTrace::read(&dir.join("missing.jsonl")).is_empty());
    }

    #[test]
    fn the_witness_writes_its_first_and_last_reading_and_every_change() {
        let dir = std::env::temp_dir().join(format!("lc-steal-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("steal.jsonl");
        run(&[0], Duration::from_millis(50), &out).unwrap();
        let t = StealTrace::read(&out);
        assert!(t.readings.len() >= 2, "{t:?}");
        // The first and last readings span the run's 50 ms, less up to a
        // reading period (2 ms) at either end.
        let span = t.readings.last().unwrap().unix_ns - t.readings[0].unix_ns;
        assert!(span >= 46 * MS, "{span}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
