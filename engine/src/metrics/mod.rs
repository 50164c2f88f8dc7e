//! The OpenMetrics endpoint (`[engine] metrics = "ADDRESS:PORT"`, issue
//! 41): per session its state, its departures from Up by diagnostic, its
//! packets, and its receive and transmit gaps in seconds and as a fraction
//! of the detection time each ran against, measured where the packet is
//! (the fast path's `LC_GAPS` for the xdp backend, userspace's own
//! instants for the others; the `path` label says which).
//!
//! The loop never formats or serves: a scrape on this module's thread asks
//! it for a [`Snapshot`] through a channel and an eventfd the loop polls
//! (a copy of a few hundred bytes per session), then reads the kernel's
//! maps itself and encodes, so that a scrape costs the loop that copy and
//! nothing on the wire waits for a socket.

mod exposition;
mod http;
mod openmetrics;

pub use exposition::encode;

use anyhow::{Context, Result};
use linecard_api::control::{Diagnostic, State};
use linecard_common::bfd::SessionState;
use linecard_common::gaps::SessionGaps;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::time::Duration;

/// One session as the loop sees it at a scrape.
#[derive(Clone, Debug)]
pub struct SessionRow {
    pub local: IpAddr,
    pub peer: IpAddr,
    pub multihop: bool,
    pub backend: String,
    pub state: State,
    /// Departures from Up, by diagnostic code.
    pub downs: Vec<(Diagnostic, u64)>,
    /// The last departure from Up: CLOCK_REALTIME ns and its diagnostic.
    pub last_down: Option<(i64, Diagnostic)>,
    /// The packets userspace received and handed to the backend.
    pub userspace_in: u64,
    pub userspace_out: u64,
    /// Userspace's own gaps (`session::telemetry`).
    pub userspace_gaps: SessionGaps,
    /// Userspace's largest receive and transmit gaps since the previous
    /// scrape: ns, and when each ended (CLOCK_REALTIME ns).
    pub userspace_window: [WindowMax; 2],
    /// The session's slot in the fast path's maps (xdp backend): its
    /// gaps and kernel counters are read there.
    pub kernel_slot: Option<u32>,
    /// Its configured timers, e.g. `3x10ms` (Detect Mult x Desired Min
    /// TX): the class its histograms join beyond the cardinality bound.
    pub timer_class: String,
}

/// What the loop hands a scrape.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub sessions: Vec<SessionRow>,
    /// The first this many sessions (in table order) get gap histograms of
    /// their own; the rest are summed per timer class, backend and plane
    /// (`[engine] metrics_sessions`, default 1024). Every session keeps
    /// its state, downs, packets, maxima and over-budget counters.
    pub detailed_sessions: usize,
    /// Refused before reaching a session or after demultiplexing, by
    /// reason, userspace and kernel summed: (reason, count).
    pub drops: Vec<(String, u64)>,
    /// The fast path's verdicts, summed over CPUs: (verdict, count).
    pub verdicts: Vec<(String, u64)>,
    /// How the xdp backend's responder is scheduled (`SCHED_DEADLINE`, ...).
    pub responder: Option<String>,
}

/// The largest gap of a scrape window: ns, and when it ended
/// (CLOCK_REALTIME ns); none if the window had no gap.
pub type WindowMax = Option<(u64, i64)>;

/// The kernel's figures of one slot, read on the metrics thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelRow {
    pub gaps: SessionGaps,
    pub received: u64,
    pub replied: u64,
    /// The largest receive and transmit gaps since the previous scrape.
    pub window: [WindowMax; 2],
}

/// Where the metrics thread reads the fast path's per-slot figures.
pub struct KernelMaps {
    pub gaps: aya::maps::PerCpuArray<aya::maps::MapData, SessionGaps>,
    pub state: aya::maps::Array<aya::maps::MapData, SessionState>,
    /// The scrape window the fast path records into (`LC_GAPS_WINDOW`).
    pub window: aya::maps::Array<aya::maps::MapData, u64>,
}

/// The window a scrape reads, and how to put the kernel's clock
/// (CLOCK_MONOTONIC) on the wall's.
#[derive(Clone, Copy, Debug)]
pub struct KernelWindow {
    closed: u64,
    realtime_minus_monotonic_ns: i64,
}

