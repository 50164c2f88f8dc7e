//! The `ssh` provider: a scenario's lab on a remote Linux host (a user's
//! bare-metal box), driven from here over SSH. The host gets this build's
//! `linecard` and `linecardd`, the scenario (as a `local` one) and its
//! profiles in a staging directory of its own, runs the scenario there,
//! and the run directory comes back here whole: captures, analyses,
//! manifest, summary.
//!
//! The remote run is detached from the connection (`setsid`), so a dropped
//! connection never kills it half way through (its lab would be left up):
//! the harness polls it over fresh connections, streaming its progress,
//! and only a host unreachable for longer than `lost_after_s` fails the run
//! here. The run directory then keeps what came back (the remote log up to
//! the loss) and says where the remote run went on. Ctrl-C here interrupts
//! the remote run, which tears its lab down and is fetched as usual.

use super::{provider::HostFacts, RunOptions, RunResult, RunStatus, INTERRUPTED};
use crate::scenario::{value, ProviderKind, Scenario};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod connection;
mod fetch;
mod remote_host;
pub mod staging;

pub(crate) use crate::scenario::value::quote;
pub(crate) use connection::Mode;
pub(crate) use fetch::fetch_tree;
use fetch::{fetch, unfinished};
pub(crate) use remote_host::cpu_list;
pub use remote_host::RemoteHost;
pub(crate) use remote_host::{kill_marked, reaper};
pub use staging::{Staged, Staging, STAGING_RECORD};

/// `[ssh]`: where a `provider = "ssh"` scenario runs. Either one host
/// (`target`) that runs the scenario's whole lab, or three (`[ssh.dut]`,
/// `[ssh.peer]`, `[ssh.observer]`), one per role, each reached over SSH
/// (`hosts.rs`). The connection keys here are every host's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshSpec {
    /// `user@host` or an alias of ~/.ssh/config. The user must be root
    /// there: the lab needs namespaces, cgroups and XDP.
    #[serde(default)]
    pub target: Option<String>,
    /// The SSH port; unset, `ssh` decides (a `Port` in ~/.ssh/config for
    /// the target, else 22).
    #[serde(default)]
    pub port: Option<u16>,
    /// A private key file; otherwise the agent and ~/.ssh/config decide.
    #[serde(default)]
    pub identity: Option<PathBuf>,
    /// Where on the host runs are staged; each run's directory there is
    /// removed once its results are here.
    #[serde(default = "default_remote_dir")]
    pub remote_dir: String,
    /// How long the host may stay unreachable before the run fails here.
    #[serde(default = "default_lost_after_s")]
    pub lost_after_s: u64,
    /// More ssh `-o` options (`StrictHostKeyChecking=accept-new`, ...).
    #[serde(default)]
    pub options: Vec<String>,
    /// The host under test: its daemon, the stress and the canary.
    #[serde(default)]
    pub dut: Option<HostSpec>,
    /// The host of the peer daemon (FRR's bfdd or BIRD).
    #[serde(default)]
    pub peer: Option<HostSpec>,
    /// The host that captures what the DUT and the peer send each other
    /// (a bridge between them, or a mirror port).
    #[serde(default)]
    pub observer: Option<HostSpec>,
}

/// `[ssh.dut]`, `[ssh.peer]`, `[ssh.observer]`: one host of a three-host
/// run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// `user@host` or an ssh alias; root there.
    pub target: String,
    /// Instead of `[ssh].port`.
    #[serde(default)]
    pub port: Option<u16>,
    /// ssh `-o` options after `[ssh].options` (a `ProxyCommand`, ...).
    #[serde(default)]
    pub options: Vec<String>,
    /// The DUT's and the peer's: where the session runs (the xdp backend
    /// attaches here); the observer's: where it captures, seeing both
    /// directions.
    pub interface: String,
    /// The DUT's and the peer's: the session's address on `interface`.
    #[serde(default)]
    pub address: Option<IpAddr>,
    /// CPUs the run's processes on this host are pinned to (`taskset`).
    /// The DUT's are the CPUs under test: its daemon, the stress and the
    /// canary run there, and the harness's own queries elsewhere.
    #[serde(default)]
    pub cpus: Vec<usize>,
}

