//! The local lab's fixed names, as promised in the README ("The local lab"): docs,
//! tests and scripts agree on them, and `lab down` finds leftovers by them.

use std::path::PathBuf;

/// Every object the lab creates carries this prefix.
pub const PREFIX: &str = "lc-";

/// The namespace holding the bridge; captures run here, outside every host.
pub const OBSERVER_NS: &str = "lc-obs";
pub const BRIDGE: &str = "lc-br";
/// Each host's interface name inside its namespace.
pub const HOST_IFACE: &str = "eth0";

pub const CPUSET_ROOT: &str = "/sys/fs/cgroup/cpuset";
/// The DUT's CPUs: DUT processes and the stress run here.
pub const DUT_CPUSET: &str = "lc-dut";
/// Every other CPU: peer, observer, traffic generators and the harness.
pub const REST_CPUSET: &str = "lc-rest";

/// The root cpuset's load-balancing switch: the lab turns it off so that
/// each lab cpuset is a scheduling partition (root domain) of its own.
pub const ROOT_LOAD_BALANCE: &str = "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance";
/// The switch's value before the lab turned it off, restored by `lab down`.
pub const ROOT_LOAD_BALANCE_SAVED: &str = "/run/lc-cpuset-load-balance.saved";

/// Where pinned BPF links live, so that programs stay attached after the
/// command that attached them exits, and `lab down` can find them.
pub const BPF_PIN_DIR: &str = "/sys/fs/bpf/lc-lab";

/// A BPF filesystem of the lab's own for the engines it runs: `ip netns
/// exec` remounts /sys for the namespace, hiding /sys/fs/bpf, so a
/// linecardd in a lab host pins its fast path for a handover here
/// (`engine.handover_dir`, a folder under it). Mounted by `lab up`,
/// emptied and unmounted by `lab down`.
pub const ENGINE_BPFFS: &str = "/run/lc-bpffs";

/// One host of the lab: a namespace with one veth into the bridge.
#[derive(Clone, Copy, Debug)]
pub struct Host {
    /// Role name used on the command line and in JSON: `dut`, `peer`, `spare`.
    pub role: &'static str,
    pub namespace: &'static str,
    /// The veth end inside the observer namespace, enslaved to the bridge.
    pub bridge_port: &'static str,
    pub ipv4: &'static str,
    pub ipv6: &'static str,
    /// Fixed MACs make captures and crafted frames reproducible.
    pub mac: &'static str,
}

pub const DUT: Host = Host {
    role: "dut",
    namespace: "lc-dut",
    bridge_port: "lc-dut-port",
    ipv4: "192.0.2.1",
    ipv6: "2001:db8::1",
    mac: "02:1c:00:00:00:01",
};
pub const PEER: Host = Host {
    role: "peer",
    namespace: "lc-peer",
    bridge_port: "lc-peer-port",
    ipv4: "192.0.2.2",
    ipv6: "2001:db8::2",
    mac: "02:1c:00:00:00:02",
};
pub const SPARE: Host = Host {
    role: "spare",
    namespace: "lc-spare",
    bridge_port: "lc-spare-port",
    ipv4: "192.0.2.3",
    ipv6: "2001:db8::3",
    mac: "02:1c:00:00:00:03",
};
pub const HOSTS: [Host; 3] = [DUT, PEER, SPARE];
pub const IPV4_PREFIX_LEN: u8 = 24;
pub const IPV6_PREFIX_LEN: u8 = 64;

/// MAC of the observer's side of each veth: fixed for the same reason.
pub fn bridge_port_mac(host: &Host) -> String {
    format!("02:1c:00:00:01:{}", &host.mac[15..])
}

pub fn cpuset_dir(name: &str) -> PathBuf {
    PathBuf::from(CPUSET_ROOT).join(name)
}

/// A CPU list in the kernel's format ("1", "0-3", "0,2").
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Parses the kernel's CPU list format; `None` on anything else.
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The hexadecimal CPU mask sysfs expects in `rps_cpus`.
pub fn cpu_mask(cpus: &[usize]) -> String {
    let mut words = vec![0u32; cpus.iter().max().map_or(1, |m| m / 32 + 1)];
    for &cpu in cpus {
        words[cpu / 32] |= 1 << (cpu % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses a sysfs CPU mask ("00000002", "00000000,00000001") into CPUs.
pub fn parse_cpu_mask(mask: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for (word_index, word) in mask.trim().split(',').rev().enumerate() {
        let bits = u32::from_str_radix(word, 16).ok()?;
        cpus.extend(
            (0..32)
                .filter(|b| bits & (1 << b) != 0)
                .map(|b| word_index * 32 + b),
        );
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(parse_cpu_list("0-2,5,7-8"), Some(vec![0, 1, 2, 5, 7, 8]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn cpu_masks_round_trip() {
        assert_eq!(cpu_mask(&[1]), "00000002");
        assert_eq!(cpu_mask(&[0, 33]), "00000002,00000001");
        assert_eq!(parse_cpu_mask("00000002,00000001"), Some(vec![0, 33]));
        assert_eq!(parse_cpu_mask("0"), Some(vec![]));
    }

    #[test]
    fn every_name_carries_the_prefix_and_fits_ifnamsiz() {
        for host in HOSTS {
            assert!(host.namespace.starts_with(PREFIX));
            assert!(host.bridge_port.starts_with(PREFIX));
            assert!(
                host.bridge_port.len() < 16,
                "{} exceeds IFNAMSIZ",
                host.bridge_port
            );
        }
        assert!(OBSERVER_NS.starts_with(PREFIX) && BRIDGE.starts_with(PREFIX));
        assert!(DUT_CPUSET.starts_with(PREFIX) && REST_CPUSET.starts_with(PREFIX));
    }
}
