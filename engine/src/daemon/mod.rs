//! The daemon: sockets, the session table and the event loop that drives
//! the sans-IO sessions with a clock.
//!
//! Every backend shares this loop; its [`Transmitter`] decides how the
//! loop's thread runs, how long it sleeps and when packets are handed to
//! the kernel (naive: a 2 ms receive timeout as its clock; rt: exact
//! deadlines on a SCHED_FIFO thread; txtime: ahead of time with SO_TXTIME;
//! xdp: transitions from here, steady replies from the kernel).

pub mod control;
mod due;
mod fast_path_config;
use fast_path_config::{kernel_verifies, registered_config};
mod frr;
pub mod handover;
mod kernel_events;
pub mod offload;
mod reload;
mod sessions;
mod start;
mod telemetry;

use crate::backend::xdp::{self as fast_path, FastPath};
use crate::backend::{txtime, Departure, Transmitter};
use crate::config::{EngineConfig, SessionSpec};
use crate::io::{Received, RxSocket, TxSocket};
use crate::session::table::{PathKey, SessionId, SessionTable};
use crate::session::Nanos;
use crate::wire::Repr;
use anyhow::{Context, Result};
use due::{Deadline, DueQueue};
use linecard_api::control::{FastPathCounters, State, Transition};
use linecard_api::BackendKind;
use linecard_common::bfd::{DropReason, PORT_MULTI_HOP, PORT_SINGLE_HOP};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use offload::{KernelView, KERNEL_DETECTION_GRACE_NS};

/// A loop pass services only the sessions that are due or heard from; at
/// least this often it services every session (a safety net for a change
/// that forgot to mark its session).
const FULL_PASS_NS: Nanos = 100_000_000;

/// What the engine keeps per session beside the state machine.
pub struct Peer {
    pub spec: SessionSpec,
    tx: TxSocket,
    /// Packets refused after demultiplexing, by reason.
    pub drops: [u64; DropReason::ALL.len()],
    pub last_transition: Option<Transition>,
    /// What userspace last wrote to the kernel for this session (xdp
    /// backend): whether and in which role the fast path answers for it,
    /// its reply template, its sweep slot, its registration.
    pub kernel: KernelView,
    /// When the kernel last declared the peer silent (CLOCK_REALTIME ns).
    pub kernel_detection_unix_ns: Option<i64>,
    /// Engine time of userspace's last packet for this session.
    last_user_tx: Option<Nanos>,
    /// How often the kernel's sweep asked for a packet of the session's
    /// own clock while offloaded (nothing had left for the interval after
    /// an RX-clocked reply, or for the jittered gap after its own packet,
    /// RFC 5880 6.8.7).
    pub own_clock_requests: u64,
    /// When the last of them was due (engine time).
    pub last_own_clock: Option<Nanos>,
    /// The session's next deadline and detection deadline when it was last
    /// serviced (the due queue's entries are checked against them), and
    /// whether something has happened to it since (a packet, a kernel
    /// event; it is then in the due queue's touched list once): a pass
    /// visits only due and touched sessions, so that 4096 sessions cost a
    /// pass what the due ones cost.
    due_next: Option<Nanos>,
    due_detection: Option<Nanos>,
    stale: bool,
    /// The echo interval the originator runs for this session, ns (0:
    /// none sent).
    echo_interval_ns: u64,
    /// Handed over by the engine before us and not placed by this one yet
    /// (`handover.rs`): the kernel still answers and hears for it.
    adopted: bool,
}

