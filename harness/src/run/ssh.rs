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

use super::{provider::HostFacts, Manifest, RunOptions, RunResult, INTERRUPTED};
use crate::scenario::{ProviderKind, Scenario};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `[ssh]`: the host a `provider = "ssh"` scenario runs on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshSpec {
    /// `user@host` or an alias of ~/.ssh/config. The user must be root
    /// there: the lab needs namespaces, cgroups and XDP.
    pub target: String,
    #[serde(default = "default_port")]
    pub port: u16,
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
}

fn default_port() -> u16 {
    22
}

fn default_remote_dir() -> String {
    "/var/tmp/linecard".into()
}

fn default_lost_after_s() -> u64 {
    60
}

impl SshSpec {
    /// Problems with the table, as (key, value, why).
    pub fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "@._-:[]".contains(c))
        };
        if !plain(&self.target) {
            return Err((
                "target",
                self.target.clone(),
                "must be user@host or an ssh alias (letters, digits and @._-:[] only)",
            ));
        }
        let safe_path = self.remote_dir.starts_with('/')
            && self.remote_dir.len() > 1
            && self
                .remote_dir
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
            && !self.remote_dir.contains("..");
        if !safe_path {
            return Err((
                "remote_dir",
                self.remote_dir.clone(),
                "must be an absolute path of letters, digits and /._- (no ..)",
            ));
        }
        if !(1..=3600).contains(&self.lost_after_s) {
            return Err((
                "lost_after_s",
                self.lost_after_s.to_string(),
                "must be 1 to 3600 seconds",
            ));
        }
        if self.port == 0 {
            return Err(("port", "0".into(), "must be 1 to 65535"));
        }
        if let Some(o) = self.options.iter().find(|o| !o.contains('=')) {
            return Err(("options", o.clone(), "each is an ssh -o option, Key=value"));
        }
        Ok(())
    }

    /// `ssh` to the host, in batch mode (never a password prompt) and
    /// failing fast on a dead connection.
    fn command(&self) -> Command {
        let mut c = Command::new("ssh");
        for o in [
            "BatchMode=yes",
            "ConnectTimeout=5",
            "ServerAliveInterval=2",
            "ServerAliveCountMax=3",
        ] {
            c.arg("-o").arg(o);
        }
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        if let Some(key) = &self.identity {
            c.arg("-i").arg(key);
        }
        c.arg("-p").arg(self.port.to_string()).arg(&self.target);
        c
    }

    /// Runs `script` with the host's shell, `input` on its stdin; its
    /// stdout, or why not (ssh's or the script's stderr).
    fn exec(&self, script: &str, input: Option<&[u8]>) -> Result<Vec<u8>> {
        let mut child = self
            .command()
            .arg(script)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running ssh (is openssh-client installed?)")?;
        if let Some(bytes) = input {
            let mut stdin = child.stdin.take().expect("piped");
            // A closed connection shows in ssh's exit status below.
            let _ = stdin.write_all(bytes);
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "ssh {} ({}): {}",
                self.target,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out.stdout)
    }

    /// Writes `bytes` to `path` on the host (mode 0755 when `executable`).
    fn upload(&self, bytes: &[u8], path: &str, executable: bool) -> Result<()> {
        let mode = if executable { 755 } else { 644 };
        self.exec(
            &format!("cat > {path}.part && chmod {mode} {path}.part && mv {path}.part {path}"),
            Some(bytes),
        )
        .with_context(|| format!("copying to {}:{path}", self.target))?;
        Ok(())
    }
}

/// Quotes `s` for a POSIX shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
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
fn host_facts(spec: &SshSpec) -> Result<HostFacts> {
    let out = spec.exec(
        "id -u; uname -r; nproc; cat /proc/sys/kernel/sched_rt_runtime_us",
        None,
    )?;
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let [uid, kernel, cpus, rt] = lines[..] else {
        bail!(
            "{}: unexpected answer about the host: {text:?}",
            spec.target
        );
    };
    if uid != "0" {
        bail!(
            "{}: the user is not root there (uid {uid}); the lab needs namespaces, cgroups and XDP",
            spec.target
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
        via: Some(spec.target.clone()),
    })
}

/// Runs `scenario` on its `[ssh]` host; the run directory is here, under
/// `options.results`, as for a local run.
pub fn run(scenario: &Scenario, spec: &SshSpec, options: &RunOptions) -> Result<RunResult> {
    let facts = host_facts(spec).context("asking the host about itself")?;
    let run_id = super::run_id(crate::sys::unix_ns() / 1_000_000_000);
    let dir = options.results.join(&scenario.name).join(&run_id);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let staged = format!("{}/{run_id}", spec.remote_dir);
    eprintln!(
        "staging the run on {} ({} CPUs, kernel {}) in {staged}",
        spec.target,
        facts.online_cpus.len(),
        facts.kernel
    );
    stage(scenario, spec, options, &staged)?;
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
    spec.upload(script.as_bytes(), &format!("{staged}/run.sh"), false)?;
    spec.exec(
        // In a subshell of its own: `cd && cmd &` would background the
        // whole list, holding this session's output open to the end.
        &format!("cd {staged} && (setsid sh run.sh < /dev/null > /dev/null 2>&1 &)"),
        None,
    )
    .context("starting the run on the host")?;
    let log = dir.join("remote-run.log");
    match follow(spec, &staged, &log)? {
        Followed::Finished(code) => {
            eprintln!("the remote run ended (exit {code}); fetching its results");
            let result = match fetch(spec, &staged, scenario, &dir, facts.clone()) {
                Ok(result) => result,
                // It never got as far as a run directory (bad input there,
                // a missing tool): its own words say why.
                Err(e) => {
                    let said = std::fs::read_to_string(&log).unwrap_or_default();
                    let last = said.lines().rev().find(|l| !l.trim().is_empty());
                    let status = format!(
                        "failed: the run on {} ended with exit {code} and no run directory came back ({e:#}); it said: {}",
                        spec.target,
                        last.unwrap_or("nothing").trim()
                    );
                    unfinished(scenario, &dir, &run_id, facts, status)?
                }
            };
            // The host keeps nothing of the run.
            if let Err(e) = spec.exec(&format!("rm -rf {staged}"), None) {
                eprintln!(
                    "warning: could not remove {staged} on {}: {e:#}",
                    spec.target
                );
            }
            Ok(result)
        }
        Followed::Lost { since_s } => {
            let status = format!(
                "failed: the SSH connection to {} was lost {since_s} s into the run and did not come back within {} s; partial results: the remote log up to the loss (remote-run.log). The remote run may have gone on in {}:{staged}",
                spec.target, spec.lost_after_s, spec.target
            );
            Ok(unfinished(scenario, &dir, &run_id, facts, status)?)
        }
    }
}

