//! What the kernel's sweep asks for leaves from here: a thread at
//! SCHED_DEADLINE (SCHED_FIFO where the kernel refuses it) that sleeps on
//! the kernel's ring buffer and sends a prepared packet at once. The xdp
//! backend's event loop runs at normal priority; under L4 the Down waited
//! for it 35-508 ms after the kernel's detection (measured), though
//! detecting was never the loop's job. At SCHED_FIFO, RT throttling held
//! the thread itself up to 46 ms behind an L4 hog (measured): long enough
//! for a peer's 20 ms stall to become a 31 ms silence on the wire and a
//! flap (once in a CI bake-off).
//!
//! For each offloaded session the loop prepares two packets: the Down its
//! own state machine would send at the detection deadline
//! (`event::PEER_SILENT`), and the steady packet the session's own clock
//! sends when nothing has left for a while (`event::TRANSMIT_DUE`: the peer
//! stalled or is RX-clocked too). The loop still handles every detection
//! afterwards: it receives them from here, in order, and its own Down
//! follows the first (a duplicate Down is harmless, RFC 5880 6.8.6).

use super::rt::{make_current_thread_timely, Timeliness};
use crate::session::auth::Signer;
use anyhow::{Context, Result};
use aya::maps::{Array, MapData, RingBuf};
use linecard_api::control::Diagnostic;
use linecard_api::control::ThreadPolicy;
use linecard_common::bfd::{event, DeadMan, SessionState, SweepEvent};
use socket2::{SockAddr, Socket};
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How often the thread looks at its stop flag while no event comes, and
/// the longest time between two heartbeats.
const POLL_MS: i32 = 100;

/// The engine's heartbeat in `LC_DEAD_MAN`: beaten by this thread, the one
/// that must run for the fast path's answers to mean anything (it sends the
/// Down and the own clock), so a stopped engine stops being answered for.
pub struct Heartbeat {
    pub map: Array<MapData, DeadMan>,
    /// 0: the guard is off (and nothing is written).
    pub limit_ns: u64,
}

impl Heartbeat {
    /// At most this long between beats: a quarter of the limit, so that a
    /// thread held off for less than three quarters of it never trips it.
    fn period_ms(&self) -> i32 {
        let quarter = self.limit_ns / 4 / 1_000_000;
        (quarter.min(POLL_MS as u64) as i32).max(1)
    }

    fn beat(&mut self) {
        if self.limit_ns == 0 {
            return;
        }
        let beat = DeadMan {
            heartbeat_ns: crate::io::clock_ns(libc::CLOCK_MONOTONIC),
            limit_ns: self.limit_ns,
        };
        // A failed write shows as the kernel's ORPHANED verdict: the
        // guard fails safe (the peer detects us), never open.
        let _ = self.map.set(0, beat, 0);
    }
}

/// A session's prepared packets: its own socket (a duplicate descriptor of
/// the session's), the peer, the bytes.
pub struct Prepared {
    pub socket: Socket,
    pub peer: SockAddr,
    /// Sent once, on the first `PEER_SILENT`.
    pub down: Option<Vec<u8>>,
    /// Sent on every `TRANSMIT_DUE` until the session is disarmed.
    pub steady: Vec<u8>,
    /// An authenticated session's: each packet is signed as it leaves,
    /// with the next number of the sequence the kernel's replies share
    /// (RFC 5880 6.7.3).
    pub signer: Option<Signer>,
}

impl Prepared {
    /// `packet` as it must leave now: signed afresh when authenticated.
    fn signed(signer: &mut Option<Signer>, packet: &mut [u8]) {
        if let Some(signer) = signer {
            signer.sign(packet);
        }
    }
}

/// The prepared Down (the state machine's at a detection, Diag 1) as
/// `kind` of event must send it: with Diag 3 when the peer said Down or
/// AdminDown (RFC 5880 6.8.6). The Diag field is the low five bits of the
/// first byte (section 4.1).
pub fn down_for(kind: u32, mut down: Vec<u8>) -> Vec<u8> {
    if kind == event::PEER_DOWN {
        if let Some(first) = down.first_mut() {
            *first = (*first & 0xe0) | Diagnostic::NeighborSignaledSessionDown.bits();
        }
    }
    down
}

/// A detection event and when, if at all, the thread sent its Down.
#[derive(Clone, Copy, Debug)]
pub struct Detection {
    pub event: SweepEvent,
    /// CLOCK_MONOTONIC ns when the prepared Down left (None: none armed,
    /// or stale).
    pub down_sent_mono_ns: Option<u64>,
    /// The session was armed again after the kernel noticed: no Down left.
    pub stale: bool,
}

