//! The fast path keeps RFC 5880 6.8.7 against a peer that negotiates
//! differently (issue 22). The peer is this test: a plain UDP socket in the
//! peer's namespace playing the remote system of a 3 x 50 ms session with
//! linecardd xdp, counting what arrives there, outside the DUT. Before the
//! kernel kept the rule, a peer that raised its Required Min RX to 200 ms
//! by a Poll was still answered every 38-46 ms, and one that asked for 0
//! got 47 packets in 2 s.

mod common;

use common::*;
use linecard_harness::lab::spec::{DUT, PEER};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PEER_DISCR: u32 = 0x5eed_0001;
const FLAG_POLL: u8 = 0x20;
const FLAG_FINAL: u8 = 0x10;
const DOWN: u8 = 1;
const INIT: u8 = 2;
const UP: u8 = 3;
/// The peer sends every 40 ms whatever it asks for: faster than a DUT
/// that honours a larger Required Min RX may answer.
const PEER_PERIOD: Duration = Duration::from_millis(40);

/// What the scripted peer saw and what it asks for.
#[derive(Default)]
struct PeerView {
    state: u8,
    /// Our Required Min RX, µs; a change starts a Poll.
    required_min_rx_us: u32,
    polling: bool,
    /// The DUT's packets: when they arrived, and their flags.
    arrivals: Vec<(Instant, u8)>,
}

struct ScriptedPeer {
    view: Arc<Mutex<PeerView>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedPeer {
    /// Runs in the peer's namespace for at most `limit`.
    fn start(limit: Duration) -> Self {
        let view = Arc::new(Mutex::new(PeerView {
            state: DOWN,
            required_min_rx_us: 50_000,
            ..PeerView::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (view, stop) = (view.clone(), stop.clone());
            std::thread::spawn(move || run_peer(&view, &stop, limit))
        };
        Self {
            view,
            stop,
            thread: Some(thread),
        }
    }

    /// Asks for `us` by a Poll and waits (bounded) for the DUT's Final.
    fn require_min_rx(&self, us: u32) {
        {
            let mut view = self.view.lock().unwrap();
            view.required_min_rx_us = us;
            view.polling = true;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.view.lock().unwrap().polling {
            assert!(
                Instant::now() < deadline,
                "no Final to our Poll for {us} us"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The DUT's periodic packets (no Final) over the next `window`.
    fn periodic_over(&self, window: Duration) -> Vec<Instant> {
        self.view.lock().unwrap().arrivals.clear();
        std::thread::sleep(window);
        let view = self.view.lock().unwrap();
        view.arrivals
            .iter()
            .filter(|(_, flags)| flags & FLAG_FINAL == 0)
            .map(|(at, _)| *at)
            .collect()
    }
}

impl Drop for ScriptedPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn packet(state: u8, flags: u8, your: u32, required_min_rx_us: u32) -> [u8; 24] {
    let mut p = [0u8; 24];
    p[0] = 0x20;
    p[1] = (state << 6) | flags;
    p[2] = 3;
    p[3] = 24;
    p[4..8].copy_from_slice(&PEER_DISCR.to_be_bytes());
    p[8..12].copy_from_slice(&your.to_be_bytes());
    p[12..16].copy_from_slice(&50_000u32.to_be_bytes());
    p[16..20].copy_from_slice(&required_min_rx_us.to_be_bytes());
    p
}

/// The remote system's side of RFC 5880 6.8.6, as little as the test
/// needs: Down -> Init -> Up on the DUT's state, a Poll until its Final.
fn run_peer(view: &Mutex<PeerView>, stop: &AtomicBool, limit: Duration) {
    let netns = std::fs::File::open(format!("/run/netns/{}", PEER.namespace)).unwrap();
    // SAFETY: moves this thread (only) into the peer's network namespace.
    assert_eq!(
        unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) },
        0
    );
    let peer_ip: Ipv4Addr = PEER.ipv4.parse().unwrap();
    let dut = SocketAddrV4::new(DUT.ipv4.parse().unwrap(), 3784);
    let rx = UdpSocket::bind(SocketAddrV4::new(peer_ip, 3784)).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(2))).unwrap();
    // RFC 5881 section 4: a source port from 49152, TTL 255.
    let tx = UdpSocket::bind(SocketAddrV4::new(peer_ip, 49_200)).unwrap();
    tx.set_ttl(255).unwrap();
    let end = Instant::now() + limit;
    let mut dut_discr = 0u32;
    let mut next_send = Instant::now();
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        if let Ok(n) = rx.recv(&mut buf) {
            if n >= 24 {
                let (state, flags) = (buf[1] >> 6, buf[1] & 0x3f);
                dut_discr = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
                let mut v = view.lock().unwrap();
                v.arrivals.push((Instant::now(), flags));
                // 6.8.6's table, AdminDown aside.
                v.state = match (v.state, state) {
                    (DOWN, DOWN) => INIT,
                    (DOWN, INIT) | (INIT, INIT | UP) => UP,
                    (UP, 0 | DOWN) => DOWN,
                    (ours, _) => ours,
                };
                if flags & FLAG_FINAL != 0 {
                    v.polling = false;
                }
                // The DUT's Poll gets its Final at once (6.5).
                if flags & FLAG_POLL != 0 {
                    let _ = tx.send_to(
                        &packet(v.state, FLAG_FINAL, dut_discr, v.required_min_rx_us),
                        dut,
                    );
                }
            }
        }
        if Instant::now() >= next_send {
            let v = view.lock().unwrap();
            let flags = if v.polling { FLAG_POLL } else { 0 };
            let _ = tx.send_to(
                &packet(v.state, flags, dut_discr, v.required_min_rx_us),
                dut,
            );
            next_send += PEER_PERIOD;
        }
    }
}

fn heard(socket: &std::path::Path) -> u64 {
    fast_path_verdicts(
        &ctl(socket, &["drops"]),
        linecard_common::bfd::verdict::HEARD,
    )
}

fn gaps_ms(at: &[Instant]) -> Vec<f64> {
    at.windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64() * 1e3)
        .collect()
}

#[test]
fn the_kernel_answers_no_faster_than_the_peer_allows() {
    if !privileged("the_kernel_answers_no_faster_than_the_peer_allows") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let dir = scratch_dir("conformance");
    let socket = dir.join("dut.sock");
    let mut dut = start_linecardd_toml(
        &dir,
        &format!(
            "[engine]\ncontrol_socket = \"{}\"\n\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\ntx_interval_ms = 50\nrx_interval_ms = 50\nmultiplier = 3\nbackend = \"xdp\"\ninterface = \"eth0\"\n",
            socket.display(),
            PEER.ipv4,
            DUT.ipv4
        ),
    );
    let peer = ScriptedPeer::start(Duration::from_secs(30));
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(5),
        "the session Up and offloaded",
        |s| s[0]["state"] == "up" && s[0]["polling"] == false && s[0]["offloaded"] == true,
    );
    // Precondition: the kernel answers a 40 ms peer (its Desired Min TX
    // 50 ms against ours: a punctual peer clocks us).
    let clocked = peer.periodic_over(Duration::from_millis(1_500));
    assert!(
        clocked.len() >= 25,
        "the DUT answered {} packets in 1.5 s",
        clocked.len()
    );

