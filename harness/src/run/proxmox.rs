//! The `proxmox` provider's command plan: a Proxmox VE host reached over
//! SSH clones three VMs (DUT, peer, spare) from a template with `qm`,
//! attaches their second NIC to an isolated bridge with no uplink, gives
//! them the lab's addresses through the guest agent, and captures on the
//! bridge port facing the DUT (the hypervisor is the observer: outside the
//! device under test by construction). Teardown destroys exactly the VMs
//! and the bridge the plan created.
//!
//! Nested virtualisation does not work on the machine kind this project is
//! built on, so this provider cannot run here: the plan is unit-tested and
//! `linecard run --dry-run` prints it for review. (A mock, and it says so.)

use crate::lab::spec;
use serde::{Deserialize, Serialize};

/// `[proxmox]` in a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxmoxSpec {
    /// `root@pve.example.net`: where `qm` runs.
    pub host: String,
    /// A VM template with Debian 12, qemu-guest-agent and SSH keys.
    pub template_vmid: u32,
    /// VM IDs `first_vmid`, +1, +2 for DUT, peer, spare; they must not exist.
    pub first_vmid: u32,
    /// The isolated bridge, created for the run (no uplink, no address).
    #[serde(default = "default_bridge")]
    pub bridge: String,
    /// vCPUs of the DUT VM (the peer and spare get 2).
    #[serde(default = "default_dut_cores")]
    pub dut_cores: u32,
}

fn default_bridge() -> String {
    "lcbr0".into()
}

fn default_dut_cores() -> u32 {
    2
}

/// One command of the plan, where it runs, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    /// `pve` (the Proxmox host, over SSH) or `local`.
    pub on: &'static str,
    pub command: String,
    pub why: &'static str,
}

/// The VMs of the plan: (role, VM ID, lab host).
pub fn vms(p: &ProxmoxSpec) -> [(&'static str, u32, &'static spec::Host); 3] {
    [
        ("dut", p.first_vmid, &spec::DUT),
        ("peer", p.first_vmid + 1, &spec::PEER),
        ("spare", p.first_vmid + 2, &spec::SPARE),
    ]
}

/// The bring-up: checks, bridge, clones, NICs, start, addresses.
pub fn bring_up(p: &ProxmoxSpec) -> Vec<Step> {
    let mut steps = vec![
        Step {
            on: "local",
            command: format!("ssh -o BatchMode=yes {} pveversion", p.host),
            why: "the host is reachable without a password and runs Proxmox VE",
        },
        Step {
            on: "pve",
            command: format!("qm config {}", p.template_vmid),
            why: "the template exists",
        },
    ];
    for (role, id, _) in vms(p) {
        steps.push(Step {
            on: "pve",
            command: format!("! qm status {id}"),
            why: if role == "dut" {
                "the plan's VM IDs are free: it never touches a VM it did not create"
            } else {
                "VM ID free"
            },
        });
    }
    steps.push(Step {
        on: "pve",
        command: format!(
            "! ip link show {b} && ip link add name {b} type bridge && ip link set {b} up",
            b = p.bridge
        ),
        why: "an isolated bridge for test traffic: no uplink, no address, created by this run",
    });
    for (role, id, host) in vms(p) {
        let cores = if role == "dut" { p.dut_cores } else { 2 };
        steps.push(Step {
            on: "pve",
            command: format!(
                "qm clone {} {id} --name lc-{role} --full 0",
                p.template_vmid
            ),
            why: "a linked clone of the template",
        });
        steps.push(Step {
            on: "pve",
            command: format!(
                "qm set {id} --cores {cores} --cpu host --agent enabled=1 --net1 virtio={},bridge={},firewall=0",
                host.mac.to_uppercase(),
                p.bridge
            ),
            why: "the lab's fixed MAC on the isolated bridge (net0 stays the management network)",
        });
        steps.push(Step {
            on: "pve",
            command: format!("qm start {id}"),
            why: "boot",
        });
        steps.push(Step {
            on: "pve",
            command: format!("timeout 120 sh -c 'until qm guest cmd {id} ping; do sleep 1; done'"),
            why: "readiness: the guest agent answers (bounded)",
        });
        steps.push(Step {
            on: "pve",
            command: format!(
                "qm guest exec {id} -- sh -c 'ip link set eth1 up && ip addr add {}/24 dev eth1 && ip addr add {}/64 dev eth1 nodad'",
                host.ipv4, host.ipv6
            ),
            why: "the lab's addresses on the test NIC",
        });
    }
    steps
}

/// The capture: on the hypervisor, on the DUT's port of the bridge.
pub fn capture(p: &ProxmoxSpec, remote_path: &str) -> Step {
    Step {
        on: "pve",
        command: format!(
            "tcpdump -n -i tap{}i1 -s 0 -U --immediate-mode --time-stamp-precision nano -w {remote_path} 'udp port 3784 or udp port 4784 or udp port 3785'",
            p.first_vmid
        ),
        why: "the observer is the hypervisor: outside the DUT, on the wire it sends to",
    }
}