/// A session's prepared packets and when they were armed.
struct Armed {
    prepared: Prepared,
    /// CLOCK_MONOTONIC ns (`bpf_ktime_get_ns`'s clock) of the arming.
    since_mono_ns: u64,
}

/// Why a detection event sends no Down of the responder's.
#[derive(Debug, PartialEq, Eq)]
enum NoDown {
    /// Nothing is armed: the session is userspace's.
    Disarmed,
    /// The packets were armed after the kernel noticed: the event is
    /// stale, its session went Down and came Up again while this thread
    /// was held off (RT throttling: a Down 31 ms late, into the session
    /// re-established meanwhile, seen with the thread at SCHED_FIFO). That
    /// Down would end an Up session no detection time expired for (RFC
    /// 5880 6.8.4); they stay armed, and the loop judges the event with
    /// its state machine.
    Stale,
}

/// The session's prepared packets for a detection event, taken out (its
/// Down is sent once).
fn take_for_detection(
    armed: &mut HashMap<u32, Armed>,
    event: &SweepEvent,
) -> Result<Prepared, NoDown> {
    match armed.get(&event.discr) {
        None => Err(NoDown::Disarmed),
        Some(a) if a.since_mono_ns > event.at_ns => Err(NoDown::Stale),
        Some(_) => armed
            .remove(&event.discr)
            .map(|a| a.prepared)
            .ok_or(NoDown::Disarmed),
    }
}

pub struct Responder {
    armed: Arc<Mutex<HashMap<u32, Armed>>>,
    /// How the thread got scheduled (None until it started).
    policy: Arc<Mutex<Option<ThreadPolicy>>>,
    detections: Receiver<Detection>,
    /// Readable whenever detections wait (an eventfd the loop polls).
    wake: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    /// Own-clock packets sent so far.
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    /// What the thread takes when it starts; `None` once it has.
    parts: Option<Parts>,
}

/// The maps and settings a responder's thread owns.
struct Parts {
    events: RingBuf<MapData>,
    clock_sent: Array<MapData, u64>,
    states: Array<MapData, SessionState>,
    heartbeat: Heartbeat,
    want: Timeliness,
    sender: std::sync::mpsc::Sender<Detection>,
}

impl Responder {
    /// Starts the thread on `events`, pinned to `cpu` if given, at
    /// SCHED_DEADLINE when the kernel admits it, else at SCHED_FIFO
    /// `priority`, else at normal priority (and says so).
    /// It stamps each own-clock packet it sends in `clock_sent` (slot ->
    /// CLOCK_MONOTONIC ns), the only writer of that map, and reads the
    /// kernel's `states` to skip a request the fast path overtook.
    /// A responder whose thread has not started ([`Responder::run`]): it
    /// takes arming, but reads no event and beats nothing yet. An engine
    /// taking over from a running one starts it only once that one's has
    /// stopped, so that no event is read by the process without the
    /// session.
    pub fn idle(
        events: RingBuf<MapData>,
        clock_sent: Array<MapData, u64>,
        states: Array<MapData, SessionState>,
        heartbeat: Heartbeat,
        want: Timeliness,
    ) -> Result<Self> {
        // SAFETY: eventfd has no preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error()).context("creating an eventfd");
        }
        // SAFETY: raw is a fresh descriptor we own.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let (sender, detections) = channel();
        Ok(Self {
            armed: Arc::default(),
            policy: Arc::default(),
            detections,
            wake,
            stop: Arc::new(AtomicBool::new(false)),
            sent: Arc::new(AtomicU64::new(0)),
            thread: None,
            parts: Some(Parts {
                events,
                clock_sent,
                states,
                heartbeat,
                want,
                sender,
            }),
        })
    }

    /// Starts the thread (once).
    pub fn run(&mut self) -> Result<()> {
        let Some(parts) = self.parts.take() else {
            return Ok(());
        };
        let Parts {
            events,
            clock_sent,
            states,
            heartbeat,
            want,
            sender,
        } = parts;
        let (armed, stop, wake, sent) = (
            self.armed.clone(),
            self.stop.clone(),
            self.wake.clone(),
            self.sent.clone(),
        );
        let policy_slot = self.policy.clone();
        let thread = std::thread::Builder::new()
            .name("lc-responder".into())
            .spawn(move || {
                let got = make_current_thread_timely(want);
                let priority = want.priority;
                match &got {
                    ThreadPolicy::Deadline { .. } => {}
                    ThreadPolicy::Fifo { why_not_deadline, .. } => crate::log::line(&format!(
                        "the responder runs at SCHED_FIFO {priority}, not SCHED_DEADLINE ({why_not_deadline}): RT throttling can hold the first Down and the own clock for ~50 ms a second under RT load"
                    )),
                    ThreadPolicy::Normal { why } => crate::log::line(&format!(
                        "the responder runs at normal priority ({why}): the first Down and the own clock wait for the scheduler"
                    )),
                }
                *policy_slot.lock().expect("set once, never poisoned") = Some(got);
                let shared = Shared {
                    armed: &armed,
                    detections: &sender,
                    wake: &wake,
                    stop: &stop,
                    sent: &sent,
                };
                respond(events, clock_sent, states, heartbeat, shared);
            })
            .context("starting the responder thread")?;
        self.thread = Some(thread);
        Ok(())
    }

    /// Own-clock packets the thread has sent.
    pub fn own_clock_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Prepares (or replaces) the packets of session `discr`, from now.
    pub fn arm(&self, discr: u32, prepared: Prepared) {
        let since_mono_ns = crate::io::clock_ns(libc::CLOCK_MONOTONIC);
        self.armed
            .lock()
            .expect("the responder never panics holding the lock")
            .insert(
                discr,
                Armed {
                    prepared,
                    since_mono_ns,
                },
            );
    }

    pub fn disarm(&self, discr: u32) {
        self.armed
            .lock()
            .expect("the responder never panics holding the lock")
            .remove(&discr);
    }

    /// How the thread is scheduled (None in its first instants).
    pub fn policy(&self) -> Option<ThreadPolicy> {
        self.policy
            .lock()
            .expect("set once, never poisoned")
            .clone()
    }

    /// The descriptor that is readable while detections wait.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Every detection so far, in order.
    pub fn take(&self) -> Vec<Detection> {
        let mut counter = 0u64;
        // SAFETY: reading 8 bytes into a u64 we own from our eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), (&mut counter as *mut u64).cast(), 8) };
        self.detections.try_iter().collect()
    }
}

