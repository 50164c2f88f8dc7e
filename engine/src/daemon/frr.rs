//! FRR bfdd drives the engine over its dataplane protocol: bfdd listens
//! (`--dplaneaddr ipv4:ADDR:PORT`), we connect, run the sessions it adds,
//! report their state, and answer its counters requests.
//!
//! Facts this module defends (docs/frr-dataplane.md, bfdd 8.4.4):
//! - DP_ADD_SESSION is add *or update*, keyed by bfdd's local discriminator
//!   (`lid`); an update changes timers through a Poll Sequence, never by
//!   recreating the session.
//! - bfdd adopts the state we report as its own local state, and resets it
//!   to Down whenever it (re)registers a session: we report after every add.
//! - bfdd busy-waits on a counters reply with the request's id: every
//!   request is answered at once, zeros for an unknown lid.
//! - 8.4.4 never reclaims input buffer space on the counters path; an
//!   ECHO_REQUEST every 0.5 s makes it read asynchronously, which does.
//! - bfdd sends no deletes when it exits: EOF means every session it owned
//!   is gone (drop and recreate; its next registration burst brings them
//!   back with new discriminators). Hold mode (opt-in) keeps them Up on the
//!   wire instead, adopts each by address pair when the new bfdd re-adds
//!   it (our discriminator stays: the peer sees nothing), and sweeps those
//!   not re-added.
//! - On reconnect bfdd registers every session again with a new lid.

use super::{log, Engine};
use crate::bfddp::{flags, Framer, Message, SessionCounters, SessionMsg, StateChange};
use crate::config::SessionSpec;
use crate::session::table::SessionId;
use crate::session::{Nanos, Session};
use linecard_api::control::State;
use linecard_api::timers::Timers;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};

/// How often we say hello to bfdd (see the module comment).
const KEEPALIVE_NS: Nanos = 500_000_000;
/// How soon we try again after bfdd refused or dropped the connection.
const RECONNECT_NS: Nanos = 1_000_000_000;
/// The same while holding sessions: a restarted bfdd runs its sessions in
/// software until a dataplane connects, and their Down packets (your
/// discriminator 0, matched by address) would take the peer down.
const HOLD_RECONNECT_NS: Nanos = 50_000_000;
/// How long a connect may stay in progress before it is given up. It
/// never blocks the loop: the socket connects in the background, and each
/// pass looks at it.
const CONNECT_LIMIT_NS: Nanos = 1_000_000_000;
/// BFD control packets carry no authentication here: 24 bytes each.
const CONTROL_PACKET_BYTES: u64 = 24;
/// After bfdd reconnects, held sessions it has not re-added within this
/// time are swept (its registration burst arrives at once).
const ADOPT_GRACE_NS: Nanos = 3_000_000_000;
/// Unanswered output beyond this means bfdd stopped reading: drop it.
const MAX_OUTPUT: usize = 1 << 20;
/// bfdd's messages applied per pass of the loop: the sessions' timers
/// come first, and a burst of additions (each opens a socket) would
/// otherwise hold the loop for tens of ms (16 ms measured for 32 peers).
const MESSAGES_PER_PASS: usize = 8;

/// The link to one bfdd.
pub struct FrrLink {
    addr: SocketAddr,
    conn: Option<Connection>,
    /// A connect in progress, and when it is given up.
    connecting: Option<(socket2::Socket, Nanos)>,
    next_connect: Nanos,
    next_keepalive: Nanos,
    /// bfdd's lid -> our session.
    sessions: HashMap<u32, SessionId>,
    /// What bfdd was last told about each lid.
    reported: HashMap<u32, StateChange>,
    /// Whole messages wait in the framer for the next pass.
    backlog: bool,
    /// Hold mode: how long sessions outlive their bfdd (0: not at all).
    hold_ns: Nanos,
    /// Held sessions, by address pair, waiting for bfdd to re-add them.
    orphans: HashMap<(IpAddr, IpAddr), SessionId>,
    /// When the orphans still unclaimed are removed.
    sweep_at: Option<Nanos>,
}

struct Connection {
    stream: TcpStream,
    framer: Framer,
    output: Vec<u8>,
}

impl FrrLink {
    pub fn new(addr: SocketAddr, hold_seconds: u32) -> Self {
        Self {
            hold_ns: Nanos::from(hold_seconds) * 1_000_000_000,
            orphans: HashMap::new(),
            sweep_at: None,
            addr,
            conn: None,
            connecting: None,
            next_connect: 0,
            next_keepalive: 0,
            sessions: HashMap::new(),
            reported: HashMap::new(),
            backlog: false,
        }
    }

