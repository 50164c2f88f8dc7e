//! The `xdp` backend: the fast path `lc_bfd` answers the peer from the
//! kernel while a session is Up and steady (RX-clocked), validates every
//! BFD frame before userspace sees it, and counts drops by reason and
//! verdicts per CPU (placement evidence). Userspace keeps the state
//! machine, bring-up, Polls it starts and every transition.

use super::responder::{Detection, Heartbeat, Prepared, Responder};
use super::{Availability, BackendKind, Transmitter, MAX_SLEEP_NS};
use crate::config::EngineConfig;
use anyhow::{bail, Context, Result};
use aya::maps::{Array, HashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::{Xdp, XdpMode};
use linecard_api::control::FastPathCounters;
use linecard_common::bfd::{
    AuthKeyRef, AuthSecret, EchoPeer, SessionConfig, SessionState, SlotConfig, DROP_REASONS,
    FLAG_REPLY, KEYS_PER_SESSION, MAX_AUTH_KEYS, MAX_SESSIONS, SWEEP_SLOTS, VERDICTS,
};
use linecard_common::names;
use std::net::IpAddr;
use std::os::fd::RawFd;

mod handover;
pub use handover::Adoption;

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
    /// Their indexes: a packet that arrived on one of them went through
    /// `lc_bfd` before it reached a socket.
    ifindexes: Vec<u32>,
    /// Owns the kernel's sweep events (LC_EVENTS): sends each session's
    /// first Down and its own clock's packets.
    responder: Responder,
    /// What LC_SWEEP_LEN holds: the highest slot armed so far + 1.
    sweep_len: u32,
    /// The Key IDs in LC_AUTH_KEYS, by our discriminator: what `forget`
    /// removes.
    keys: std::collections::HashMap<u32, Vec<u8>>,
    /// LC_XMIT_SEQ in our memory: bfd.XmitAuthSeq of every authenticated
    /// session, shared with the kernel's signed replies.
    xmit_seq: std::sync::Arc<super::xmit_seq::Mapping>,
    /// A descriptor of every map of ours, by name, whoever owns the map
    /// now (the responder takes some): what a handover pins.
    maps: Vec<(String, std::os::fd::OwnedFd)>,
    /// Our attachment to each interface, by name: what a handover pins.
    links: Vec<(String, aya::programs::xdp::XdpLinkId)>,
    /// A running engine's maps and links this one takes over, until it
    /// has (`handover.rs`).
    adoption: Option<Adoption>,
    /// Attachments taken over with the program in them, ours too (the
    /// same build and switches: nothing was loaded or verified).
    kept_links: Vec<(String, aya::programs::links::FdLink)>,
    /// What our `lc_bfd` is (`linecard_bpf_objects::identity`).
    identity: String,
    /// `lc_bfd` was loaded by this process (not kept from the engine
    /// before us).
    loaded: bool,
}

