//! `[ssh]`: the hosts a `provider = "ssh"` scenario runs on, checked
//! key by key when the scenario is read (`run::ssh` and `run::hosts`
//! drive them).

use super::value;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::PathBuf;

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
