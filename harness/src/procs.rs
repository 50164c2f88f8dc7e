//! Processes the harness starts inside lab namespaces, or on a host over
//! SSH: peers (FRR bfdd, BIRD), the DUT (linecardd, FRR bfdd) and captures
//! (tcpdump). Each is stopped by its PID, never by name; dropping a handle
//! stops it.

use crate::remote::RemoteHost;
use crate::sys;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod remote;
use remote::Remote;
pub use remote::LOST_AFTER;

/// `log`, opened to append a process's stdout and stderr.
fn append_to(log: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))
}

/// A process started by the harness.
pub struct Daemon {
    pub name: String,
    /// The process itself, or (on a host over SSH) the `ssh` that follows
    /// its log there and ends when it does (`procs/remote.rs`).
    child: Child,
    pub log: PathBuf,
    /// On a host over SSH: the host, the process's PID there, and the
    /// state of the connection that follows it.
    remote: Option<Remote>,
}

impl Daemon {
    /// Starts `program args` in network namespace `ns`, in `cpuset` if
    /// given, with stdout and stderr appended to `log`.
    pub fn spawn(
        name: &str,
        ns: &str,
        cpuset: Option<&Path>,
        program: &str,
        args: &[String],
        log: &Path,
    ) -> Result<Self> {
        let out = append_to(log)?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        if let Some(cpuset) = cpuset {
            sys::join_cpuset_on_exec(&mut cmd, cpuset);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({program})"))?;
        Ok(Self {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
            remote: None,
        })
    }

    /// Starts `program args` on `host` (pinned to its CPUs), its PID in
    /// `run_dir/NAME.pid` there and its stdout and stderr appended to
    /// `log` here; returns once the PID is known (bounded).
    pub fn spawn_remote(
        name: &str,
        host: &Arc<RemoteHost>,
        run_dir: &str,
        program: &str,
        args: &[String],
        log: &Path,
    ) -> Result<Self> {
        let pid_file = format!("{run_dir}/{name}.pid");
        let line = host.launch_line(&pid_file, program, args);
        Self::spawn_remote_line(name, host, &pid_file, line, log)
    }

    /// [`Daemon::spawn_remote`] off the DUT's CPUs, where the harness's
    /// own queries run (a witness must not be starved by what it watches).
    pub fn spawn_remote_off_dut(
        name: &str,
        host: &Arc<RemoteHost>,
        run_dir: &str,
        program: &str,
        args: &[String],
        log: &Path,
    ) -> Result<Self> {
        let pid_file = format!("{run_dir}/{name}.pid");
        let line = host.launch_line_off_dut(&pid_file, program, args);
        Self::spawn_remote_line(name, host, &pid_file, line, log)
    }

    /// Its PID (on its host, for a process over SSH).
    pub fn pid(&self) -> u32 {
        self.remote.as_ref().map_or(self.child.id(), |r| r.pid)
    }

    pub fn running(&mut self) -> bool {
        if self.remote.is_some() {
            return self.remote_running();
        }
        matches!(self.child.try_wait(), Ok(None))
    }

    fn signal(&self, signal: i32) {
        match &self.remote {
            // SAFETY: kill on the PID of our own child.
            None => unsafe {
                libc::kill(self.child.id() as i32, signal);
            },
            // A host that cannot be reached: the run's clean-up (and the
            // host's reaper) tries again.
            Some(r) => {
                let _ = r.host.signal(r.pid, signal);
            }
        }
    }

    /// SIGKILL: the process dies without a farewell packet.
    pub fn kill(&mut self) -> Result<ExitStatus> {
        if self.remote.is_some() {
            // Bounded: the follower ends with the process, unless the
            // connection hangs.
            if let Some(status) = self.remote_end(libc::SIGKILL, Duration::from_secs(5))? {
                return Ok(status);
            }
            let _ = self.child.kill();
        } else {
            self.signal(libc::SIGKILL);
        }
        Ok(self.child.wait()?)
    }

    /// SIGKILL to every descendant of this (local) process, then
    /// [`Daemon::stop`]: a stress-ng whose SCHED_FIFO workers hold the
    /// CPUs its own normal-priority parent needs to pass on a SIGTERM
    /// would otherwise run to its `--timeout`.
    pub fn stop_with_descendants(&mut self) -> Result<ExitStatus> {
        if self.remote.is_none() {
            let mut pending = vec![self.child.id()];
            while let Some(pid) = pending.pop() {
                let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                    .unwrap_or_default();
                for child in children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok())
                {
                    pending.push(child);
                    // SAFETY: kill on a descendant of our own child, by PID.
                    unsafe { libc::kill(child as i32, libc::SIGKILL) };
                }
            }
        }
        self.stop()
    }