impl FastPath {
    /// Loads the program and starts the responder as `config` asks (see
    /// [`Responder`]); with `adoption`, on the maps a running engine
    /// handed over (their pins are removed once held).
    pub fn load(config: &EngineConfig, adoption: Option<Adoption>) -> Result<Self> {
        let switches = linecard_bpf_objects::Switches {
            fixed_sweep: config.xdp_sweep_fixed_period,
            unverified_auth: !config.verify_authentication,
            ..linecard_bpf_objects::Switches::default()
        };
        let pins = adoption
            .as_ref()
            .map(Adoption::map_pins)
            .unwrap_or_default();
        let mut bpf = linecard_bpf_objects::load_adopting(switches, &pins)?;
        if let Some(adoption) = adoption.as_ref() {
            adoption.maps_held();
        }
        let maps = handover::descriptors(&bpf)?;
        let identity = linecard_bpf_objects::identity(switches)?;
        // Taking over from an engine running this very program, in place
        // and attached: keep it, verifying nothing (a second of CPU that
        // would cost the running engine's replies their schedule).
        let loaded = !adoption.as_ref().is_some_and(|a| a.runs(&identity));
        if adoption.is_some() {
            crate::log::line(&if loaded {
                format!("taking over with a program of our own (lc_bfd {identity}): loaded and swapped in")
            } else {
                format!("taking over the running program (lc_bfd {identity}, the same as this build's): nothing to load")
            });
        }
        if loaded {
            let program: &mut Xdp = bpf
                .program_mut(names::BFD_PROGRAM)
                .context("the object has no lc_bfd")?
                .try_into()?;
            program
                .load()
                .context("the kernel's verifier refused lc_bfd")?;
        }
        let events = RingBuf::try_from(
            bpf.take_map(names::EVENTS_MAP)
                .context("no events ring buffer")?,
        )?;
        let clock_sent = Array::try_from(
            bpf.take_map(names::CLOCK_SENT_MAP)
                .context("no clock-sent map")?,
        )?;
        // A handle of its own on the sessions' state for the responder
        // thread (the loop keeps the object's): the same map under a
        // duplicated descriptor. Not BPF_MAP_GET_FD_BY_ID, which needs
        // CAP_SYS_ADMIN, a capability the service does not have.
        let states = {
            let fd = match bpf.map(names::STATE_MAP).context("no state map")? {
                aya::maps::Map::Array(data) => {
                    use std::os::fd::AsFd;
                    data.fd().as_fd().try_clone_to_owned()?
                }
                _ => anyhow::bail!("the state map is not an array"),
            };
            Array::try_from(aya::maps::Map::Array(aya::maps::MapData::from_fd(fd)?))?
        };
        let heartbeat = Heartbeat {
            map: Array::try_from(
                bpf.take_map(names::DEAD_MAN_MAP)
                    .context("no dead-man map")?,
            )?,
            limit_ns: u64::from(config.dead_man_ms) * 1_000_000,
        };
        let xmit_seq = match bpf.map(names::XMIT_SEQ_MAP) {
            Some(aya::maps::Map::Array(data)) => super::xmit_seq::Mapping::of(data)?,
            _ => anyhow::bail!("no LC_XMIT_SEQ array"),
        };
        let sweep_len = handover::sweep_len(&bpf);
        let taking_over = adoption.is_some();
        let mut fast = Self {
            xmit_seq,
            bpf,
            interfaces: Vec::new(),
            ifindexes: Vec::new(),
            maps,
            links: Vec::new(),
            kept_links: Vec::new(),
            identity,
            loaded,
            adoption,
            sweep_len,
            keys: std::collections::HashMap::new(),
            responder: Responder::idle(
                events,
                clock_sent,
                states,
                heartbeat,
                config.responder_scheduling(),
            )?,
        };
        // Taking over, the responder starts once the running engine's has
        // stopped (`start_responder`).
        if !taking_over {
            fast.responder.run()?;
        }
        Ok(fast)
    }

    /// Attaches in native (driver) mode; generic mode would say nothing
    /// about where the driver runs us.
    pub fn attach(&mut self, interface: &str) -> Result<()> {
        if self.interfaces.iter().any(|i| i == interface) {
            return Ok(());
        }
        let taken = self.adoption.as_ref().and_then(|a| a.link(interface));
        if let (Some(link), false) = (taken, self.loaded) {
            // The running engine's attachment and its program, ours now.
            self.kept_links.push((interface.to_string(), link?));
            self.interfaces.push(interface.to_string());
            self.ifindexes.extend(crate::echo::ifindex(interface));
            return Ok(());
        }
        let program: &mut Xdp = self
            .bpf
            .program_mut(names::BFD_PROGRAM)
            .context("lc_bfd in the object")?
            .try_into()?;
        if !self.loaded {
            // An interface the running program was not attached to: this
            // one needs a program of its own after all.
            program
                .load()
                .context("the kernel's verifier refused lc_bfd")?;
            self.loaded = true;
        }
        let link = match self.adoption.as_ref().and_then(|a| a.link(interface)) {
            // The running engine's attachment, our program swapped in
            // atomically (BPF_LINK_UPDATE): no frame goes unjudged.
            Some(link) => program
                .attach_to_link(aya::programs::xdp::XdpLink::try_from(link?)?)
                .with_context(|| format!("taking over lc_bfd's attachment to {interface}"))?,
            None => program
                .attach(interface, XdpMode::Driver)
                .with_context(|| format!("attaching lc_bfd to {interface} in native mode"))?,
        };
        self.links.push((interface.to_string(), link));
        self.interfaces.push(interface.to_string());
        self.ifindexes.extend(crate::echo::ifindex(interface));
        Ok(())
    }

