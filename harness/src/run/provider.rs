//! Where a scenario's hosts come from. Every provider brings the topology
//! up, proves where the DUT's receive path runs, describes the host for the
//! manifest, and tears down what it created.
//!
//! One road for every provider: `road::Road::for_scenario` picks it, the runner
//! calls `prepare`, runs each DUT on the `Site` it returned, and calls
//! `teardown`. `Local` is the network-namespace lab on this machine;
//! `hosts::ThreeHosts` the DUT, the peer and the observer on three SSH
//! hosts; `proxmox::Proxmox` three VMs it clones on a Proxmox VE host,
//! then run as three hosts. An `[ssh] target` is not a provider: the
//! whole command runs on that host (`Road::Elsewhere`, `ssh.rs`).

use super::site::lab::LabSite;
use super::site::Site;
use super::RunOptions;
use crate::lab::{self, check};
use crate::manifest::HostFacts;
use crate::scenario::{ProviderKind, Scenario};
use anyhow::{bail, Context, Result};
use std::process::Command;

/// Where a run's hosts come from. The runner calls `prepare`, runs every
/// DUT on the site it returns, then calls `teardown` whatever happened
/// (after a failed `prepare` too: it removes only what was made).
pub(crate) trait Provider {
    /// Brings the hosts up and proves them.
    fn prepare(&mut self) -> Result<Ready<'_>>;
    /// Removes what `prepare` made.
    fn teardown(&mut self) -> Result<()>;
}

/// Hosts brought up: the facts the manifest records, the site each DUT
/// runs on, and the run's id when the provider made its directory first
/// (it records there what it makes before it makes it).
pub(crate) struct Ready<'a> {
    pub facts: HostFacts,
    pub site: &'a dyn Site,
    pub run_id: Option<String>,
}

/// The local lab of network namespaces.
pub struct Local<'a> {
    scenario: &'a Scenario,
    options: &'a RunOptions,
    /// The lab was up before the run: leave it as found.
    was_up: bool,
    /// The lab, held from `prepare` to the end of the run.
    lock: Option<crate::lock::LabLock>,
    site: Option<LabSite>,
}

impl<'a> Local<'a> {
    pub(super) fn new(scenario: &'a Scenario, options: &'a RunOptions) -> Self {
        Self {
            scenario,
            options,
            was_up: lab::status::read().map(|s| s.up).unwrap_or(false),
            lock: None,
            site: None,
        }
    }
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

impl Provider for Local<'_> {
    fn prepare(&mut self) -> Result<Ready<'_>> {
        super::space::check(self.scenario, self.options)?;
        super::check_socket_paths(self.scenario, self.options)?;
        // The input is checked: now the lab, held to the end of the run.
        self.lock = Some(crate::lock::take(self.options.lab_wait)?);
        let facts = self.bring_up().context("preparing the lab")?;
        let site = self.site.insert(LabSite {
            host: facts.clone(),
        });
        Ok(Ready {
            facts,
            site,
            run_id: None,
        })
    }

    fn teardown(&mut self) -> Result<()> {
        // Nothing to take down unless this run held the lab.
        if self.lock.is_some() && !self.was_up {
            lab::down()?;
        }
        Ok(())
    }
}

impl Local<'_> {
    /// Brings the lab up, checks where XDP runs and describes the host;
    /// a failed check takes the lab down again.
    fn bring_up(&self) -> Result<HostFacts> {
        let status = lab::up(&lab::LabOptions::detect()?)?;
        let report = check::run(&check::CheckOptions {
            steering: true,
            packets: 200,
        })?;
        if !report.passed {
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
}
