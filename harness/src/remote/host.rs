//! A host of a three-host run (`run/hosts.rs`): how to reach it, what it
//! runs, and how the run signals and cleans up exactly what it started
//! there (by PID, only while the PID still carries this run's marker).

use super::Connection;
use crate::scenario::value::quote;
use crate::scenario::HostSpec;
use anyhow::{bail, Result};
use std::time::Duration;

/// One host of a three-host run as the runner uses it: how to reach it,
/// its table, and this run's directory there. Everything the run starts
/// on it carries `LINECARD_RUN=<marker>` in its environment: a PID is
/// signalled only while it still names a process of this run.
pub struct RemoteHost {
    pub role: &'static str,
    pub conn: Connection,
    pub spec: HostSpec,
    /// This run's staging directory on the host.
    pub dir: String,
    pub marker: String,
    pub online_cpus: Vec<usize>,
    /// Set when a file of the run did not come back whole from this host:
    /// its directory is then kept (the only copy), never removed.
    pub keep: std::sync::atomic::AtomicBool,
    /// When the harness could not reach the host while its processes ran
    /// (`procs/remote.rs`), as (start, end) ns, not yet handed to a DUT's
    /// evidence.
    pub outages: std::sync::Mutex<Vec<(i64, i64)>>,
}

/// A CPU list for `taskset -c` and `linecard steal-witness --cpus`.
pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

impl RemoteHost {
    /// The harness lost the host from `start_ns` to `end_ns` (as one of
    /// the run's processes there saw it: the views of several processes
    /// of one outage become one).
    pub fn note_outage(&self, start_ns: i64, end_ns: i64) {
        let Ok(mut outages) = self.outages.lock() else {
            return;
        };
        if let Some(o) = outages
            .iter_mut()
            .find(|(s, e)| start_ns <= *e && *s <= end_ns)
        {
            *o = (o.0.min(start_ns), o.1.max(end_ns));
            return;
        }
        eprintln!(
            "the connection to the {} host {} was lost for {:.1} s; its processes ran on (the verdict is the capture's)",
            self.role,
            self.conn.target,
            (end_ns - start_ns) as f64 / 1e9
        );
        outages.push((start_ns, end_ns));
    }

    /// The outages noted since the last call.
    pub fn take_outages(&self) -> Vec<(i64, i64)> {
        self.outages
            .lock()
            .map(|mut o| std::mem::take(&mut *o))
            .unwrap_or_default()
    }

    /// `taskset -c CPUS ` for the run's processes on this host (the DUT's:
    /// the CPUs under test), or nothing when it names none.
    fn pinned(cpus: &[usize]) -> String {
        if cpus.is_empty() {
            String::new()
        } else {
            format!("taskset -c {} ", cpu_list(cpus))
        }
    }

    /// Where the harness's own commands run on the host: off the DUT's
    /// CPUs (a query must not compete with what it measures), on the
    /// host's CPUs elsewhere.
    pub(super) fn query_cpus(&self) -> Vec<usize> {
        if self.role == "dut" {
            self.online_cpus
                .iter()
                .copied()
                .filter(|c| !self.spec.cpus.contains(c))
                .collect()
        } else {
            self.spec.cpus.clone()
        }
    }

    /// The line that starts `program args` on the host, pinned to its
    /// CPUs, after writing its PID (the shell's, kept by `exec`) to
    /// `pid_file`.
    pub fn launch_line(&self, pid_file: &str, program: &str, args: &[String]) -> String {
        self.launch_line_on(&self.spec.cpus, pid_file, program, args)
    }

    /// [`RemoteHost::launch_line`] pinned where the harness's queries run,
    /// off the DUT's CPUs.
    pub fn launch_line_off_dut(&self, pid_file: &str, program: &str, args: &[String]) -> String {
        self.launch_line_on(&self.query_cpus(), pid_file, program, args)
    }

    fn launch_line_on(
        &self,
        cpus: &[usize],
        pid_file: &str,
        program: &str,
        args: &[String],
    ) -> String {
        let mut line = format!(
            "echo $$ > {} && exec env LINECARD_RUN={} {}{}",
            quote(pid_file),
            self.marker,
            Self::pinned(cpus),
            quote(program)
        );
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        line
    }

    /// Sends `signal` to `pid` on the host if it is still a process of
    /// this run.
    pub fn signal(&self, pid: u32, signal: i32) -> Result<()> {
        self.conn.exec(
            &format!(
                "if grep -qz '^LINECARD_RUN={}$' /proc/{pid}/environ 2>/dev/null; then kill -{signal} {pid}; fi",
                self.marker
            ),
            None,
        )?;
        Ok(())
    }