    /// What our `lc_bfd` is (`linecard_bpf_objects::identity`): a
    /// successor running the same keeps it instead of loading its own.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether `lc_bfd` judged a packet that arrived on `ifindex` before
    /// any socket saw it (it runs on every frame of the interfaces it is
    /// attached to).
    pub fn saw_first(&self, ifindex: u32) -> bool {
        self.ifindexes.contains(&ifindex)
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
        self.sessions()?.insert(discr, config, 0).with_context(|| {
            format!("writing the session to LC_SESSIONS (it holds {MAX_SESSIONS} sessions)")
        })?;
        Ok(())
    }

    /// Session `slot`'s bfd.XmitAuthSeq, as the kernel's signed replies
    /// take it.
    pub fn xmit_sequence(
        &self,
        slot: u32,
    ) -> Result<std::sync::Arc<super::xmit_seq::MappedSequence>> {
        self.xmit_seq.counter(slot)
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

    /// Installs the keys of authenticated session `discr` (Key ID,
    /// secret), so that the kernel verifies its packets (RFC 5880 6.7)
    /// before they count as heard. A secret longer than 20 bytes is a
    /// configuration `AuthConfig::check` has already refused.
    pub fn install_keys(&mut self, discr: u32, keys: &[(u8, &[u8])]) -> Result<()> {
        let mut map: HashMap<&mut MapData, AuthKeyRef, AuthSecret> = HashMap::try_from(
            self.bpf
                .map_mut(names::AUTH_KEYS_MAP)
                .context("no auth keys map")?,
        )?;
        for &(id, secret) in keys {
            let value = AuthSecret::new(secret).context("a key longer than 20 bytes")?;
            map.insert(AuthKeyRef::new(discr, id), value, 0)
                .with_context(|| {
                    format!(
                        "writing a key to LC_AUTH_KEYS (it holds {MAX_AUTH_KEYS}, {KEYS_PER_SESSION} per session)"
                    )
                })?;
            self.keys.entry(discr).or_default().push(id);
        }
        Ok(())
    }

    /// Forgets a removed session, and its keys.
    pub fn forget(&mut self, discr: u32) -> Result<()> {
        self.responder.disarm(discr);
        if let Some(ids) = self.keys.remove(&discr) {
            let mut map: HashMap<&mut MapData, AuthKeyRef, AuthSecret> = HashMap::try_from(
                self.bpf
                    .map_mut(names::AUTH_KEYS_MAP)
                    .context("no auth keys map")?,
            )?;
            for key_id in ids {
                match map.remove(&AuthKeyRef::new(discr, key_id)) {
                    Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
                    Err(e) => return Err(e).context("removing a key from LC_AUTH_KEYS"),
                }
            }
        }
        match self.sessions()?.remove(&discr) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e).context("removing the session from LC_SESSIONS"),
        }
    }

    /// Lets the fast path reflect `peer`'s self-addressed echoes
    /// (RFC 5880 6.4): the peer of session `discr`, which advertises a
    /// Required Min Echo RX.
    pub fn reflect_echoes_of(&mut self, peer: IpAddr, discr: u32) -> Result<()> {
        let mut peers: HashMap<&mut MapData, [u8; 16], EchoPeer> = HashMap::try_from(
            self.bpf
                .map_mut(names::ECHO_PEERS_MAP)
                .context("no echo peers map")?,
        )?;
        peers
            .insert(
                mapped(peer),
                EchoPeer {
                    discr,
                    _reserved: 0,
                },
                0,
            )
            .context("writing the peer to LC_ECHO_PEERS")?;
        Ok(())
    }

    /// Stops reflecting `peer`'s echoes.
    pub fn stop_reflecting(&mut self, peer: IpAddr) -> Result<()> {
        let mut peers: HashMap<&mut MapData, [u8; 16], EchoPeer> = HashMap::try_from(
            self.bpf
                .map_mut(names::ECHO_PEERS_MAP)
                .context("no echo peers map")?,
        )?;
        match peers.remove(&mapped(peer)) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e).context("removing the peer from LC_ECHO_PEERS"),
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
        // The sweep visits slots below LC_SWEEP_LEN only: raise it once
        // this slot is armed (written after the slot, so the sweep never
        // visits a slot before its configuration is in place).
        if config.armed != 0 && slot >= self.sweep_len {
            let mut len: Array<&mut MapData, u32> = Array::try_from(
                self.bpf
                    .map_mut(names::SWEEP_LEN_MAP)
                    .context("no sweep length map")?,
            )?;
            len.set(0, slot + 1, 0).context("writing LC_SWEEP_LEN")?;
            self.sweep_len = slot + 1;
        }
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

    /// What the sweep holds for `slot` (a handed-over session's, read by
    /// its adopter).
    pub fn slot(&self, slot: u32) -> Result<SlotConfig> {
        let slots: Array<&MapData, SlotConfig> =
            Array::try_from(self.bpf.map(names::SLOTS_MAP).context("no slots map")?)?;
        Ok(slots.get(&slot, 0)?)
    }

    /// Handles of their own on the maps the metrics endpoint reads per
    /// slot (`LC_GAPS`, `LC_STATE`) and the scrape window it opens
    /// (`LC_GAPS_WINDOW`), for its thread.
    pub fn metrics_maps(&self) -> Result<crate::metrics::KernelMaps> {
        let fd = |name: &str| -> Result<MapData> {
            let (_, fd) = (self.maps.iter())
                .find(|(n, _)| n == name)
                .with_context(|| format!("no {name} map"))?;
            Ok(MapData::from_fd(fd.try_clone()?)?)
        };
        Ok(crate::metrics::KernelMaps {
            gaps: PerCpuArray::try_from(aya::maps::Map::PerCpuArray(fd(names::GAPS_MAP)?))?,
            state: Array::try_from(aya::maps::Map::Array(fd(names::STATE_MAP)?))?,
            window: Array::try_from(aya::maps::Map::Array(fd(names::GAPS_WINDOW_MAP)?))?,
        })
    }

    /// The kernel's view of the session in `slot`.
    pub fn state(&self, slot: u32) -> Result<SessionState> {
        let states: Array<&MapData, SessionState> =
            Array::try_from(self.bpf.map(names::STATE_MAP).context("no state map")?)?;
        Ok(states.get(&slot, 0)?)
    }

    /// The kernel's digest budget and expected digests of the session in
    /// `slot` (`linecard_common::verify`).
    pub fn verify_guard(&self, slot: u32) -> Result<linecard_common::verify::VerifyGuard> {
        let guards: Array<&MapData, linecard_common::verify::VerifyGuard> =
            Array::try_from(self.bpf.map(names::VERIFY_MAP).context("no verify map")?)?;
        Ok(guards.get(&slot, 0)?)
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
            drops_by_reason: drops
                .iter()
                .enumerate()
                .map(|(i, &n)| (linecard_common::bfd::drop::name(i as u32).to_string(), n))
                .collect(),
            drops,
            verdicts_per_cpu: per_cpu,
            responder: self.responder.policy(),
            own_clock_sent: self.responder.own_clock_sent(),
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

/// A snapshot of the kernel's usable neighbours, IPv4 and IPv6 (one
/// RTM_GETNEIGH dump over rtnetlink), read once per loop pass that needs
/// one: reading the table per session made a burst of 128 sessions going
/// Up cost the loop 15 ms.
#[derive(Default)]
pub struct Neighbours(std::collections::HashMap<(IpAddr, u32), [u8; 6]>);

/// `ndm_state` bits of an entry whose link-layer address can be used:
/// REACHABLE, STALE, DELAY, PROBE, PERMANENT.
const NUD_USABLE: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x80;
const RTM_GETNEIGH: u16 = 30;
const RTM_NEWNEIGH: u16 = 28;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// nlmsghdr and ndmsg sizes.
const NLMSG_HDR: usize = 16;
const NDMSG: usize = 12;

impl Neighbours {
    /// The dump; an empty table if rtnetlink fails (no offload until the
    /// next try, and the session keeps being answered from userspace).
    pub fn read() -> Self {
        Self::dump().unwrap_or_default()
    }

    fn dump() -> std::io::Result<Self> {
        use std::io::{Read, Write};
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own; File closes it.
        let mut socket = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let mut request = Vec::with_capacity(NLMSG_HDR + NDMSG);
        request.extend_from_slice(&((NLMSG_HDR + NDMSG) as u32).to_ne_bytes());
        request.extend_from_slice(&RTM_GETNEIGH.to_ne_bytes());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
        request.extend_from_slice(&flags.to_ne_bytes());
        request.extend_from_slice(&1u32.to_ne_bytes()); // sequence
        request.extend_from_slice(&0u32.to_ne_bytes()); // to the kernel
        request.extend_from_slice(&[libc::AF_UNSPEC as u8; 1]);
        request.extend_from_slice(&[0u8; 11]); // any interface, state, type
        socket.write_all(&request)?;
        let mut table = std::collections::HashMap::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = socket.read(&mut buf)?;
            let mut at = 0;
            while at + NLMSG_HDR <= n {
                let len = u32::from_ne_bytes(buf[at..at + 4].try_into().expect("a 4-byte slice"))
                    as usize;
                let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
                if len < NLMSG_HDR || at + len > n {
                    return Ok(Self(table));
                }
                match kind {
                    NLMSG_DONE | NLMSG_ERROR => return Ok(Self(table)),
                    RTM_NEWNEIGH => {
                        if let Some((key, mac)) = parse_neighbour(&buf[at + NLMSG_HDR..at + len]) {
                            table.insert(key, mac);
                        }
                    }
                    _ => {}
                }
                at += (len + 3) & !3;
            }
            if n == 0 {
                return Ok(Self(table));
            }
        }
    }

    /// The neighbour's MAC on `interface`.
    pub fn mac(&self, peer: IpAddr, interface: &str) -> Option<[u8; 6]> {
        let name = std::ffi::CString::new(interface).ok()?;
        // SAFETY: a NUL-terminated name we own.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        self.0.get(&(peer, index)).copied()
    }
}

