//! What the lab looks like right now, read from the system (no state file:
//! the kernel is the only record that cannot go stale).

use super::spec::{self, Host, BRIDGE, HOSTS, HOST_IFACE, OBSERVER_NS, PREFIX};
use crate::sys;
use anyhow::Result;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// `linecard lab status --json`: the contract of the README's "The local lab".
#[derive(Debug, Serialize)]
pub struct LabStatus {
    /// Every part of the lab is present and configured.
    pub up: bool,
    /// What is missing or wrong, in words; empty when `up`.
    pub problems: Vec<String>,
    pub hosts: Vec<HostStatus>,
    pub observer: ObserverStatus,
    pub cpusets: Vec<CpusetStatus>,
}

#[derive(Debug, Serialize)]
pub struct HostStatus {
    /// `dut`, `peer` or `spare`.
    pub role: String,
    pub namespace: String,
    pub present: bool,
    pub interface: String,
    pub mac: Option<String>,
    /// Addresses with prefix length, as configured.
    pub ipv4: Vec<String>,
    pub ipv6: Vec<String>,
    /// The cpuset the host's processes belong in.
    pub cpuset: String,
    pub cpus: Vec<usize>,
}

#[derive(Debug, Serialize)]
pub struct ObserverStatus {
    pub namespace: String,
    pub present: bool,
    pub bridge: String,
    pub ports: Vec<PortStatus>,
}

#[derive(Debug, Serialize)]
pub struct PortStatus {
    pub name: String,
    /// Role of the host at the other end of this veth.
    pub faces: String,
    pub mac: Option<String>,
    /// CPUs this port's receive processing is steered to (RPS); empty: none.
    pub rps_cpus: Vec<usize>,
    /// Id of the XDP program attached, if any.
    pub xdp_program_id: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct CpusetStatus {
    pub name: String,
    pub path: String,
    pub present: bool,
    pub cpus: Vec<usize>,
    /// Tasks currently confined to it.
    pub tasks: usize,
}

impl LabStatus {
    pub fn anything_present(&self) -> bool {
        self.observer.present
            || self.hosts.iter().any(|h| h.present)
            || self.cpusets.iter().any(|c| c.present)
    }

    pub fn dut_cpus(&self) -> Vec<usize> {
        self.cpusets
            .iter()
            .find(|c| c.name == spec::DUT_CPUSET)
            .map(|c| c.cpus.clone())
            .unwrap_or_default()
    }
}

pub fn lab_namespaces() -> Result<Vec<String>> {
    let out = sys::run("ip", ["netns", "list"])?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(PREFIX))
        .map(str::to_string)
        .collect())
}

pub fn lab_cpusets() -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(spec::CPUSET_ROOT)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(PREFIX) && entry.file_type()?.is_dir() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