/// How to reach one host: `ssh` in batch mode with these settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
    pub target: String,
    /// `-p`, only when the scenario names one: otherwise ~/.ssh/config's
    /// `Port` for the target (or 22) stands.
    pub port: Option<u16>,
    pub identity: Option<PathBuf>,
    pub options: Vec<String>,
    /// Commands share one connection to the host (OpenSSH's
    /// `ControlMaster`): a run over three hosts sends hundreds, each a
    /// handshake otherwise (two through a jump host).
    pub multiplex: bool,
}

fn default_remote_dir() -> String {
    "/var/tmp/linecard".into()
}

fn default_lost_after_s() -> u64 {
    60
}

fn check_options(options: &[String]) -> Result<(), (String, &'static str)> {
    match options
        .iter()
        .find_map(|o| value::ssh_option(o).err().map(|why| (o, why)))
    {
        Some((o, why)) => Err((o.clone(), why)),
        None => Ok(()),
    }
}

impl SshSpec {
    /// Problems with the table, as (key, value, why).
    pub fn check(&self) -> Result<(), (String, String, &'static str)> {
        let err = |key: &str, value: String, why| Err((key.to_string(), value, why));
        let hosts = [
            ("dut", &self.dut),
            ("peer", &self.peer),
            ("observer", &self.observer),
        ];
        let given = hosts.iter().filter(|(_, h)| h.is_some()).count();
        match (&self.target, given) {
            (Some(_), 0) => {}
            (None, 3) => {}
            (Some(_), _) => {
                return err(
                    "target",
                    self.target.clone().unwrap_or_default(),
                    "either one host (target) or three ([ssh.dut], [ssh.peer], [ssh.observer]), not both",
                )
            }
            (None, _) => {
                let missing = hosts.iter().find(|(_, h)| h.is_none()).map_or("", |(n, _)| n);
                return err(
                    missing,
                    "(missing)".into(),
                    "needs target = \"root@host\" (one host), or [ssh.dut], [ssh.peer] and [ssh.observer] (three)",
                );
            }
        }
        if let Some(target) = &self.target {
            if let Err(why) = value::ssh_target(target) {
                return err("target", target.clone(), why);
            }
        }
        if let Err(why) = value::absolute_path(&self.remote_dir) {
            return err("remote_dir", self.remote_dir.clone(), why);
        }
        if !(1..=3600).contains(&self.lost_after_s) {
            return err(
                "lost_after_s",
                self.lost_after_s.to_string(),
                "must be 1 to 3600 seconds",
            );
        }
        if self.port == Some(0) {
            return err("port", "0".into(), "must be 1 to 65535");
        }
        if let Err((o, why)) = check_options(&self.options) {
            return err("options", o, why);
        }
        for (role, host) in hosts {
            if let Some(host) = host {
                host.check(role)
                    .map_err(|(key, value, why)| (format!("{role}.{key}"), value, why))?;
            }
        }
        Ok(())
    }

    /// The one host of a single-host run.
    pub fn connection(&self) -> Option<Connection> {
        Some(Connection {
            target: self.target.clone()?,
            port: self.port,
            identity: self.identity.clone(),
            options: self.options.clone(),
            // A single host is polled once a second: each poll its own
            // connection, so that a lost host is seen as lost.
            multiplex: false,
        })
    }

    /// One host of a three-host run, with this table's defaults.
    pub fn connection_to(&self, host: &HostSpec) -> Connection {
        let mut options = self.options.clone();
        options.extend(host.options.iter().cloned());
        Connection {
            target: host.target.clone(),
            port: host.port.or(self.port),
            identity: self.identity.clone(),
            options,
            multiplex: true,
        }
    }
}