    pub fn fd(&self) -> Option<i32> {
        use std::os::fd::AsRawFd;
        match (&self.conn, &self.connecting) {
            (Some(c), _) => Some(c.stream.as_raw_fd()),
            (None, Some((socket, _))) => Some(socket.as_raw_fd()),
            (None, None) => None,
        }
    }

    /// Whether we have output bfdd has not taken yet, or a connect in
    /// progress (poll for POLLOUT).
    pub fn wants_write(&self) -> bool {
        self.connecting.is_some() || self.conn.as_ref().is_some_and(|c| !c.output.is_empty())
    }

    /// The next instant this link has something to do by itself.
    pub fn next_deadline(&self) -> Nanos {
        if self.backlog {
            return 0;
        }
        let own = match (&self.conn, &self.connecting) {
            (Some(_), _) => self.next_keepalive,
            (None, Some((_, give_up))) => *give_up,
            (None, None) => self.next_connect,
        };
        self.sweep_at.map_or(own, |at| own.min(at))
    }

    fn send(&mut self, message: &Message) {
        if let Some(conn) = self.conn.as_mut() {
            message.encode(&mut conn.output);
        }
    }
}

/// What bfdd should show for a session: our state, the remote's values.
fn state_change(lid: u32, session: &Session) -> StateChange {
    let remote = session.remote();
    StateChange {
        lid,
        rid: remote.discr,
        // RBIT_DEMAND (1 << 1): the remote asks for Demand mode.
        remote_flags: if remote.demand { 1 << 1 } else { 0 },
        desired_tx_us: remote.desired_min_tx_us,
        required_rx_us: remote.min_rx_us,
        required_echo_rx_us: remote.min_echo_rx_us,
        state: session.state() as u8,
        diagnostics: remote.diag.bits(),
        detect_mult: remote.detect_mult,
    }
}

/// The source address the routing table would choose towards `peer`.
fn route_source(peer: IpAddr) -> std::io::Result<IpAddr> {
    let any: SocketAddr = if peer.is_ipv6() {
        "[::]:0".parse().expect("a valid address")
    } else {
        "0.0.0.0:0".parse().expect("a valid address")
    };
    let probe = std::net::UdpSocket::bind(any)?;
    // A UDP connect sends nothing; it only asks the routing table.
    probe.connect((peer, linecard_common::bfd::PORT_SINGLE_HOP))?;
    Ok(probe.local_addr()?.ip())
}

/// The interface that holds `local` (the xdp backend attaches there).
fn interface_of(local: IpAddr) -> Option<String> {
    let mut addrs: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below; we only read it.
    if unsafe { libc::getifaddrs(&mut addrs) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cursor = addrs;
    while !cursor.is_null() {
        // SAFETY: cursor walks the list getifaddrs returned, still alive.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        if entry.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and its family says which sockaddr
        // it is; ifa_name is a NUL-terminated string.
        let (addr, name) = unsafe {
            let addr = match i32::from((*entry.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes())
                }
                libc::AF_INET6 => {
                    let sin6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    IpAddr::from(sin6.sin6_addr.s6_addr)
                }
                _ => continue,
            };
            (addr, std::ffi::CStr::from_ptr(entry.ifa_name))
        };
        if addr == local {
            found = Some(name.to_string_lossy().into_owned());
            break;
        }
    }
    // SAFETY: addrs came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(addrs) };
    found
}

/// Starts, follows or completes the connect to bfdd without blocking
/// (a remote bfdd once held the loop up to 20 ms a try).
fn connect_frr(link: &mut FrrLink, now: Nanos) {
    use socket2::{Domain, Socket, Type};
    let socket = match link.connecting.take() {
        Some((socket, give_up)) => match socket.take_error() {
            Ok(None) if socket.peer_addr().is_ok() => socket,
            Ok(None) if now < give_up => {
                link.connecting = Some((socket, give_up));
                return;
            }
            Ok(None) => {
                log(&format!(
                    "connecting to bfdd at {}: no answer within 1 s",
                    link.addr
                ));
                return;
            }
            Ok(Some(e)) | Err(e) => {
                if e.kind() != std::io::ErrorKind::ConnectionRefused {
                    log(&format!("connecting to bfdd at {}: {e}", link.addr));
                }
                return;
            }
        },
        None if now >= link.next_connect => {
            link.next_connect = now
                + if link.orphans.is_empty() {
                    RECONNECT_NS
                } else {
                    HOLD_RECONNECT_NS
                };
            let started = Socket::new(Domain::for_address(link.addr), Type::STREAM, None)
                .and_then(|socket| socket.set_nonblocking(true).map(|()| socket));
            let socket = match started {
                Ok(socket) => socket,
                Err(e) => {
                    log(&format!("a socket for bfdd at {}: {e}", link.addr));
                    return;
                }
            };
            match socket.connect(&link.addr.into()) {
                Ok(()) => socket,
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                    link.connecting = Some((socket, now + CONNECT_LIMIT_NS));
                    return;
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return,
                Err(e) => {
                    log(&format!("connecting to bfdd at {}: {e}", link.addr));
                    return;
                }
            }
        }
        None => return,
    };
    let stream: TcpStream = socket.into();
    let _ = stream.set_nodelay(true);
    log(&format!(
        "connected to FRR bfdd's dataplane socket {}",
        link.addr
    ));
    link.conn = Some(Connection {
        stream,
        framer: Framer::default(),
        output: Vec::new(),
    });
    link.next_keepalive = now;
    if !link.orphans.is_empty() {
        link.sweep_at = Some(now + ADOPT_GRACE_NS);
    }
}

