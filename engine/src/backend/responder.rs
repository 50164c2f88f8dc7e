//! The first Down after the kernel declares a peer silent leaves from here:
//! a thread at real-time priority that sleeps on the kernel's ring buffer
//! and sends a prepared Down at once. The xdp backend's event loop runs at
//! normal priority; under L4 the Down waited for it 35-508 ms after the
//! kernel's detection (measured), though detecting was never the loop's job.
//!
//! The loop prepares each offloaded session's Down (the packet its own state
//! machine would send at the detection deadline) and still handles every
//! event afterwards: it receives them from here, in order, and its own Down
//! follows the first (a duplicate Down is harmless, RFC 5880 6.8.6).

use anyhow::{Context, Result};
use aya::maps::{MapData, RingBuf};
use linecard_common::bfd::DetectionEvent;
use socket2::{SockAddr, Socket};
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How often the thread looks at its stop flag while no event comes.
const POLL_MS: i32 = 100;

/// A session's prepared Down: its own socket (a duplicate descriptor of the
/// session's), the peer, the bytes.
pub struct PreparedDown {
    pub socket: Socket,
    pub peer: SockAddr,
    pub bytes: Vec<u8>,
}

/// A detection event and when, if at all, the thread sent its Down.
#[derive(Clone, Copy, Debug)]
pub struct Detection {
    pub event: DetectionEvent,
    /// CLOCK_MONOTONIC ns when the prepared Down left (None: none armed).
    pub down_sent_mono_ns: Option<u64>,
}

pub struct DownResponder {
    armed: Arc<Mutex<HashMap<u32, PreparedDown>>>,
    detections: Receiver<Detection>,
    /// Readable whenever detections wait (an eventfd the loop polls).
    wake: Arc<OwnedFd>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DownResponder {
    /// Starts the thread on `events`, at SCHED_FIFO `priority` pinned to
    /// `cpu` when it can (it runs at normal priority otherwise, and says so).
    pub fn start(events: RingBuf<MapData>, priority: i32, cpu: Option<usize>) -> Result<Self> {
        // SAFETY: eventfd has no preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(std::io::Error::last_os_error()).context("creating an eventfd");
        }
        // SAFETY: raw is a fresh descriptor we own.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let armed: Arc<Mutex<HashMap<u32, PreparedDown>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (sender, detections) = channel();
        let thread = {
            let (armed, stop, wake) = (armed.clone(), stop.clone(), wake.clone());
            std::thread::Builder::new()
                .name("lc-down".into())
                .spawn(move || {
                    if let Err(e) = super::rt::make_current_thread_realtime(priority, cpu) {
                        eprintln!(
                            "linecardd: the Down responder runs at normal priority ({e}): the first Down waits for the scheduler"
                        );
                    }
                    respond(events, &armed, &sender, &wake, &stop);
                })
                .context("starting the Down responder thread")?
        };
        Ok(Self {
            armed,
            detections,
            wake,
            stop,
            thread: Some(thread),
        })
    }

    /// Prepares (or replaces) the Down for session `discr`.
    pub fn arm(&self, discr: u32, down: PreparedDown) {
        self.armed
            .lock()
            .expect("the responder never panics holding the lock")
            .insert(discr, down);
    }

    pub fn disarm(&self, discr: u32) {
        self.armed
            .lock()
            .expect("the responder never panics holding the lock")
            .remove(&discr);
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

impl Drop for DownResponder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn respond(
    mut events: RingBuf<MapData>,
    armed: &Mutex<HashMap<u32, PreparedDown>>,
    detections: &Sender<Detection>,
    wake: &OwnedFd,
    stop: &AtomicBool,
) {
    let fd = events.as_fd().as_raw_fd();
    while !stop.load(Ordering::Relaxed) {
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        if unsafe { libc::poll(&mut pollfd, 1, POLL_MS) } <= 0 {
            continue;
        }
        let mut any = false;
        while let Some(item) = events.next() {
            if item.len() < std::mem::size_of::<DetectionEvent>() {
                continue;
            }
            // SAFETY: the kernel wrote a DetectionEvent (repr(C), Pod);
            // read_unaligned copes with the ring's alignment.
            let event = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<DetectionEvent>()) };
            let down = armed
                .lock()
                .expect("the loop never panics holding the lock")
                .remove(&event.discr);
            let down_sent_mono_ns = down.and_then(|down| {
                down.socket.send_to(&down.bytes, &down.peer).ok()?;
                Some(crate::io::clock_ns(libc::CLOCK_MONOTONIC))
            });
            let _ = detections.send(Detection {
                event,
                down_sent_mono_ns,
            });
            any = true;
        }
        if any {
            let one = 1u64;
            // SAFETY: writing 8 bytes from a u64 to our eventfd.
            unsafe { libc::write(wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }
}