impl HostSpec {
    fn check(&self, role: &str) -> Result<(), (&'static str, String, &'static str)> {
        if let Err(why) = value::ssh_target(&self.target) {
            return Err(("target", self.target.clone(), why));
        }
        if self.port == Some(0) {
            return Err(("port", "0".into(), "must be 1 to 65535"));
        }
        if let Err((o, why)) = check_options(&self.options) {
            return Err(("options", o, why));
        }
        if let Err(why) = value::interface_name(&self.interface) {
            return Err(("interface", self.interface.clone(), why));
        }
        match (role, &self.address) {
            ("dut" | "peer", None) => {
                return Err((
                    "address",
                    "(missing)".into(),
                    "the session's address on the interface",
                ))
            }
            ("observer", Some(a)) => {
                return Err((
                    "address",
                    a.to_string(),
                    "the observer only captures: it has no session address",
                ))
            }
            _ => {}
        }
        if role == "dut" && self.cpus.is_empty() {
            return Err((
                "cpus",
                "(missing)".into(),
                "the DUT's CPUs under test: its daemon, the stress and the canary run there",
            ));
        }
        let mut sorted = self.cpus.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.cpus.len() || self.cpus.iter().any(|&c| c > value::MAX_CPU) {
            return Err(("cpus", format!("{:?}", self.cpus), "distinct CPU numbers"));
        }
        Ok(())
    }
}

/// The scenario as the host runs it: the same file with the local
/// provider.
fn remote_scenario(scenario: &Scenario) -> Result<String> {
    let text = std::fs::read_to_string(&scenario.file)
        .with_context(|| format!("reading {}", scenario.file.display()))?;
    let mut table: toml::Table = text.parse()?;
    table.remove("ssh");
    table.insert("provider".into(), toml::Value::String("local".into()));
    Ok(toml::to_string(&table)?)
}

/// What the host says about itself before the run (for a run that never
/// brings its manifest back).
pub(super) fn host_facts(conn: &Connection) -> Result<HostFacts> {
    let out = conn.exec(
        "id -u; uname -r; nproc; cat /proc/sys/kernel/sched_rt_runtime_us",
        None,
    )?;
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let [uid, kernel, cpus, rt] = lines[..] else {
        bail!(
            "{}: unexpected answer about the host: {text:?}",
            conn.target
        );
    };
    if uid != "0" {
        bail!(
            "{}: the user is not root there (uid {uid}); the lab needs namespaces, cgroups and XDP",
            conn.target
        );
    }
    let cpus: usize = cpus.parse().unwrap_or(0);
    Ok(HostFacts {
        provider: ProviderKind::Ssh,
        kernel: kernel.into(),
        online_cpus: (0..cpus).collect(),
        dut_cpus: Vec::new(),
        sched_rt_runtime_us: rt.parse().unwrap_or(0),
        placement_share_on_dut_cpus: 0.0,
        git_revision: String::new(),
        linecard_version: env!("CARGO_PKG_VERSION").into(),
        tools: Vec::new(),
        via: Some(conn.target.clone()),
    })
}