impl KernelMaps {
    /// Opens the next scrape window and returns the one it closed. The
    /// next is opened before the closed one is read: a packet recorded
    /// meanwhile lands in the other slot (`GapHistogram::window`). The
    /// number lives in the map, so that an engine taking over the maps
    /// carries on where its predecessor was. `None` if the map could not
    /// be read or written (the rows then carry no window maximum).
    pub fn close_window(&mut self) -> Option<KernelWindow> {
        let closed = self.window.get(&0, 0).ok()?;
        self.window.set(0, closed.wrapping_add(1), 0).ok()?;
        let realtime = crate::io::clock_ns(libc::CLOCK_REALTIME) as i64;
        let monotonic = crate::io::clock_ns(libc::CLOCK_MONOTONIC) as i64;
        Some(KernelWindow {
            closed,
            realtime_minus_monotonic_ns: realtime - monotonic,
        })
    }

    /// `slot`'s figures, summed over CPUs (none if the read fails: the
    /// row then shows userspace's alone), with `window`'s maxima.
    pub fn row(&self, slot: u32, window: Option<KernelWindow>) -> Option<KernelRow> {
        let mut gaps = SessionGaps::default();
        for cpu in self.gaps.get(&slot, 0).ok()?.iter() {
            gaps.rx.add(&cpu.rx);
            gaps.tx.add(&cpu.tx);
        }
        let state = self.state.get(&slot, 0).ok()?;
        let window_max = |h: &linecard_common::gaps::GapHistogram| {
            let w = window?;
            let (gap, at) = h.window_max(w.closed)?;
            Some((gap, at as i64 + w.realtime_minus_monotonic_ns))
        };
        Some(KernelRow {
            gaps,
            received: state.rx_packets,
            replied: state.tx_packets,
            window: [window_max(&gaps.rx), window_max(&gaps.tx)],
        })
    }
}

/// The loop's end: polled with the sockets; answered with a snapshot.
pub struct LoopSide {
    wake: OwnedFd,
    requests: mpsc::Receiver<mpsc::SyncSender<Snapshot>>,
}

impl LoopSide {
    /// The descriptor the loop polls for readability.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// Each scrape waiting, answered with `snapshot()` (built once).
    pub fn serve(&self, snapshot: impl FnOnce() -> Snapshot) {
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into our buffer from our eventfd (non-
        // blocking: nothing pending is EAGAIN).
        unsafe { libc::read(self.wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        let waiting: Vec<_> = self.requests.try_iter().collect();
        if waiting.is_empty() {
            return;
        }
        let snapshot = snapshot();
        for reply in waiting {
            let _ = reply.try_send(snapshot.clone());
        }
    }
}

/// The scrape's end, on the metrics thread.
struct ScrapeSide {
    wake: OwnedFd,
    requests: mpsc::Sender<mpsc::SyncSender<Snapshot>>,
}

impl ScrapeSide {
    /// The loop's snapshot, or `None` if it did not answer within `wait`
    /// (the scrape then fails rather than show stale figures).
    fn snapshot(&self, wait: Duration) -> Option<Snapshot> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.requests.send(reply).ok()?;
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from our u64 to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        answer.recv_timeout(wait).ok()
    }
}

/// Binds `addr` now (so that a taken port fails the start, with the
/// reason) and serves it on a thread of its own; the loop's end is
/// returned. `kernel` reads the fast path's maps (xdp backend).
pub fn start(addr: SocketAddr, mut kernel: Option<KernelMaps>) -> Result<LoopSide> {
    let listener = listen(addr).with_context(|| format!("binding the metrics endpoint {addr}"))?;
    // SAFETY: eventfd returns a new descriptor we own, or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("eventfd for the metrics endpoint");
    }
    // SAFETY: fd is ours (above); the loop's end owns it, the thread a dup.
    let wake = unsafe { OwnedFd::from_raw_fd(fd) };
    let (requests_tx, requests_rx) = mpsc::channel();
    let scrape = ScrapeSide {
        wake: wake.try_clone()?,
        requests: requests_tx,
    };
    std::thread::Builder::new()
        .name("lc-metrics".into())
        .spawn(move || http::serve(&listener, &scrape, kernel.as_mut()))
        .context("starting the metrics thread")?;
    Ok(LoopSide {
        wake,
        requests: requests_rx,
    })
}

/// A listener on `addr` that the engine taking over from this one can
/// bind beside it (SO_REUSEPORT, same user only): during a handover both
/// answer scrapes, each with its own figures, until this one exits.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_cloexec(true)?;
    socket.bind(&addr.into())?;
    socket.listen(64)?;
    Ok(socket.into())
}