/// One RTM_NEWNEIGH payload (ndmsg, then attributes): the usable entry's
/// (address, interface index) and MAC.
fn parse_neighbour(payload: &[u8]) -> Option<((IpAddr, u32), [u8; 6])> {
    let ndmsg = payload.get(..NDMSG)?;
    let ifindex = i32::from_ne_bytes(ndmsg[4..8].try_into().ok()?) as u32;
    let state = u16::from_ne_bytes([ndmsg[8], ndmsg[9]]);
    if state & NUD_USABLE == 0 {
        return None;
    }
    let (mut dst, mut mac) = (None, None);
    let mut attrs = &payload[NDMSG..];
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        let kind = u16::from_ne_bytes([attrs[2], attrs[3]]);
        let value = attrs.get(4..len)?;
        match (kind, value.len()) {
            (NDA_DST, 4) => dst = Some(IpAddr::from(<[u8; 4]>::try_from(value).ok()?)),
            (NDA_DST, 16) => dst = Some(IpAddr::from(<[u8; 16]>::try_from(value).ok()?)),
            (NDA_LLADDR, 6) => mac = Some(<[u8; 6]>::try_from(value).ok()?),
            _ => {}
        }
        attrs = attrs.get(((len + 3) & !3).min(attrs.len())..)?;
    }
    Some(((dst?, ifindex), mac?))
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
    fn neighbour_entries_parse_and_unusable_ones_are_skipped() {
        let entry = |state: u16, dst: &[u8]| {
            let mut p = vec![10u8, 0, 0, 0];
            p.extend_from_slice(&3i32.to_ne_bytes());
            p.extend_from_slice(&state.to_ne_bytes());
            p.extend_from_slice(&[0, 0]);
            p.extend_from_slice(&((4 + dst.len()) as u16).to_ne_bytes());
            p.extend_from_slice(&NDA_DST.to_ne_bytes());
            p.extend_from_slice(dst);
            p.extend_from_slice(&10u16.to_ne_bytes());
            p.extend_from_slice(&NDA_LLADDR.to_ne_bytes());
            p.extend_from_slice(&[2, 0x1c, 0, 0, 0, 2, 0, 0]);
            p
        };
        let v6: [u8; 16] = "2001:db8::2"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets();
        assert_eq!(
            parse_neighbour(&entry(0x02, &v6)),
            Some(((IpAddr::from(v6), 3), [2, 0x1c, 0, 0, 0, 2]))
        );
        assert_eq!(
            parse_neighbour(&entry(0x80, &[192, 0, 2, 2])).map(|(k, _)| k),
            Some(("192.0.2.2".parse().unwrap(), 3))
        );
        // INCOMPLETE (0x01) and FAILED (0x20) have no usable address.
        assert_eq!(parse_neighbour(&entry(0x01, &v6)), None);
        assert_eq!(parse_neighbour(&entry(0x20, &v6)), None);
        // Truncated attributes are refused, not read past.
        let full = entry(0x02, &v6);
        assert_eq!(parse_neighbour(&full[..full.len() - 6]), None);
    }

    #[test]
    fn addresses_map_like_the_kernel_side() {
        assert_eq!(
            mapped("192.0.2.1".parse().unwrap())[10..],
            [0xff, 0xff, 192, 0, 2, 1]
        );
    }
}
