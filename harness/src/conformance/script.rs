//! The scripted remote system: a BFD peer in the peer's namespace that
//! keeps RFC 5880 itself (6.8.6's state table, 6.8.3's slow rate while not
//! Up, jittered periodic packets, a Final at once for every Poll) and, step
//! by step, does what a real peer may do to a session: probe it with
//! packets it must discard, change its timers and multiplier, fall silent,
//! go AdminDown. It records everything it heard and sent (`trace.rs`);
//! `checks.rs` judges the record.

use super::packet::{Control, State, DIAG_ADMIN_DOWN};
use super::trace::{Event, Probe, Step, Trace};
use anyhow::{bail, Context, Result};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Our My Discriminator.
pub const PEER_DISCR: u32 = 0x5eed_0001;
/// The session on both sides: 3 x 50 ms.
pub const BASE_INTERVAL_US: u32 = 50_000;
pub const BASE_MULT: u8 = 3;
/// Our raised Required Min RX.
pub const RAISED_MIN_RX_US: u32 = 200_000;
/// Our raised Desired Min TX.
pub const SLOW_TX_US: u32 = 300_000;
/// Our raised Detect Mult.
pub const HIGH_MULT: u8 = 10;
/// RFC 5880 6.8.3: not less than one second while not Up.
const NOT_UP_TX_US: u32 = 1_000_000;

const MS: i64 = 1_000_000;

fn realtime_ns() -> i64 {
    crate::sys::unix_ns()
}

/// What we advertise and how we behave; the script turns these knobs.
#[derive(Clone, Copy)]
struct Knobs {
    desired_min_tx_us: u32,
    required_min_rx_us: u32,
    detect_mult: u8,
    admin_down: bool,
    silent: bool,
}

struct Received {
    at_ns: i64,
    bytes: [u8; 64],
    len: usize,
    ttl: u8,
    source_port: u16,
}

/// A UDP socket that reports each datagram's kernel receive time and TTL.
struct Receiver {
    fd: OwnedFd,
}

impl Receiver {
    fn bind(at: SocketAddrV4) -> Result<Self> {
        // SAFETY: plain socket calls on a descriptor we own; every pointer
        // passed is to a live local of the right size.
        unsafe {
            let raw = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_NONBLOCK, 0);
            if raw < 0 {
                bail!("socket: {}", std::io::Error::last_os_error());
            }
            let fd = OwnedFd::from_raw_fd(raw);
            let one: libc::c_int = 1;
            for (level, name) in [
                (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS),
                (libc::IPPROTO_IP, libc::IP_RECVTTL),
            ] {
                let len = std::mem::size_of_val(&one) as libc::socklen_t;
                if libc::setsockopt(raw, level, name, (&one as *const libc::c_int).cast(), len) != 0
                {
                    bail!("setsockopt: {}", std::io::Error::last_os_error());
                }
            }
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: at.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*at.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            let len = std::mem::size_of_val(&addr) as libc::socklen_t;
            if libc::bind(raw, (&addr as *const libc::sockaddr_in).cast(), len) != 0 {
                bail!("binding {at}: {}", std::io::Error::last_os_error());
            }
            Ok(Self { fd })
        }
    }

    /// Waits at most `timeout_ns` for the socket to become readable.
    fn wait(&self, timeout_ns: i64) {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout_ns.max(0) / 1_000_000_000,
            tv_nsec: timeout_ns.max(0) % 1_000_000_000,
        };
        // SAFETY: one pollfd we own, a timespec we own, no signal mask.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }

    /// The next datagram, if one is waiting.
    fn recv(&self) -> Option<Received> {
        let mut out = Received {
            at_ns: 0,
            bytes: [0; 64],
            len: 0,
            ttl: 0,
            source_port: 0,
        };
        // SAFETY: an all-zero sockaddr_in is valid; recvfrom fills it.
        let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: out.bytes.as_mut_ptr().cast(),
            iov_len: out.bytes.len(),
        };
        let mut control = [0u64; 16];
        // SAFETY: msghdr points at locals that outlive the call; the
        // control messages are read within `control`'s bounds by the
        // kernel's CMSG macros.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
            msg.msg_namelen = std::mem::size_of_val(&from) as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control);
            let n = libc::recvmsg(self.fd.as_raw_fd(), &mut msg, 0);
            if n < 0 {
                return None;
            }
            out.len = n as usize;
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let data = libc::CMSG_DATA(cmsg);
                match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                        let ts: libc::timespec = std::ptr::read_unaligned(data.cast());
                        out.at_ns = ts.tv_sec * 1_000_000_000 + ts.tv_nsec;
                    }
                    (libc::IPPROTO_IP, libc::IP_TTL) => {
                        out.ttl = std::ptr::read_unaligned(data.cast::<libc::c_int>()) as u8;
                    }
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if out.at_ns == 0 {
            out.at_ns = realtime_ns();
        }
        out.source_port = u16::from_be(from.sin_port);
        Some(out)
    }
}

