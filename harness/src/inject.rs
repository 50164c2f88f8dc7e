//! `linecard inject`: the injection matrix. Crafted frames from the lab's
//! spare host to a linecardd DUT on the xdp backend whose session with the
//! lab's peer is Up and offloaded. Each case is judged on the DUT's own
//! counters in one window: the kernel's drop counter for its reason moved
//! by exactly the number sent, a control counter moved in the same window
//! (the live session kept being answered: "+0" alone proves nothing), and
//! no userspace socket received a frame (the engine's drops and the
//! session's packets-in did not move). A flood then sends the most frames
//! the lab sustains while the session must not flap; whether it flapped is
//! the capture's to say (the tests capture and check), the command reports
//! the session's transitions as the engine saw them.
//!
//! The echo port's cases (RFC 5880 6.4) are judged on the fast path's
//! echo verdicts instead of a drop reason: a stranger's self-addressed
//! echo (an amplification attempt) and, when the live session has no echo
//! function, the peer's own must pass untouched, never reflected; when it
//! has, the peer's own echo is reflected, the control that shows the echo
//! branch runs at all.

use crate::lab::spec::{PEER, SPARE};
use crate::linecardd;
use crate::sys::in_netns;
use anyhow::{bail, Context, Result};
use linecard_api::control::{DropsReply, ListReply, SessionStatus, State, Transition};
use linecard_bpf_objects::craft;
use linecard_common::bfd::{drop, verdict};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// What the fast path must do with a case's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// Dropped and counted under this `bfd::drop` reason.
    Dropped(u32),
    /// An echo passed to the stack untouched, not reflected.
    EchoPassed,
    /// An echo reflected with XDP_TX (the echo branch's control).
    EchoReflected,
}

impl Expected {
    fn name(self) -> &'static str {
        match self {
            Expected::Dropped(reason) => drop::name(reason),
            Expected::EchoPassed => "echo passed, not reflected",
            Expected::EchoReflected => "echo reflected (control)",
        }
    }
}

/// One crafted frame and what the kernel must do with it.
pub struct Case {
    pub name: &'static str,
    pub expected: Expected,
    pub frame: Vec<u8>,
}

/// What one case did to the DUT's counters.
#[derive(Debug, Serialize)]
pub struct CaseResult {
    pub case: String,
    /// `linecard_common::bfd::drop` index (`None` for an echo case) and
    /// the name of what was expected.
    pub reason: Option<u32>,
    pub reason_name: &'static str,
    pub sent: u64,
    /// How far the kernel's counter for the expected outcome moved.
    pub counted: u64,
    /// Echoes the fast path reflected in the window (0 unless expected).
    pub reflected: u64,
    /// Kernel replies to the live session in the same window (the control).
    pub control_replies: u64,
    /// Frames userspace received in the window: the engine's own drops and
    /// the live session's packets-in (both must stay still).
    pub reached_userspace: u64,
    pub pass: bool,
}

/// The flood's outcome.
#[derive(Debug, Serialize)]
pub struct FloodResult {
    pub sent: u64,
    pub seconds: f64,
    pub frames_per_second: f64,
    pub counted: u64,
    pub control_replies: u64,
    pub reached_userspace: u64,
    /// The live session's last transition changed during the flood (the
    /// engine's view; the capture is the authority on flaps).
    pub session_transitioned: bool,
    pub pass: bool,
}

#[derive(Debug, Serialize)]
pub struct Matrix {
    pub cases: Vec<CaseResult>,
    pub flood: Option<FloodResult>,
    pub pass: bool,
}