impl Engine {
    /// Connects if needed, then reads and applies bfdd's messages. Never
    /// blocks.
    pub(super) fn serve_frr(&mut self, now: Nanos) {
        let Some(mut link) = self.frr.take() else {
            return;
        };
        if link.conn.is_none() {
            connect_frr(&mut link, now);
        }
        if let Err(why) = self.read_frr(&mut link, now) {
            self.drop_frr_connection(&mut link, now, &why);
        }
        if link.sweep_at.is_some_and(|at| now >= at) {
            self.full_pass_wanted = true;
            link.sweep_at = None;
            if !link.orphans.is_empty() {
                log(&format!(
                    "hold: removing {} session(s) bfdd did not re-add",
                    link.orphans.len()
                ));
            }
            for (_, id) in std::mem::take(&mut link.orphans) {
                self.remove_session(id, now);
            }
        }
        self.frr = Some(link);
    }

    /// Tells bfdd what changed since the last call, keeps the connection
    /// alive and writes what is queued. Runs after the sessions were
    /// serviced, so that a transition reaches bfdd in the same pass.
    pub(super) fn flush_frr(&mut self, now: Nanos) {
        let Some(mut link) = self.frr.take() else {
            return;
        };
        if link.conn.is_some() {
            self.report_to_frr(&mut link);
            if now >= link.next_keepalive {
                link.next_keepalive = now + KEEPALIVE_NS;
                link.send(&Message::EchoRequest {
                    id: 0,
                    dp_time: (self.unix_ns(now) / 1000) as u64,
                    bfdd_time: 0,
                });
            }
            if let Err(why) = write_frr(&mut link) {
                self.drop_frr_connection(&mut link, now, &why);
            }
        }
        self.frr = Some(link);
    }