pub struct Engine {
    config: EngineConfig,
    /// The file `config` was read from, which a reload reads again.
    config_path: Option<std::path::PathBuf>,
    transmitter: Box<dyn Transmitter>,
    table: SessionTable<Peer>,
    /// Receive sockets, bound as sessions need them: index
    /// [`rx_index`]`(ipv6, multihop)`.
    rx: [Option<RxSocket>; 4],
    control: UnixListener,
    /// Control clients still writing their request.
    pending: Vec<control::PendingClient>,
    /// Packets refused before reaching a session, by reason.
    drops: [u64; DropReason::ALL.len()],
    epoch: Instant,
    /// CLOCK_MONOTONIC at `epoch`: the kernel's timestamps
    /// (bpf_ktime_get_ns) minus this are engine time.
    epoch_mono_ns: i64,
    /// CLOCK_REALTIME at `epoch`, for reports on the capture's clock.
    epoch_unix_ns: i64,
    /// The XDP fast path, for the xdp backend.
    fast: Option<FastPath>,
    /// FRR bfdd, when it drives this engine.
    frr: Option<frr::FrrLink>,
    /// The echo originator, once a session wants echoes; and those
    /// sessions.
    echo: Option<crate::echo::Originator>,
    echo_sessions: Vec<SessionId>,
    seed: u64,
    port: u16,
    /// The next pass services every session (a control request or FRR
    /// changed something), and when the last such pass ran.
    full_pass_wanted: bool,
    last_full_pass: Nanos,
    /// The sessions the next pass visits besides a full pass's.
    due: DueQueue,
    /// The sessions were handed to the next process (`handover.rs`): the
    /// loop ends without a packet.
    handed_over: bool,
    /// A take-over's successor, on the connection that asked for the
    /// handover: our responder runs until it closes it.
    successor: Option<std::os::unix::net::UnixStream>,
    /// A successor prepared the handover (a take-over's first phase): it
    /// runs, so handing over ends this process's part entirely.
    successor_prepared: bool,
    /// Taking over: the connection to the engine that handed over, closed
    /// once our first pass has armed our responder.
    predecessor: Option<std::os::unix::net::UnixStream>,
    /// The OpenMetrics endpoint's scrapes, answered after each wait
    /// (`[engine] metrics`).
    metrics: Option<crate::metrics::LoopSide>,
}

/// What the signal handlers tell the loop (`linecardd`'s main sets them).
pub struct Signals {
    /// SIGTERM, SIGINT: AdminDown to every peer, then exit.
    pub stop: AtomicBool,
    /// SIGHUP: read the config file again.
    pub reload: AtomicBool,
    /// SIGUSR2: hand the sessions to the next process, then exit.
    pub hand_over: AtomicBool,
}

impl Signals {
    pub const fn new() -> Self {
        Self {
            stop: AtomicBool::new(false),
            reload: AtomicBool::new(false),
            hand_over: AtomicBool::new(false),
        }
    }
}

impl Default for Signals {
    fn default() -> Self {
        Self::new()
    }
}

/// How [`Engine::run`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Every peer was sent AdminDown.
    Stopped,
    /// The sessions were handed to a successor that runs now (a
    /// take-over); the peers saw nothing.
    HandedOver(usize),
    /// The sessions were handed over with no successor running yet
    /// (SIGUSR2, `ctl handover`): the kernel answers them until the next
    /// start adopts them (`linecard_api::control::EXIT_AWAITING_NEXT_START`).
    AwaitingNextStart(usize),
}

/// Where the receive socket of a family and kind lives in `Engine::rx`.
fn rx_index(ipv6: bool, multihop: bool) -> usize {
    usize::from(ipv6) + 2 * usize::from(multihop)
}

fn monotonic_ns() -> i64 {
    crate::io::clock_ns(libc::CLOCK_MONOTONIC) as i64
}

fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into our array.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 8, 0) };
    if n != 8 {
        // Never fatal: jitter and discriminators only need to differ.
        return std::process::id() as u64
            ^ Instant::now().elapsed().as_nanos() as u64
            ^ 0x9e37_79b9_7f4a_7c15;
    }
    u64::from_ne_bytes(bytes)
}

/// Packets taken from one receive socket before the loop looks at its
/// timers again: 4096 sessions' worth of one round at the peer's rate
/// would be more than a transmit interval of work.
const RECEIVES_PER_WAKE: usize = 256;