/// Every case of the matrix, aimed at the live session (`peer_discr` is
/// the peer's discriminator, `our_discr` ours), from the spare host's MAC
/// with valid IPv4 checksums (the bridge's stack drops a bad one before
/// XDP would see it).
/// `echo_reflected`: the live session has the echo function on, and the
/// DUT reflects its peer's echoes.
pub fn cases(peer_discr: u32, our_discr: u32, echo_reflected: bool) -> Vec<Case> {
    let mut cases: Vec<Case> = craft::drop_cases_for(peer_discr, our_discr)
        .into_iter()
        .map(|(name, reason, frame)| Case {
            name,
            expected: Expected::Dropped(reason),
            frame,
        })
        .collect();
    let peer = craft::PEER_IP;
    let payload = b"an echo payload, opaque to reflectors";
    cases.push(if echo_reflected {
        Case {
            name: "the peer's self-addressed echo",
            expected: Expected::EchoReflected,
            frame: craft::echo_frame(peer, peer, 255, payload),
        }
    } else {
        Case {
            name: "a self-addressed echo of a peer without echo",
            expected: Expected::EchoPassed,
            frame: craft::echo_frame(peer, peer, 255, payload),
        }
    });
    cases.push(Case {
        name: "a stranger's self-addressed echo (amplification attempt)",
        expected: Expected::EchoPassed,
        frame: craft::echo_frame(craft::STRANGER_IP, craft::STRANGER_IP, 255, payload),
    });
    for case in &mut cases {
        case.frame[6..12].copy_from_slice(&spare_mac());
        // A truncated frame has no complete IPv4 header to sum over.
        if case.frame.len() >= 34 {
            craft::fix_ipv4_checksum(&mut case.frame);
        }
    }
    cases
}

/// The lab's spare host's MAC, the source of every frame it injects.
pub fn spare_mac() -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (byte, hex) in mac.iter_mut().zip(SPARE.mac.split(':')) {
        *byte = u8::from_str_radix(hex, 16).expect("the lab's MACs are hex");
    }
    mac
}

/// Sends `frames` from the spare host's eth0 (AF_PACKET: every header byte
/// as crafted), each `copies` times, `gap` apart (zero: back to back).
pub fn send_from_spare(frames: &[Vec<u8>], copies: u64, gap: Duration) -> Result<()> {
    let frames = frames.to_vec();
    with_spare_socket(move |send| {
        for frame in &frames {
            for _ in 0..copies {
                send(frame)?;
                if !gap.is_zero() {
                    std::thread::sleep(gap);
                }
            }
        }
        Ok(())
    })
}

/// Sends every frame of `frames` from the spare host every `every` for
/// `duration` (bounded by it); returns how many frames it sent.
pub fn send_from_spare_every(
    frames: &[Vec<u8>],
    every: Duration,
    duration: Duration,
) -> Result<u64> {
    let frames = frames.to_vec();
    with_spare_socket(move |send| {
        let until = Instant::now() + duration;
        let mut sent = 0;
        while Instant::now() < until {
            for frame in &frames {
                send(frame)?;
                sent += 1;
            }
            std::thread::sleep(every);
        }
        Ok(sent)
    })
}

/// Sends `total` frames from the spare host, the `n`th made by
/// `frame(n, since_start)`, at most `per_ms` a millisecond, stopping at
/// `total` or after `limit`; returns how many it sent.
pub fn send_from_spare_paced(
    mut frame: impl FnMut(u64, Duration) -> Vec<u8> + Send + 'static,
    total: u64,
    per_ms: u64,
    limit: Duration,
) -> Result<u64> {
    with_spare_socket(move |send| {
        let started = Instant::now();
        let mut sent = 0u64;
        while sent < total && started.elapsed() < limit {
            // Ahead of the pace: wait for it.
            let due = Duration::from_micros(sent * 1000 / per_ms.max(1));
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
            for _ in 0..per_ms.min(total - sent) {
                send(&frame(sent, started.elapsed()))?;
                sent += 1;
            }
        }
        Ok(sent)
    })
}

/// Runs `body` in the spare host's namespace with a packet socket bound to
/// its eth0, handing it a send function (which retries a full queue).
fn with_spare_socket<T: Send + 'static>(
    body: impl FnOnce(&dyn Fn(&[u8]) -> Result<()>) -> Result<T> + Send + 'static,
) -> Result<T> {
    in_netns(SPARE.namespace, move || {
        // SAFETY: socket(2)/bind(2)/sendto(2) with a sockaddr_ll we fill in;
        // the fd is closed on every path below.
        unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
            if fd < 0 {
                bail!("AF_PACKET socket: {}", std::io::Error::last_os_error());
            }
            let result = (|| {
                let ifindex = libc::if_nametoindex(c"eth0".as_ptr());
                if ifindex == 0 {
                    bail!("no eth0 in {}", SPARE.namespace);
                }
                let mut addr: libc::sockaddr_ll = std::mem::zeroed();
                addr.sll_family = libc::AF_PACKET as u16;
                addr.sll_protocol = (libc::ETH_P_IP as u16).to_be();
                addr.sll_ifindex = ifindex as i32;
                let len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                if libc::bind(fd, (&addr as *const libc::sockaddr_ll).cast(), len) != 0 {
                    bail!("bind to eth0: {}", std::io::Error::last_os_error());
                }
                let send = |frame: &[u8]| -> Result<()> {
                    loop {
                        // SAFETY: `fd` is open until the close below;
                        // `frame` and `addr` outlive the call.
                        let n = libc::sendto(
                            fd,
                            frame.as_ptr().cast(),
                            frame.len(),
                            0,
                            (&addr as *const libc::sockaddr_ll).cast(),
                            len,
                        );
                        if n >= 0 {
                            return Ok(());
                        }
                        let e = std::io::Error::last_os_error();
                        // A full transmit queue under a flood: retry.
                        if e.raw_os_error() != Some(libc::ENOBUFS) {
                            bail!("sendto: {e}");
                        }
                        std::thread::sleep(Duration::from_micros(50));
                    }
                };
                body(&send)
            })();
            libc::close(fd);
            result
        }
    })
}

