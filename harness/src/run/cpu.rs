//! What a phase cost the DUT's CPUs, read from `/proc` outside the engine:
//! the DUT daemon's own CPU time (all its threads), and the softirq time
//! on the DUT's CPUs, where its receive path (XDP and the kernel's sweep
//! included) runs. A figure of cost, never of timing: timing comes from the
//! capture.

use crate::manifest::evidence::CpuCost;

/// `/proc/stat` and `/proc/PID/stat` count in ticks of 10 ms (USER_HZ 100).
const TICK_MS: f64 = 10.0;

/// `/proc/stat` per-CPU columns after the name: user nice system idle
/// iowait irq softirq steal.
const IDLE: usize = 3;
const IOWAIT: usize = 4;
const SOFTIRQ: usize = 6;
const STEAL: usize = 7;

/// One reading of the counters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pid: u32,
    /// utime + stime of the daemon; `None` when it could not be read.
    engine_ticks: Option<u64>,
    softirq_ticks: u64,
    /// Idle and iowait on the CPUs: what was left over (a peer's headroom).
    idle_ticks: u64,
}

/// The sum of column `column` of `/proc/stat`'s lines for `cpus`, ms.
fn stat_column_ms(stat: &str, cpus: &[usize], column: usize) -> f64 {
    let ticks: u64 = stat
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let cpu = fields.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
            cpus.contains(&cpu)
                .then(|| fields.nth(column)?.parse::<u64>().ok())?
        })
        .sum();
    ticks as f64 * TICK_MS
}

/// The whole machine's CPU time and the hypervisor's steal so far, in
/// ticks (`/proc/stat`'s aggregate line, user through steal).
pub fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("cpu "))
        .map(|rest| {
            rest.split_whitespace()
                .take(STEAL + 1)
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    (ticks.iter().sum(), ticks.get(STEAL).copied().unwrap_or(0))
}

/// Time the hypervisor took from `cpus` so far (steal), ms.
pub fn steal_ms(cpus: &[usize]) -> f64 {
    steal_ms_in(
        &std::fs::read_to_string("/proc/stat").unwrap_or_default(),
        cpus,
    )
}

/// [`steal_ms`] from a `/proc/stat` read elsewhere (a host over SSH).
pub fn steal_ms_in(stat: &str, cpus: &[usize]) -> f64 {
    stat_column_ms(stat, cpus, STEAL)
}

/// utime + stime from a `/proc/PID/stat` line: fields 14 and 15, counted
/// after the command's closing parenthesis (the command may hold spaces).
fn process_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    // After ")": state is field 3, so utime (14) is the 12th from here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

pub fn sample(pid: u32, cpus: &[usize]) -> Sample {
    sample_from(
        &std::fs::read_to_string("/proc/stat").unwrap_or_default(),
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .as_deref(),
        pid,
        cpus,
    )
}

/// [`sample`] from `/proc/stat` and `/proc/PID/stat` read elsewhere (a
/// host over SSH); `pid_stat` is `None` when the process was gone.
pub fn sample_from(stat: &str, pid_stat: Option<&str>, pid: u32, cpus: &[usize]) -> Sample {
    Sample {
        pid,
        engine_ticks: pid_stat.and_then(process_ticks),
        softirq_ticks: (stat_column_ms(stat, cpus, SOFTIRQ) / TICK_MS) as u64,
        idle_ticks: ((stat_column_ms(stat, cpus, IDLE) + stat_column_ms(stat, cpus, IOWAIT))
            / TICK_MS) as u64,
    }
}

pub fn cost(before: &Sample, after: &Sample, seconds: f64) -> CpuCost {
    CpuCost {
        // A daemon restarted in the phase (a fault) is another process.
        engine_cpu_ms: match (before.engine_ticks, after.engine_ticks) {
            (Some(a), Some(b)) if b >= a && before.pid == after.pid => {
                Some((b - a) as f64 * TICK_MS)
            }
            _ => None,
        },
        softirq_ms: after.softirq_ticks.saturating_sub(before.softirq_ticks) as f64 * TICK_MS,
        idle_ms: Some(after.idle_ticks.saturating_sub(before.idle_ticks) as f64 * TICK_MS),
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_s_ticks_hold_its_steal_and_grow() {
        let (total, steal) = machine_ticks();
        assert!(total > 0 && steal <= total, "{total} {steal}");
        // Busy for 50 ms: the total moves on (10 ms ticks, 2+ CPUs).
        let until = std::time::Instant::now() + std::time::Duration::from_millis(50);
        while std::time::Instant::now() < until {}
        assert!(machine_ticks().0 > total);
    }

    #[test]
    fn columns_and_process_times_are_read_where_the_kernel_puts_them() {
        let stat = "cpu  10 0 20 900 0 0 7 3 0 0\n\
                    cpu0 5 0 10 450 0 0 2 1 0 0\n\
                    cpu1 5 0 10 450 0 0 5 2 0 0\n";
        assert_eq!(stat_column_ms(stat, &[1], SOFTIRQ), 50.0);
        assert_eq!(stat_column_ms(stat, &[0, 1], STEAL), 30.0);
        assert_eq!(stat_column_ms(stat, &[2], STEAL), 0.0);
        assert_eq!(stat_column_ms(stat, &[0], IDLE), 4500.0);
        // A command with a space and a parenthesis in it.
        let proc = "4242 (lin (card) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 37 12 0 0 20 0 3 0";
        assert_eq!(process_ticks(proc), Some(49));
        let a = Sample {
            pid: 7,
            engine_ticks: Some(49),
            softirq_ticks: 5,
            idle_ticks: 100,
        };
        let b = Sample {
            pid: 7,
            engine_ticks: Some(149),
            softirq_ticks: 25,
            idle_ticks: 400,
        };
        assert_eq!(
            cost(&a, &b, 10.0),
            CpuCost {
                engine_cpu_ms: Some(1000.0),
                softirq_ms: 200.0,
                idle_ms: Some(3000.0),
                seconds: 10.0
            }
        );
        // Restarted: its CPU time is not the phase's.
        let restarted = Sample { pid: 8, ..b };
        assert_eq!(cost(&a, &restarted, 10.0).engine_cpu_ms, None);
    }
}
