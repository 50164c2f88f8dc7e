//! `[proxmox]`: the Proxmox VE host a `provider = "proxmox"` scenario
//! clones its three VMs on, checked key by key when the scenario is read
//! (`run::proxmox` plans and runs it).

use super::value;
use crate::lab::spec;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[proxmox]` in a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxmoxSpec {
    /// `root@pve.example.net` or an alias of ~/.ssh/config: where `qm`
    /// runs. Root there (qm, ip, tcpdump).
    pub host: String,
    /// The host's SSH port; unset, `ssh` decides (~/.ssh/config, else 22).
    #[serde(default)]
    pub port: Option<u16>,
    /// A private key for the host and the guests; otherwise the agent and
    /// ~/.ssh/config decide.
    #[serde(default)]
    pub identity: Option<PathBuf>,
    /// More ssh `-o` options for the host (a `ProxyCommand`, ...).
    #[serde(default)]
    pub options: Vec<String>,
    /// A VM template with Debian 12, qemu-guest-agent, the SSH key, and
    /// this build's dependencies (frr, stress-ng).
    pub template_vmid: u32,
    /// VM IDs `first_vmid`, +1, +2 for DUT, peer, spare; none may exist
    /// anywhere in the cluster.
    pub first_vmid: u32,
    /// The isolated bridge, created for the run (no uplink, no address);
    /// unset, `lcbr` and the run's token, a name no other run takes.
    #[serde(default)]
    pub bridge: Option<String>,
    /// vCPUs of the DUT VM (the peer and spare get 2).
    #[serde(default = "default_dut_cores")]
    pub dut_cores: u32,
    /// Host CPUs the DUT VM's vCPUs run on (`qm set --affinity`, e.g.
    /// "2-3"); unset, the host's scheduler decides.
    #[serde(default)]
    pub dut_affinity: Option<String>,
    /// Host CPUs of the peer VM, away from the DUT's.
    #[serde(default)]
    pub peer_affinity: Option<String>,
    /// The DUT guest's CPUs under test (its daemon, the stress, the
    /// canary); default: its last vCPU, the first left for the rest.
    #[serde(default)]
    pub dut_cpus: Vec<usize>,
    /// The peer guest's CPUs for its daemon; default: unpinned.
    #[serde(default)]
    pub peer_cpus: Vec<usize>,
    /// The user the guests are logged in as (root: BFD's ports, XDP).
    #[serde(default = "default_guest_user")]
    pub guest_user: String,
    /// ssh `-o` options for the guests. Without a `ProxyCommand` or
    /// `ProxyJump` of their own, guests are reached through the host
    /// (`ssh -W`), which sees their management network.
    #[serde(default)]
    pub guest_options: Vec<String>,
    /// How long a guest's agent may take to answer after `qm start`.
    #[serde(default = "default_agent_timeout_s")]
    pub agent_timeout_s: u64,
    /// Where runs are staged on the guests and the host.
    #[serde(default = "default_remote_dir")]
    pub remote_dir: String,
}

fn default_dut_cores() -> u32 {
    2
}

fn default_guest_user() -> String {
    "root".into()
}

fn default_agent_timeout_s() -> u64 {
    120
}

fn default_remote_dir() -> String {
    "/var/tmp/linecard".into()
}

impl ProxmoxSpec {
    /// The three VMs: (role, VM ID, the lab host whose MAC and addresses
    /// it takes).
    pub fn vms(&self) -> [(&'static str, u32, &'static spec::Host); 3] {
        [
            ("dut", self.first_vmid, &spec::DUT),
            ("peer", self.first_vmid + 1, &spec::PEER),
            ("spare", self.first_vmid + 2, &spec::SPARE),
        ]
    }

    /// The capture: on the hypervisor, on the DUT's tap (`tap<vmid>i1`:
    /// net1).
    pub fn capture_interface(&self) -> String {
        format!("tap{}i1", self.first_vmid)
    }

    /// The DUT guest's CPUs under test.
    pub fn dut_cpus(&self) -> Vec<usize> {
        if self.dut_cpus.is_empty() {
            vec![self.dut_cores.saturating_sub(1) as usize]
        } else {
            self.dut_cpus.clone()
        }
    }

    /// Problems with the table, as (key, value, why): every value that
    /// reaches a command on the hypervisor or a guest has its shape
    /// (`scenario::value`), checked when the scenario is read.
    pub fn check(&self) -> Result<(), (String, String, &'static str)> {
        let err = |key: &str, value: &dyn std::fmt::Display, why| {
            Err((key.to_string(), value.to_string(), why))
        };
        if let Err(why) = value::ssh_target(&self.host) {
            return err("host", &self.host, why);
        }
        if self.port == Some(0) {
            return err("port", &0, "must be 1 to 65535");
        }
        if let Some(key) = &self.identity {
            if let Err(why) = value::program_path(&key.display().to_string()) {
                return err("identity", &key.display(), why);
            }
        }
        for (key, options) in [
            ("options", &self.options),
            ("guest_options", &self.guest_options),
        ] {
            for o in options {
                if let Err(why) = value::ssh_option(o) {
                    return err(key, o, why);
                }
            }
        }
        // Proxmox's VM IDs: 100 to 999999999; the plan takes three.
        const VMIDS: std::ops::RangeInclusive<u32> = 100..=999_999_997;
        if !VMIDS.contains(&self.template_vmid) {
            return err(
                "template_vmid",
                &self.template_vmid,
                "Proxmox VM IDs are 100 to 999999999",
            );
        }
        if !VMIDS.contains(&self.first_vmid) {
            return err(
                "first_vmid",
                &self.first_vmid,
                "must be 100 to 999999997 (the run takes it and the next two)",
            );
        }
        if (self.first_vmid..=self.first_vmid + 2).contains(&self.template_vmid) {
            return err(
                "first_vmid",
                &self.first_vmid,
                "the run's three VM IDs must not include the template's",
            );
        }
        if let Some(bridge) = &self.bridge {
            if let Err(why) = value::interface_name(bridge) {
                return err("bridge", bridge, why);
            }
        }
        if !(1..=512).contains(&self.dut_cores) {
            return err("dut_cores", &self.dut_cores, "must be 1 to 512 vCPUs");
        }
        for (key, cpus) in [
            ("dut_affinity", &self.dut_affinity),
            ("peer_affinity", &self.peer_affinity),
        ] {
            if let Some(cpus) = cpus {
                if let Err(why) = value::cpu_list(cpus) {
                    return err(key, cpus, why);
                }
            }
        }
        for (key, cpus) in [("dut_cpus", &self.dut_cpus), ("peer_cpus", &self.peer_cpus)] {
            if cpus.iter().any(|&c| c > value::MAX_CPU) {
                return err(key, &format!("{cpus:?}"), "CPU numbers up to 8191");
            }
        }
        if let Some(&cpu) = self
            .dut_cpus
            .iter()
            .find(|&&c| c >= self.dut_cores as usize)
        {
            return err(
                "dut_cpus",
                &cpu,
                "must be vCPUs of the DUT VM (0 to dut_cores - 1)",
            );
        }
        if let Err(why) = value::user_name(&self.guest_user) {
            return err("guest_user", &self.guest_user, why);
        }
        if !(1..=3600).contains(&self.agent_timeout_s) {
            return err(
                "agent_timeout_s",
                &self.agent_timeout_s,
                "must be 1 to 3600 seconds",
            );
        }
        if let Err(why) = value::absolute_path(&self.remote_dir) {
            return err("remote_dir", &self.remote_dir, why);
        }
        Ok(())
    }
}
