//! The echo function's originator (RFC 5880 section 6.4, RFC 5881 section
//! 4): our own echoes, addressed to ourselves and handed to the peer's MAC,
//! which the peer's forwarding plane turns around.
//!
//! - Sent from a packet socket (`AF_PACKET`, `SOCK_DGRAM`) straight to the
//!   peer's MAC: a UDP socket would loop a self-addressed packet back
//!   inside this host and never test the path.
//! - Returns are read from packet sockets too, filtered in the kernel to
//!   UDP 3785: they carry our own address as source, which the IP layer
//!   drops as a martian before any UDP socket.
//! - A return is ours when its payload carries our magic and a session's
//!   discriminator; the sequence number and send time in the payload give
//!   the round trip. The payload is opaque to reflectors (RFC 5880 6.4).
//! - Round trips and losses are judged on the kernel's receive timestamp
//!   (`SO_TIMESTAMPNS`, CLOCK_REALTIME like the send time in the payload),
//!   and returns are read before anything is declared lost: a thread that
//!   was itself starved would otherwise take its own lateness for lost
//!   echoes. (Scheduling uses CLOCK_MONOTONIC.)
//! - Advisory only: nothing here feeds the session's state machine. A
//!   stalled host would otherwise take its own echoes' lateness for a path
//!   failure. The gap between consecutive sends is measured when each send
//!   returns, independently of the schedule, so a stalled originator shows
//!   up as a gap, not as zero losses.
//! - Runs in a thread of its own at normal priority, so that echo never
//!   holds the control loop.

use linecard_api::control::EchoStatus;
use linecard_common::checksum::ones_complement_sum;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// UDP port of echo packets, source and destination.
pub const PORT: u16 = linecard_common::bfd::PORT_ECHO;
/// The first bytes of our echo payload.
pub const MAGIC: [u8; 4] = *b"LCE1";
/// Magic, discriminator, sequence number, send time (CLOCK_REALTIME ns).
pub const PAYLOAD_LEN: usize = 4 + 4 + 8 + 8;
/// Echoes leave one hop away at TTL 255 and come back at 254: the
/// reflector forwards them (RFC 5881 section 4 leaves the value to us; 255
/// lets a reflector tell an on-link echo from a remote one).
const TTL: u8 = 255;

/// What the control loop asks of one session's echo: where to send and
/// how often. `None` stops it (not Up, or the peer does not reflect).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EchoPlan {
    pub local: IpAddr,
    pub ifindex: u32,
    pub peer_mac: [u8; 6],
    /// max(our desired echo interval, the peer's Required Min Echo RX)
    /// (RFC 5880 6.8.9), ns.
    pub interval_ns: u64,
    /// An echo not back within this long is lost (the detection time the
    /// echo would have had: interval times the detect multiplier).
    pub lost_after_ns: u64,
}

#[derive(Default)]
struct Entry {
    plan: Option<EchoPlan>,
    status: EchoStatus,
    next_seq: u64,
    /// CLOCK_MONOTONIC: when the next echo is due, and when the last left.
    next_due_ns: u64,
    last_sent_ns: u64,
    /// CLOCK_REALTIME (the kernel's receive stamp) of the last return.
    last_return_ns: u64,
    rtt_sum_us: u64,
    /// (sequence, sent at on CLOCK_REALTIME), oldest first.
    outstanding: VecDeque<(u64, u64)>,
}

/// What the control loop asks of the originator thread.
enum Command {
    Steer(u32, Option<EchoPlan>),
    Forget(u32),
}

/// The statuses the thread publishes for the control loop to read.
type Published = Arc<Mutex<HashMap<u32, EchoStatus>>>;

/// The originator thread and what it shares with the control loop.
///
/// The control loop may run at SCHED_FIFO and this thread does not, so the
/// loop never waits on it: it hands commands over a channel and wakes the
/// thread with an eventfd, and reads statuses with `try_lock` (a status
/// the thread is publishing right then reads as absent). A lock shared
/// both ways would let a starved normal-priority thread hold the control
/// loop for as long as it is starved, up to a second under L4.
pub struct Originator {
    commands: mpsc::Sender<Command>,
    wake: OwnedFd,
    published: Published,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Originator {
    /// Opens the packet sockets (CAP_NET_RAW) and starts the thread.
    pub fn start() -> io::Result<Self> {
        let v4 = PacketSocket::open(libc::ETH_P_IP as u16, &filter_v4())?;
        let v6 = PacketSocket::open(libc::ETH_P_IPV6 as u16, &filter_v6())?;
        // SAFETY: eventfd(2) with constant arguments; the result is checked.
        let wake = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if wake < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        let (commands, inbox) = mpsc::channel();
        let published: Published = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let thread = Thread {
                inbox,
                wake: wake.try_clone()?,
                published: published.clone(),
                stop: stop.clone(),
                v4,
                v6,
                entries: HashMap::new(),
            };
            std::thread::Builder::new()
                .name("linecardd-echo".into())
                .spawn(move || thread.run())?
        };
        Ok(Self {
            commands,
            wake,
            published,
            stop,
            thread: Some(thread),
        })
    }