impl Engine {
    pub fn loop_kind(&self) -> BackendKind {
        self.transmitter.kind()
    }

    /// The file a reload (SIGHUP, `ctl reload`) reads again: the one the
    /// engine's config came from.
    pub fn reloads_from(mut self, path: std::path::PathBuf) -> Self {
        self.config_path = Some(path);
        self
    }

    fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// The control port of single-hop (RFC 5881) or multihop (RFC 5883)
    /// sessions: 3784 and 4784, or the test port and the same offset.
    fn control_port(&self, multihop: bool) -> u16 {
        if multihop {
            self.port.wrapping_add(PORT_MULTI_HOP - PORT_SINGLE_HOP)
        } else {
            self.port
        }
    }

    fn ensure_rx(&mut self, ipv6: bool, multihop: bool) -> Result<()> {
        let port = self.control_port(multihop);
        let slot = &mut self.rx[rx_index(ipv6, multihop)];
        if slot.is_none() {
            let socket = RxSocket::bind(ipv6, port).with_context(|| {
                format!(
                    "binding UDP {} port {port} (is another BFD daemon running in this namespace?)",
                    if ipv6 { "[::]" } else { "0.0.0.0" },
                )
            })?;
            *slot = Some(socket);
        }
        Ok(())
    }

    /// The session between `local` and `peer`, single-hop first.
    fn find(&self, local: std::net::IpAddr, peer: std::net::IpAddr) -> Option<SessionId> {
        [false, true].into_iter().find_map(|multihop| {
            self.table.by_path(&PathKey {
                local,
                peer,
                multihop,
            })
        })
    }

    fn handle_packet(&mut self, now: Nanos, received: Received, bytes: &[u8], multihop: bool) {
        let repr = match Repr::parse_bytes(bytes) {
            Ok(r) => r,
            Err(reason) => {
                self.drops[reason.index()] += 1;
                return;
            }
        };
        // GTSM (RFC 5881 section 5): single-hop packets arrive at TTL 255.
        // Multihop ones are judged against their session's minimum below:
        // the relaxation applies to sessions configured multihop only
        // (a multihop packet names a multihop session or none).
        if !multihop && received.ttl != 255 {
            self.drops[DropReason::BadTtl.index()] += 1;
            return;
        }
        if received.extension_headers {
            self.drops[DropReason::ExtensionHeader.index()] += 1;
            return;
        }
        let path = PathKey {
            local: received.dst,
            peer: received.src.ip(),
            multihop,
        };
        let id = match self.table.demux(&path, &repr) {
            Ok(id) => id,
            Err(reason) => {
                self.drops[reason.index()] += 1;
                return;
            }
        };
        let (_, session, peer) = self.table.get_mut(id).expect("demux returns live ids");
        if received.ttl < peer.spec.min_ttl {
            peer.drops[DropReason::BadTtl.index()] += 1;
            return;
        }
        if !peer.stale {
            peer.stale = true;
            self.due.touch(id);
        }
        let through_fast_path = self
            .fast
            .as_ref()
            .is_some_and(|f| f.saw_first(received.ifindex));
        let judge = offload::sequence_judge(
            through_fast_path && kernel_verifies(session),
            repr.your_discr,
            session.config().local_discr,
        );
        match session.receive_judged(now, &repr, bytes, judge) {
            Ok(Some(t)) => {
                peer.last_transition = Some(t);
                log_transition(&peer.spec, &t);
            }
            Ok(None) => {}
            Err(reason) => peer.drops[reason.index()] += 1,
        }
    }