/// Runs `scenario` on its `[ssh]` host; the run directory is here, under
/// `options.results`, as for a local run.
pub fn run(scenario: &Scenario, spec: &SshSpec, options: &RunOptions) -> Result<RunResult> {
    let conn = spec
        .connection()
        .context("a single-host [ssh] table has a target")?;
    let facts = host_facts(&conn).context("asking the host about itself")?;
    // The run directory comes back here whole.
    super::space::check(scenario, options)?;
    let (run_id, dir) =
        super::new_run_dir(&options.results, &scenario.name, crate::sys::unix_ns())?;
    let need = super::space::estimate_bytes(scenario, &options.only);
    let (staged, df) = match conn.private_dir(&spec.remote_dir, super::space::DF) {
        Ok(made) => made,
        Err(e) => {
            // Nothing ran: leave nothing behind.
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
    };
    if let Err(e) = super::space::check_df(
        &conn.target,
        &staged,
        &df,
        need,
        "the run's captures and analyses",
    ) {
        let _ = conn.exec(&format!("rm -rf {}", quote(&staged)), None);
        let _ = std::fs::remove_dir(&dir);
        return Err(e);
    }
    // Where the run is on the host, for whoever must find it later.
    Staging {
        marker: None,
        hosts: vec![Staged::new("host", &conn, &staged)],
    }
    .write(&dir)?;
    eprintln!(
        "staging the run on {} ({} CPUs, kernel {}) in {staged}",
        conn.target,
        facts.online_cpus.len(),
        facts.kernel
    );
    stage(scenario, &conn, options, &staged)?;
    let mut only = String::new();
    for label in &options.only {
        only.push_str(&format!(" --only {}", quote(label)));
    }
    // The run, its PID (for an interrupt) and its exit code, in files the
    // polls read; detached from this connection. Its results go to `r/`:
    // short, as the lab's unix sockets live under it.
    let script = format!(
        "./linecard run scenario.toml --profiles profiles --results r{only} > run.log 2>&1 &\n\
         echo $! > run.pid\n\
         wait $!\n\
         echo $? > run.exit\n"
    );
    conn.upload(
        script.as_bytes(),
        &format!("{staged}/run.sh"),
        Mode::Private,
    )?;
    conn.exec(
        // In a subshell of its own: `cd && cmd &` would background the
        // whole list, holding this session's output open to the end.
        &format!(
            "cd {} && (setsid sh run.sh < /dev/null > /dev/null 2>&1 &)",
            quote(&staged)
        ),
        None,
    )
    .context("starting the run on the host")?;
    let log = dir.join("remote-run.log");
    match follow(spec, &conn, &staged, &log)? {
        Followed::Finished(code) => {
            eprintln!("the remote run ended (exit {code}); fetching its results");
            let result = match fetch(&conn, &staged, scenario, &dir, facts.clone()) {
                Ok(result) => result,
                // It never got as far as a run directory (bad input there,
                // a missing tool), or it did not come back whole: its own
                // words say why, and the host keeps its copy.
                Err(e) => {
                    let said = std::fs::read_to_string(&log).unwrap_or_default();
                    let last = said.lines().rev().find(|l| !l.trim().is_empty());
                    let status = RunStatus::Failed(format!(
                        "the run on {} ended with exit {code} and no run directory came back whole ({e:#}); \
                         it said: {}; everything it left is kept on the host in {}:{staged}",
                        conn.target,
                        last.unwrap_or("nothing").trim(),
                        conn.target
                    ));
                    return unfinished(scenario, &dir, &run_id, facts, status);
                }
            };
            // Every file came back whole (fetch verified it): the host
            // keeps nothing of the run.
            match conn.exec(&format!("rm -rf {}", quote(&staged)), None) {
                Ok(_) => Staging::default().write(&dir)?,
                Err(e) => eprintln!(
                    "warning: could not remove {staged} on {} (linecard teardown {} tries again): {e:#}",
                    conn.target,
                    dir.display()
                ),
            }
            Ok(result)
        }
        Followed::Lost { since_s } => {
            let status = RunStatus::Failed(format!(
                "the SSH connection to {} was lost {since_s} s into the run and did not come back within {} s; partial results: the remote log up to the loss (remote-run.log). The remote run may have gone on in {}:{staged}",
                conn.target, spec.lost_after_s, conn.target
            ));
            Ok(unfinished(scenario, &dir, &run_id, facts, status)?)
        }
    }
}

/// Copies the binaries, the scenario and its profiles to `staged`.
fn stage(scenario: &Scenario, conn: &Connection, options: &RunOptions, staged: &str) -> Result<()> {
    conn.exec(&format!("mkdir {}/profiles", quote(staged)), None)?;
    let linecard = std::env::current_exe()?;
    let linecardd = super::daemons::linecardd_binary();
    for (binary, name) in [(&linecard, "linecard"), (&linecardd, "linecardd")] {
        let bytes =
            std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
        conn.upload(&bytes, &format!("{staged}/{name}"), Mode::Program)?;
    }
    conn.upload(
        remote_scenario(scenario)?.as_bytes(),
        &format!("{staged}/scenario.toml"),
        Mode::Private,
    )?;
    for entry in std::fs::read_dir(&options.profiles)
        .with_context(|| format!("reading {}", options.profiles.display()))?
    {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".toml")
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            conn.upload(
                &std::fs::read(&path)?,
                &format!("{staged}/profiles/{name}"),
                Mode::Private,
            )?;
        }
    }
    Ok(())
}

