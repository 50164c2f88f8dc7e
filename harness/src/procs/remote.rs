//! A process on a host over SSH, detached from every connection: it runs
//! in a session of its own (`setsid`), its output goes to a log file in
//! the run's directory there, and its PID to a pidfile beside it. The
//! connection that brings the log here is a follower (`tail -F --pid`)
//! that ends when the process does; a follower that ends because the
//! connection broke is started again from where it stopped, and the
//! process is taken for alive meanwhile, for at most [`LOST_AFTER`]. A
//! dropped connection is then an outage of the harness's view, recorded
//! on the host ([`RemoteHost::outages`]), never "the DUT exited"; and the
//! process never dies of a closed channel (no SIGHUP, no EPIPE).

use super::{append_to, Daemon};
use crate::remote::RemoteHost;
use crate::scenario::value::quote;
use anyhow::{Context, Result};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a host may stay unreachable before its processes are taken
/// for gone: the single-host provider's `lost_after_s` default.
pub const LOST_AFTER: Duration = Duration::from_secs(60);

/// A follower alive this long reached the host: `ConnectTimeout` (5 s)
/// and the keepalive (3 x 2 s) would have ended it otherwise.
const CONNECTED_AFTER: Duration = Duration::from_secs(7);

/// What the harness knows of a process over SSH.
pub(super) struct Remote {
    pub(super) host: Arc<RemoteHost>,
    pub(super) pid: u32,
    /// The process's log on the host.
    log_there: String,
    /// The local log's size before the first follower: what followers
    /// appended since is how far the host's log has been read.
    base: u64,
    /// The current follower's start.
    followed_at: Instant,
    /// Since when the host has not been reachable (unix ns), if it is not.
    lost_since: Option<(Instant, i64)>,
}

impl Daemon {
    pub(super) fn spawn_remote_line(
        name: &str,
        host: &Arc<RemoteHost>,
        pid_file: &str,
        line: String,
        log: &Path,
    ) -> Result<Self> {
        let log_there = format!("{}.log", pid_file.strip_suffix(".pid").unwrap_or(pid_file));
        // The subshell returns at once; the process keeps nothing of the
        // connection (stdin, stdout, stderr, session). The same connection
        // waits (10 s at most) for its PID.
        let said = host
            .conn
            .exec(
                &format!(
                    "(setsid sh -c {line} < /dev/null >> {log} 2>&1 &); i=0; \
                     while [ $i -lt 200 ]; do [ -s {pid} ] && exec cat {pid}; i=$((i+1)); sleep 0.05; done; \
                     tail -n 15 {log} >&2; exit 1",
                    line = quote(&line),
                    log = quote(&log_there),
                    pid = quote(pid_file)
                ),
                None,
            )
            .with_context(|| format!("{name} did not start on {}", host.conn.target))?;
        let pid: u32 = String::from_utf8_lossy(&said)
            .trim()
            .parse()
            .with_context(|| {
                format!("{name} on {}: its pidfile held {said:?}", host.conn.target)
            })?;
        let base = std::fs::metadata(log).map_or(0, |m| m.len());
        let mut remote = Remote {
            host: host.clone(),
            pid,
            log_there,
            base,
            followed_at: Instant::now(),
            lost_since: None,
        };
        let child = remote.follow(log)?;
        Ok(Self {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
            remote: Some(remote),
        })
    }

    /// Whether the process over SSH still runs: its follower does, or
    /// the host cannot be asked (an outage shorter than [`LOST_AFTER`]).
    pub(super) fn remote_running(&mut self) -> bool {
        let Some(remote) = self.remote.as_mut() else {
            return false;
        };
        match self.child.try_wait() {
            Ok(None) => {
                if remote.followed_at.elapsed() >= CONNECTED_AFTER {
                    remote.back();
                }
                true
            }
            // `tail --pid` ended: the process did.
            Ok(Some(status)) if status.success() => {
                remote.back();
                false
            }
            // The connection broke (ssh's 255, or a signal).
            _ => {
                let (since, _) = *remote
                    .lost_since
                    .get_or_insert_with(|| (Instant::now(), crate::sys::unix_ns()));
                if since.elapsed() > LOST_AFTER {
                    return false;
                }
                if remote.followed_at.elapsed() >= Duration::from_secs(1) {
                    if let Ok(child) = remote.follow(&self.log) {
                        self.child = child;
                    }
                }
                true
            }
        }
    }

    /// Stops the process over SSH: `signal` (SIGTERM), then SIGKILL after
    /// 3 s, judged by its follower, which ends with it.
    pub(super) fn remote_stop(&mut self) -> Result<ExitStatus> {
        for (signal, wait) in [(libc::SIGTERM, 3), (libc::SIGKILL, 5)] {
            if let Some(status) = self.remote_end(signal, Duration::from_secs(wait))? {
                return Ok(status);
            }
        }
        let _ = self.child.kill();
        Ok(self.child.wait()?)
    }

    /// Sends `signal` to the process over SSH and waits up to `wait` for
    /// it to end (its follower's end); `None` if it did not.
    pub(super) fn remote_end(&mut self, signal: i32, wait: Duration) -> Result<Option<ExitStatus>> {
        self.signal(signal);
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if !self.remote_running() {
                return Ok(Some(self.child.wait()?));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(None)
    }
}

impl Remote {
    /// Starts a follower of the host's log from where the last one
    /// stopped, appending to `log` here.
    fn follow(&mut self, log: &Path) -> Result<Child> {
        let read = std::fs::metadata(log)
            .map_or(0, |m| m.len())
            .saturating_sub(self.base);
        self.followed_at = Instant::now();
        let out = append_to(log)?;
        self.host
            .conn
            .command()
            .arg(self.host.follow_line(self.pid, &self.log_there, read + 1))
            // Its own process group: a terminal's Ctrl-C reaches the
            // harness, which stops the remote process by its PID.
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("following {} on {}", self.log_there, self.host.conn.target))
    }

    /// The host answers again: an open outage is recorded, from when it
    /// was first seen to the start of the follower that got through.
    fn back(&mut self) {
        if let Some((_, start_ns)) = self.lost_since.take() {
            let end_ns = crate::sys::unix_ns() - self.followed_at.elapsed().as_nanos() as i64;
            self.host.note_outage(start_ns, end_ns.max(start_ns));
        }
    }
}