/// The DUT's counters that every case reads before and after.
struct Counters {
    kernel_drops: Vec<u64>,
    replies: u64,
    echo_passed: u64,
    echo_reflected: u64,
    userspace: u64,
    transition: Option<Transition>,
}

fn read_counters(socket: &Path) -> Result<Counters> {
    let drops: DropsReply = linecardd::ctl_as(socket, &["drops"])?;
    let list: ListReply = linecardd::ctl_as(socket, &["list", "--json"])?;
    let session = live_session(&list)?;
    let fast = drops
        .fast_path
        .context("the DUT reports no fast-path drops: is it on the xdp backend?")?;
    let verdicts = |index: u32| -> u64 {
        (fast.verdicts_per_cpu.iter())
            .map(|cpu| cpu[index as usize])
            .sum()
    };
    let engine_drops: u64 = drops.drops.iter().map(|(_, n)| n).sum();
    Ok(Counters {
        replies: verdicts(verdict::REPLIED),
        echo_passed: verdicts(verdict::ECHO_PASSED),
        echo_reflected: verdicts(verdict::ECHO_REFLECTED),
        kernel_drops: fast.drops,
        userspace: engine_drops + session.counters.packets_in,
        transition: session.last_transition,
    })
}

/// The DUT's session with the lab's peer, which must be Up and offloaded.
fn live_session(list: &ListReply) -> Result<&SessionStatus> {
    let peer: std::net::IpAddr = PEER.ipv4.parse().context("the lab's peer address")?;
    let session = list
        .session(peer)
        .with_context(|| format!("the DUT has no session with the lab's peer {peer}"))?;
    if session.state != State::Up || !session.offloaded {
        bail!(
            "the DUT's session with {peer} is not Up and offloaded (state {:?}, offloaded {}): the matrix needs the fast path answering it",
            session.state,
            session.offloaded
        );
    }
    Ok(session)
}

/// How long a case waits for its counters (the control needs at least one
/// of the peer's packets, ~10 ms apart).
const WINDOW: Duration = Duration::from_secs(3);
const MIN_WINDOW: Duration = Duration::from_millis(50);

/// Runs every case `copies` times, then, if `flood` > 0, the flood.
pub fn run(socket: &Path, copies: u64, flood: u64) -> Result<Matrix> {
    let list: ListReply = linecardd::ctl_as(socket, &["list", "--json"])?;
    let session = live_session(&list)?;
    let (our_discr, peer_discr) = (session.local_discr, session.remote.discr);
    let echo_reflected = session.required_min_echo_rx_us > 0;
    let mut results = Vec::new();
    for case in cases(peer_discr, our_discr, echo_reflected) {
        let before = read_counters(socket)?;
        let started = Instant::now();
        send_from_spare(
            std::slice::from_ref(&case.frame),
            copies,
            Duration::from_micros(50),
        )?;
        let after = settle(socket, &before, case.expected, copies, started)?;
        let counted = outcome(&after, case.expected) - outcome(&before, case.expected);
        let reflected = after.echo_reflected - before.echo_reflected;
        let control_replies = after.replies - before.replies;
        let reached_userspace = after.userspace - before.userspace;
        let reflected_as_expected = match case.expected {
            Expected::EchoReflected => reflected == copies,
            _ => reflected == 0,
        };
        results.push(CaseResult {
            case: case.name.to_string(),
            reason: match case.expected {
                Expected::Dropped(reason) => Some(reason),
                _ => None,
            },
            reason_name: case.expected.name(),
            sent: copies,
            counted,
            reflected,
            control_replies,
            reached_userspace,
            pass: counted == copies
                && reflected_as_expected
                && control_replies > 0
                && reached_userspace == 0,
        });
    }
    let flood = (flood > 0)
        .then(|| run_flood(socket, peer_discr, flood))
        .transpose()?;
    let pass = results.iter().all(|r| r.pass) && flood.as_ref().is_none_or(|f| f.pass);
    Ok(Matrix {
        cases: results,
        flood,
        pass,
    })
}

