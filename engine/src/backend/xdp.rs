//! The `xdp` backend: the fast path `lc_bfd` answers the peer from the
//! kernel while a session is Up and steady (RX-clocked), validates every
//! BFD frame before userspace sees it, and counts drops by reason and
//! verdicts per CPU (placement evidence). Userspace keeps the state
//! machine, bring-up, Polls it starts and every transition.

use super::responder::{Detection, Prepared, Responder};
use super::{Availability, BackendKind, Transmitter, MAX_SLEEP_NS};
use anyhow::{bail, Context, Result};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::{Xdp, XdpMode};
use linecard_common::bfd::{
    SessionConfig, SessionState, SlotConfig, DROP_REASONS, FLAG_REPLY, SWEEP_SLOTS, VERDICTS,
};
use linecard_common::names;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::RawFd;

/// The XDP backend needs the embedded object (absent when the crate was
/// built without the BPF toolchain, or stale against this binary's layout).
pub fn availability() -> Availability {
    match linecard_bpf_objects::object() {
        Ok(_) => Availability::Available,
        Err(e) => Availability::Unavailable {
            reason: e.to_string(),
        },
    }
}

/// Userspace's share of the xdp backend: packets at transitions, bring-up
/// and Polls leave from the shared loop, at normal priority, at their
/// deadlines; steady packets leave from the kernel (see [`FastPath`]).
pub struct RxClocked;

impl Transmitter for RxClocked {
    fn kind(&self) -> BackendKind {
        BackendKind::Xdp
    }

    fn sleep_ns(&self, until_wake: Option<i64>, _until_detection: Option<i64>) -> i64 {
        until_wake.map_or(MAX_SLEEP_NS, |d| d.min(MAX_SLEEP_NS))
    }
}

/// The loaded fast path. Dropping it detaches the program.
pub struct FastPath {
    bpf: aya::Ebpf,
    interfaces: Vec<String>,
    /// Owns the kernel's sweep events (LC_EVENTS): sends each session's
    /// first Down and its own clock's packets.
    responder: Responder,
}

/// What the fast path counted, for `linecardd ctl drops` and placement.
#[derive(Debug, serde::Serialize)]
pub struct FastPathCounters {
    /// Indexed by `linecard_common::bfd::drop::*`, summed over CPUs.
    pub drops: Vec<u64>,
    /// Per CPU, indexed by `linecard_common::bfd::verdict::*`.
    pub verdicts_per_cpu: Vec<[u64; VERDICTS as usize]>,
}

impl FastPath {
    /// Loads the program and starts the responder at SCHED_FIFO
    /// `priority` on `cpu` (see [`Responder`]).
    pub fn load(priority: i32, cpu: Option<usize>) -> Result<Self> {
        let mut bpf = linecard_bpf_objects::load()?;
        let program: &mut Xdp = bpf
            .program_mut(names::BFD_PROGRAM)
            .context("the object has no lc_bfd")?
            .try_into()?;
        program
            .load()
            .context("the kernel's verifier refused lc_bfd")?;
        let events = RingBuf::try_from(
            bpf.take_map(names::EVENTS_MAP)
                .context("no events ring buffer")?,
        )?;
        let clock_sent = Array::try_from(
            bpf.take_map(names::CLOCK_SENT_MAP)
                .context("no clock-sent map")?,
        )?;
        Ok(Self {
            bpf,
            interfaces: Vec::new(),
            responder: Responder::start(events, clock_sent, priority, cpu)?,
        })
    }

    /// Attaches in native (driver) mode; generic mode would say nothing
    /// about where the driver runs us.
    pub fn attach(&mut self, interface: &str) -> Result<()> {
        if self.interfaces.iter().any(|i| i == interface) {
            return Ok(());
        }
        let program: &mut Xdp = self
            .bpf
            .program_mut(names::BFD_PROGRAM)
            .unwrap()
            .try_into()?;
        program
            .attach(interface, XdpMode::Driver)
            .with_context(|| format!("attaching lc_bfd to {interface} in native mode"))?;
        self.interfaces.push(interface.to_string());
        Ok(())
    }

    fn sessions(&mut self) -> Result<HashMap<&mut MapData, u32, SessionConfig>> {
        Ok(HashMap::try_from(
            self.bpf
                .map_mut(names::SESSIONS_MAP)
                .context("no sessions map")?,
        )?)
    }

    /// Makes the session known to the fast path: its packets are validated
    /// and passed to userspace (every configured session is in the map, so
    /// that address pairs without one can be dropped in the kernel).
    pub fn register(&mut self, discr: u32, config: SessionConfig) -> Result<()> {
        if config.flags & FLAG_REPLY != 0 {
            bail!("registering with FLAG_REPLY: use offload");
        }
        self.sessions()?
            .insert(discr, config, 0)
            .context("writing the session to LC_SESSIONS")?;
        Ok(())
    }

    /// Lets the kernel answer for session `discr` with `config`.
    pub fn offload(&mut self, discr: u32, config: SessionConfig) -> Result<()> {
        if config.flags & FLAG_REPLY == 0 {
            bail!("offloading without FLAG_REPLY");
        }
        self.sessions()?
            .insert(discr, config, 0)
            .context("writing the session to LC_SESSIONS")?;
        Ok(())
    }

