//! The kernel's RT throttling (`/proc/sys/kernel/sched_rt_runtime_us`).
//!
//! With the default 950000 of 1000000 us, SCHED_FIFO tasks are stopped for
//! ~50 ms each second once they saturate a CPU; under the L4 stress that
//! window is longer than a 3 x 10 ms detection time. Runs that disable it
//! restore it afterwards, also on failure: the guard restores on drop, and
//! the original value is saved in a file that `linecard lab down` restores
//! after a crash.

use anyhow::{Context, Result};
use std::path::Path;

pub const KNOB: &str = "/proc/sys/kernel/sched_rt_runtime_us";
/// Where the value to restore is kept while throttling is off.
pub const SAVED: &str = "/run/lc-sched-rt-runtime.saved";

pub fn read() -> Result<i64> {
    let text = std::fs::read_to_string(KNOB).with_context(|| format!("reading {KNOB}"))?;
    text.trim()
        .parse()
        .with_context(|| format!("{KNOB} holds {text:?}"))
}

/// Turns RT throttling off until the guard is dropped.
pub struct ThrottlingOff {
    original: i64,
}

impl ThrottlingOff {
    pub fn new() -> Result<Self> {
        // A value saved by a crashed run is the true original.
        let original = match std::fs::read_to_string(SAVED) {
            Ok(saved) => saved
                .trim()
                .parse()
                .context("parsing the saved sched_rt_runtime_us")?,
            Err(_) => read()?,
        };
        std::fs::write(SAVED, original.to_string()).with_context(|| format!("writing {SAVED}"))?;
        std::fs::write(KNOB, "-1")
            .with_context(|| format!("writing -1 to {KNOB} (root needed)"))?;
        Ok(Self { original })
    }
}

impl Drop for ThrottlingOff {
    fn drop(&mut self) {
        if std::fs::write(KNOB, self.original.to_string()).is_ok() {
            let _ = std::fs::remove_file(SAVED);
        }
    }
}

/// Restores a value saved by a run that did not finish; returns it.
pub fn restore_if_saved() -> Result<Option<i64>> {
    if !Path::new(SAVED).exists() {
        return Ok(None);
    }
    let saved: i64 = std::fs::read_to_string(SAVED)?
        .trim()
        .parse()
        .context("parsing the saved sched_rt_runtime_us")?;
    std::fs::write(KNOB, saved.to_string()).with_context(|| format!("restoring {KNOB}"))?;
    std::fs::remove_file(SAVED)?;
    Ok(Some(saved))
}