    /// SIGTERM, then SIGKILL after 3 s.
    pub fn stop(&mut self) -> Result<ExitStatus> {
        if self.remote.is_some() {
            return self.remote_stop();
        }
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill()
    }

    /// Its log so far, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A packet capture on the observer.
pub struct Capture {
    daemon: Daemon,
    /// Here: the capture, once finished.
    pub path: PathBuf,
    /// On an observer over SSH: the file tcpdump writes there.
    remote: Option<String>,
}

/// tcpdump's arguments for a capture of BFD (control, echo, multihop) on
/// `iface` into `file`, nanosecond timestamps.
fn tcpdump_args(iface: &str, file: &str) -> Vec<String> {
    [
        "-n",
        "-i",
        iface,
        // In immediate mode libpcap uses TPACKET_V2, whose ring has a
        // fixed slot per frame sized by the snapshot length: at the
        // default (262144) 64 MB held ~250 frames and 1024 sessions
        // dropped 6153 of 401730. 512 bytes holds any BFD frame,
        // authentication included, and gives the ring ~110 000 slots.
        "-s",
        "512",
        // Immediate mode: without it libpcap hands packets over in blocks
        // up to a second late, and the blocks still pending when tcpdump
        // stops are lost from the capture.
        "-U",
        "--immediate-mode",
        // 64 MB (KiB units): at 128 sessions of 3 x 10 ms, with the peer
        // sharing the observer's CPU, 8 MB overflowed (1242 drops).
        "-B",
        "65536",
        "--time-stamp-precision",
        "nano",
        "-w",
        file,
        "udp port 3784 or udp port 4784 or udp port 3785",
    ]
    .map(String::from)
    .to_vec()
}

impl Capture {
    /// Starts tcpdump on `iface` in `ns` writing nanosecond pcap to `path`
    /// (BFD ports only), and waits until it is listening.
    pub fn start(ns: &str, iface: &str, path: &Path, cpuset: Option<&Path>) -> Result<Self> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, "tcpdump"])
            .args(tcpdump_args(iface, &path.display().to_string()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(cpuset) = cpuset {
            sys::join_cpuset_on_exec(&mut cmd, cpuset);
        }
        let mut child = cmd
            .spawn()
            .context("starting tcpdump (apt-get install tcpdump)")?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = path.with_extension("tcpdump.log");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let log_path = log.clone();
        // Readiness is tcpdump's own "listening on" line, not a sleep; the
        // rest of its stderr (the drop counts at exit) goes to the log.
        std::thread::spawn(move || {
            let mut out = std::fs::File::create(&log_path).ok();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = ready_tx.send(());
                }
                if let Some(f) = out.as_mut() {
                    use std::io::Write;
                    let _ = writeln!(f, "{line}");
                }
            }
        });
        let daemon = Daemon {
            name: "tcpdump".into(),
            child,
            log,
            remote: None,
        };
        if ready_rx.recv_timeout(Duration::from_secs(5)).is_err() {
            bail!(
                "tcpdump did not start listening on {iface} in {ns} within 5 s: {}",
                daemon.log_tail()
            );
        }
        Ok(Self {
            daemon,
            path: path.to_path_buf(),
            remote: None,
        })
    }

    /// Starts tcpdump on the observer `host`'s `iface`, writing to
    /// `run_dir/capture.pcap` there (fetched to `path` when finished), and
    /// waits until it is listening.
    pub fn start_remote(
        host: &Arc<RemoteHost>,
        run_dir: &str,
        iface: &str,
        path: &Path,
    ) -> Result<Self> {
        let remote = format!("{run_dir}/capture.pcap");
        let log = path.with_extension("tcpdump.log");
        let daemon = Daemon::spawn_remote(
            "tcpdump",
            host,
            run_dir,
            "tcpdump",
            &tcpdump_args(iface, &remote),
            &log,
        )?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("listening on")
        {
            if Instant::now() > deadline {
                bail!(
                    "tcpdump did not start listening on {iface} on {} within 5 s: {}",
                    host.conn.target,
                    daemon.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self {
            daemon,
            path: path.to_path_buf(),
            remote: Some(remote),
        })
    }

    /// Stops the capture (SIGTERM flushes the file) and returns its path.
    pub fn finish(self) -> Result<PathBuf> {
        Ok(self.finish_checked()?.path)
    }

    /// Whether tcpdump is still capturing.
    pub fn running(&mut self) -> bool {
        self.daemon.running()
    }

    /// Stops the capture and says whether it can be trusted: tcpdump must
    /// have run until now, and its kernel must have dropped nothing.
    pub fn finish_checked(mut self) -> Result<CaptureOutcome> {
        let died_early = !self.daemon.running();
        self.daemon.stop()?;
        // tcpdump prints its counts on exit; the reader thread copies them.
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut dropped = None;
        while dropped.is_none() && Instant::now() < deadline {
            dropped =
                dropped_by_kernel(&std::fs::read_to_string(&self.daemon.log).unwrap_or_default());
            if dropped.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // From an observer over SSH: what it wrote, also when tcpdump
        // died early (a partial capture is kept, and marked).
        if let (Some(remote), Some(Remote { host, .. })) = (&self.remote, &self.daemon.remote) {
            if let Err(e) = host.conn.download(remote, &self.path) {
                // The host's is the only whole copy: it stays there.
                host.keep.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(e.context(format!(
                    "the capture stays on {} in {}",
                    host.conn.target, host.dir
                )));
            }
        }
        Ok(CaptureOutcome {
            path: self.path.clone(),
            died_early,
            dropped_by_kernel: dropped,
        })
    }
}

/// What a finished capture says about itself.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CaptureOutcome {
    pub path: PathBuf,
    /// tcpdump had exited before it was stopped (killed, crashed, disk full).
    pub died_early: bool,
    /// "N packets dropped by kernel", as tcpdump reported at exit; `None`
    /// when it did not report (it died).
    pub dropped_by_kernel: Option<u64>,
}

/// tcpdump's "N packets dropped by kernel" line.
fn dropped_by_kernel(log: &str) -> Option<u64> {
    log.lines().find_map(|l| {
        l.strip_suffix(" packets dropped by kernel")
            .or_else(|| l.strip_suffix(" packet dropped by kernel"))
            .and_then(|n| n.trim().parse().ok())
    })
}

/// One BFD session as a peer daemon's configuration sees it.
#[derive(Clone, Debug)]
pub struct PeerSession {
    pub local: IpAddr,
    pub peer: IpAddr,
    pub tx_ms: u32,
    pub rx_ms: u32,
    pub multiplier: u8,
    /// RFC 5883 (UDP 4784). FRR accepts TTL 254 and above by default; BIRD
    /// sends its multihop packets at the system's default TTL (64).
    pub multihop: bool,
    /// FRR's `minimum-ttl` for a multihop session (None: its default 254).
    pub min_ttl: Option<u8>,
    /// FRR's `echo-mode` at the control intervals, on the lab's interface
    /// (bfdd originates echoes only for an interface peer, and needs
    /// zebra); IPv4 only: FRR's IPv6 echo is addressed to the other side
    /// and works only between FRRs.
    pub echo: bool,
    /// RFC 5880 6.7, one key (BIRD; FRR bfdd 8.4.4 has none).
    pub auth: Option<crate::scenario::SessionAuth>,
}

/// BIRD's name of an authentication type (its `authentication` option).
fn bird_auth_type(auth_type: linecard_api::AuthType) -> &'static str {
    use linecard_api::AuthType::*;
    match auth_type {
        SimplePassword => "simple",
        KeyedMd5 => "keyed md5",
        MeticulousKeyedMd5 => "meticulous keyed md5",
        KeyedSha1 => "keyed sha1",
        MeticulousKeyedSha1 => "meticulous keyed sha1",
    }
}