    /// Runs timers and transmits what is due; returns the next deadline of
    /// any kind and the next detection deadline.
    fn service_sessions(&mut self, now: Nanos) -> (Option<Nanos>, Option<Nanos>) {
        let full = self.full_pass_wanted || now - self.last_full_pass >= FULL_PASS_NS;
        if full {
            self.full_pass_wanted = false;
            self.last_full_pass = now;
        }
        self.apply_kernel_events();
        let ids: Vec<SessionId> = if full {
            self.due.clear_touched();
            self.table.ids().collect()
        } else {
            let table = &self.table;
            self.due
                .take_due(now, |id, which, at| is_current(table, id, which, at))
        };
        let mut neighbours: Option<fast_path::Neighbours> = None;
        for id in ids {
            let Some((path, session, peer)) = self.table.get_mut(id) else {
                continue;
            };
            let path = *path;
            let before = (peer.due_next, peer.due_detection);
            peer.stale = false;
            // An adopted session is the kernel's until this process places
            // it: what the kernel heard while the loop waited (starved, or
            // adopting) counts, or a late first pass would time out a live
            // peer.
            if let (Some(fast), true) =
                (self.fast.as_ref(), peer.kernel.offloaded() || peer.adopted)
            {
                fast_path_config::note_kernel_state(fast, id, session, peer, self.epoch_mono_ns);
            }
            if peer.kernel.offloaded() {
                peer.adopted = false;
            }
            // While the kernel's sweep is the detector (its event carries
            // the instant), userspace is the backstop, a grace period later
            // (offload::detection_grace).
            let grace = offload::detection_grace(&peer.kernel);
            if let Some(t) = session.on_timer(now - grace) {
                peer.last_transition = Some(t);
                log_transition(&peer.spec, &t);
            }
            if let Some(fast) = self.fast.as_mut() {
                let at = Placing {
                    path: &path,
                    id,
                    now,
                    epoch_mono_ns: self.epoch_mono_ns,
                };
                let allowed = allowed(&self.config, &peer.spec);
                fast_path_config::place(fast, &at, allowed, session, peer, &mut neighbours);
            }
            if offload::kernel_transmits(&peer.kernel) {
                // The kernel transmits and detects; we only keep backstops.
                let backstop = session
                    .detection_deadline()
                    .map(|d| d + KERNEL_DETECTION_GRACE_NS);
                (peer.due_next, peer.due_detection) = (backstop, backstop);
                reschedule(&mut self.due, id, before, (backstop, backstop), now);
                continue;
            }
            let mut sent_any = false;
            let tx = &peer.tx;
            self.transmitter
                .transmit(now, id, session, &mut |packet, departure| {
                    let bytes = packet.to_bytes();
                    sent_any = true;
                    let sent = match departure {
                        Departure::Now => tx.send(&bytes),
                        Departure::At(at) => tx.send_at(&bytes, txtime::tai_ns(now, at)),
                    };
                    if let Err(e) = sent {
                        // A full socket buffer or an unreachable neighbour
                        // is what BFD exists to detect; keep going.
                        if e.kind() != std::io::ErrorKind::WouldBlock {
                            log(&format!("send to {} failed: {e}", path.peer));
                        }
                    }
                });
            if sent_any {
                peer.last_user_tx = Some(now);
            }
            peer.due_next = self.transmitter.next_wake(id, session);
            peer.due_detection = session.detection_deadline().map(|d| d + grace);
            let after = (peer.due_next, peer.due_detection);
            reschedule(&mut self.due, id, before, after, now);
        }
        let table = &self.table;
        let current = |id, which, at| is_current(table, id, which, at);
        (
            self.due.earliest(Deadline::Next, current),
            self.due.earliest(Deadline::Detection, current),
        )
    }

    /// Engine time as CLOCK_REALTIME ns (the capture's clock).
    pub fn unix_ns(&self, at: Nanos) -> i64 {
        self.epoch_unix_ns + at
    }

    /// The fast path's counters, if this engine runs one.
    pub fn fast_path_counters(&self) -> Option<FastPathCounters> {
        self.fast.as_ref().and_then(|f| f.counters().ok())
    }