    /// Sets or stops a session's echo; keeps its counters either way.
    pub fn steer(&self, discr: u32, plan: Option<EchoPlan>) {
        self.send(Command::Steer(discr, plan));
    }

    pub fn forget(&self, discr: u32) {
        self.send(Command::Forget(discr));
    }

    fn send(&self, command: Command) {
        // Neither blocks: an unbounded channel, a non-blocking eventfd.
        let _ = self.commands.send(command);
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a valid buffer.
        unsafe { libc::write(self.wake.as_raw_fd(), std::ptr::from_ref(&one).cast(), 8) };
    }

    /// The session's echo as last published; `None` also while the thread
    /// is publishing (never waited for).
    pub fn status(&self, discr: u32) -> Option<EchoStatus> {
        self.published.try_lock().ok()?.get(&discr).copied()
    }
}

impl Drop for Originator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a valid buffer.
        unsafe { libc::write(self.wake.as_raw_fd(), std::ptr::from_ref(&one).cast(), 8) };
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub fn monotonic_ns() -> u64 {
    crate::io::clock_ns(libc::CLOCK_MONOTONIC)
}

fn realtime_ns() -> u64 {
    crate::io::clock_ns(libc::CLOCK_REALTIME)
}

/// The originator thread's own state: nobody else touches `entries`.
struct Thread {
    inbox: mpsc::Receiver<Command>,
    wake: OwnedFd,
    published: Published,
    stop: Arc<AtomicBool>,
    v4: PacketSocket,
    v6: PacketSocket,
    entries: HashMap<u32, Entry>,
}

