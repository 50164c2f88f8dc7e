//! The stress canary: a normal-priority task on the DUT's CPUs that asks to
//! wake every millisecond and records each time it was kept from running.
//! It is how a run proves that its stress bit: a phase whose profile sets
//! `canary.min_stall_ms` is invalid unless the canary stalled that long.
//!
//! Output: one JSON line per stall longer than [`REPORT_STALL_NS`],
//! `{"from_unix_ns":..,"to_unix_ns":..}`, written as it happens so that a
//! killed canary keeps what it saw.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// The canary's period.
pub const PERIOD: Duration = Duration::from_millis(1);
/// Stalls shorter than this are ordinary scheduling and not recorded.
pub const REPORT_STALL_NS: i64 = 2_000_000;

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stall {
    /// When the canary should have woken (CLOCK_REALTIME ns).
    pub from_unix_ns: i64,
    /// When it did.
    pub to_unix_ns: i64,
}

impl Stall {
    pub fn ms(&self) -> f64 {
        (self.to_unix_ns - self.from_unix_ns) as f64 / 1e6
    }
}

use crate::sys::unix_ns;

/// Runs for `seconds`, writing stalls to `out`.
pub fn run(seconds: u64, out: &Path) -> Result<()> {
    let mut file =
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut due = Instant::now() + PERIOD;
    let mut due_unix = unix_ns() + PERIOD.as_nanos() as i64;
    while Instant::now() < end {
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let woke = Instant::now();
        let late = woke.saturating_duration_since(due).as_nanos() as i64;
        if late > REPORT_STALL_NS {
            let stall = Stall {
                from_unix_ns: due_unix,
                to_unix_ns: due_unix + late,
            };
            writeln!(file, "{}", serde_json::to_string(&stall)?)?;
            file.flush()?;
        }
        // The next period starts from now: one stall is one record.
        due = woke + PERIOD;
        due_unix = unix_ns() + PERIOD.as_nanos() as i64;
    }
    Ok(())
}

/// Reads a canary's stalls; a torn last line (a killed canary) is skipped.
pub fn read(path: &Path) -> Result<Vec<Stall>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading canary output {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The longest stall that overlaps [start, end), in ms (0 if none).
pub fn longest_stall_ms(stalls: &[Stall], start_ns: i64, end_ns: i64) -> f64 {
    stalls
        .iter()
        .filter(|s| s.from_unix_ns < end_ns && s.to_unix_ns > start_ns)
        .map(Stall::ms)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_count_in_every_phase_they_overlap() {
        let stalls = [
            Stall {
                from_unix_ns: 100,
                to_unix_ns: 50_000_100,
            },
            Stall {
                from_unix_ns: 200_000_000,
                to_unix_ns: 203_000_000,
            },
        ];
        assert_eq!(longest_stall_ms(&stalls, 0, 1_000), 50.0);
        assert_eq!(
            longest_stall_ms(&stalls, 0, 100),
            0.0,
            "ends where the stall starts"
        );
        assert_eq!(longest_stall_ms(&stalls, 50_000_000, 60_000_000), 50.0);
        assert_eq!(longest_stall_ms(&stalls, 60_000_000, 199_000_000), 0.0);
        assert_eq!(longest_stall_ms(&stalls, 199_000_000, 300_000_000), 3.0);
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let dir = std::env::temp_dir().join(format!("lc-canary-{}", std::process::id()));
        std::fs::write(
            &dir,
            "{\"from_unix_ns\":1,\"to_unix_ns\":5000001}\n{\"from_unix_ns\":9,\"to_",
        )
        .unwrap();
        let stalls = read(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(
            stalls,
            [Stall {
                from_unix_ns: 1,
                to_unix_ns: 5_000_001
            }]
        );
    }
}