/// The teardown: exactly what `bring_up` created, in reverse.
pub fn teardown(p: &ProxmoxSpec) -> Vec<Step> {
    let mut steps = Vec::new();
    for (_, id, _) in vms(p).into_iter().rev() {
        steps.push(Step {
            on: "pve",
            command: format!("qm stop {id} --skiplock 1; qm destroy {id} --purge 1"),
            why: "remove the VM this run cloned",
        });
    }
    steps.push(Step {
        on: "pve",
        command: format!("ip link del {}", p.bridge),
        why: "remove the isolated bridge",
    });
    steps
}

/// The whole plan as text, for `--dry-run`.
pub fn render(p: &ProxmoxSpec, scenario: &str) -> String {
    let mut out = format!(
        "proxmox plan for scenario {scenario} on {} (dry run: nothing is executed)\n\nbring-up:\n",
        p.host
    );
    let line = |s: &Step| format!("  [{}] {}\n        # {}\n", s.on, s.command, s.why);
    for s in bring_up(p) {
        out.push_str(&line(&s));
    }
    out.push_str("\nper DUT: start the peer and the DUT in their VMs over SSH, then capture:\n");
    out.push_str(&line(&capture(
        p,
        &format!("/var/tmp/lc-{scenario}-DUT.pcap"),
    )));
    out.push_str(&format!(
        "  [local] scp {}:/var/tmp/lc-{scenario}-DUT.pcap results/{scenario}/RUN_ID/DUT/capture.pcap\n        # captures come back to the run directory\n",
        p.host
    ));
    out.push_str("\nteardown (also after a failure):\n");
    for s in teardown(p) {
        out.push_str(&line(&s));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ProxmoxSpec {
        ProxmoxSpec {
            host: "root@pve".into(),
            template_vmid: 9000,
            first_vmid: 7100,
            bridge: "lcbr0".into(),
            dut_cores: 4,
        }
    }

    #[test]
    fn the_plan_clones_three_vms_onto_an_isolated_bridge_with_the_lab_addresses() {
        let steps = bring_up(&spec());
        let commands: Vec<&str> = steps.iter().map(|s| s.command.as_str()).collect();
        for (role, id) in [("dut", 7100), ("peer", 7101), ("spare", 7102)] {
            assert!(commands
                .contains(&format!("qm clone 9000 {id} --name lc-{role} --full 0").as_str()));
            assert!(
                commands.contains(&format!("! qm status {id}").as_str()),
                "refuses a VM ID in use"
            );
        }
        assert!(commands
            .iter()
            .any(|c| c.starts_with("qm set 7100 --cores 4 ")
                && c.contains("virtio=02:1C:00:00:00:01,bridge=lcbr0")));
        assert!(commands
            .iter()
            .any(|c| c.contains("ip addr add 192.0.2.1/24 dev eth1")
                && c.starts_with("qm guest exec 7100")));
        let bridge = commands
            .iter()
            .position(|c| c.contains("ip link add name lcbr0 type bridge"))
            .unwrap();
        let first_clone = commands
            .iter()
            .position(|c| c.starts_with("qm clone"))
            .unwrap();
        assert!(
            bridge < first_clone,
            "the bridge exists before any VM is attached"
        );
        // Checks come first, and every readiness wait is bounded.
        assert!(commands[0].contains("BatchMode=yes"));
        assert!(commands
            .iter()
            .filter(|c| c.contains("until"))
            .all(|c| c.starts_with("timeout ")));
    }

    #[test]
    fn the_capture_is_on_the_dut_port_of_the_bridge() {
        let s = capture(&spec(), "/var/tmp/x.pcap");
        assert!(
            s.command.starts_with("tcpdump -n -i tap7100i1 "),
            "{}",
            s.command
        );
        assert!(s.command.contains("--immediate-mode") && s.command.contains("nano"));
    }

    #[test]
    fn teardown_removes_exactly_what_bring_up_created() {
        let p = spec();
        let created: Vec<u32> = bring_up(&p)
            .iter()
            .filter_map(|s| s.command.strip_prefix("qm clone 9000 "))
            .map(|rest| rest.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        let destroyed: Vec<u32> = teardown(&p)
            .iter()
            .filter_map(|s| s.command.split("qm destroy ").nth(1))
            .map(|rest| rest.split_whitespace().next().unwrap().parse().unwrap())
            .collect();
        let mut sorted = destroyed.clone();
        sorted.sort();
        assert_eq!(sorted, created);
        assert!(
            !destroyed.contains(&9000),
            "the template is never destroyed"
        );
        assert_eq!(teardown(&p).last().unwrap().command, "ip link del lcbr0");
    }

    #[test]
    fn the_dry_run_prints_every_step_with_its_reason() {
        let text = render(&spec(), "bakeoff");
        assert!(text.contains("dry run: nothing is executed"));
        assert_eq!(
            text.matches("        # ").count(),
            bring_up(&spec()).len() + 2 + teardown(&spec()).len()
        );
    }
}
