//! The softirq threads of the DUT's CPUs (`ksoftirqd/N`), and the receive
//! path's one switch: raising them above the hogs.
//!
//! The fast path runs in softirq on the CPU it protects: the receive path
//! that RPS steers to the DUT's CPUs, the XDP program behind it and the
//! detection sweep's timer (a soft hrtimer). Once the kernel defers that
//! work to the CPU's ksoftirqd, a normal-priority thread, SCHED_FIFO hogs
//! hold it until RT throttling's window: every session silent at one
//! instant for hundreds of ms (`docs/limitations.md`). At SCHED_FIFO above
//! the hogs, the deferred work runs before them. A scenario's DUT asks for
//! it with `ksoftirqd_priority`; the runner records each thread's policy
//! from `/proc` in every phase, so that the mechanism is proven in force,
//! and puts the threads back as they were afterwards (on drop, and after a
//! crash through `linecard lab down`).

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where the threads' policies are kept while a run holds them raised.
pub const SAVED: &str = "/run/lc-ksoftirqd.saved";

/// One CPU's softirq thread as `/proc/PID/stat` reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftirqThread {
    pub cpu: usize,
    pub pid: u32,
    /// `SCHED_OTHER`, `SCHED_FIFO`, ... (sched(7)).
    pub policy: String,
    /// The real-time priority (0 outside SCHED_FIFO and SCHED_RR).
    pub priority: u8,
}

impl SoftirqThread {
    /// Whether it runs at SCHED_FIFO `priority`.
    pub fn is_fifo(&self, priority: u8) -> bool {
        self.policy == "SCHED_FIFO" && self.priority == priority
    }

    pub fn describe(&self) -> String {
        let priority = if self.priority > 0 {
            format!(" {}", self.priority)
        } else {
            String::new()
        };
        format!(
            "ksoftirqd/{} (pid {}) {}{priority}",
            self.cpu, self.pid, self.policy
        )
    }
}

/// sched(7)'s policies by the number `/proc/PID/stat` gives.
const POLICIES: [(u32, &str); 6] = [
    (0, "SCHED_OTHER"),
    (1, "SCHED_FIFO"),
    (2, "SCHED_RR"),
    (3, "SCHED_BATCH"),
    (5, "SCHED_IDLE"),
    (6, "SCHED_DEADLINE"),
];

fn policy_name(number: u32) -> String {
    POLICIES
        .iter()
        .find(|(n, _)| *n == number)
        .map_or_else(|| format!("policy {number}"), |(_, name)| name.to_string())
}

fn policy_number(name: &str) -> Option<i32> {
    POLICIES
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(number, _)| *number as i32)
}

/// The command, real-time priority and policy in one `/proc/PID/stat`
/// (proc(5): fields 2, 40 and 41; the command may hold spaces and
/// parentheses, so fields are counted from its last `)`).
pub fn parse_stat(stat: &str) -> Option<(String, u8, String)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let command = stat.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // Field 3 (state) is the first after the command.
    let priority: u8 = fields.get(40 - 3)?.parse().ok()?;
    let policy: u32 = fields.get(41 - 3)?.parse().ok()?;
    Some((command, priority, policy_name(policy)))
}

/// The softirq thread of each of `cpus`, read from `proc` (`/proc`).
pub fn find_in(proc: &Path, cpus: &[usize]) -> Result<Vec<SoftirqThread>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(proc).with_context(|| format!("listing {}", proc.display()))? {
        let entry = entry?;
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((command, priority, policy)) = parse_stat(&stat) else {
            continue;
        };
        let Some(cpu) = command
            .strip_prefix("ksoftirqd/")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if cpus.contains(&cpu) {
            found.push(SoftirqThread {
                cpu,
                pid,
                policy,
                priority,
            });
        }
    }
    found.sort_by_key(|t| t.cpu);
    if let Some(cpu) = cpus.iter().find(|c| !found.iter().any(|t| t.cpu == **c)) {
        bail!("no ksoftirqd/{cpu} in {}", proc.display());
    }
    Ok(found)
}

/// The softirq threads of `cpus` on this machine.
pub fn find(cpus: &[usize]) -> Result<Vec<SoftirqThread>> {
    find_in(Path::new("/proc"), cpus)
}