impl Thread {
    /// Sends what is due, reads returns, expires the lost, publishes;
    /// wakes at the next due send, a return or a command, at least every
    /// 100 ms.
    fn run(mut self) {
        // Normal priority whoever started us: a thread inherits its
        // creator's policy, and the loop that steers us may run at
        // SCHED_FIFO (rt) by the time a session asks for echoes.
        let normal = libc::sched_param { sched_priority: 0 };
        // SAFETY: a valid sched_param for the calling thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal) };
        let mut buf = [0u8; 2048];
        while !self.stop.load(Ordering::Relaxed) {
            while let Ok(command) = self.inbox.try_recv() {
                self.apply(command);
            }
            // Returns before any loss: after a stall of this thread they
            // wait in the sockets, stamped by the kernel when they came.
            for socket in [&self.v4, &self.v6] {
                while let Some((len, at)) = socket.recv_incoming(&mut buf) {
                    if let Some((discr, seq, sent)) = parse_return(&buf[..len]) {
                        if let Some(entry) = self.entries.get_mut(&discr) {
                            note_return(entry, seq, sent, at.unwrap_or_else(realtime_ns));
                        }
                    }
                }
            }
            let now = monotonic_ns();
            let wall = realtime_ns();
            let mut next_due = now + 100_000_000;
            for (&discr, entry) in &mut self.entries {
                let Some(plan) = entry.plan.clone() else {
                    continue;
                };
                while let Some(&(_, sent)) = entry.outstanding.front() {
                    if wall.saturating_sub(sent) <= plan.lost_after_ns {
                        break;
                    }
                    entry.outstanding.pop_front();
                    entry.status.lost += 1;
                }
                if entry.next_due_ns <= now {
                    send(&self.v4, &self.v6, discr, &plan, entry);
                    // On schedule while we keep up; after a stall, one
                    // interval from now rather than a burst to catch up.
                    entry.next_due_ns = (entry.next_due_ns + plan.interval_ns)
                        .max(monotonic_ns() + plan.interval_ns / 2);
                }
                next_due = next_due.min(entry.next_due_ns);
            }
            self.publish(wall);
            // To the nanosecond: poll's milliseconds would make every echo
            // up to a millisecond late.
            let wait_ns = next_due.saturating_sub(monotonic_ns()).min(100_000_000);
            let timeout = libc::timespec {
                tv_sec: 0,
                tv_nsec: wait_ns as libc::c_long,
            };
            let mut fds = [
                self.v4.pollfd(),
                self.v6.pollfd(),
                libc::pollfd {
                    fd: self.wake.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: three valid pollfd entries and a valid timespec.
            unsafe { libc::ppoll(fds.as_mut_ptr(), 3, &timeout, std::ptr::null()) };
            let mut count = 0u64;
            // SAFETY: an 8-byte read into a valid buffer (resets the count).
            unsafe {
                libc::read(
                    self.wake.as_raw_fd(),
                    std::ptr::from_mut(&mut count).cast(),
                    8,
                )
            };
        }
    }

    fn apply(&mut self, command: Command) {
        match command {
            Command::Forget(discr) => {
                self.entries.remove(&discr);
            }
            Command::Steer(discr, plan) => {
                let entry = self.entries.entry(discr).or_default();
                if entry.plan == plan {
                    return;
                }
                entry.status.interval_us = plan.as_ref().map_or(0, |p| p.interval_ns / 1000);
                entry.next_due_ns = monotonic_ns();
                // A restart is not a gap of the originator's making, and
                // the longest gap is the current interval's.
                entry.last_sent_ns = 0;
                entry.status.max_send_gap_us = 0;
                entry.outstanding.clear();
                entry.plan = plan;
            }
        }
    }

    fn publish(&self, wall: u64) {
        let statuses = self.entries.iter().map(|(&discr, entry)| {
            let mut status = entry.status;
            status.live = entry.plan.as_ref().is_some_and(|p| {
                entry.last_return_ns != 0
                    && wall.saturating_sub(entry.last_return_ns) <= p.lost_after_ns
            });
            (discr, status)
        });
        if let Ok(mut published) = self.published.lock() {
            published.clear();
            published.extend(statuses);
        }
    }
}

fn send(v4: &PacketSocket, v6: &PacketSocket, discr: u32, plan: &EchoPlan, entry: &mut Entry) {
    let seq = entry.next_seq;
    entry.next_seq += 1;
    let sent_ns = realtime_ns();
    let mut payload = [0u8; PAYLOAD_LEN];
    payload[..4].copy_from_slice(&MAGIC);
    payload[4..8].copy_from_slice(&discr.to_be_bytes());
    payload[8..16].copy_from_slice(&seq.to_be_bytes());
    payload[16..24].copy_from_slice(&sent_ns.to_be_bytes());
    let (socket, packet) = match plan.local {
        IpAddr::V4(a) => (v4, ipv4_echo(a.octets(), &payload)),
        IpAddr::V6(a) => (v6, ipv6_echo(a.octets(), &payload)),
    };
    if socket
        .send_to(&packet, plan.ifindex, plan.peer_mac)
        .is_err()
    {
        // Counted as lost when it does not come back.
    }
    let left = monotonic_ns();
    if entry.last_sent_ns != 0 {
        let gap_us = (left - entry.last_sent_ns) / 1000;
        entry.status.max_send_gap_us = entry.status.max_send_gap_us.max(gap_us);
    }
    entry.last_sent_ns = left;
    entry.status.sent += 1;
    entry.outstanding.push_back((seq, sent_ns));
}

fn note_return(entry: &mut Entry, seq: u64, sent: u64, at: u64) {
    let Some(i) = entry.outstanding.iter().position(|&(s, _)| s == seq) else {
        entry.status.unmatched += 1;
        return;
    };
    entry.outstanding.remove(i);
    let rtt_us = at.saturating_sub(sent) / 1000;
    let s = &mut entry.status;
    s.returned += 1;
    s.rtt_min_us = Some(s.rtt_min_us.map_or(rtt_us, |m| m.min(rtt_us)));
    s.rtt_max_us = Some(s.rtt_max_us.map_or(rtt_us, |m| m.max(rtt_us)));
    entry.rtt_sum_us += rtt_us;
    s.rtt_avg_us = Some(entry.rtt_sum_us / s.returned);
    entry.last_return_ns = at;
}

/// An IPv4 echo, self-addressed, UDP 3785 -> 3785, TTL 255, DSCP CS6, UDP
/// checksum 0 (none, allowed over IPv4).
pub fn ipv4_echo(local: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let total = 20 + 8 + payload.len();
    let mut p = Vec::with_capacity(total);
    p.extend_from_slice(&[0x45, 0xc0]);
    p.extend_from_slice(&(total as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, TTL, 17, 0, 0]);
    p.extend_from_slice(&local);
    p.extend_from_slice(&local);
    let check = !ones_complement_sum(&p);
    p[10..12].copy_from_slice(&check.to_be_bytes());
    p.extend_from_slice(&PORT.to_be_bytes());
    p.extend_from_slice(&PORT.to_be_bytes());
    p.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}

/// An IPv6 echo, self-addressed, hop limit 255, with its mandatory UDP
/// checksum (RFC 8200 8.1).
pub fn ipv6_echo(local: [u8; 16], payload: &[u8]) -> Vec<u8> {
    let udp_len = (8 + payload.len()) as u16;
    let mut p = Vec::with_capacity(40 + usize::from(udp_len));
    p.extend_from_slice(&[0x6c, 0, 0, 0]); // version 6, class CS6
    p.extend_from_slice(&udp_len.to_be_bytes());
    p.extend_from_slice(&[17, TTL]);
    p.extend_from_slice(&local);
    p.extend_from_slice(&local);
    let mut udp = Vec::with_capacity(usize::from(udp_len));
    udp.extend_from_slice(&PORT.to_be_bytes());
    udp.extend_from_slice(&PORT.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut pseudo = Vec::with_capacity(40 + udp.len());
    pseudo.extend_from_slice(&local);
    pseudo.extend_from_slice(&local);
    pseudo.extend_from_slice(&u32::from(udp_len).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&udp);
    let check = match !ones_complement_sum(&pseudo) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&check.to_be_bytes());
    p.extend_from_slice(&udp);
    p
}

/// One of our echoes come back: self-addressed UDP 3785 with our magic.
/// Returns (discriminator, sequence, sent at).
pub fn parse_return(packet: &[u8]) -> Option<(u32, u64, u64)> {
    let (src, dst, udp) = match packet.first()? >> 4 {
        4 => {
            let ihl = usize::from(packet[0] & 0x0f) * 4;
            if ihl < 20 || packet.len() < ihl + 8 || packet[9] != 17 {
                return None;
            }
            (&packet[12..16], &packet[16..20], &packet[ihl..])
        }
        6 if packet.len() >= 48 && packet[6] == 17 => {
            (&packet[8..24], &packet[24..40], &packet[40..])
        }
        _ => return None,
    };
    if src != dst || u16::from_be_bytes([udp[2], udp[3]]) != PORT {
        return None;
    }
    let payload = udp.get(8..8 + PAYLOAD_LEN)?;
    if payload[..4] != MAGIC {
        return None;
    }
    let word =
        |r: std::ops::Range<usize>| payload[r].iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
    Some((word(4..8) as u32, word(8..16), word(16..24)))
}

/// A classic BPF filter: IPv4, UDP, destination port 3785 (the header
/// length taken from IHL). Offsets are from the network header, where a
/// `SOCK_DGRAM` packet socket's data starts.
fn filter_v4() -> Vec<libc::sock_filter> {
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    vec![
        op(0x30, 0, 0, 9),               // ldb [9]: protocol
        op(0x15, 0, 4, 17),              // jeq UDP, else drop
        op(0xb1, 0, 0, 0),               // ldxb 4*([0]&0xf): header length
        op(0x48, 0, 0, 2),               // ldh [x+2]: destination port
        op(0x15, 0, 1, u32::from(PORT)), // jeq 3785, else drop
        op(0x06, 0, 0, 0x0004_0000),     // accept
        op(0x06, 0, 0, 0),               // drop
    ]
}

/// IPv6, next header UDP (no extension headers), destination port 3785.
fn filter_v6() -> Vec<libc::sock_filter> {
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    vec![
        op(0x30, 0, 0, 6),               // ldb [6]: next header
        op(0x15, 0, 3, 17),              // jeq UDP, else drop
        op(0x28, 0, 0, 42),              // ldh [42]: destination port
        op(0x15, 0, 1, u32::from(PORT)), // jeq 3785, else drop
        op(0x06, 0, 0, 0x0004_0000),     // accept
        op(0x06, 0, 0, 0),               // drop
    ]
}

/// An `AF_PACKET`/`SOCK_DGRAM` socket for one ethertype: the kernel adds
/// and strips the link-layer header.
struct PacketSocket {
    fd: OwnedFd,
    ethertype: u16,
}

impl PacketSocket {
    fn open(ethertype: u16, filter: &[libc::sock_filter]) -> io::Result<Self> {
        // SAFETY: socket(2) with constant arguments; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ethertype.to_be()),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let on: libc::c_int = 1;
        // SAFETY: an int option for the call's duration.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                std::ptr::from_ref(&on).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let program = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr().cast_mut(),
        };
        // SAFETY: a valid sock_fprog for the call's duration.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                std::ptr::from_ref(&program).cast(),
                std::mem::size_of::<libc::sock_fprog>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { fd, ethertype })
    }

