//! The xdp backend's own clock holds through RT throttling. Under an L4 hog
//! on the DUT's CPU, RT throttling stops every SCHED_FIFO task for the rest
//! of each second once RT tasks used their runtime: a responder at
//! SCHED_FIFO then cannot send, and a peer that stalls in that window gets
//! its own silence mirrored back (a 31 ms gap and a flap in one CI
//! bake-off). At SCHED_DEADLINE the responder is not throttled.
//!
//! To make the window easy to hit, sched_rt_runtime_us is 500000 for the
//! test (half of every second throttled, instead of 50 ms); the peer's bfdd
//! is stopped 18 ms at a time, 16 times, 290 ms apart. The DUT's longest gap
//! must stay within 20 ms with the responder at SCHED_DEADLINE; the
//! negative control, the same with `engine.sched_deadline = false`, must
//! show a gap above it (the test can see the failure it guards against).

mod common;

use common::*;
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::start_frr_bfdd;
use linecard_harness::rt_throttle::RuntimeOverride;
use std::time::Duration;

const STALLS: usize = 16;
const STALL_MS: u64 = 18;
/// Two intervals: the own clock's 11 ms and what the send path adds. The
/// responder's packet crosses the veth's NAPI on the DUT's CPU (XDP is
/// attached on its other end), a softirq the kernel may defer: 16.57 ms
/// once in CI at SCHED_DEADLINE, 11.58 ms here; at SCHED_FIFO the gap
/// mirrors the peer's whole stall (27.40 and 27.58 ms).
const LIMIT_MS: f64 = 20.0;

#[test]
fn the_own_clock_is_not_held_by_rt_throttling() {
    if !privileged("the_own_clock_is_not_held_by_rt_throttling") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let deadline = stalls_under_throttling(true);
    let fifo = stalls_under_throttling(false);
    eprintln!(
        "peer stalled {STALLS} x {STALL_MS} ms under L4, half of each second RT-throttled: DUT's longest gap {:.2} ms at SCHED_DEADLINE, {:.2} ms at SCHED_FIFO (the peer's longest {:.2} / {:.2} ms)",
        deadline.ours_max, fifo.ours_max, deadline.peer_max, fifo.peer_max
    );
    for run in [&deadline, &fifo] {
        assert!(
            run.peer_max >= STALL_MS as f64,
            "{}: the peer's longest gap was {:.2} ms: the stalls did not silence it",
            run.policy,
            run.peer_max
        );
    }
    assert!(
        deadline.policy.contains("deadline"),
        "the responder was not admitted at SCHED_DEADLINE: {}",
        deadline.policy
    );
    assert!(
        fifo.policy.contains("fifo"),
        "the control's responder: {}",
        fifo.policy
    );
    assert!(
        fifo.ours_max > LIMIT_MS,
        "negative control: at SCHED_FIFO the DUT's longest gap was {:.2} ms, within {LIMIT_MS} ms: no stall fell into a throttled window, so the test saw nothing",
        fifo.ours_max
    );
    assert!(
        deadline.ours_max <= LIMIT_MS,
        "at SCHED_DEADLINE the DUT's longest gap was {:.2} ms (limit {LIMIT_MS} ms)",
        deadline.ours_max
    );
}

struct Stalled {
    /// The responder's scheduling, as the engine reported it.
    policy: String,
    ours_max: f64,
    peer_max: f64,
}

fn stalls_under_throttling(sched_deadline: bool) -> Stalled {
    let dir = scratch_dir(if sched_deadline {
        "throttling-deadline"
    } else {
        "throttling-fifo"
    });
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let session = session_3x10(PEER.ipv4, DUT.ipv4);
    let frr = start_frr_bfdd("frr", PEER.namespace, Some(&rest), &dir, &[session]).unwrap();
    let socket = dir.join("dut.sock");
    let mut dut = start_linecardd_toml(
        &dir,
        &format!(
            r#"[engine]
control_socket = "{}"
sched_deadline = {sched_deadline}

[[session]]
peer = "{}"
local = "{}"
tx_interval_ms = 10
rx_interval_ms = 10
multiplier = 3
backend = "xdp"
interface = "eth0"
"#,
            socket.display(),
            PEER.ipv4,
            DUT.ipv4
        ),
    );
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "the session Up and offloaded",
        |s| s[0]["state"] == "up" && s[0]["offloaded"] == true,
    );
    let policy = ctl(&socket, &["drops"])["fast_path"]["responder"].to_string();
    let capture = capture_dut_port(&dir);
    let throttled = RuntimeOverride::set(500_000).unwrap();
    let mut hog = spawn_stress(&dir, "stress", &L4_HOG, 8);
    wait_for_hog(hog.pid());
    let start = epoch_ns();
    let bfdd = frr.pid() as libc::pid_t;
    for _ in 0..STALLS {
        // SAFETY: signals to the bfdd this test started, by PID.
        unsafe { libc::kill(bfdd, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(STALL_MS));
        unsafe { libc::kill(bfdd, libc::SIGCONT) };
        std::thread::sleep(Duration::from_millis(290));
    }
    let end = epoch_ns();
    hog.stop().unwrap();
    drop(throttled);
    std::thread::sleep(Duration::from_millis(100));
    let pcap = capture.finish().unwrap();
    dut.stop().unwrap();
    drop(frr);
    let a = analyze_window(pcap, "stalls", start, end);
    let flows = &a.phases[0].result.flows;
    let max_of = |src: &str| {
        flows
            .iter()
            .find(|f| f.src == src)
            .unwrap_or_else(|| panic!("no packets from {src} on the capture"))
            .gap_ms
            .max
    };
    let stalled = Stalled {
        policy,
        ours_max: max_of(DUT.ipv4),
        peer_max: max_of(PEER.ipv4),
    };
    let _ = std::fs::remove_dir_all(&dir);
    stalled
}