enum Followed {
    /// The remote run ended with this exit code.
    Finished(i32),
    /// The host was unreachable for longer than `lost_after_s`, this many
    /// seconds into the run.
    Lost { since_s: u64 },
}

/// Polls the remote run until it ends, appending its log to `log` and
/// echoing it as progress; rides out connection losses shorter than
/// `lost_after_s`.
fn follow(spec: &SshSpec, conn: &Connection, staged: &str, log: &Path) -> Result<Followed> {
    let started = Instant::now();
    let mut local = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut offset = 0usize;
    let mut lost_at: Option<Instant> = None;
    let mut interrupted = false;
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) && !interrupted {
            interrupted = true;
            eprintln!("interrupting the remote run (it tears its lab down)");
            let _ = conn.exec(
                &format!("kill -INT $(cat {}/run.pid) 2>/dev/null", quote(staged)),
                None,
            );
        }
        // Its exit code; else whether it still runs (not yet its PID:
        // starting; a run that died without an exit code, its host
        // rebooted or it was killed, is no longer waited for); then its
        // log since the last poll.
        let script = format!(
            "if [ -e {s}/run.exit ]; then cat {s}/run.exit; \
             elif [ ! -s {s}/run.pid ] || kill -0 $(cat {s}/run.pid) 2>/dev/null; then echo running; \
             elif [ -e {s}/run.exit ]; then cat {s}/run.exit; else echo gone; fi; \
             tail -c +{} {s}/run.log 2>/dev/null",
            offset + 1,
            s = quote(staged)
        );
        match conn.exec(&script, None) {
            Ok(out) => {
                if let Some(at) = lost_at.take() {
                    eprintln!(
                        "the connection to {} is back after {:.0} s",
                        conn.target,
                        at.elapsed().as_secs_f64()
                    );
                }
                let split = out.iter().position(|&b| b == b'\n').unwrap_or(out.len());
                let (state, rest) = out.split_at(split);
                let rest = rest.get(1..).unwrap_or(&[]);
                local.write_all(rest)?;
                std::io::stderr().write_all(rest)?;
                offset += rest.len();
                let state = String::from_utf8_lossy(state);
                if let Ok(code) = state.trim().parse::<i32>() {
                    return Ok(Followed::Finished(code));
                }
                if state.trim() == "gone" {
                    eprintln!(
                        "the remote run ended without an exit code (killed, or its host restarted)"
                    );
                    return Ok(Followed::Finished(-1));
                }
            }
            Err(e) => {
                let at = *lost_at.get_or_insert_with(|| {
                    eprintln!(
                        "lost the connection to {} ({e:#}); retrying for {} s",
                        conn.target, spec.lost_after_s
                    );
                    Instant::now()
                });
                if at.elapsed() > Duration::from_secs(spec.lost_after_s) {
                    return Ok(Followed::Lost {
                        since_s: (at - started).as_secs(),
                    });
                }
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SshSpec {
        SshSpec {
            target: Some("root@bench-1".into()),
            port: Some(22),
            identity: None,
            remote_dir: default_remote_dir(),
            lost_after_s: 60,
            options: Vec::new(),
            dut: None,
            peer: None,
            observer: None,
        }
    }

    #[test]
    fn the_table_refuses_what_a_shell_would_interpret() {
        assert_eq!(spec().check(), Ok(()));
        let bad = |f: fn(&mut SshSpec)| {
            let mut s = spec();
            f(&mut s);
            s.check().unwrap_err().0
        };
        assert_eq!(
            bad(|s| s.target = Some("root@host; rm -rf /".into())),
            "target"
        );
        assert_eq!(bad(|s| s.remote_dir = "relative/dir".into()), "remote_dir");
        assert_eq!(bad(|s| s.remote_dir = "/tmp/../etc".into()), "remote_dir");
        assert_eq!(bad(|s| s.remote_dir = "/tmp/$(id)".into()), "remote_dir");
        assert_eq!(bad(|s| s.lost_after_s = 0), "lost_after_s");
        assert_eq!(bad(|s| s.options = vec!["-v".into()]), "options");
    }

    fn host(address: Option<&str>, cpus: Vec<usize>) -> HostSpec {
        HostSpec {
            target: "root@h".into(),
            port: None,
            options: vec!["ProxyCommand=ip netns exec lc-dut nc 127.0.0.1 22".into()],
            interface: "eth0".into(),
            address: address.map(|a| a.parse().unwrap()),
            cpus,
        }
    }

    fn three() -> SshSpec {
        SshSpec {
            target: None,
            dut: Some(host(Some("192.0.2.1"), vec![1])),
            peer: Some(host(Some("192.0.2.2"), vec![])),
            observer: Some(host(None, vec![])),
            ..spec()
        }
    }

    #[test]
    fn three_hosts_need_all_roles_their_addresses_and_the_dut_s_cpus() {
        assert_eq!(three().check(), Ok(()));
        let bad = |f: fn(&mut SshSpec)| {
            let mut s = three();
            f(&mut s);
            let (key, _, why) = s.check().unwrap_err();
            format!("{key}: {why}")
        };
        assert!(bad(|s| s.target = Some("root@h".into())).starts_with("target: either one host"));
        assert!(bad(|s| s.observer = None).starts_with("observer: needs target"));
        assert!(bad(|s| s.dut.as_mut().unwrap().cpus.clear()).starts_with("dut.cpus:"));
        assert!(bad(|s| s.dut.as_mut().unwrap().cpus = vec![1, 1]).starts_with("dut.cpus:"));
        assert!(bad(|s| s.peer.as_mut().unwrap().address = None).starts_with("peer.address:"));
        assert!(
            bad(|s| s.observer.as_mut().unwrap().address = Some("192.0.2.3".parse().unwrap()))
                .starts_with("observer.address:")
        );
        assert!(
            bad(|s| s.dut.as_mut().unwrap().interface = "eth0; reboot".into())
                .starts_with("dut.interface:")
        );
        assert!(
            bad(|s| s.peer.as_mut().unwrap().target = "root@$(id)".into())
                .starts_with("peer.target:")
        );
        assert!(
            bad(|s| s.peer.as_mut().unwrap().options = vec!["-v".into()])
                .starts_with("peer.options:")
        );
        // A host's options follow the table's; its port wins over the table's.
        let s = three();
        let mut peer = s.peer.clone().unwrap();
        peer.port = Some(2222);
        let c = s.connection_to(&peer);
        assert_eq!(c.port, Some(2222));
        assert_eq!(c.options.len(), s.options.len() + 1);
        assert_eq!(s.connection_to(&s.dut.clone().unwrap()).port, Some(22));
        // No port anywhere: none passed, ~/.ssh/config's stands.
        let unset = SshSpec {
            port: None,
            ..three()
        };
        let c = unset.connection_to(&unset.dut.clone().unwrap());
        assert_eq!(c.port, None);
        let args: Vec<String> = c
            .command()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(!args.iter().any(|a| a == "-p"), "{args:?}");
    }

    #[test]
    fn a_remote_process_is_launched_pinned_marked_and_quoted() {
        let host = RemoteHost {
            role: "dut",
            conn: three().connection_to(&three().dut.unwrap()),
            spec: three().dut.unwrap(),
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