/// Copies the binaries, the scenario and its profiles to `staged`.
fn stage(scenario: &Scenario, spec: &SshSpec, options: &RunOptions, staged: &str) -> Result<()> {
    spec.exec(&format!("mkdir -p {staged}/profiles"), None)?;
    let linecard = std::env::current_exe()?;
    let linecardd = super::daemons::linecardd_binary();
    for (binary, name) in [(&linecard, "linecard"), (&linecardd, "linecardd")] {
        let bytes =
            std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
        spec.upload(&bytes, &format!("{staged}/{name}"), true)?;
    }
    spec.upload(
        remote_scenario(scenario)?.as_bytes(),
        &format!("{staged}/scenario.toml"),
        false,
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
            spec.upload(
                &std::fs::read(&path)?,
                &format!("{staged}/profiles/{name}"),
                false,
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
fn follow(spec: &SshSpec, staged: &str, log: &Path) -> Result<Followed> {
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
            let _ = spec.exec(
                &format!("kill -INT $(cat {staged}/run.pid) 2>/dev/null"),
                None,
            );
        }
        let script = format!(
            "cat {staged}/run.exit 2>/dev/null || echo running; tail -c +{} {staged}/run.log 2>/dev/null",
            offset + 1
        );
        match spec.exec(&script, None) {
            Ok(out) => {
                if let Some(at) = lost_at.take() {
                    eprintln!(
                        "the connection to {} is back after {:.0} s",
                        spec.target,
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
            }
            Err(e) => {
                let at = *lost_at.get_or_insert_with(|| {
                    eprintln!(
                        "lost the connection to {} ({e:#}); retrying for {} s",
                        spec.target, spec.lost_after_s
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

/// Brings the remote run directory here and returns it as a run of this
/// harness (its manifest saying where it ran).
fn fetch(
    spec: &SshSpec,
    staged: &str,
    scenario: &Scenario,
    dir: &Path,
    facts: HostFacts,
) -> Result<RunResult> {
    let tar = spec
        .exec(
            &format!("cd {staged}/r/{} && tar -cf - .", scenario.name),
            None,
        )
        .context("fetching the run directory")?;
    // One run directory under results/<scenario>/ on the host.
    let unpack = dir.join(".fetched");
    std::fs::create_dir_all(&unpack)?;
    let mut child = Command::new("tar")
        .args(["-x", "-C"])
        .arg(&unpack)
        .stdin(Stdio::piped())
        .spawn()?;
    child.stdin.take().expect("piped").write_all(&tar)?;
    if !child.wait()?.success() {
        bail!("unpacking the fetched run directory failed");
    }
    let remote_run = std::fs::read_dir(&unpack)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
        .context("the host's results hold no run directory")?;
    for entry in std::fs::read_dir(&remote_run)? {
        let entry = entry?;
        std::fs::rename(entry.path(), dir.join(entry.file_name()))?;
    }
    std::fs::remove_dir_all(&unpack)?;
    let manifest_path = dir.join("manifest.json");
    let mut manifest: Manifest = serde_json::from_str(
        &std::fs::read_to_string(&manifest_path).context("the remote run left no manifest.json")?,
    )?;
    // Where it ran: the host's own facts, reached over SSH.
    manifest.host.provider = ProviderKind::Ssh;
    manifest.host.via = facts.via;
    manifest.scenario = scenario.clone();
    super::finish(dir.to_path_buf(), manifest)
}

/// A run whose results never came back: the manifest says why and what
/// is here.
fn unfinished(
    scenario: &Scenario,
    dir: &Path,
    run_id: &str,
    facts: HostFacts,
    status: String,
) -> Result<RunResult> {
    let manifest = Manifest {
        schema_version: 1,
        scenario: scenario.clone(),
        run_id: run_id.into(),
        status,
        host: facts,
        duts: Vec::new(),
    };
    super::finish(dir.to_path_buf(), manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SshSpec {
        SshSpec {
            target: "root@bench-1".into(),
            port: 22,
            identity: None,
            remote_dir: default_remote_dir(),
            lost_after_s: 60,
            options: Vec::new(),
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
        assert_eq!(bad(|s| s.target = "root@host; rm -rf /".into()), "target");
        assert_eq!(bad(|s| s.remote_dir = "relative/dir".into()), "remote_dir");
        assert_eq!(bad(|s| s.remote_dir = "/tmp/../etc".into()), "remote_dir");
        assert_eq!(bad(|s| s.remote_dir = "/tmp/$(id)".into()), "remote_dir");
        assert_eq!(bad(|s| s.lost_after_s = 0), "lost_after_s");
        assert_eq!(bad(|s| s.options = vec!["-v".into()]), "options");
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }
}