/// The remote system.
pub struct Peer {
    rx: Receiver,
    tx: UdpSocket,
    /// For the GTSM probe.
    tx_ttl_254: UdpSocket,
    dut: SocketAddrV4,
    state: State,
    diag: u8,
    dut_discr: u32,
    dut_state: Option<State>,
    /// The DUT's Required Min RX, as it last said.
    dut_min_rx_us: u32,
    knobs: Knobs,
    /// Our Desired Min TX in force: a raise waits for the Final (6.8.3).
    tx_in_force_us: u32,
    polling: bool,
    /// When our last periodic packet left, and the fraction of the
    /// interval (per mille, 750-999) drawn for the next: due at
    /// `last_sent_ns + interval * draw`, the interval as it stands then,
    /// so a DUT that lowers its Required Min RX is obeyed at once.
    last_sent_ns: i64,
    draw_per_mille: i64,
    /// Send at once (our state changed, or the script asks).
    send_now: bool,
    rng: u64,
    pub trace: Trace,
    /// The DUT's packets heard so far.
    heard: usize,
    /// Nothing runs past this.
    end_ns: i64,
}

impl Peer {
    /// Binds in the calling thread's namespace (the peer's).
    pub fn new(ours: Ipv4Addr, dut: Ipv4Addr, limit_ns: i64) -> Result<Self> {
        let rx = Receiver::bind(SocketAddrV4::new(ours, 3784)).context("the peer's BFD port")?;
        // RFC 5881 4: a source port in 49152-65535, TTL 255.
        let tx = UdpSocket::bind(SocketAddrV4::new(ours, 49_200))?;
        tx.set_ttl(255)?;
        let tx_ttl_254 = UdpSocket::bind(SocketAddrV4::new(ours, 49_201))?;
        tx_ttl_254.set_ttl(254)?;
        let now = realtime_ns();
        Ok(Self {
            rx,
            tx,
            tx_ttl_254,
            dut: SocketAddrV4::new(dut, 3784),
            state: State::Down,
            diag: 0,
            dut_discr: 0,
            dut_state: None,
            dut_min_rx_us: 1,
            knobs: Knobs {
                desired_min_tx_us: BASE_INTERVAL_US,
                required_min_rx_us: BASE_INTERVAL_US,
                detect_mult: BASE_MULT,
                admin_down: false,
                silent: true,
            },
            tx_in_force_us: BASE_INTERVAL_US,
            polling: false,
            last_sent_ns: now,
            draw_per_mille: 1_000,
            send_now: true,
            rng: (now as u64) | 1,
            trace: Trace::default(),
            heard: 0,
            end_ns: now + limit_ns,
        })
    }

    fn mark(&mut self, step: Step) {
        self.trace.events.push(Event::Began {
            at_ns: realtime_ns(),
            step,
        });
    }

    fn stuck(&mut self, why: String) {
        self.trace.events.push(Event::Stuck {
            at_ns: realtime_ns(),
            why,
        });
    }

    /// Our packet as it stands, Poll and Final aside.
    fn packet(&self) -> Control {
        let mut p = Control::new(self.state, PEER_DISCR, self.dut_discr);
        p.diag = self.diag;
        p.detect_mult = self.knobs.detect_mult;
        p.desired_min_tx_us = if self.state == State::Up {
            self.knobs.desired_min_tx_us
        } else {
            NOT_UP_TX_US
        };
        p.required_min_rx_us = self.knobs.required_min_rx_us;
        p
    }