    /// Runs until `signals.stop` is set (SIGTERM/SIGINT), then sends
    /// AdminDown once per session so that peers take the session down
    /// deliberately; or until the sessions are handed over
    /// (`signals.hand_over`, SIGUSR2, or `ctl handover`), then sends
    /// nothing. `signals.reload` (SIGHUP): the config file is read again
    /// at the next pass.
    pub fn run(&mut self, signals: &Signals) -> Result<Ending> {
        self.transmitter
            .enter_loop()
            .with_context(|| format!("starting the {} loop", self.loop_kind()))?;
        let mut buf = [0u8; 2048];
        while !signals.stop.load(Ordering::Relaxed) && !self.handed_over {
            // Timers are judged at an instant taken before the sockets are
            // read, so every packet that arrived by then has been handled:
            // a loop that was itself delayed (even between reading and
            // judging) must not blame the peer for packets in its socket.
            let now = self.now();
            self.drain_receive(&mut buf);
            self.serve_frr(now);
            let (next, detection) = self.service_sessions(now);
            self.relieve_predecessor()?;
            self.steer_echo();
            self.flush_frr(now);
            let until = |d: Nanos| d.saturating_sub(self.now()).max(0);
            let mut wait_ns = self
                .transmitter
                .sleep_ns(next.map(until), detection.map(until));
            if let Some(frr) = self.frr.as_ref() {
                wait_ns = wait_ns.min(until(frr.next_deadline()));
            }
            if self.building_a_list() {
                // The next slice of a `list` reply, after this pass.
                wait_ns = 0;
            }
            self.wait(wait_ns)?;
            self.serve_control();
            self.serve_metrics();
            if signals.reload.swap(false, Ordering::Relaxed) {
                self.reload();
            }
            if signals.hand_over.swap(false, Ordering::Relaxed) {
                match self.hand_over() {
                    Ok(_) => self.handed_over = true,
                    Err(e) => log(&format!("handover refused: {e:#}; running on")),
                }
            }
        }
        if self.handed_over {
            self.release();
            let sessions = self.table.len();
            return Ok(if self.successor_prepared {
                Ending::HandedOver(sessions)
            } else {
                Ending::AwaitingNextStart(sessions)
            });
        }
        self.shutdown();
        Ok(Ending::Stopped)
    }

    /// Reads and handles every packet waiting on the receive sockets.
    fn drain_receive(&mut self, buf: &mut [u8]) {
        for (ipv6, multihop) in [(false, false), (true, false), (false, true), (true, true)] {
            // At most RECEIVES_PER_WAKE a socket, then back to the timers:
            // a flood must not hold our own transmissions (the socket is
            // still readable, so the next wait returns at once).
            for _ in 0..RECEIVES_PER_WAKE {
                let Some(socket) = &self.rx[rx_index(ipv6, multihop)] else {
                    break;
                };
                match socket.recv(buf) {
                    Ok(Some(received)) => {
                        let now = self.now();
                        let len = received.len.min(buf.len());
                        let bytes = buf[..len].to_vec();
                        self.handle_packet(now, received, &bytes, multihop);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        log(&format!("receive failed: {e}"));
                        break;
                    }
                }
            }
        }
    }

