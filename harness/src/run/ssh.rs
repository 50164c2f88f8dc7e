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

use super::{RunOptions, RunResult, INTERRUPTED};
use crate::manifest::status::RunStatus;
use crate::manifest::HostFacts;
use crate::remote::{Connection, Mode};
use crate::scenario::value::quote;
use crate::scenario::{ProviderKind, Scenario, SshSpec};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod fetch;
pub mod staging;

pub(crate) use fetch::fetch_tree;
use fetch::{fetch, unfinished};
pub use staging::{Staged, Staging, STAGING_RECORD};

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
    let linecardd = crate::linecardd::binary();
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
    use crate::scenario::HostSpec;

    fn spec() -> SshSpec {
        SshSpec {
            target: Some("root@bench-1".into()),
            port: Some(22),
            identity: None,
            remote_dir: "/var/tmp/linecard".into(),
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
}
