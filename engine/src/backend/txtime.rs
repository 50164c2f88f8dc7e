//! The `txtime` backend: packets handed to the kernel ahead of their
//! departure with SO_TXTIME, released by the etf qdisc on time even when the
//! daemon is not scheduled.
//!
//! Its hazard (from the reference): a pipelined sender answered Polls a
//! second late. Finals therefore never enter the pipeline: they leave at
//! once, untimed ([`Pipeline::admit`] only admits periodic packets).

use super::{Availability, BackendKind, Departure, Transmitter, MAX_SLEEP_NS};
use crate::config::SessionSpec;
use crate::io::TxSocket;
use crate::session::table::SessionId;
use crate::session::{Nanos, Session};
use crate::wire::Repr;
use std::collections::{HashMap, VecDeque};
use std::process::{Command, Stdio};

/// How early before a packet's departure the etf qdisc hands it to the
/// device (its `delta`).
pub const ETF_DELTA_NS: Nanos = 200_000;
/// Departure of a packet that must leave at once. etf drops a packet whose
/// time is already past or earlier than the last one it released (released
/// up to `delta` early), so "at once" is just beyond `delta`.
pub const URGENT_LEAD_NS: Nanos = ETF_DELTA_NS + 50_000;
/// The traffic-control class of our BFD packets (SO_PRIORITY): `bfd:1`.
/// htb files a packet whose priority names one of its classes there
/// directly, so the etf leaf sees our sockets' packets and nothing else.
pub const BFD_CLASS: u32 = 0x0bfd_0001;
/// Everything else on the interface (ARP, neighbour discovery, other
/// daemons): `bfd:2`, a plain FIFO.
pub const OTHER_CLASS: u32 = 0x0bfd_0002;

/// The txtime backend: periodic packets of a steady session handed to the
/// kernel up to `depth` ahead of their departure; everything else (Finals,
/// bring-up, Polls) on time with an urgent departure.
pub struct Txtime {
    depth: usize,
    pipelines: HashMap<SessionId, Pipeline>,
    scopes: Vec<EtfScope>,
}

impl Txtime {
    pub fn new(depth: usize) -> Self {
        Self {
            depth: depth.max(1),
            pipelines: HashMap::new(),
            scopes: Vec::new(),
        }
    }
}

impl Transmitter for Txtime {
    fn kind(&self) -> BackendKind {
        BackendKind::Txtime
    }

    fn prepare_session(
        &mut self,
        spec: &SessionSpec,
        socket: &mut TxSocket,
    ) -> std::io::Result<()> {
        let interface = spec.interface.as_deref().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the txtime backend installs etf on the session's interface: name it",
            )
        })?;
        if !self.scopes.iter().any(|s| s.device == interface) {
            self.scopes.push(EtfScope::install(interface, Leaf::Etf)?);
        }
        socket.set_priority(BFD_CLASS)?;
        socket.enable_txtime(URGENT_LEAD_NS as u64)
    }

    fn transmit(
        &mut self,
        now: Nanos,
        id: SessionId,
        session: &mut Session,
        send: &mut dyn FnMut(&Repr, Departure),
    ) {
        let pipe = self
            .pipelines
            .entry(id)
            .or_insert_with(|| Pipeline::new(self.depth));
        pipe.advance(now);
        // A Final, or a packet whose time passed while we were not
        // scheduled, leaves at once and outside the pipeline: queued behind
        // periodic packets a Final would answer its Poll late (the
        // reference's first pipelined build: a second late).
        while let Some(packet) = session.poll_transmit(now) {
            send(&packet, Departure::At(now + URGENT_LEAD_NS));
        }
        // Only a steady session's packets go ahead of time: a queued packet
        // cannot be recalled, so bring-up and Polls (whose contents change
        // with every packet received) leave on time.
        if !session.is_steady() {
            return;
        }
        while let Some(due) = session.next_transmit_ns() {
            if !pipe.admit(now, due) {
                break;
            }
            let Some(packet) = session.poll_transmit(due) else {
                break;
            };
            send(&packet, Departure::At(due.max(now + URGENT_LEAD_NS)));
        }
    }

    fn next_wake(&self, id: SessionId, session: &Session) -> Option<Nanos> {
        let queued = self.pipelines.get(&id).and_then(Pipeline::next_departure);
        match (session.is_steady(), queued) {
            // A slot frees when the oldest queued packet departs.
            (true, Some(slot)) => Some(session.detection_deadline().map_or(slot, |d| d.min(slot))),
            _ => session.next_deadline(),
        }
    }

    fn sleep_ns(&self, until_wake: Option<Nanos>, _until_detection: Option<Nanos>) -> Nanos {
        until_wake.map_or(MAX_SLEEP_NS, |d| d.min(MAX_SLEEP_NS))
    }

    fn forget(&mut self, id: SessionId) {
        self.pipelines.remove(&id);
    }
}