impl Responder {
    /// Stops the thread: no more beats, Downs or own-clock packets.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the thread shares with the engine.
struct Shared<'a> {
    armed: &'a Mutex<HashMap<u32, Armed>>,
    detections: &'a Sender<Detection>,
    wake: &'a OwnedFd,
    stop: &'a AtomicBool,
    sent: &'a AtomicU64,
}

fn respond(
    mut events: RingBuf<MapData>,
    mut clock_sent: Array<MapData, u64>,
    states: Array<MapData, SessionState>,
    mut heartbeat: Heartbeat,
    shared: Shared,
) {
    let Shared {
        armed,
        detections,
        wake,
        stop,
        sent,
    } = shared;
    let fd = events.as_fd().as_raw_fd();
    let period_ms = heartbeat.period_ms();
    let period_ns = i64::from(period_ms) * 1_000_000;
    let mut last_beat = i64::MIN;
    while !stop.load(Ordering::Relaxed) {
        let now = crate::io::clock_ns(libc::CLOCK_MONOTONIC) as i64;
        if now.saturating_sub(last_beat) >= period_ns {
            heartbeat.beat();
            last_beat = now;
        }
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        if unsafe { libc::poll(&mut pollfd, 1, period_ms) } <= 0 {
            continue;
        }
        let mut any = false;
        // (discr, slot, asked at) of each session whose own clock is due,
        // once: a thread held off (RT throttling) finds several requests
        // waiting and sends one packet, late, rather than a burst.
        let mut due: Vec<(u32, u32, u64)> = Vec::new();
        while let Some(item) = events.next() {
            if item.len() < std::mem::size_of::<SweepEvent>() {
                continue;
            }
            // SAFETY: the kernel wrote a SweepEvent (repr(C), Pod);
            // read_unaligned copes with the ring's alignment.
            let event = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<SweepEvent>()) };
            if event.kind == event::TRANSMIT_DUE {
                match due
                    .iter_mut()
                    .find(|d| (d.0, d.1) == (event.discr, event.slot))
                {
                    Some(known) => known.2 = event.at_ns,
                    None => due.push((event.discr, event.slot, event.at_ns)),
                }
                continue;
            }
            let mut armed = armed
                .lock()
                .expect("the loop never panics holding the lock");
            // Disarmed: the session is userspace's until it is offloaded
            // again (and its clock with it).
            let found = take_for_detection(&mut armed, &event);
            let stale = found.as_ref().err() == Some(&NoDown::Stale);
            let down_sent_mono_ns = found.ok().and_then(|mut prepared| {
                let mut down = down_for(event.kind, prepared.down.take()?);
                Prepared::signed(&mut prepared.signer, &mut down);
                prepared.socket.send_to(&down, &prepared.peer).ok()?;
                Some(crate::io::clock_ns(libc::CLOCK_MONOTONIC))
            });
            drop(armed);
            let _ = detections.send(Detection {
                event,
                down_sent_mono_ns,
                stale,
            });
            any = true;
        }
        if !due.is_empty() {
            let mut armed = armed
                .lock()
                .expect("the loop never panics holding the lock");
            for (discr, slot, asked_ns) in due {
                // Disarmed meanwhile: the session is userspace's again.
                let Some(Armed { prepared, .. }) = armed.get_mut(&discr) else {
                    continue;
                };
                // Stamped first: the peer's answer must find it (the fast
                // path hears, not answers, a packet that follows ours), and
                // a reply the fast path sends from now on sees it.
                let before = clock_sent.get(&slot, 0).unwrap_or(0);
                let _ = clock_sent.set(slot, crate::io::clock_ns(libc::CLOCK_MONOTONIC), 0);
                // Then: did the fast path answer the peer since the request
                // (this thread held off, or the peer's packet came with
                // it)? A second packet now would follow that reply sooner
                // than 6.8.7 allows (seen: 47 us apart). The stamp goes
                // back; nothing was sent.
                if states
                    .get(&slot, 0)
                    .is_ok_and(|state| state.last_tx_ns >= asked_ns)
                {
                    let _ = clock_sent.set(slot, before, 0);
                    continue;
                }
                Prepared::signed(&mut prepared.signer, &mut prepared.steady);
                // A full buffer is what the peer's detection is for.
                if prepared
                    .socket
                    .send_to(&prepared.steady, &prepared.peer)
                    .is_ok()
                {
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if any {
            let one = 1u64;
            // SAFETY: writing 8 bytes from a u64 to our eventfd.
            unsafe { libc::write(wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Repr;
    use linecard_api::control::State;

    fn armed_at(since_mono_ns: u64) -> Armed {
        let socket = Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap();
        let peer = SockAddr::from(std::net::SocketAddr::from(([127, 0, 0, 1], 3784)));
        Armed {
            prepared: Prepared {
                socket,
                peer,
                down: Some(vec![0x21]),
                steady: vec![0x20],
                signer: None,
            },
            since_mono_ns,
        }
    }

    fn silent(discr: u32, at_ns: u64) -> SweepEvent {
        SweepEvent {
            at_ns,
            last_rx_ns: at_ns.saturating_sub(30_000_000),
            discr,
            slot: 0,
            kind: event::PEER_SILENT,
            _reserved: 0,
        }
    }

    #[test]
    fn a_detection_older_than_the_arming_sends_no_down_and_keeps_the_packets() {
        let mut armed = HashMap::from([(7, armed_at(1_000))]);
        // Noticed at 999 ns, armed at 1000: the session came Up again
        // while the event waited.
        assert_eq!(
            take_for_detection(&mut armed, &silent(7, 999)).err(),
            Some(NoDown::Stale)
        );
        assert!(armed.contains_key(&7), "still armed for the next silence");
        // Noticed at (or after) the arming: this incarnation's Down, once.
        let prepared = take_for_detection(&mut armed, &silent(7, 1_000)).unwrap();
        assert_eq!(prepared.down, Some(vec![0x21]));
        assert!(armed.is_empty());
        assert_eq!(
            take_for_detection(&mut armed, &silent(7, 2_000)).err(),
            Some(NoDown::Disarmed)
        );
        // Another session's event takes nothing of this one's.
        let mut armed = HashMap::from([(7, armed_at(0))]);
        assert_eq!(
            take_for_detection(&mut armed, &silent(8, 5)).err(),
            Some(NoDown::Disarmed)
        );
        assert!(armed.contains_key(&7));
    }

    #[test]
    fn the_peer_s_down_is_answered_with_diag_3_a_silence_with_diag_1() {
        // Version 1, Diag 1 (detection), Down, Detect Mult 3, 24 bytes.
        let prepared = vec![
            0x21, 0x40, 3, 24, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0x0f, 0x42, 0x40, 0, 0, 0x27, 0x10, 0, 0,
            0, 0,
        ];
        let detection = Repr::parse_bytes(&prepared).unwrap();
        assert_eq!(
            (detection.state, detection.diag),
            (State::Down, Diagnostic::ControlDetectionTimeExpired)
        );
        assert_eq!(down_for(event::PEER_SILENT, prepared.clone()), prepared);
        let said_down = Repr::parse_bytes(&down_for(event::PEER_DOWN, prepared)).unwrap();
        assert_eq!(said_down.diag, Diagnostic::NeighborSignaledSessionDown);
        assert_eq!(
            Repr {
                diag: detection.diag,
                ..said_down
            },
            detection,
            "nothing else changed"
        );
    }
}