/// The kernel counter an expected outcome moves.
fn outcome(c: &Counters, expected: Expected) -> u64 {
    match expected {
        Expected::Dropped(reason) => c.kernel_drops[reason as usize],
        Expected::EchoPassed => c.echo_passed,
        Expected::EchoReflected => c.echo_reflected,
    }
}

/// Reads the counters until the expected outcome counted `sent` and a
/// reply went out, at least [`MIN_WINDOW`] after `started`, at most
/// [`WINDOW`].
fn settle(
    socket: &Path,
    before: &Counters,
    expected: Expected,
    sent: u64,
    started: Instant,
) -> Result<Counters> {
    loop {
        let now = read_counters(socket)?;
        let done = outcome(&now, expected) - outcome(before, expected) >= sent
            && now.replies > before.replies;
        if (done && started.elapsed() >= MIN_WINDOW) || started.elapsed() >= WINDOW {
            return Ok(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Frames with a wrong discriminator back to back, bounded by `count` and
/// by 10 s.
fn run_flood(socket: &Path, peer_discr: u32, count: u64) -> Result<FloodResult> {
    let frame = cases(peer_discr, 0xdead_beef, false)
        .into_iter()
        .find(|c| c.expected == Expected::Dropped(drop::NO_SESSION))
        .expect("the matrix has a wrong-discriminator case")
        .frame;
    let before = read_counters(socket)?;
    let started = Instant::now();
    // In batches, so that the time bound holds whatever the rate.
    let batch = 10_000.min(count);
    let mut sent = 0;
    while sent < count && started.elapsed() < Duration::from_secs(10) {
        let n = batch.min(count - sent);
        send_from_spare(std::slice::from_ref(&frame), n, Duration::ZERO)?;
        sent += n;
    }
    let seconds = started.elapsed().as_secs_f64();
    let after = settle(
        socket,
        &before,
        Expected::Dropped(drop::NO_SESSION),
        sent,
        started,
    )?;
    let counted = after.kernel_drops[drop::NO_SESSION as usize]
        - before.kernel_drops[drop::NO_SESSION as usize];
    let control_replies = after.replies - before.replies;
    let reached_userspace = after.userspace - before.userspace;
    let session_transitioned = after.transition != before.transition;
    Ok(FloodResult {
        sent,
        seconds,
        frames_per_second: sent as f64 / seconds.max(1e-9),
        counted,
        control_replies,
        reached_userspace,
        session_transitioned,
        pass: counted == sent
            && control_replies > 0
            && reached_userspace == 0
            && !session_transitioned,
    })
}

/// The matrix as a table.
pub fn render(m: &Matrix) -> String {
    let mut out = String::from(
        "| case | kernel drop reason or echo verdict | sent | counted | reflected | control replies | reached userspace | verdict |\n|---|---|---:|---:|---:|---:|---:|---|\n",
    );
    for r in &m.cases {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.case,
            r.reason_name,
            r.sent,
            r.counted,
            r.reflected,
            r.control_replies,
            r.reached_userspace,
            if r.pass { "pass" } else { "FAIL" }
        ));
    }
    if let Some(f) = &m.flood {
        out.push_str(&format!(
            "| flood, wrong discriminator ({:.0} frames/s for {:.1} s) | no_session | {} | {} | 0 | {} | {} | {}{} |\n",
            f.frames_per_second,
            f.seconds,
            f.sent,
            f.counted,
            f.control_replies,
            f.reached_userspace,
            if f.pass { "pass" } else { "FAIL" },
            if f.session_transitioned { " (the session changed state)" } else { "" }
        ));
    }
    out
}