    // Required Min RX 200 ms: never more often (6.8.7), jittered 75-100 %.
    peer.require_min_rx(200_000);
    let heard_before = heard(&socket);
    let paced = peer.periodic_over(Duration::from_secs(3));
    let gaps = gaps_ms(&paced);
    let shortest = gaps.iter().copied().fold(f64::MAX, f64::min);
    let longest = gaps.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "Required Min RX 50 ms: {} packets in 1.5 s; 200 ms: {} in 3 s, gaps {shortest:.1}-{longest:.1} ms",
        clocked.len(),
        paced.len()
    );
    assert!(
        (12..=21).contains(&paced.len()) && shortest >= 145.0 && longest <= 260.0,
        "at Required Min RX 200 ms the DUT sent {} packets in 3 s, gaps {shortest:.1}-{longest:.1} ms: {gaps:?}",
        paced.len()
    );
    assert!(
        heard(&socket) > heard_before + 20,
        "the kernel withheld the peer's 40 ms packets (heard counter)"
    );

    // Required Min RX 0: no periodic packet at all; the Final still came.
    peer.require_min_rx(0);
    let quiet = peer.periodic_over(Duration::from_secs(2));
    assert!(
        quiet.is_empty(),
        "{} periodic packets to a peer that asked for none",
        quiet.len()
    );

    // Still Up, still the kernel's, and userspace knows the peer's wish.
    let sessions = wait_sessions(&socket, &mut dut, Duration::from_secs(2), "state", |s| {
        s[0]["remote"]["min_rx_us"] == 0
    });
    assert_eq!(sessions[0]["state"], "up");
    assert_eq!(sessions[0]["offloaded"], true, "{:#}", sessions[0]);
    drop(peer);
    let _ = dut.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
