//! The kernel's RT throttling (`/proc/sys/kernel/sched_rt_runtime_us`).
//!
//! With the default 950000 of 1000000 us, SCHED_FIFO tasks are stopped for
//! ~50 ms each second once they saturate a CPU; under the L4 stress that
//! window is longer than a 3 x 10 ms detection time. Runs that change it
//! restore it afterwards, also on failure: the guard restores on drop, and
//! the original value is saved in a file that `linecard lab down` restores
//! after a crash.

use anyhow::{Context, Result};

pub const KNOB: &str = "/proc/sys/kernel/sched_rt_runtime_us";
/// Where the value to restore is kept while throttling is off.
pub const SAVED: &str = "/run/lc-sched-rt-runtime.saved";

pub fn read() -> Result<i64> {
    read_i64(KNOB)
}

/// The root task group's RT runtime (cgroup v1 cpu controller, kernels
/// with CONFIG_RT_GROUP_SCHED): the global value may not drop below it
/// (EINVAL), so a lower global value lowers it first.
pub const ROOT_GROUP_KNOB: &str = "/sys/fs/cgroup/cpu/cpu.rt_runtime_us";
/// Where the root group's value is kept while it is lowered.
pub const GROUP_SAVED: &str = "/run/lc-cpu-rt-runtime.saved";

/// Holds sched_rt_runtime_us at another value until the guard is dropped.
pub struct RuntimeOverride {
    original: i64,
    /// The root group's value, when it had to be lowered.
    group_original: Option<i64>,
}

fn read_i64(path: &str) -> Result<i64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    text.trim()
        .parse()
        .with_context(|| format!("{path} holds {text:?}"))
}

/// Saves `path`'s value in `saved` (a value saved by a crashed run is the
/// true original); returns the original.
fn save(path: &str, saved: &str) -> Result<i64> {
    let original = match read_i64(saved) {
        Ok(v) => v,
        Err(_) => read_i64(path)?,
    };
    std::fs::write(saved, original.to_string()).with_context(|| format!("writing {saved}"))?;
    Ok(original)
}

fn write(path: &str, value: i64) -> Result<()> {
    std::fs::write(path, value.to_string())
        .with_context(|| format!("writing {value} to {path} (root needed)"))
}

impl RuntimeOverride {
    /// Turns RT throttling off.
    pub fn throttling_off() -> Result<Self> {
        Self::set(-1)
    }

    /// RT tasks may use `runtime_us` of every period (-1: all of it).
    pub fn set(runtime_us: i64) -> Result<Self> {
        let original = save(KNOB, SAVED)?;
        let group_original = match read_i64(ROOT_GROUP_KNOB) {
            Ok(group) if runtime_us >= 0 && group > runtime_us => {
                let group_original = save(ROOT_GROUP_KNOB, GROUP_SAVED)?;
                write(ROOT_GROUP_KNOB, runtime_us)?;
                Some(group_original)
            }
            _ => None,
        };
        let guard = Self {
            original,
            group_original,
        };
        // On failure the guard's drop puts back what was changed.
        write(KNOB, runtime_us)?;
        Ok(guard)
    }
}

impl Drop for RuntimeOverride {
    fn drop(&mut self) {
        // The global value first: the group may not exceed it.
        if write(KNOB, self.original).is_ok() {
            let _ = std::fs::remove_file(SAVED);
        }
        if let Some(group) = self.group_original {
            if write(ROOT_GROUP_KNOB, group).is_ok() {
                let _ = std::fs::remove_file(GROUP_SAVED);
            }
        }
    }
}

/// Restores values saved by a run that did not finish; returns the global
/// one.
pub fn restore_if_saved() -> Result<Option<i64>> {
    let global = match read_i64(SAVED) {
        Ok(saved) => {
            write(KNOB, saved)?;
            std::fs::remove_file(SAVED)?;
            Some(saved)
        }
        Err(_) => None,
    };
    if let Ok(group) = read_i64(GROUP_SAVED) {
        write(ROOT_GROUP_KNOB, group)?;
        std::fs::remove_file(GROUP_SAVED)?;
    }
    Ok(global)
}