fn set_policy(pid: u32, policy: &str, priority: u8) -> Result<()> {
    let number = policy_number(policy).with_context(|| format!("unknown policy {policy}"))?;
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: sched_setscheduler reads the param we pass.
    if unsafe { libc::sched_setscheduler(pid as i32, number, &param) } != 0 {
        bail!(
            "{policy} {priority} for pid {pid}: {} (root needed)",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Holds the softirq threads of some CPUs at SCHED_FIFO until dropped.
pub struct PriorityOverride {
    original: Vec<SoftirqThread>,
}

impl PriorityOverride {
    /// Raises the softirq threads of `cpus` to SCHED_FIFO `priority`. What
    /// they were is saved first (a record a crashed run left is the true
    /// original).
    pub fn set(cpus: &[usize], priority: u8) -> Result<Self> {
        let original = match read_saved() {
            Some(saved) => saved,
            None => find(cpus)?,
        };
        std::fs::write(SAVED, serde_json::to_string(&original)? + "\n")
            .with_context(|| format!("writing {SAVED}"))?;
        // On failure the guard's drop puts back what was changed.
        let guard = Self { original };
        for thread in find(cpus)? {
            set_policy(thread.pid, "SCHED_FIFO", priority)?;
        }
        Ok(guard)
    }
}

impl Drop for PriorityOverride {
    fn drop(&mut self) {
        if restore(&self.original).is_ok() {
            let _ = std::fs::remove_file(SAVED);
        }
    }
}

fn read_saved() -> Option<Vec<SoftirqThread>> {
    serde_json::from_str(&std::fs::read_to_string(SAVED).ok()?).ok()
}

/// Puts each thread back as recorded, where it is still that CPU's
/// softirq thread (a pid is checked against its command first: nothing
/// but a ksoftirqd is touched).
fn restore(threads: &[SoftirqThread]) -> Result<()> {
    let cpus: Vec<usize> = threads.iter().map(|t| t.cpu).collect();
    let now = find(&cpus)?;
    for thread in threads {
        if now
            .iter()
            .any(|t| t.pid == thread.pid && t.cpu == thread.cpu)
        {
            set_policy(thread.pid, &thread.policy, thread.priority)?;
        }
    }
    Ok(())
}

/// Restores the threads a run that did not finish left raised; returns
/// them as restored.
pub fn restore_if_saved() -> Result<Vec<SoftirqThread>> {
    let Some(saved) = read_saved() else {
        return Ok(Vec::new());
    };
    restore(&saved)?;
    std::fs::remove_file(SAVED).with_context(|| format!("removing {SAVED}"))?;
    Ok(saved)
}

/// Why the scenario's `priority` was not in force in `readings` (each
/// phase's reading of the DUT's softirq threads); `None` when it was, or
/// when the DUT asked for nothing (0).
pub fn not_in_force(priority: u8, readings: &[(&str, &[SoftirqThread])]) -> Option<String> {
    if priority == 0 {
        return None;
    }
    for (phase, threads) in readings {
        if threads.is_empty() {
            return Some(format!(
                "phase {phase}: the DUT's softirq threads were not read (ksoftirqd_priority = {priority} unproven)"
            ));
        }
        if let Some(t) = threads.iter().find(|t| !t.is_fifo(priority)) {
            return Some(format!(
                "phase {phase}: {} where the scenario asked SCHED_FIFO {priority}",
                t.describe()
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: u32, command: &str, priority: u8, policy: u32) -> String {
        // Fields 4-39 as a kernel thread has them, then 40 and 41.
        let middle = vec!["0"; 36].join(" ");
        format!("{pid} ({command}) S {middle} {priority} {policy} 0 0 0\n")
    }

    #[test]
    fn parse_reads_priority_and_policy_past_a_command_with_parentheses() {
        assert_eq!(
            parse_stat(&stat(24, "ksoftirqd/1", 60, 1)),
            Some(("ksoftirqd/1".into(), 60, "SCHED_FIFO".into()))
        );
        assert_eq!(
            parse_stat(&stat(9, "a (b) c", 0, 0)),
            Some(("a (b) c".into(), 0, "SCHED_OTHER".into()))
        );
        assert_eq!(parse_stat("12 (short) S 1 2"), None);
    }

    #[test]
    fn find_in_picks_the_cpus_threads_and_names_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("lc-softirq-proc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (pid, command, priority, policy) in [
            (14, "ksoftirqd/0", 0, 0),
            (24, "ksoftirqd/1", 60, 1),
            (30, "ksoftirqd/10", 0, 0),
            (99, "stress-ng", 50, 1),
        ] {
            let d = dir.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("stat"), stat(pid, command, priority, policy)).unwrap();
        }
        std::fs::create_dir(dir.join("self")).unwrap();
        let found = find_in(&dir, &[1]).unwrap();
        assert_eq!(
            found,
            vec![SoftirqThread {
                cpu: 1,
                pid: 24,
                policy: "SCHED_FIFO".into(),
                priority: 60
            }]
        );
        let err = find_in(&dir, &[1, 2]).unwrap_err().to_string();
        assert!(err.contains("ksoftirqd/2"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn not_in_force_names_the_phase_and_thread_that_differ() {
        let raised = SoftirqThread {
            cpu: 1,
            pid: 24,
            policy: "SCHED_FIFO".into(),
            priority: 60,
        };
        let shipped = SoftirqThread {
            policy: "SCHED_OTHER".into(),
            priority: 0,
            ..raised.clone()
        };
        let on = [raised.clone()];
        let off = [shipped];
        assert_eq!(not_in_force(60, &[("L3#0", &on), ("L4#1", &on)]), None);
        assert_eq!(not_in_force(0, &[("L3#0", &off)]), None);
        let why = not_in_force(60, &[("L3#0", &on), ("L4#1", &off)]).unwrap();
        assert!(why.contains("L4#1") && why.contains("SCHED_OTHER"), "{why}");
        assert!(not_in_force(70, &[("L3#0", &on)]).is_some());
        assert!(not_in_force(60, &[("L3#0", &[])])
            .unwrap()
            .contains("not read"));
    }
}