/// CLOCK_TAI ns at engine time `at`, given engine time `now`.
pub fn tai_ns(now: Nanos, at: Nanos) -> u64 {
    crate::io::clock_ns(libc::CLOCK_TAI).saturating_add_signed(at - now)
}

/// The leaf that holds our BFD packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// etf on CLOCK_TAI: what the backend runs on.
    Etf,
    /// A FIFO in etf's place: the same scoping, for kernels without etf
    /// (tests prove the classification here).
    Fifo,
}

/// The qdisc tree that scopes etf to our BFD packets on one interface:
/// an htb root `bfd:` whose class `bfd:1` ([`BFD_CLASS`], chosen by our
/// sockets' SO_PRIORITY) has the etf leaf, and whose default class `bfd:2`
/// carries everything else. etf drops any packet without a transmit time,
/// so unscoped it would starve ARP and with it every session. Removed on
/// drop; an interface that already has a root qdisc of its own is refused,
/// never replaced.
pub struct EtfScope {
    pub device: String,
}

fn tc(args: &[&str]) -> std::io::Result<String> {
    let out = Command::new("tc").args(args).output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "`tc {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl EtfScope {
    pub fn install(device: &str, leaf: Leaf) -> std::io::Result<Self> {
        let root = tc(&["qdisc", "show", "dev", device, "root"])?;
        // "qdisc noqueue 0: root refcnt 2": the kernel's default (handle 0).
        let handle = root.split_whitespace().nth(2).unwrap_or("0:");
        if handle != "0:" {
            return Err(std::io::Error::other(format!(
                "{device} already has a root qdisc ({}); the txtime backend will not replace it",
                root.trim()
            )));
        }
        let scope = Self {
            device: device.to_string(),
        };
        let d = device;
        tc(&[
            "qdisc", "add", "dev", d, "root", "handle", "bfd:", "htb", "default", "2",
        ])?;
        for class in ["bfd:1", "bfd:2"] {
            tc(&[
                "class", "add", "dev", d, "parent", "bfd:", "classid", class, "htb", "rate",
                "10gbit",
            ])?;
        }
        let delta = ETF_DELTA_NS.to_string();
        let leaf_args: Vec<&str> = match leaf {
            Leaf::Etf => vec!["etf", "clockid", "CLOCK_TAI", "delta", &delta],
            Leaf::Fifo => vec!["pfifo"],
        };
        let mut args = vec![
            "qdisc", "add", "dev", d, "parent", "bfd:1", "handle", "bfd1:",
        ];
        args.extend(leaf_args);
        tc(&args)?;
        Ok(scope)
    }

    /// Packets sent through class `classid` so far.
    pub fn class_packets(&self, classid: u32) -> std::io::Result<u64> {
        let name = format!("{:x}:{:x}", classid >> 16, classid & 0xffff);
        let out = tc(&["-s", "class", "show", "dev", &self.device])?;
        let mut in_class = false;
        for line in out.lines() {
            if line.starts_with("class ") {
                in_class = line.split_whitespace().nth(2) == Some(name.as_str());
            } else if in_class {
                if let Some(rest) = line.trim().strip_prefix("Sent ") {
                    // "Sent 1234 bytes 17 pkt (dropped 0, ..."
                    let words: Vec<&str> = rest.split_whitespace().collect();
                    return words.get(2).and_then(|w| w.parse().ok()).ok_or_else(|| {
                        std::io::Error::other(format!("unreadable tc line: {line}"))
                    });
                }
            }
        }
        Err(std::io::Error::other(format!(
            "no class {name} on {}",
            self.device
        )))
    }
}

impl Drop for EtfScope {
    fn drop(&mut self) {
        let _ = tc(&[
            "qdisc",
            "del",
            "dev",
            &self.device,
            "root",
            "handle",
            "bfd:",
        ]);
    }
}

/// Whether this kernel has the etf qdisc. Probed in a private network
/// namespace (`unshare -n`), so nothing on the host changes.
pub fn availability() -> Availability {
    let probe = Command::new("unshare")
        .args([
            "-n",
            "tc",
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
            "etf",
            "clockid",
            "CLOCK_TAI",
            "delta",
            "300000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(out) if out.status.success() => Availability::Available,
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let reason = if stderr.contains("Operation not permitted") {
                "probing for the etf qdisc needs root".to_string()
            } else {
                format!(
                    "this kernel has no etf qdisc (`tc qdisc add ... etf` said: {}); SO_TXTIME has nothing to honour it. \
                     Run the txtime backend on a host whose kernel has CONFIG_NET_SCH_ETF",
                    stderr.trim()
                )
            };
            Availability::Unavailable { reason }
        }
        Err(e) => Availability::Unavailable {
            reason: format!(
                "cannot run `unshare`/`tc` to probe for etf ({e}); install util-linux and iproute2"
            ),
        },
    }
}

/// How many periodic packets may wait in the qdisc, and which.
#[derive(Debug)]
pub struct Pipeline {
    depth: usize,
    /// Departure times (ns) of packets handed over and not yet departed.
    queued: VecDeque<i64>,
}