/// FRR bfdd's configuration for `sessions`.
pub fn frr_config(sessions: &[PeerSession]) -> String {
    let mut out = String::from("bfd\n");
    for s in sessions {
        let echo = s.echo && s.peer.is_ipv4();
        out.push_str(&format!(
            " peer {}{} local-address {}{}\n  transmit-interval {}\n  receive-interval {}\n  detect-multiplier {}\n",
            s.peer,
            if s.multihop { " multihop" } else { "" },
            s.local,
            if echo { " interface eth0" } else { "" },
            s.tx_ms,
            s.rx_ms,
            s.multiplier
        ));
        if echo {
            out.push_str(&format!(
                "  echo-mode\n  echo transmit-interval {}\n  echo receive-interval {}\n",
                s.tx_ms, s.rx_ms
            ));
        }
        if let (true, Some(ttl)) = (s.multihop, s.min_ttl) {
            out.push_str(&format!("  minimum-ttl {ttl}\n"));
        }
        out.push_str(" !\n");
    }
    out.push_str("!\n");
    out
}

/// Starts FRR's bfdd standalone (no zebra, no watchfrr) in `ns`, with its
/// sockets and logs under `dir`.
pub fn start_frr_bfdd(
    name: &str,
    ns: &str,
    cpuset: Option<&Path>,
    dir: &Path,
    sessions: &[PeerSession],
) -> Result<Daemon> {
    let program = crate::scenario::programs::Programs::default().bfdd();
    start_frr_bfdd_program(&program, name, ns, cpuset, dir, sessions, &[])
}

