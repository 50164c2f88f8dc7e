//! What decides the DUT's receive path, interface by interface, as the
//! host reports it: the driver and firmware, the XDP attach mode actually
//! in force, the queues, how UDP is hashed onto them, flow control,
//! interrupt coalescing, where each queue's interrupt runs, threaded NAPI,
//! and the drop counters, read before and after every phase.
//!
//! On a real host this is what the BFD packet's fate depends on before any
//! daemon sees it: the reference's bare-metal hour went from 165,028 to
//! 4,148 down events by spreading other traffic off the BFD CPU, turning
//! flow control off and hashing UDP on its ports. A driver that cannot say
//! something says so in its own words (veth has no flow control); nothing
//! here judges, the report only flags a drop counter that moved.
//!
//! One shell script per interface (`script`), run by the site where the
//! interface is (a lab namespace, a host over SSH), and one parser
//! (`InterfaceRecord::parse`): the same record from every site.

use crate::scenario::value::quote;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The interface's drop counters by name: the kernel's (`rx.dropped`,
/// from `ip -s link`) and the driver's (`ethtool -S`, per queue on a NIC
/// that has queues).
pub type Counters = BTreeMap<String, u64>;

/// One interface in the DUT's receive path, read once its sessions are Up
/// (the fast path attached).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceRecord {
    /// Where it was read: a lab namespace (`lc-dut`) or a host (`dut`).
    pub at: String,
    pub name: String,
    /// `ethtool -i`.
    pub driver: String,
    pub driver_version: String,
    pub firmware: String,
    pub bus_info: String,
    /// The XDP program attached and the mode the kernel reports in force
    /// (`ip -d link`); `None` when none is attached.
    pub xdp: Option<XdpAttachment>,
    pub rx_queues: Option<u64>,
    pub tx_queues: Option<u64>,
    /// The fields UDP over IPv4 / IPv6 is hashed on to pick a receive
    /// queue (`ethtool -n IF rx-flow-hash udp4`), or what the driver said.
    pub udp4_hash: String,
    pub udp6_hash: String,
    /// Pause frames (`ethtool -a`), or what the driver said.
    pub flow_control: String,
    /// Interrupt coalescing (`ethtool -c`: rx-usecs, rx-frames, adaptive),
    /// or what the driver said.
    pub coalescing: String,
    /// `/sys/class/net/IF/threaded`: NAPI polled by a kthread of its own
    /// instead of in softirq.
    pub threaded_napi: Option<bool>,
    /// Each queue's interrupt and the CPUs it may run on (none for a
    /// virtual device such as veth).
    pub irqs: Vec<Irq>,
    /// The drop counters as read then.
    pub drop_counters: Counters,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct XdpAttachment {
    /// `native` (the driver's hook), `generic` (after the stack's skb
    /// allocation), `offload` (on the NIC) or `multi`.
    pub mode: String,
    pub program: String,
    pub id: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Irq {
    pub irq: u32,
    /// Its action's name in `/proc/interrupts` (names the queue).
    pub name: String,
    /// `/proc/irq/N/smp_affinity_list`.
    pub affinity: String,
}

/// One interface's drop counters around a phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InterfaceDrops {
    pub at: String,
    pub name: String,
    pub before: Counters,
    pub after: Counters,
}

impl InterfaceDrops {
    /// The counters that moved in the phase, by how much.
    pub fn moved(&self) -> Vec<(&str, u64)> {
        (self.after.iter())
            .filter_map(|(name, &after)| {
                let before = self.before.get(name).copied().unwrap_or(0);
                (after > before).then(|| (name.as_str(), after - before))
            })
            .collect()
    }
}

/// How much of an interface a script reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Everything [`InterfaceRecord`] holds (once per DUT run).
    Full,
    /// The drop counters only (before and after each phase).
    Counters,
}

/// Marks a section of a script's output.
const SECTION: &str = "#lc-section ";