    /// The line that follows `log` on the host from byte `from` (1-based)
    /// until process `pid` ends, off the DUT's CPUs: `tail` looks for new
    /// lines and for the process's end every 0.2 s, so that a stop is
    /// seen at once, not after tail's default second.
    pub fn follow_line(&self, pid: u32, log: &str, from: u64) -> String {
        format!(
            "exec {}tail -s 0.2 -c +{from} -F --pid={pid} {} 2>/dev/null",
            Self::pinned(&self.query_cpus()),
            quote(log)
        )
    }

    /// Runs `program args` on the host, off the DUT's CPUs, bounded to 10
    /// s; its output whatever its exit status.
    pub fn query(&self, program: &str, args: &[String]) -> Result<std::process::Output> {
        let mut line = format!(
            "timeout 10 {}{}",
            Self::pinned(&self.query_cpus()),
            quote(program)
        );
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        self.conn.output(&line)
    }

    /// A file of the host, as text.
    pub fn read(&self, path: &str) -> Result<String> {
        Ok(
            String::from_utf8_lossy(&self.conn.exec(&format!("cat {}", quote(path)), None)?)
                .into_owned(),
        )
    }

    /// Stops what is left of this run on the host (by the PIDs it
    /// recorded, only those still carrying its marker) and removes its
    /// directory, unless a file of it did not come back whole ([`keep`]):
    /// then the directory stays and the error says where.
    ///
    /// [`keep`]: RemoteHost::keep
    pub fn clean(&self) -> Result<()> {
        let keep = self.keep.load(std::sync::atomic::Ordering::Relaxed);
        let remove = if keep {
            String::new()
        } else {
            format!("rm -rf {}", quote(&self.dir))
        };
        self.conn.exec(
            &format!("{}; {remove}", kill_marked(&quote(&self.dir), &self.marker)),
            None,
        )?;
        if keep {
            bail!(
                "kept {}:{} (a file of the run did not come back whole; it is the only copy)",
                self.conn.target,
                self.dir
            );
        }
        Ok(())
    }
}

/// The shell line, run where `$d` is the run's new directory on a host
/// ([`Connection::private_dir`]), that starts the host's reaper: after
/// `lifetime` it kills every process of the run still there (by its
/// pidfiles, only while the PID carries the run's marker), so that a
/// harness that vanished (`kill -9`, a lost controller) never leaves a
/// daemon, a stress or a capture running until the disk fills. The run's
/// own end kills the reaper with the rest; the files stay for `linecard
/// teardown RUN_DIR`.
pub(crate) fn reaper(marker: &str, lifetime: Duration) -> String {
    let script = format!(
        "echo $$ > \"$1/reaper.pid\"; sleep {}; {}",
        lifetime.as_secs(),
        kill_marked("\"$1\"", marker)
    );
    format!(
        "(setsid env LINECARD_RUN={marker} sh -c {} reaper \"$d\" < /dev/null > /dev/null 2>&1 &)",
        quote(&script)
    )
}

/// A shell loop that SIGKILLs every process whose PID a pidfile under
/// the directory `dir` (a shell word: quoted, or a variable) names, while that PID still carries `LINECARD_RUN=marker` (a
/// reused PID is someone else's), itself excepted; with its process
/// group, which each started with `setsid` leads (stress-ng's workers,
/// the reaper's `sleep`).
pub(crate) fn kill_marked(dir: &str, marker: &str) -> String {
    format!(
        "for f in $(find {dir} -name '*.pid' 2>/dev/null); do \
           p=$(cat \"$f\" 2>/dev/null); \
           case \"$p\" in ''|*[!0-9]*) continue;; esac; \
           [ \"$p\" = \"$$\" ] && continue; \
           grep -qz '^LINECARD_RUN={marker}$' /proc/$p/environ 2>/dev/null \
             && {{ kill -KILL -\"$p\" 2>/dev/null || kill -KILL \"$p\"; }}; \
         done"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_process_is_launched_pinned_marked_and_quoted() {
        let spec = HostSpec {
            target: "root@h".into(),
            port: None,
            options: Vec::new(),
            interface: "eth0".into(),
            address: None,
            cpus: vec![1],
        };
        let host = RemoteHost {
            role: "dut",
            conn: Connection {
                target: spec.target.clone(),
                port: None,
                identity: None,
                options: Vec::new(),
                multiplex: false,
            },
            spec,
            dir: "/var/tmp/linecard/r1".into(),
            marker: "r1-42".into(),
            online_cpus: vec![0, 1],
            keep: Default::default(),
            outages: Default::default(),
        };
        assert_eq!(
            host.launch_line(
                "/var/tmp/linecard/r1/x/linecardd.pid",
                "/var/tmp/linecard/r1/linecardd",
                &["--config".into(), "a b'c".into()]
            ),
            "echo $$ > /var/tmp/linecard/r1/x/linecardd.pid && exec env LINECARD_RUN=r1-42 \
             taskset -c 1 /var/tmp/linecard/r1/linecardd --config \"a b'c\""
        );
        // The harness's own queries stay off the DUT's CPUs.
        assert_eq!(host.query_cpus(), vec![0]);
    }
}