/// [`start_frr_bfdd`] running `program` as bfdd (a scenario's `bfdd =
/// PATH`), with more command-line options, e.g. `--dplaneaddr
/// ipv4:127.0.0.1:PORT` for a bfdd that hands its sessions to linecardd.
/// Its vtysh socket directory is `dir/name` (see [`vtysh`]).
pub fn start_frr_bfdd_program(
    program: &Path,
    name: &str,
    ns: &str,
    cpuset: Option<&Path>,
    dir: &Path,
    sessions: &[PeerSession],
    extra_args: &[String],
) -> Result<Daemon> {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("bfdd.conf");
    std::fs::write(&config, frr_config(sessions))?;
    // bfdd drops privileges to frr:frr, which must be able to write here.
    sys::run(
        "chown",
        ["-R", "frr:frr", dir.to_str().context("a UTF-8 path")?],
    )?;
    let mut args = frr_args("bfdd", &config, &dir);
    args.extend([
        "--bfdctl".into(),
        dir.join("bfdd.sock").display().to_string(),
    ]);
    args.extend_from_slice(extra_args);
    Daemon::spawn(
        name,
        ns,
        cpuset,
        program.to_str().context("bfdd's path is not UTF-8")?,
        &args,
        &dir.join("bfdd.out"),
    )
}

/// What every FRR daemon of the lab is started with: its config, pid
/// file and vty socket under `dir`, zebra's socket there too (so daemons
/// sharing `dir` find each other), no TCP vty, the frr user.
pub(crate) fn frr_args(daemon: &str, config: &Path, dir: &Path) -> Vec<String> {
    let s = |p: &Path| p.display().to_string();
    vec![
        "-f".into(),
        s(config),
        "-i".into(),
        s(&dir.join(format!("{daemon}.pid"))),
        "--vty_socket".into(),
        s(dir),
        "-z".into(),
        s(&dir.join("zserv.api")),
        "-P".into(),
        "0".into(),
        "-u".into(),
        "frr".into(),
        "-g".into(),
        "frr".into(),
    ]
}