    fn read_frr(&mut self, link: &mut FrrLink, now: Nanos) -> Result<(), String> {
        let mut buf = [0u8; 4096];
        loop {
            let Some(conn) = link.conn.as_mut() else {
                return Ok(());
            };
            // No more than the framer holds: the rest waits in the socket
            // (TCP holds bfdd back) until messages have been taken out.
            let room = conn.framer.room().min(buf.len());
            if room == 0 {
                break;
            }
            match conn.stream.read(&mut buf[..room]) {
                Ok(0) => return Err("bfdd closed the connection".into()),
                Ok(n) => {
                    conn.framer.push(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading from bfdd: {e}")),
            }
        }
        link.backlog = false;
        for _ in 0..MESSAGES_PER_PASS {
            let Some(conn) = link.conn.as_mut() else {
                return Ok(());
            };
            match conn.framer.next_message() {
                Ok(Some(message)) => self.apply_frr_message(link, now, message),
                Ok(None) => return Ok(()),
                Err(e) => return Err(format!("bfdd sent a malformed message: {e}")),
            }
        }
        link.backlog = true;
        Ok(())
    }

    fn apply_frr_message(&mut self, link: &mut FrrLink, now: Nanos, message: Message) {
        // A message may change any session: the next pass sees them all.
        self.full_pass_wanted = true;
        match message {
            Message::AddSession(s) => match link.sessions.get(&s.lid).copied() {
                Some(id) => self.update_frr_session(id, &s, now),
                None if !link.orphans.is_empty() && self.adopt(link, &s, now) => {}
                None => match self.add_frr_session(&s) {
                    Ok(id) => {
                        link.sessions.insert(s.lid, id);
                        // bfdd just set its view to Down; say where we are.
                        link.reported.remove(&s.lid);
                        if s.has(flags::SHUTDOWN) {
                            self.update_frr_session(id, &s, now);
                        }
                    }
                    Err(e) => {
                        log(&format!(
                            "bfdd's session {} -> {} (lid {}) refused: {e:#}",
                            s.src.map_or("?".into(), |a| a.to_string()),
                            s.dst,
                            s.lid
                        ));
                        // Tell bfdd it is down rather than leave it guessing.
                        link.send(&Message::StateChange(StateChange {
                            lid: s.lid,
                            state: State::Down as u8,
                            ..Default::default()
                        }));
                    }
                },
            },
            Message::DeleteSession(s) => {
                if let Some(id) = link.sessions.remove(&s.lid) {
                    link.reported.remove(&s.lid);
                    self.remove_session(id, now);
                }
            }
            Message::RequestCounters { id, lid } => {
                let counters = link
                    .sessions
                    .get(&lid)
                    .map(|&sid| self.frr_counters(lid, sid))
                    .unwrap_or(SessionCounters {
                        lid,
                        ..Default::default()
                    });
                link.send(&Message::Counters { id, counters });
            }
            // bfdd's answer to our keepalive: nothing to do.
            Message::EchoReply { .. } => {}
            // Directions bfdd never uses; ignored as bfdd ignores them.
            Message::EchoRequest { .. } | Message::StateChange(_) | Message::Counters { .. } => {}
        }
    }

    /// Hold mode: a held session with this address pair becomes bfdd's
    /// session `s.lid`, unchanged on the wire; bfdd hears its state.
    fn adopt(&mut self, link: &mut FrrLink, s: &SessionMsg, now: Nanos) -> bool {
        let Some(local) = s.src.or_else(|| route_source(s.dst).ok()) else {
            return false;
        };
        let Some(id) = link.orphans.remove(&(local, s.dst)) else {
            return false;
        };
        link.sessions.insert(s.lid, id);
        link.reported.remove(&s.lid);
        self.update_frr_session(id, s, now);
        log(&format!(
            "hold: bfdd re-added {local} -> {} (lid {}); session kept",
            s.dst, s.lid
        ));
        true
    }

    fn add_frr_session(&mut self, s: &SessionMsg) -> anyhow::Result<SessionId> {
        if s.dst.is_unspecified() {
            anyhow::bail!("no peer address");
        }
        let timers = Timers::from_us(s.min_tx_us, s.min_rx_us, s.detect_mult)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let local = match s.src {
            Some(src) => src,
            None => route_source(s.dst)
                .map_err(|e| anyhow::anyhow!("choosing a source address towards {}: {e}", s.dst))?,
        };
        let interface = match s.interface() {
            Some(name) => Some(name.to_string()),
            None => interface_of(local),
        };
        let spec = SessionSpec {
            peer: s.dst,
            local,
            tx_interval_us: timers.tx_interval_us,
            rx_interval_us: timers.rx_interval_us,
            multiplier: timers.multiplier,
            backend: self.loop_kind(),
            interface,
            passive: s.has(flags::PASSIVE),
            multihop: s.has(flags::MULTIHOP),
            // bfdd's `ttl` is the minimum it accepts: 255 for single-hop
            // (GTSM), `minimum-ttl` (default 254) for multihop.
            min_ttl: match (s.has(flags::MULTIHOP), s.ttl) {
                (false, _) => 255,
                (true, 0) => crate::config::DEFAULT_MULTIHOP_MIN_TTL,
                (true, ttl) => ttl,
            },
            offload: true,
            // SESSION_ECHO (`echo-mode`, single-hop only): originate at
            // bfdd's configured interval; we negotiate it with the peer's
            // RMERx ourselves (8.4.4 does not).
            echo_interval_us: s.has(flags::ECHO).then_some(s.min_echo_tx_us),
            // bfdd's `echo receive-interval` (50 ms by default even with
            // echo-mode off) is advertised only where we reflect.
            echo_rx_us: if self.loop_kind() == linecard_api::BackendKind::Xdp {
                s.min_echo_rx_us
            } else {
                0
            },
            // The dataplane protocol carries no keys: bfdd 8.4.4 has no
            // authentication to hand over.
            auth: None,
            // SESSION_DEMAND: never set by bfdd 8.4.4 (it has no Demand
            // mode); honoured should a later bfdd send it.
            demand: s.has(flags::DEMAND),
            demand_verify_us: crate::config::DEFAULT_DEMAND_VERIFY_MS as u32 * 1000,
        };
        // bfdd's lid is our discriminator, so that `show bfd peers` and the
        // wire agree on the session's id.
        self.add_session_with_discr(spec, Some(s.lid))
    }

    fn update_frr_session(&mut self, id: SessionId, s: &SessionMsg, now: Nanos) {
        let Some((_, session, peer)) = self.table.get_mut(id) else {
            return;
        };
        let config = session.config();
        match Timers::from_us(s.min_tx_us, s.min_rx_us, s.detect_mult) {
            Err(e) => log(&format!(
                "bfdd's update of {} -> {} refused, its timers kept: {e}",
                peer.spec.local, peer.spec.peer
            )),
            Ok(t)
                if (t.tx_interval_us, t.rx_interval_us, t.multiplier)
                    != (
                        config.desired_min_tx_us,
                        config.required_min_rx_us,
                        config.detect_mult,
                    ) =>
            {
                // RFC 5880 6.8.3: new timers through a Poll Sequence.
                session.set_timers(now, t.tx_interval_us, t.rx_interval_us, t.multiplier);
                peer.spec.tx_interval_us = t.tx_interval_us;
                peer.spec.rx_interval_us = t.rx_interval_us;
                peer.spec.multiplier = t.multiplier;
            }
            Ok(_) => {}
        }
        let admin_down = s.has(flags::SHUTDOWN);
        if admin_down != (session.state() == State::AdminDown) {
            if let Some(t) = session.set_admin_down(now, admin_down) {
                peer.last_transition = Some(t);
                super::log_transition(&peer.spec, &t);
            }
        }
    }

    /// Counters as bfdd wants them: userspace's and the fast path's.
    fn frr_counters(&self, lid: u32, id: SessionId) -> SessionCounters {
        let Some((_, session, _)) = self.table.get(id) else {
            return SessionCounters {
                lid,
                ..Default::default()
            };
        };
        let ours = session.counters();
        let (kernel_in, kernel_out) = self
            .fast
            .as_ref()
            .and_then(|f| f.state(id as u32).ok())
            // The kernel counts every valid packet; those it passed up were
            // counted again by the session.
            .map_or((0, 0), |s| {
                (s.rx_packets.saturating_sub(s.passed), s.tx_packets)
            });
        let input = ours.packets_in + kernel_in;
        let output = ours.packets_out + kernel_out;
        SessionCounters {
            lid,
            control_input_bytes: input * CONTROL_PACKET_BYTES,
            control_input_packets: input,
            control_output_bytes: output * CONTROL_PACKET_BYTES,
            control_output_packets: output,
            ..Default::default()
        }
    }

    fn report_to_frr(&self, link: &mut FrrLink) {
        let mut changes = Vec::new();
        for (&lid, &id) in &link.sessions {
            if let Some((_, session, _)) = self.table.get(id) {
                let now = state_change(lid, session);
                if link.reported.get(&lid) != Some(&now) {
                    changes.push(now);
                }
            }
        }
        for change in changes {
            link.reported.insert(change.lid, change);
            link.send(&Message::StateChange(change));
        }
    }

    /// Drop and recreate (bfdd re-registers everything when it comes
    /// back), or in hold mode keep the sessions for the hold time.
    fn drop_frr_connection(&mut self, link: &mut FrrLink, now: Nanos, why: &str) {
        self.full_pass_wanted = true;
        link.conn = None;
        link.backlog = false;
        link.next_connect = now + RECONNECT_NS;
        link.reported.clear();
        if link.hold_ns > 0 {
            link.next_connect = now + HOLD_RECONNECT_NS;
            log(&format!(
                "FRR dataplane connection lost ({why}); holding its {} session(s) for {} s",
                link.sessions.len(),
                link.hold_ns / 1_000_000_000
            ));
            for (_, id) in link.sessions.drain() {
                if let Some((path, _, _)) = self.table.get(id) {
                    link.orphans.insert((path.local, path.peer), id);
                }
            }
            // Swept when the hold time ends unless bfdd is back by then
            // (a reconnect moves the sweep to its own grace period).
            link.sweep_at = Some(now + link.hold_ns);
            return;
        }
        log(&format!(
            "FRR dataplane connection lost ({why}); removing its {} session(s)",
            link.sessions.len()
        ));
        for (_, id) in link.sessions.drain() {
            self.remove_session(id, now);
        }
    }
}

fn write_frr(link: &mut FrrLink) -> Result<(), String> {
    let Some(conn) = link.conn.as_mut() else {
        return Ok(());
    };
    while !conn.output.is_empty() {
        match conn.stream.write(&conn.output) {
            Ok(0) => return Err("bfdd stopped accepting data".into()),
            Ok(n) => {
                conn.output.drain(..n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("writing to bfdd: {e}")),
        }
    }
    if conn.output.len() > MAX_OUTPUT {
        return Err(format!("bfdd left {} bytes unread", conn.output.len()));
    }
    Ok(())
}
