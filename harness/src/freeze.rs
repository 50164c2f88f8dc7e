//! The freeze witness: places in time the moments when nothing at all could
//! run on the DUT's CPUs, because the machine itself stood still.
//!
//! The hypervisor of a VM can stop a vCPU, or the whole guest, without the
//! guest's steal counter moving. Traced here (issue 21): a SCHED_DEADLINE
//! thread on each CPU of an idle and of a stressed guest woke 13-24 ms late
//! at the same instants on both CPUs, several times a minute, while
//! /proc/stat's steal stayed put; the XDP program's sweep timer went 22-85
//! ms without firing inside such windows, so neither the kernel's own clock
//! nor anything else of the DUT could send. The peer, on the other CPU,
//! fell silent at the same moments, and the DUT's gap mirrored it.
//!
//! `linecard freeze-witness` runs in the DUT's cpuset at SCHED_DEADLINE
//! (which nothing the stress profiles start can delay, RT throttling
//! included: an L4 hog is SCHED_FIFO) and asks to wake every
//! [`PERIOD_NS`]. A wake later than [`REPORT_LATE_NS`] is recorded as a
//! freeze, `{"from_unix_ns":..,"to_unix_ns":..}` (the canary's record),
//! written as it happens. One thread whose CPUs are the whole cpuset: late
//! means that no CPU of the DUT's could run it. Where the kernel refuses
//! SCHED_DEADLINE the witness records nothing (a SCHED_FIFO witness would
//! record RT throttling as freezes) and says why, so nothing is excused.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;

use crate::canary::Stall;

/// The witness's period.
pub const PERIOD_NS: i64 = 1_000_000;
/// A wake this late is a freeze (shorter ones are the witness's own
/// scheduling, and too short to stretch a gap past any limit).
pub const REPORT_LATE_NS: i64 = 2_000_000;
/// The witness's reservation: it runs for a few microseconds a period.
const RUNTIME_NS: u64 = 50_000;

fn now(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Makes the calling thread SCHED_DEADLINE on the CPUs it may run on.
fn become_deadline() -> std::io::Result<()> {
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_DEADLINE as u32,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: RUNTIME_NS,
        sched_deadline: PERIOD_NS as u64,
        sched_period: PERIOD_NS as u64,
    };
    // SAFETY: sched_setattr reads the attr we pass; 0 is this thread.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs for `seconds`, writing freezes to `out`. Fails (after creating an
/// empty `out`) when the kernel refuses SCHED_DEADLINE here.
pub fn run(seconds: u64, out: &Path) -> Result<()> {
    let mut file =
        std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    if let Err(e) = become_deadline() {
        bail!(
            "the freeze witness needs SCHED_DEADLINE on the DUT's CPUs and the kernel refused it ({e}); it records nothing, so no freeze can excuse a gap (the DUT's CPUs must be a scheduling partition of their own, as `linecard lab up` makes them)"
        );
    }
    let end = now(libc::CLOCK_MONOTONIC) + seconds as i64 * 1_000_000_000;
    let mut due = now(libc::CLOCK_MONOTONIC) + PERIOD_NS;
    while due < end {
        let wake = libc::timespec {
            tv_sec: due / 1_000_000_000,
            tv_nsec: due % 1_000_000_000,
        };
        // SAFETY: an absolute sleep on a timespec we own; an early return
        // (a signal) is just an early wake.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &wake,
                std::ptr::null_mut(),
            )
        };
        let woke = now(libc::CLOCK_MONOTONIC);
        let late = woke - due;
        if late > REPORT_LATE_NS {
            let woke_unix = now(libc::CLOCK_REALTIME);
            let freeze = Stall {
                from_unix_ns: woke_unix - late,
                to_unix_ns: woke_unix,
            };
            writeln!(file, "{}", serde_json::to_string(&freeze)?)?;
            file.flush()?;
        }
        // The next period starts from the wake: one freeze is one record.
        due = woke.max(due) + PERIOD_NS;
    }
    Ok(())
}

/// How long the witnessed freezes overlap [start, end), ms: the time inside
/// that window when no CPU of the DUT's could run anything.
pub fn frozen_within_ms(freezes: &[Stall], start_ns: i64, end_ns: i64) -> f64 {
    freezes
        .iter()
        .map(|f| (f.to_unix_ns.min(end_ns) - f.from_unix_ns.max(start_ns)).max(0))
        .sum::<i64>() as f64
        / 1e6
}

/// How long, ms, both `dut` and `rest` were frozen at once within [start,
/// end): the machine standing still, not something on the DUT's CPUs
/// alone (the witness on the other CPUs froze at the same instants).
pub fn frozen_together_within_ms(dut: &[Stall], rest: &[Stall], start_ns: i64, end_ns: i64) -> f64 {
    let mut together = 0;
    for a in dut {
        for b in rest {
            let from = a.from_unix_ns.max(b.from_unix_ns).max(start_ns);
            let to = a.to_unix_ns.min(b.to_unix_ns).min(end_ns);
            together += (to - from).max(0);
        }
    }
    together as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    #[test]
    fn only_what_both_witnesses_froze_at_once_counts_as_together() {
        let dut = [freeze(100, 118), freeze(500, 520)];
        // The other CPUs froze 105-125 (with the first) and 600-610 (alone).
        let rest = [freeze(105, 125), freeze(600, 610)];
        assert_eq!(frozen_together_within_ms(&dut, &rest, 0, 1000 * MS), 13.0);
        // Within a gap 110-700 ms: 110-118 only.
        assert_eq!(
            frozen_together_within_ms(&dut, &rest, 110 * MS, 700 * MS),
            8.0
        );
        assert_eq!(frozen_together_within_ms(&dut, &[], 0, 1000 * MS), 0.0);
    }

    fn freeze(from_ms: i64, to_ms: i64) -> Stall {
        Stall {
            from_unix_ns: from_ms * MS,
            to_unix_ns: to_ms * MS,
        }
    }

    #[test]
    fn only_the_part_of_a_freeze_inside_the_window_counts() {
        let freezes = [freeze(100, 118), freeze(500, 520)];
        // A gap 95-121 ms holds all of the first freeze.
        assert_eq!(frozen_within_ms(&freezes, 95 * MS, 121 * MS), 18.0);
        // A gap that ends mid-freeze holds only its part.
        assert_eq!(frozen_within_ms(&freezes, 90 * MS, 110 * MS), 10.0);
        // One a second later holds nothing of either.
        assert_eq!(frozen_within_ms(&freezes, 1_090 * MS, 1_120 * MS), 0.0);
        // Two freezes inside one window add up.
        assert_eq!(frozen_within_ms(&freezes, 0, 1_000 * MS), 38.0);
    }
}