/// Starts FRR's zebra in `ns` with its sockets under `dir`, where a bfdd
/// started with the same `dir` finds it (`-z dir/zserv.api`). No kernel
/// routes of its own (`-f /dev/null`): bfdd needs it only for interfaces
/// and neighbours (docs/engine.md, FRR as the control plane).
pub fn start_frr_zebra(
    program: &Path,
    name: &str,
    ns: &str,
    cpuset: Option<&Path>,
    dir: &Path,
) -> Result<Daemon> {
    std::fs::create_dir_all(dir)?;
    sys::run(
        "chown",
        ["-R", "frr:frr", dir.to_str().context("a UTF-8 path")?],
    )?;
    let args = frr_args("zebra", Path::new("/dev/null"), dir);
    let daemon = Daemon::spawn(
        name,
        ns,
        cpuset,
        program.to_str().context("zebra's path is not UTF-8")?,
        &args,
        &dir.join("zebra.out"),
    )?;
    // bfdd connects to zebra's socket once it exists (bounded wait).
    let socket = dir.join("zserv.api");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !socket.exists() {
        if std::time::Instant::now() > deadline {
            anyhow::bail!("zebra did not create {} within 10 s", socket.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(daemon)
}

/// Runs vtysh against the bfdd whose socket directory is `vty` in `ns`,
/// one `-c` per command (vtysh sends them one at a time, which is what
/// bfdd 8.4.4 needs past 58 dataplane sessions). Bounded: vtysh hangs when
/// bfdd waits on a dataplane that does not answer.
pub fn vtysh(ns: &str, vty: &Path, commands: &[&str]) -> Result<std::process::Output> {
    let mut command = std::process::Command::new("timeout");
    command
        .args(["10", "ip", "netns", "exec", ns, "vtysh", "--vty_socket"])
        .arg(vty);
    for c in commands {
        command.args(["-c", c]);
    }
    command.output().context("running vtysh")
}

/// BIRD 2's configuration: one BFD protocol with a neighbor per session.
pub fn bird_config(router_id: IpAddr, sessions: &[PeerSession]) -> String {
    let first = sessions.first();
    let mut out = format!("router id {router_id};\nprotocol device {{}}\nprotocol bfd {{\n");
    if let Some(s) = first {
        let auth = s.auth.as_ref().map_or(String::new(), |a| {
            format!(
                "    authentication {};\n    password \"{}\" {{ id {}; }};\n",
                bird_auth_type(a.auth_type()),
                a.secret,
                a.key_id
            )
        });
        let timers = format!(
            "{{\n    min rx interval {} ms;\n    min tx interval {} ms;\n    idle tx interval 1000 ms;\n    multiplier {};\n{auth}  }};\n",
            s.rx_ms, s.tx_ms, s.multiplier
        );
        out.push_str(&format!("  interface \"*\" {timers}"));
        out.push_str(&format!("  multihop {timers}"));
    }
    for s in sessions {
        out.push_str(&format!(
            "  neighbor {} local {}{};\n",
            s.peer,
            s.local,
            if s.multihop { " multihop yes" } else { "" }
        ));
    }
    out.push_str("}\n");
    out
}

/// Starts BIRD in the foreground in `ns`.
pub fn start_bird(
    name: &str,
    ns: &str,
    cpuset: Option<&Path>,
    dir: &Path,
    router_id: IpAddr,
    sessions: &[PeerSession],
) -> Result<Daemon> {
    let program = crate::scenario::programs::Programs::default().bird();
    start_bird_program(
        &program,
        name,
        ns,
        cpuset,
        dir,
        &bird_config(router_id, sessions),
    )
}

/// Starts `program` as BIRD (a scenario's `bird = PATH`) in the
/// foreground in `ns` with `config` as its configuration
/// (`dir/name/bird.conf`), its socket and logs beside it.
pub fn start_bird_program(
    program: &Path,
    name: &str,
    ns: &str,
    cpuset: Option<&Path>,
    dir: &Path,
    config: &str,
) -> Result<Daemon> {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("bird.conf");
    crate::sys::write_private(&file, config.as_bytes())?;
    let s = |p: &Path| p.display().to_string();
    let args = vec![
        "-f".into(),
        "-c".into(),
        s(&file),
        "-s".into(),
        s(&dir.join("bird.ctl")),
        "-P".into(),
        s(&dir.join("bird.pid")),
    ];
    let program = program.to_str().context("bird's path is not UTF-8")?;
    Daemon::spawn(name, ns, cpuset, program, &args, &dir.join("bird.out"))
}