impl Pipeline {
    /// `depth` 1: one packet in flight; N: pipelined N deep.
    pub fn new(depth: usize) -> Self {
        assert!(depth >= 1);
        Self {
            depth,
            queued: VecDeque::new(),
        }
    }

    /// Forgets packets that have departed by `now`.
    pub fn advance(&mut self, now: i64) {
        while self.queued.front().is_some_and(|&t| t <= now) {
            self.queued.pop_front();
        }
    }

    /// Whether a periodic packet departing at `departure` may be handed over
    /// now; records it if so.
    pub fn admit(&mut self, now: i64, departure: i64) -> bool {
        self.advance(now);
        if self.queued.len() >= self.depth {
            return false;
        }
        self.queued.push_back(departure);
        true
    }

    pub fn in_flight(&self) -> usize {
        self.queued.len()
    }

    /// When the oldest packet in flight departs.
    pub fn next_departure(&self) -> Option<Nanos> {
        self.queued.front().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::{config_3x10 as config, Side, SimPair};

    const MS: Nanos = 1_000_000;

    /// A session brought Up and steady by a simulated peer, taken out of
    /// the simulation at `now`.
    fn steady_session() -> (Session, Nanos) {
        let mut pair = SimPair::new(config(1), config(2), 100_000, 3);
        pair.run_until(5_000 * MS);
        let now = pair.now();
        let session = pair.session_mut(Side::A).clone();
        assert!(session.is_steady(), "{:?}", session.state());
        (session, now)
    }

    fn run(t: &mut Txtime, now: Nanos, session: &mut Session) -> Vec<(Repr, Departure)> {
        let mut sent = Vec::new();
        t.transmit(now, 0, session, &mut |p, d| sent.push((*p, d)));
        sent
    }

    #[test]
    fn a_steady_session_hands_over_depth_packets_ahead_at_their_departure() {
        let (mut session, now) = steady_session();
        let mut t = Txtime::new(3);
        let due = session.next_transmit_ns().unwrap();
        let sent = run(&mut t, now, &mut session);
        assert_eq!(sent.len(), 3, "three in flight");
        let times: Vec<Nanos> = sent
            .iter()
            .map(|(_, d)| match d {
                Departure::At(t) => *t,
                Departure::Now => panic!("etf drops untimed packets"),
            })
            .collect();
        assert_eq!(times[0], due.max(now + URGENT_LEAD_NS));
        for pair in times.windows(2) {
            let gap = pair[1] - pair[0];
            // RFC 5880 section 6.8.7: 75-100 % of the 10 ms interval.
            assert!((7_500_000..=10_000_000).contains(&gap), "gap {gap}");
        }
        assert!(run(&mut t, now, &mut session).is_empty(), "pipeline full");
        assert_eq!(
            t.next_wake(0, &session),
            Some(times[0].min(session.detection_deadline().unwrap()))
        );
        // Once the first departs, exactly one more is handed over.
        assert_eq!(run(&mut t, times[0], &mut session).len(), 1);
    }

    #[test]
    fn a_final_leaves_at_once_even_with_the_pipeline_full() {
        let (mut session, now) = steady_session();
        let mut t = Txtime::new(5);
        assert_eq!(run(&mut t, now, &mut session).len(), 5);
        // The peer polls: the Final must not wait behind five packets.
        let mut poll = session.steady_packet();
        poll.my_discr = session.remote().discr;
        poll.your_discr = session.config().local_discr;
        poll.poll = true;
        session.receive(now + MS, &poll, &poll.to_bytes()).unwrap();
        let sent = run(&mut t, now + MS, &mut session);
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(sent[0].0.final_);
        assert_eq!(sent[0].1, Departure::At(now + MS + URGENT_LEAD_NS));
    }

    #[test]
    fn a_session_not_up_sends_on_time_not_ahead() {
        let mut session = Session::new(config(1), 0, 1);
        let mut t = Txtime::new(4);
        let sent = run(&mut t, 0, &mut session);
        assert_eq!(sent.len(), 1, "the bootstrap packet only");
        assert_eq!(sent[0].1, Departure::At(URGENT_LEAD_NS));
        assert!(run(&mut t, 1, &mut session).is_empty());
    }

    #[test]
    fn depth_one_holds_one_packet_in_flight() {
        let mut p = Pipeline::new(1);
        assert!(p.admit(0, 10));
        assert!(!p.admit(1, 20), "the first has not departed");
        assert!(p.admit(10, 20), "departed at 10");
    }

    #[test]
    fn depth_n_pipelines_n_deep() {
        let mut p = Pipeline::new(5);
        for i in 0..5 {
            assert!(p.admit(0, 10 * (i + 1)));
        }
        assert!(!p.admit(0, 60));
        assert_eq!(p.in_flight(), 5);
        p.advance(25);
        assert_eq!(p.in_flight(), 3);
    }
}