/// The shell script that reads `interface` (a validated interface name,
/// quoted here) at `detail`; its output is [`InterfaceRecord::parse`]'s
/// input. Every command's error text is kept: a driver that cannot say
/// something says why.
pub fn script(interface: &str, detail: Detail) -> String {
    let mut s = format!(
        "IF={}\nsection() {{ echo \"{SECTION}$1\"; }}\n\
         section link; ip -d -s -j link show dev \"$IF\" 2>&1\n\
         section stats; ethtool -S \"$IF\" 2>&1\n",
        quote(interface)
    );
    if detail == Detail::Full {
        s.push_str(
            "section driver; ethtool -i \"$IF\" 2>&1\n\
             section udp4; ethtool -n \"$IF\" rx-flow-hash udp4 2>&1\n\
             section udp6; ethtool -n \"$IF\" rx-flow-hash udp6 2>&1\n\
             section pause; ethtool -a \"$IF\" 2>&1\n\
             section coalesce; ethtool -c \"$IF\" 2>&1\n\
             section threaded; cat \"/sys/class/net/$IF/threaded\" 2>&1\n\
             section irqs\n\
             for irq in $(ls \"/sys/class/net/$IF/device/msi_irqs\" 2>/dev/null); do\n\
             \x20 echo \"$irq $(cat /proc/irq/$irq/smp_affinity_list 2>/dev/null) \
             $(awk -v n=\"$irq:\" '$1 == n {print $NF}' /proc/interrupts)\"\n\
             done\n",
        );
    }
    // Each section's own failure is its text: the script as a whole
    // succeeds, so a site keeps every section.
    s.push_str("true\n");
    s
}