    fn pollfd(&self) -> libc::pollfd {
        libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }
    }

    fn send_to(&self, packet: &[u8], ifindex: u32, mac: [u8; 6]) -> io::Result<()> {
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_protocol = self.ethertype.to_be();
        to.sll_ifindex = ifindex as i32;
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&mac);
        // SAFETY: the buffer and address are valid for the call.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
                0,
                std::ptr::from_ref(&to).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The next packet that arrived from the wire, with the kernel's
    /// receive stamp (CLOCK_REALTIME ns) when it gave one; our own outgoing
    /// packets, which a packet socket sees too, are skipped.
    fn recv_incoming(&self, buf: &mut [u8]) -> Option<(usize, Option<u64>)> {
        loop {
            // SAFETY: all-zero is a valid sockaddr_ll and msghdr.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut control = [0u64; 8];
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths); its fields are set below.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = std::ptr::from_mut(&mut from).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control);
            // SAFETY: every pointer in `msg` is valid for the call.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, 0) };
            if n < 0 {
                return None;
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let mut stamp = None;
            // SAFETY: walking the control messages the kernel wrote into
            // `control`, with the libc macros, within `msg_controllen`.
            unsafe {
                let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
                while !cmsg.is_null() {
                    if (*cmsg).cmsg_level == libc::SOL_SOCKET
                        && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
                    {
                        let ts: libc::timespec =
                            std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                        stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                    }
                    cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
                }
            }
            return Some((n as usize, stamp));
        }
    }
}