pub fn cpuset_tasks(name: &str) -> Vec<u32> {
    std::fs::read_to_string(spec::cpuset_dir(name).join("tasks"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

fn link_json(ns: &str, dev: &str) -> Option<Value> {
    let out = sys::try_output("ip", ["-n", ns, "-j", "addr", "show", "dev", dev]).ok()?;
    if !out.status.success() {
        return None;
    }
    let parsed: Value = serde_json::from_slice(&out.stdout).ok()?;
    parsed.as_array()?.first().cloned()
}

fn addresses(link: &Value, family: &str) -> Vec<String> {
    link["addr_info"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["family"] == family && a["scope"] == "global")
        .filter_map(|a| {
            Some(format!(
                "{}/{}",
                a["local"].as_str()?,
                a["prefixlen"].as_u64()?
            ))
        })
        .collect()
}

fn read_cpuset(name: &str) -> CpusetStatus {
    let dir = spec::cpuset_dir(name);
    let cpus = std::fs::read_to_string(dir.join("cpuset.cpus")).ok();
    CpusetStatus {
        name: name.to_string(),
        path: dir.display().to_string(),
        present: cpus.is_some(),
        cpus: cpus
            .and_then(|c| spec::parse_cpu_list(&c))
            .unwrap_or_default(),
        tasks: cpuset_tasks(name).len(),
    }
}

/// A bridge port set down (`ip link set ... down`; a link flap fault
/// interrupted mid-way leaves one): every later run would see its
/// sessions never come Up. `ip -j link show`'s `flags` say.
fn port_down(name: &str, link: &serde_json::Value) -> Option<String> {
    let up = link["flags"]
        .as_array()
        .is_some_and(|flags| flags.iter().any(|f| f == "UP"));
    (!up).then(|| format!("bridge port {name} is down (a link flap interrupted mid-way?): `linecard lab up` restores it"))
}

fn read_port(host: &Host, problems: &mut Vec<String>, observer_present: bool) -> PortStatus {
    let link = observer_present
        .then(|| link_json(OBSERVER_NS, host.bridge_port))
        .flatten();
    let rps_cpus = link
        .as_ref()
        .and_then(|_| {
            let script = format!(
                "cat /sys/class/net/{}/queues/rx-0/rps_cpus",
                host.bridge_port
            );
            sys::run("ip", ["netns", "exec", OBSERVER_NS, "sh", "-c", &script]).ok()
        })
        .and_then(|m| spec::parse_cpu_mask(&m))
        .unwrap_or_default();
    if link.is_none() {
        problems.push(format!("bridge port {} missing", host.bridge_port));
    } else if link.as_ref().and_then(|l| l["master"].as_str()) != Some(BRIDGE) {
        problems.push(format!("{} is not a port of {BRIDGE}", host.bridge_port));
    } else if let Some(down) = link.as_ref().and_then(|l| port_down(host.bridge_port, l)) {
        problems.push(down);
    }
    PortStatus {
        name: host.bridge_port.to_string(),
        faces: host.role.to_string(),
        mac: link
            .as_ref()
            .and_then(|l| l["address"].as_str())
            .map(str::to_string),
        rps_cpus,
        xdp_program_id: link.as_ref().and_then(|l| l["xdp"]["prog"]["id"].as_u64()),
    }
}

pub fn read() -> Result<LabStatus> {
    let namespaces = lab_namespaces()?;
    let mut problems = Vec::new();
    let cpusets: Vec<_> = [spec::DUT_CPUSET, spec::REST_CPUSET]
        .map(read_cpuset)
        .into();
    for c in cpusets.iter().filter(|c| !c.present) {
        problems.push(format!("cpuset {} missing", c.path));
    }
    if std::fs::read_to_string(spec::ROOT_LOAD_BALANCE).is_ok_and(|v| v.trim() != "0") {
        problems.push(format!(
            "{} is not 0: the DUT's CPUs are no scheduling partition of their own (SCHED_DEADLINE cannot be admitted there)",
            spec::ROOT_LOAD_BALANCE
        ));
    }
    let cpus_of = |name: &str| {
        cpusets
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.cpus.clone())
            .unwrap_or_default()
    };

    let hosts: Vec<_> = HOSTS
        .iter()
        .map(|host| {
            let present = namespaces.iter().any(|n| n == host.namespace);
            let link = present
                .then(|| link_json(host.namespace, HOST_IFACE))
                .flatten();
            if !present {
                problems.push(format!("namespace {} missing", host.namespace));
            } else if link.is_none() {
                problems.push(format!("{} has no {HOST_IFACE}", host.namespace));
            }
            let (ipv4, ipv6) = link
                .as_ref()
                .map(|l| (addresses(l, "inet"), addresses(l, "inet6")))
                .unwrap_or_default();
            if link.is_some() && (ipv4.is_empty() || ipv6.is_empty()) {
                problems.push(format!("{} lacks its addresses", host.namespace));
            }
            let cpuset = if host.role == spec::DUT.role {
                spec::DUT_CPUSET
            } else {
                spec::REST_CPUSET
            };
            HostStatus {
                role: host.role.to_string(),
                namespace: host.namespace.to_string(),
                present,
                interface: HOST_IFACE.to_string(),
                mac: link
                    .as_ref()
                    .and_then(|l| l["address"].as_str())
                    .map(str::to_string),
                ipv4,
                ipv6,
                cpuset: cpuset.to_string(),
                cpus: cpus_of(cpuset),
            }
        })
        .collect();

    let observer_present = namespaces.iter().any(|n| n == OBSERVER_NS);
    if !observer_present {
        problems.push(format!("namespace {OBSERVER_NS} missing"));
    }
    let ports: Vec<_> = HOSTS
        .iter()
        .map(|h| read_port(h, &mut problems, observer_present))
        .collect();
    let dut_cpus = cpus_of(spec::DUT_CPUSET);
    for port in ports.iter().filter(|p| p.faces != spec::DUT.role) {
        if observer_present && port.rps_cpus != dut_cpus {
            problems.push(format!(
                "{} does not steer receive processing to the DUT's CPUs",
                port.name
            ));
        }
    }
    if let Some(port) = ports.iter().find(|p| p.faces == spec::DUT.role) {
        if observer_present && port.xdp_program_id.is_none() {
            problems.push(format!(
                "{} has no XDP program (XDP_TX from the DUT would be lost)",
                port.name
            ));
        }
    }
    if !Path::new(spec::BPF_PIN_DIR).exists() && observer_present {
        problems.push(format!("{} missing", spec::BPF_PIN_DIR));
    }
    if !crate::lab::bpffs_at(spec::ENGINE_BPFFS) && observer_present {
        problems.push(format!("no BPF filesystem at {}", spec::ENGINE_BPFFS));
    }
    Ok(LabStatus {
        up: problems.is_empty(),
        problems,
        hosts,
        observer: ObserverStatus {
            namespace: OBSERVER_NS.to_string(),
            present: observer_present,
            bridge: BRIDGE.to_string(),
            ports,
        },
        cpusets,
    })
}

/// Human-readable status for the terminal.
pub fn render(status: &LabStatus) -> String {
    let mut out = String::new();
    out.push_str(if status.up {
        "lab: up\n"
    } else {
        "lab: not up\n"
    });
    for p in &status.problems {
        out.push_str(&format!("  problem: {p}\n"));
    }
    for h in &status.hosts {
        out.push_str(&format!(
            "  {:<5} {:<9} {} {:<17} {:<14} {:<16} cpus {}\n",
            h.role,
            h.namespace,
            h.interface,
            h.mac.as_deref().unwrap_or("-"),
            h.ipv4.join(","),
            h.ipv6.join(","),
            spec::format_cpu_list(&h.cpus),
        ));
    }
    for p in &status.observer.ports {
        out.push_str(&format!(
            "  port  {:<13} faces {:<5} rps {:<4} xdp {}\n",
            p.name,
            p.faces,
            if p.rps_cpus.is_empty() {
                "-".to_string()
            } else {
                spec::format_cpu_list(&p.rps_cpus)
            },
            p.xdp_program_id
                .map_or("-".to_string(), |id| id.to_string()),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_left_down_is_a_problem() {
        let up = serde_json::json!({"ifname": "lc-peer-port", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]});
        let down =
            serde_json::json!({"ifname": "lc-peer-port", "flags": ["BROADCAST", "MULTICAST"]});
        assert_eq!(port_down("lc-peer-port", &up), None);
        assert!(port_down("lc-peer-port", &down)
            .unwrap()
            .contains("lc-peer-port is down"));
    }
}