    /// Waits for a packet, a control connection, a signal or `wait_ns`.
    fn wait(&self, wait_ns: Nanos) -> Result<()> {
        let mut fds: Vec<libc::pollfd> = self
            .rx
            .iter()
            .flatten()
            .map(|s| libc::pollfd {
                fd: s.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        fds.push(libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&self.control),
            events: libc::POLLIN,
            revents: 0,
        });
        for (fd, replying) in self.pending_fds() {
            fds.push(libc::pollfd {
                fd,
                events: if replying {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                },
                revents: 0,
            });
        }
        if let Some((fd, write)) = self
            .frr
            .as_ref()
            .and_then(|f| Some((f.fd()?, f.wants_write())))
        {
            fds.push(libc::pollfd {
                fd,
                events: if write {
                    libc::POLLIN | libc::POLLOUT
                } else {
                    libc::POLLIN
                },
                revents: 0,
            });
        }
        if let Some(metrics) = self.metrics.as_ref() {
            fds.push(libc::pollfd {
                fd: metrics.fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // The kernel's detection events wake us at once.
        if let Some(fast) = self.fast.as_ref() {
            fds.push(libc::pollfd {
                fd: fast.events_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let timeout = libc::timespec {
            tv_sec: wait_ns / 1_000_000_000,
            tv_nsec: wait_ns % 1_000_000_000,
        };
        // SAFETY: fds is a live array of fds.len() pollfds; timeout lives
        // across the call; no signal mask change.
        let rc = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &timeout,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("ppoll");
            }
        }
        Ok(())
    }

    fn shutdown(&mut self) {
        let now = self.now();
        let ids: Vec<SessionId> = self.table.ids().collect();
        for id in ids {
            let (_, session, peer) = self
                .table
                .get_mut(id)
                .expect("the due queue names live sessions");
            if let (Some(fast), true) = (self.fast.as_mut(), peer.kernel.offloaded()) {
                let _ = fast.forget(session.config().local_discr);
                peer.kernel.role = None;
            }
            session.set_admin_down(now, true);
            if let Some(packet) = session.poll_transmit(now) {
                let _ = peer.tx.send(&packet.to_bytes());
            }
        }
        let _ = std::fs::remove_file(&self.config.control_socket);
        // A take-over prepared but never completed leaves nothing pinned.
        if self.fast.is_some() {
            handover::abandon(&self.config);
        }
        log("stopped; sessions were sent AdminDown");
    }

    pub fn session_count(&self) -> usize {
        self.table.len()
    }

    pub fn state_of(&self, id: SessionId) -> Option<State> {
        self.table.get(id).map(|(_, s, _)| s.state())
    }
}

fn log(line: &str) {
    crate::log::line(line);
}

fn log_transition(spec: &SessionSpec, t: &Transition) {
    log(&format!(
        "session {} -> {}: {:?} -> {:?} (diag {:?})",
        spec.local, spec.peer, t.from, t.to, t.diag
    ));
}

/// Whether `at` is still session `id`'s `which` deadline (the due queue's
/// entries outlive a later visit that moved it).
fn is_current(table: &SessionTable<Peer>, id: SessionId, which: Deadline, at: Nanos) -> bool {
    table.get(id).is_some_and(|(_, _, peer)| {
        let deadline = match which {
            Deadline::Next => peer.due_next,
            Deadline::Detection => peer.due_detection,
        };
        deadline == Some(at)
    })
}

/// Queues a visited session's deadlines (next, detection) where they
/// changed, or came and went in this pass (their entries were taken).
fn reschedule(
    due: &mut DueQueue,
    id: SessionId,
    before: (Option<Nanos>, Option<Nanos>),
    after: (Option<Nanos>, Option<Nanos>),
    now: Nanos,
) {
    for (which, old, new) in [
        (Deadline::Next, before.0, after.0),
        (Deadline::Detection, before.1, after.1),
    ] {
        if let Some(at) = new {
            if old != new || at <= now {
                due.schedule(id, which, at);
            }
        }
    }
}

/// Where and when a session is placed on the fast path in a pass.
pub(super) struct Placing<'a> {
    pub path: &'a PathKey,
    pub id: SessionId,
    pub now: Nanos,
    /// CLOCK_MONOTONIC's ns at the engine's epoch (the kernel's clock).
    pub epoch_mono_ns: Nanos,
}

/// What the configuration lets the kernel do for a session.
pub(super) fn allowed(config: &EngineConfig, spec: &SessionSpec) -> offload::Allowed {
    offload::Allowed {
        offload: config.xdp_replies && spec.offload,
        sign: config.xdp_sign,
        own_clock: config.xdp_own_clock,
    }
}