/// The sections of a script's output, by name.
fn sections(text: &str) -> BTreeMap<&str, String> {
    let mut out: BTreeMap<&str, String> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix(SECTION) {
            current = Some(name.trim());
            out.entry(name.trim()).or_default();
        } else if let Some(name) = current {
            let body = out.entry(name).or_default();
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// Whether a counter counts frames lost on the way in or out. The XDP
/// program's own XDP_DROP verdicts (`xdp_drops`) are its decisions, not
/// losses; a failed XDP_TX (`xdp_tx_errors`) is a lost reply and counts.
fn is_drop_counter(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    let lossy = [
        "drop", "discard", "miss", "fifo", "over", "err", "no_buf", "nobuf",
    ]
    .iter()
    .any(|word| name.contains(word));
    lossy && !name.ends_with("xdp_drops") && !name.ends_with("xdp_drop")
}

/// A command's output as a record says it: its first line when it failed
/// (`unsupported: ...`), else `ok` of its text.
fn unsupported(text: &str) -> Option<String> {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output");
    let failed = first.starts_with("Cannot ")
        || first.contains("not supported")
        || first.contains("No such")
        || first.contains("error");
    failed.then(|| format!("unsupported: {}", first.trim()))
}

/// `key: value` lines of `ethtool`'s output, tabs and spaces trimmed.
fn key_values(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

/// The fields `ethtool -n IF rx-flow-hash udp4` names, joined.
fn hash_fields(text: &str) -> String {
    if let Some(why) = unsupported(text) {
        return why;
    }
    let fields: Vec<&str> = (text.lines().skip(1))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if fields.is_empty() {
        "none".into()
    } else {
        fields.join(", ")
    }
}

/// The pause settings of `ethtool -a`, one line.
fn flow_control(text: &str) -> String {
    unsupported(text).unwrap_or_else(|| {
        (key_values(text).iter())
            .filter(|(k, _)| ["Autonegotiate", "RX", "TX"].contains(k))
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// What `ethtool -c` says of receive coalescing, one line.
fn coalescing(text: &str) -> String {
    if let Some(why) = unsupported(text) {
        return why;
    }
    let mut said: Vec<String> = Vec::new();
    for line in text.lines() {
        // "Adaptive RX: on  TX: off"
        if let Some(rest) = line.strip_prefix("Adaptive RX:") {
            let rx = rest.split_whitespace().next().unwrap_or("?");
            said.push(format!("adaptive-rx {rx}"));
        }
    }
    for (k, v) in key_values(text) {
        if ["rx-usecs", "rx-frames", "tx-usecs", "tx-frames"].contains(&k) {
            said.push(format!("{k} {v}"));
        }
    }
    if said.is_empty() {
        "none reported".into()
    } else {
        said.join(", ")
    }
}

/// The drop counters of the `link` (kernel) and `stats` (driver)
/// sections.
fn drop_counters(link: Option<&serde_json::Value>, stats: &str) -> Counters {
    let mut counters = Counters::new();
    if let Some(stats64) = link.and_then(|l| l.get("stats64")) {
        for direction in ["rx", "tx"] {
            let Some(fields) = stats64.get(direction).and_then(|v| v.as_object()) else {
                continue;
            };
            for (name, value) in fields {
                if let (true, Some(n)) = (is_drop_counter(name), value.as_u64()) {
                    counters.insert(format!("{direction}.{name}"), n);
                }
            }
        }
    }
    for (name, value) in key_values(stats) {
        if let (true, Ok(n)) = (is_drop_counter(name), value.parse::<u64>()) {
            counters.insert(name.to_string(), n);
        }
    }
    counters
}

impl InterfaceRecord {
    /// The record of `name` read at `at` from its script's output
    /// (either detail: a counters-only read fills the counters).
    pub fn parse(at: &str, name: &str, text: &str) -> InterfaceRecord {
        let s = sections(text);
        let section = |name: &str| s.get(name).map(String::as_str).unwrap_or("");
        let link: Option<serde_json::Value> =
            serde_json::from_str::<serde_json::Value>(section("link"))
                .ok()
                .and_then(|v| v.get(0).cloned());
        let driver = key_values(section("driver"));
        let said = |key: &str| {
            (driver.iter())
                .find(|(k, _)| *k == key)
                .map_or(String::new(), |(_, v)| v.to_string())
        };
        let number = |key: &str| link.as_ref().and_then(|l| l.get(key)?.as_u64());
        let xdp = link.as_ref().and_then(|l| {
            let xdp = l.get("xdp")?;
            let prog = xdp.get("prog")?;
            let mode = match xdp.get("mode")?.as_u64()? {
                1 => "native",
                2 => "generic",
                3 => "offload",
                4 => "multi",
                _ => "unknown",
            };
            Some(XdpAttachment {
                mode: mode.into(),
                program: prog.get("name")?.as_str()?.into(),
                id: prog.get("id")?.as_u64()?,
            })
        });
        let irqs = (section("irqs").lines())
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                Some(Irq {
                    irq: words.next()?.parse().ok()?,
                    affinity: words.next().unwrap_or("").into(),
                    name: words.next().unwrap_or("").into(),
                })
            })
            .collect();
        InterfaceRecord {
            at: at.into(),
            name: name.into(),
            driver: said("driver"),
            driver_version: said("version"),
            firmware: said("firmware-version"),
            bus_info: said("bus-info"),
            xdp,
            rx_queues: number("num_rx_queues"),
            tx_queues: number("num_tx_queues"),
            udp4_hash: hash_fields(section("udp4")),
            udp6_hash: hash_fields(section("udp6")),
            flow_control: flow_control(section("pause")),
            coalescing: coalescing(section("coalesce")),
            threaded_napi: match section("threaded").trim() {
                "1" => Some(true),
                "0" => Some(false),
                _ => None,
            },
            irqs,
            drop_counters: drop_counters(link.as_ref(), section("stats")),
        }
    }

    /// What of the record a reader must have: `None` when complete, else
    /// what is missing (the interface could not be read at all).
    pub fn incomplete(&self) -> Option<String> {
        let mut missing = Vec::new();
        if self.driver.is_empty() {
            missing.push("driver");
        }
        if self.rx_queues.is_none() {
            missing.push("queues");
        }
        if self.drop_counters.is_empty() {
            missing.push("drop counters");
        }
        (!missing.is_empty()).then(|| missing.join(", "))
    }
}

/// Each interface's drop counters around a phase, from the counters read
/// before it and after it (paired by where and name).
pub fn drops_around(before: &[InterfaceRecord], after: &[InterfaceRecord]) -> Vec<InterfaceDrops> {
    (before.iter())
        .filter_map(|b| {
            let a = after.iter().find(|a| a.at == b.at && a.name == b.name)?;
            Some(InterfaceDrops {
                at: b.at.clone(),
                name: b.name.clone(),
                before: b.drop_counters.clone(),
                after: a.drop_counters.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "receive_path_tests.rs"]
mod tests;