/// The interface's index, or `None` if it does not exist.
pub fn ifindex(interface: &str) -> Option<u32> {
    let name = std::ffi::CString::new(interface).ok()?;
    // SAFETY: a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_we_build_parses_back_as_ours_in_both_families() {
        let mut payload = [0u8; PAYLOAD_LEN];
        payload[..4].copy_from_slice(&MAGIC);
        payload[4..8].copy_from_slice(&77u32.to_be_bytes());
        payload[8..16].copy_from_slice(&5u64.to_be_bytes());
        payload[16..24].copy_from_slice(&123_456u64.to_be_bytes());
        let v4 = ipv4_echo([192, 0, 2, 1], &payload);
        assert_eq!(ones_complement_sum(&v4[..20]), 0xffff, "IPv4 checksum");
        assert_eq!((v4[8], v4[9]), (255, 17), "TTL 255, UDP");
        assert_eq!(parse_return(&v4), Some((77, 5, 123_456)));
        let local6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let v6 = ipv6_echo(local6, &payload);
        assert_eq!(v6[7], 255, "hop limit 255");
        assert_eq!(parse_return(&v6), Some((77, 5, 123_456)));
        let mut pseudo = local6.to_vec();
        pseudo.extend_from_slice(&local6);
        pseudo.extend_from_slice(&32u32.to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        pseudo.extend_from_slice(&v6[40..]);
        assert_eq!(ones_complement_sum(&pseudo), 0xffff, "UDP checksum");
    }

    #[test]
    fn strangers_and_other_shapes_are_not_taken_for_our_returns() {
        let mut payload = [0u8; PAYLOAD_LEN];
        payload[..4].copy_from_slice(&MAGIC);
        let mut not_self = ipv4_echo([192, 0, 2, 1], &payload);
        not_self[19] = 2; // destination 192.0.2.2
        assert_eq!(parse_return(&not_self), None, "not self-addressed");
        let mut foreign = ipv4_echo([192, 0, 2, 1], &payload);
        foreign[28] = b'X'; // FRR's or anybody's payload
        assert_eq!(parse_return(&foreign), None, "not our magic");
        let short = ipv4_echo([192, 0, 2, 1], &payload[..10]);
        assert_eq!(parse_return(&short), None, "payload too short");
        assert_eq!(parse_return(&[0x45]), None, "truncated");
        assert_eq!(parse_return(&[]), None, "empty");
    }

    #[test]
    fn returns_are_matched_lost_ones_expire_and_gaps_are_measured() {
        let mut entry = Entry::default();
        entry.outstanding.extend([(1, 1_000_000), (2, 2_000_000)]);
        note_return(&mut entry, 2, 2_000_000, 2_500_000);
        assert_eq!(entry.status.returned, 1);
        assert_eq!(entry.status.rtt_max_us, Some(500));
        note_return(&mut entry, 2, 2_000_000, 2_600_000);
        assert_eq!(entry.status.unmatched, 1, "a duplicate return");
        assert_eq!(entry.outstanding.len(), 1);
    }
}
