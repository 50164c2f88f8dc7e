//! Where a scenario's hosts come from. Every provider brings the topology
//! up, proves where the DUT's receive path runs, describes the host for the
//! manifest, and tears down what it created.
//!
//! `local` (the network-namespace lab on this machine) is the one the
//! runner drives itself; `ssh` runs a scenario's local lab on a remote host
//! (`ssh.rs`), or the DUT, the peer and the observer on three hosts
//! (`hosts.rs`, whose `Hosts` is a provider too); `proxmox` clones three
//! VMs on a Proxmox VE host and hands them to the three-host path
//! (`proxmox.rs`).

use crate::lab::{self, check};
use crate::manifest::HostFacts;
use crate::scenario::{ProviderKind, Scenario};
use anyhow::{bail, Result};
use std::process::Command;

pub trait Provider {
    fn kind(&self) -> ProviderKind;
    /// Brings the topology up and checks it; errors leave nothing behind.
    fn prepare(&self) -> Result<HostFacts>;
    /// Removes what `prepare` created.
    fn teardown(&self) -> Result<()>;
}

pub fn for_scenario(scenario: &Scenario) -> Box<dyn Provider> {
    match scenario.provider {
        ProviderKind::Local => Box::new(Local {
            was_up: lab::status::read().map(|s| s.up).unwrap_or(false),
        }),
        ProviderKind::Ssh | ProviderKind::Proxmox => {
            unreachable!("run::run hands ssh and proxmox scenarios to their own runners first")
        }
    }
}

/// The local lab of network namespaces.
pub struct Local {
    /// The lab was up before the run: leave it as found.
    was_up: bool,
}

fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "not found".into())
}

impl Provider for Local {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    fn prepare(&self) -> Result<HostFacts> {
        let status = lab::up(&lab::LabOptions::detect()?)?;
        let report = check::run(&check::CheckOptions {
            steering: true,
            packets: 200,
        })?;
        if !report.passed {
            let _ = self.teardown();
            bail!("the lab's placement check failed: {}", report.verdict);
        }
        let linecardd = crate::linecardd::binary();
        Ok(HostFacts {
            provider: ProviderKind::Local,
            kernel: first_line("uname", &["-r"]),
            online_cpus: lab::online_cpus()?,
            dut_cpus: status.dut_cpus(),
            sched_rt_runtime_us: crate::rt_throttle::read()?,
            placement_share_on_dut_cpus: report.share_on_dut_cpus,
            git_revision: first_line("git", &["rev-parse", "HEAD"]),
            linecard_version: env!("CARGO_PKG_VERSION").into(),
            tools: vec![
                (
                    "linecardd".into(),
                    first_line(linecardd.to_str().unwrap_or("linecardd"), &["--version"]),
                ),
                (
                    "bfdd".into(),
                    first_line("/usr/lib/frr/bfdd", &["--version"]),
                ),
                ("bird".into(), first_line("bird", &["--version"])),
                ("stress-ng".into(), first_line("stress-ng", &["--version"])),
                ("tcpdump".into(), first_line("tcpdump", &["--version"])),
            ],
            via: None,
        })
    }

    fn teardown(&self) -> Result<()> {
        if !self.was_up {
            lab::down()?;
        }
        Ok(())
    }
}