    /// Forgets a removed session.
    pub fn forget(&mut self, discr: u32) -> Result<()> {
        self.responder.disarm(discr);
        match self.sessions()?.remove(&discr) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e).context("removing the session from LC_SESSIONS"),
        }
    }

    /// What the kernel's detection sweep knows of `slot`.
    pub fn set_slot(&mut self, slot: u32, config: SlotConfig) -> Result<()> {
        if slot >= SWEEP_SLOTS {
            bail!("slot {slot} beyond the sweep's {SWEEP_SLOTS}");
        }
        let mut slots: Array<&mut MapData, SlotConfig> =
            Array::try_from(self.bpf.map_mut(names::SLOTS_MAP).context("no slots map")?)?;
        slots.set(slot, config, 0).context("writing LC_SLOTS")?;
        Ok(())
    }

    /// Readable while detection events wait, to wake the event loop.
    pub fn events_fd(&self) -> RawFd {
        self.responder.wake_fd()
    }

    /// The kernel's detection events so far, with when each first Down
    /// left.
    pub fn take_events(&mut self) -> Vec<Detection> {
        self.responder.take()
    }

    /// Prepares the Down sent the moment the kernel declares `discr`'s
    /// peer silent, and the steady packet its own clock sends.
    pub fn arm_responder(&self, discr: u32, prepared: Prepared) {
        self.responder.arm(discr, prepared);
    }

    pub fn disarm_responder(&self, discr: u32) {
        self.responder.disarm(discr);
    }

    /// The kernel's view of the session in `slot`.
    pub fn state(&self, slot: u32) -> Result<SessionState> {
        let states: Array<&MapData, SessionState> =
            Array::try_from(self.bpf.map(names::STATE_MAP).context("no state map")?)?;
        Ok(states.get(&slot, 0)?)
    }

    pub fn counters(&self) -> Result<FastPathCounters> {
        let drops_map: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(self.bpf.map(names::DROPS_MAP).context("no drops map")?)?;
        let drops = (0..DROP_REASONS)
            .map(|i| drops_map.get(&i, 0).map(|v| v.iter().sum()))
            .collect::<Result<Vec<u64>, _>>()?;
        let verdicts: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(
            self.bpf
                .map(names::VERDICTS_MAP)
                .context("no verdicts map")?,
        )?;
        let mut per_cpu: Vec<[u64; VERDICTS as usize]> = Vec::new();
        for v in 0..VERDICTS {
            for (cpu, count) in verdicts.get(&v, 0)?.iter().enumerate() {
                if per_cpu.len() <= cpu {
                    per_cpu.resize(cpu + 1, [0; VERDICTS as usize]);
                }
                per_cpu[cpu][v as usize] = *count;
            }
        }
        Ok(FastPathCounters {
            drops,
            verdicts_per_cpu: per_cpu,
        })
    }
}

/// The interface's MAC, from sysfs.
pub fn interface_mac(interface: &str) -> Option<[u8; 6]> {
    parse_mac(
        std::fs::read_to_string(format!("/sys/class/net/{interface}/address"))
            .ok()?
            .trim(),
    )
}

/// A snapshot of the kernel's complete IPv4 neighbours (the ARP table),
/// read once per loop pass that needs one: reading /proc/net/arp per
/// session made a burst of 128 sessions going Up cost the loop 15 ms.
#[derive(Default)]
pub struct Neighbours(std::collections::HashMap<(Ipv4Addr, String), [u8; 6]>);

impl Neighbours {
    pub fn read() -> Self {
        let Ok(table) = std::fs::read_to_string("/proc/net/arp") else {
            return Self::default();
        };
        Self(
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    // IP address, HW type, Flags (ATF_COM 0x2: complete;
                    // a permanent entry is 0x6), HW address, Mask, Device.
                    let flags = u32::from_str_radix(f.get(2)?.trim_start_matches("0x"), 16).ok()?;
                    if f.len() < 6 || flags & 0x2 == 0 {
                        return None;
                    }
                    Some(((f[0].parse().ok()?, f[5].to_string()), parse_mac(f[3])?))
                })
                .collect(),
        )
    }

    /// The neighbour's MAC on `interface` (IPv4 only).
    pub fn mac(&self, peer: IpAddr, interface: &str) -> Option<[u8; 6]> {
        let IpAddr::V4(peer) = peer else { return None };
        self.0.get(&(peer, interface.to_string())).copied()
    }
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// IPv4 as v4-mapped IPv6, the maps' address encoding.
pub fn mapped(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_strictly() {
        assert_eq!(parse_mac("02:1c:00:00:00:01"), Some([2, 0x1c, 0, 0, 0, 1]));
        assert_eq!(parse_mac("02:1c:00:00:00"), None);
        assert_eq!(parse_mac("02:1c:00:00:00:01:02"), None);
        assert_eq!(parse_mac("zz:1c:00:00:00:01"), None);
    }

    #[test]
    fn addresses_map_like_the_kernel_side() {
        assert_eq!(
            mapped("192.0.2.1".parse().unwrap())[10..],
            [0xff, 0xff, 192, 0, 2, 1]
        );
    }
}