    /// Sends `packet`, stamped before it leaves: the DUT's answer, stamped
    /// by the kernel on arrival, can be back before `send_to` returns (a
    /// Final 19.5 us ahead of a stamp taken after it, under L4: the judge
    /// then took the next Poll's Final for this one's, 100 ms late).
    fn send(&mut self, packet: Control) {
        let at_ns = realtime_ns();
        let _ = self.tx.send_to(&packet.to_bytes(), self.dut);
        self.trace.events.push(Event::Sent {
            at_ns,
            packet,
            probe: None,
        });
    }

    /// One copy of `probe`, built on our packet as it stands.
    fn send_probe(&mut self, probe: Probe, base: Control) {
        let (bytes, ttl) = probe.apply(base);
        let socket = if ttl == 255 {
            &self.tx
        } else {
            &self.tx_ttl_254
        };
        // The short probe claims 20 bytes and carries them: the mandatory
        // section cut at its Length.
        let len = if probe == Probe::LengthBelowMinimum {
            20
        } else {
            24
        };
        // Stamped before it leaves, as in `send`.
        let at_ns = realtime_ns();
        let _ = socket.send_to(&bytes[..len], self.dut);
        self.trace.events.push(Event::Sent {
            at_ns,
            packet: Control::parse(&bytes).expect("24 bytes"),
            probe: Some(probe),
        });
    }

    /// A draw in [750, 1000) per mille (6.8.7, Detect Mult > 1).
    fn draw(&mut self) -> i64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        750 + (self.rng % 250) as i64
    }

    fn next_send_ns(&self) -> i64 {
        if self.send_now {
            return i64::MIN;
        }
        self.last_sent_ns + self.interval_ns() * self.draw_per_mille / 1_000
    }

    fn interval_ns(&self) -> i64 {
        if self.state != State::Up {
            return i64::from(NOT_UP_TX_US.max(self.dut_min_rx_us)) * 1_000;
        }
        i64::from(self.tx_in_force_us.max(self.dut_min_rx_us)) * 1_000
    }

    fn set_state(&mut self, state: State, diag: u8) {
        if state != self.state {
            self.state = state;
            self.diag = diag;
            // Tell the DUT at once.
            self.send_now = true;
        }
    }

    fn on_packet(&mut self, r: &Received) {
        let Some(p) = Control::parse(&r.bytes[..r.len]) else {
            return;
        };
        self.heard += 1;
        self.trace.events.push(Event::Heard {
            at_ns: r.at_ns,
            packet: p,
            ttl: r.ttl,
            source_port: r.source_port,
        });
        self.dut_discr = p.my_discr;
        self.dut_state = Some(p.state);
        self.dut_min_rx_us = p.required_min_rx_us;
        if p.final_ && self.polling {
            self.polling = false;
            self.tx_in_force_us = self.knobs.desired_min_tx_us;
        }
        if !self.knobs.admin_down {
            // RFC 5880 6.8.6's table.
            match (self.state, p.state) {
                (State::Down, _) | (State::Init, _) | (State::Up, _)
                    if p.state == State::AdminDown && self.state != State::Down =>
                {
                    self.set_state(State::Down, 3)
                }
                (State::Down, State::Down) => self.set_state(State::Init, 0),
                (State::Down, State::Init) | (State::Init, State::Init | State::Up) => {
                    self.set_state(State::Up, 0)
                }
                (State::Up, State::Down) => self.set_state(State::Down, 3),
                _ => {}
            }
        }
        // A Final at once for a Poll (6.5), unless we play dead.
        if p.poll && !self.knobs.silent {
            let mut f = self.packet();
            f.final_ = true;
            self.send(f);
        }
    }

    /// Runs the peer until `done` holds or `for_ns` passes; whether `done`
    /// held.
    fn pump(&mut self, for_ns: i64, done: impl Fn(&Self) -> bool) -> bool {
        let until = (realtime_ns() + for_ns).min(self.end_ns);
        loop {
            if done(self) {
                return true;
            }
            let now = realtime_ns();
            if now >= until {
                return false;
            }
            if !self.knobs.silent && now >= self.next_send_ns() {
                let mut p = self.packet();
                p.poll = self.polling;
                self.send(p);
                self.last_sent_ns = now;
                self.draw_per_mille = self.draw();
                self.send_now = false;
            }
            let wake = if self.knobs.silent {
                until
            } else {
                self.next_send_ns().clamp(now, until)
            };
            self.rx.wait((wake - realtime_ns()).clamp(0, 5 * MS));
            while let Some(r) = self.rx.recv() {
                self.on_packet(&r);
            }
        }
    }

    fn run_for(&mut self, ms: i64) {
        self.pump(ms * MS, |_| false);
    }

    /// Changes our knobs by a Poll and waits (bounded) for its Final
    /// (6.5, 6.8.3); a raise of our Desired Min TX takes effect then.
    fn poll(&mut self, change: impl FnOnce(&mut Knobs)) -> bool {
        change(&mut self.knobs);
        if self.knobs.desired_min_tx_us < self.tx_in_force_us {
            self.tx_in_force_us = self.knobs.desired_min_tx_us;
        }
        self.polling = true;
        self.send_now = true;
        if self.pump(2_000 * MS, |p| !p.polling) {
            return true;
        }
        self.polling = false;
        self.tx_in_force_us = self.knobs.desired_min_tx_us;
        self.stuck("no Final to our Poll within 2 s".into());
        false
    }

    fn both_up(&self) -> bool {
        self.state == State::Up && self.dut_state == Some(State::Up)
    }

    /// Waits (bounded) until both sides are Up again.
    fn ensure_up(&mut self, within_ms: i64) -> bool {
        if self.pump(within_ms * MS, Self::both_up) {
            return true;
        }
        self.stuck(format!(
            "the session was not Up again within {within_ms} ms"
        ));
        false
    }
}

