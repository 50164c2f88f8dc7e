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

use crate::lab::spec::{PEER, SPARE};
use crate::run::daemons::linecardd_ctl;
use crate::sys::in_netns;
use anyhow::{bail, Context, Result};
use linecard_bpf_objects::craft;
use linecard_common::bfd::{drop, verdict};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// One crafted frame and the kernel drop reason it must be counted under.
pub struct Case {
    pub name: &'static str,
    pub reason: u32,
    pub frame: Vec<u8>,
}

/// What one case did to the DUT's counters.
#[derive(Debug, Serialize)]
pub struct CaseResult {
    pub case: String,
    /// `linecard_common::bfd::drop` index and its name.
    pub reason: u32,
    pub reason_name: &'static str,
    pub sent: u64,
    /// How far the kernel's counter for the reason moved.
    pub counted: u64,
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
pub fn cases(peer_discr: u32, our_discr: u32) -> Vec<Case> {
    craft::drop_cases_for(peer_discr, our_discr)
        .into_iter()
        .map(|(name, reason, mut frame)| {
            frame[6..12].copy_from_slice(&spare_mac());
            // A truncated frame has no complete IPv4 header to sum over.
            if frame.len() >= 34 {
                craft::fix_ipv4_checksum(&mut frame);
            }
            Case {
                name,
                reason,
                frame,
            }
        })
        .collect()
}

fn spare_mac() -> [u8; 6] {
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
                for frame in &frames {
                    for _ in 0..copies {
                        let n = libc::sendto(
                            fd,
                            frame.as_ptr().cast(),
                            frame.len(),
                            0,
                            (&addr as *const libc::sockaddr_ll).cast(),
                            len,
                        );
                        if n < 0 {
                            let e = std::io::Error::last_os_error();
                            // A full transmit queue under a flood: retry.
                            if e.raw_os_error() == Some(libc::ENOBUFS) {
                                std::thread::sleep(Duration::from_micros(50));
                                continue;
                            }
                            bail!("sendto: {e}");
                        }
                        if !gap.is_zero() {
                            std::thread::sleep(gap);
                        }
                    }
                }
                Ok(())
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
    userspace: u64,
    transition: Value,
}

fn read_counters(socket: &Path) -> Result<Counters> {
    let drops = linecardd_ctl(socket, &["drops"])?;
    let list = linecardd_ctl(socket, &["list", "--json"])?;
    let session = live_session(&list)?;
    let fast = &drops["fast_path"];
    let kernel_drops = fast["drops"]
        .as_array()
        .context("the DUT reports no fast-path drops: is it on the xdp backend?")?
        .iter()
        .map(|v| v.as_u64().unwrap_or(0))
        .collect();
    let replies = fast["verdicts_per_cpu"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|cpu| cpu[verdict::REPLIED as usize].as_u64().unwrap_or(0))
        .sum();
    let engine_drops: u64 = drops["drops"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|pair| pair[1].as_u64().unwrap_or(0))
        .sum();
    let packets_in = session["counters"]["packets_in"].as_u64().unwrap_or(0);
    Ok(Counters {
        kernel_drops,
        replies,
        userspace: engine_drops + packets_in,
        transition: session["last_transition"].clone(),
    })
}

/// The DUT's session with the lab's peer, which must be Up and offloaded.
fn live_session(list: &Value) -> Result<&Value> {
    let session = list["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["peer"] == PEER.ipv4)
        .with_context(|| format!("the DUT has no session with the lab's peer {}", PEER.ipv4))?;
    if session["state"] != "up" || session["offloaded"] != true {
        bail!(
            "the DUT's session with {} is not Up and offloaded (state {}, offloaded {}): the matrix needs the fast path answering it",
            PEER.ipv4,
            session["state"],
            session["offloaded"]
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
    let list = linecardd_ctl(socket, &["list", "--json"])?;
    let session = live_session(&list)?;
    let our_discr = session["local_discr"].as_u64().context("no local_discr")? as u32;
    let peer_discr = session["remote"]["discr"]
        .as_u64()
        .context("no remote discr")? as u32;
    let mut results = Vec::new();
    for case in cases(peer_discr, our_discr) {
        let before = read_counters(socket)?;
        let started = Instant::now();
        send_from_spare(
            std::slice::from_ref(&case.frame),
            copies,
            Duration::from_micros(50),
        )?;
        let after = settle(socket, &before, case.reason, copies, started)?;
        let counted =
            after.kernel_drops[case.reason as usize] - before.kernel_drops[case.reason as usize];
        let control_replies = after.replies - before.replies;
        let reached_userspace = after.userspace - before.userspace;
        results.push(CaseResult {
            case: case.name.to_string(),
            reason: case.reason,
            reason_name: drop::name(case.reason),
            sent: copies,
            counted,
            control_replies,
            reached_userspace,
            pass: counted == copies && control_replies > 0 && reached_userspace == 0,
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

/// Reads the counters until the case's reason counted `sent` and a reply
/// went out, at least [`MIN_WINDOW`] after `started`, at most [`WINDOW`].
fn settle(
    socket: &Path,
    before: &Counters,
    reason: u32,
    sent: u64,
    started: Instant,
) -> Result<Counters> {
    loop {
        let now = read_counters(socket)?;
        let done = now.kernel_drops[reason as usize] - before.kernel_drops[reason as usize] >= sent
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
    let frame = cases(peer_discr, 0xdead_beef)
        .into_iter()
        .find(|c| c.reason == drop::NO_SESSION)
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
    let after = settle(socket, &before, drop::NO_SESSION, sent, started)?;
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
        "| case | kernel drop reason | sent | counted | control replies | reached userspace | verdict |\n|---|---|---:|---:|---:|---:|---|\n",
    );
    for r in &m.cases {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.case,
            r.reason_name,
            r.sent,
            r.counted,
            r.control_replies,
            r.reached_userspace,
            if r.pass { "pass" } else { "FAIL" }
        ));
    }
    if let Some(f) = &m.flood {
        out.push_str(&format!(
            "| flood, wrong discriminator ({:.0} frames/s for {:.1} s) | no_session | {} | {} | {} | {} | {}{} |\n",
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