/// The DUT's raised timers (its operator's change, both ways).
pub const DUT_SLOW_US: u32 = 100_000;

/// What the script may ask of the DUT besides the wire: what its
/// operator would do.
pub trait DutControl {
    /// Ready to be judged once Up (e.g. its session offloaded).
    fn settled(&self) -> bool;
    /// Sets its Desired Min TX and Required Min RX (ms) as its operator
    /// would; `Err` says why this DUT cannot be told (the steps that need
    /// it are then inconclusive).
    fn set_timers(&self, tx_ms: u32, rx_ms: u32) -> Result<(), String>;
}

/// Runs `f` (a question to the DUT's operator side) on a thread of its
/// own while the peer keeps the session going: a starved DUT may take
/// hundreds of ms to answer its control socket, and a peer that waited
/// for it in silence would be declared dead for it (seen: `ctl set` took
/// 363 ms under L4).
fn beside<T: Send>(peer: &mut Peer, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        let operator = s.spawn(f);
        while !operator.is_finished() {
            peer.run_for(5);
        }
        operator.join().expect("the operator's thread panicked")
    })
}

/// The whole script. `dut.settled()` is asked every 100 ms for 5 s once
/// Up.
pub fn run(peer: &mut Peer, dut: &(dyn DutControl + Sync)) {
    // Not Up: the DUT alone at its slow rate, and one probe that would
    // take a Down DUT Up if it were accepted.
    peer.mark(Step::NotUp);
    if !peer.pump(15_000 * MS, |p| p.dut_state.is_some()) {
        peer.stuck("no packet from the DUT within 15 s of its start".into());
        return;
    }
    // Three slow packets or more (6.8.3), then the probe.
    peer.run_for(3_500);
    let mut init = peer.packet();
    init.state = State::Init;
    for _ in 0..3 {
        peer.send_probe(Probe::YourDiscrZero, init);
        peer.run_for(10);
    }
    peer.run_for(2_300);

    peer.mark(Step::Handshake);
    // Whatever we made of the DUT's Down packets while silent, we start
    // from Down (6.8.6's table, from our side).
    peer.state = State::Down;
    peer.diag = 0;
    peer.knobs.silent = false;
    peer.send_now = true;
    if !peer.ensure_up(5_000) {
        return;
    }
    let mut ready = false;
    for _ in 0..50 {
        if beside(peer, || dut.settled()) {
            ready = true;
            break;
        }
        peer.run_for(100);
    }

    peer.mark(Step::Steady);
    if !ready {
        peer.stuck("the DUT did not settle (e.g. offload its session) within 5 s of Up".into());
    }
    // Enough of the DUT's packets to see its jitter's spread (the check
    // needs 20 gaps): 2.5 s, and up to 8 s more for a starved DUT.
    let before = peer.heard;
    peer.run_for(2_500);
    peer.pump(8_000 * MS, |p| p.heard >= before + 25);

    peer.mark(Step::Polls);
    for _ in 0..5 {
        peer.poll(|_| {});
        peer.run_for(100);
    }

    peer.mark(Step::Probes);
    for probe in Probe::WHILE_UP {
        if !peer.ensure_up(8_000) {
            break;
        }
        peer.run_for(100);
        let mut base = peer.packet();
        base.state = State::AdminDown;
        base.diag = DIAG_ADMIN_DOWN;
        for _ in 0..3 {
            peer.send_probe(probe, base);
            peer.run_for(10);
        }
        // Two packets of the DUT's after the probe to judge it by: at
        // least 250 ms, and up to 3 s for a DUT starved under load (the
        // naive loop runs ~50 ms a second under L4).
        let before = peer.heard;
        peer.run_for(250);
        peer.pump(3_000 * MS, |p| p.heard >= before + 2);
    }
    peer.ensure_up(8_000);

    peer.mark(Step::RaisedMinRx);
    peer.poll(|k| k.required_min_rx_us = RAISED_MIN_RX_US);
    peer.run_for(2_500);

    peer.mark(Step::LoweredMinRx);
    peer.poll(|k| k.required_min_rx_us = BASE_INTERVAL_US);
    peer.run_for(1_200);

    peer.mark(Step::ZeroMinRx);
    peer.poll(|k| k.required_min_rx_us = 0);
    peer.run_for(800);
    peer.poll(|_| {});
    peer.run_for(400);

    peer.mark(Step::RestoredMinRx);
    peer.poll(|k| k.required_min_rx_us = BASE_INTERVAL_US);
    peer.run_for(300);

    // The DUT's own change, both ways: its Poll with the new values
    // (6.8.3, 6.8.10), our Final at once, then its new rate.
    for (step, us) in [
        (Step::DutSlower, DUT_SLOW_US),
        (Step::DutFaster, BASE_INTERVAL_US),
    ] {
        peer.mark(step);
        if let Err(why) = beside(peer, || dut.set_timers(us / 1_000, us / 1_000)) {
            peer.stuck(why);
            continue;
        }
        peer.run_for(2_500);
    }
    // Whatever the DUT did, the next steps start from both Up.
    peer.ensure_up(8_000);

    peer.mark(Step::SlowerPeer);
    peer.poll(|k| k.desired_min_tx_us = SLOW_TX_US);
    peer.run_for(2_500);
    // Back down: a decrease may take effect at once (6.8.3).
    peer.poll(|k| k.desired_min_tx_us = BASE_INTERVAL_US);
    peer.run_for(300);

    peer.mark(Step::Multiplier);
    peer.knobs.detect_mult = HIGH_MULT;
    peer.run_for(200);
    for _ in 0..2 {
        peer.knobs.silent = true;
        peer.run_for(400);
        peer.knobs.silent = false;
        peer.send_now = true;
        peer.run_for(100);
    }
    peer.run_for(200);

    // Multiplier 3 again (at once, 6.8.11), then silence: detection in
    // 3 x 50 ms.
    peer.mark(Step::FasterPeerThenSilence);
    peer.knobs.detect_mult = BASE_MULT;
    peer.run_for(500);
    peer.knobs.silent = true;
    peer.pump(2_000 * MS, |p| p.dut_state != Some(State::Up));
    peer.run_for(300);

    peer.mark(Step::Rehandshake);
    // We missed the DUT's Down: we are the ones to notice now (6.8.6).
    peer.state = State::Down;
    peer.diag = 1;
    peer.knobs.silent = false;
    peer.send_now = true;
    if !peer.ensure_up(8_000) {
        return;
    }
    peer.run_for(300);

    peer.mark(Step::AdminDown);
    peer.knobs.admin_down = true;
    peer.set_state(State::AdminDown, DIAG_ADMIN_DOWN);
    peer.run_for(1_500);
    peer.mark(Step::End);
}
