//! Detection over repeated kills (issues 10 and 11): the peer (linecardd on
//! its rt backend, quick to restart with new discriminators) is killed
//! without a farewell KILLS times idle and KILLS times under L4 on the DUT's
//! CPU (stress started once the session is Up; the kill 200 ms after its
//! hog has had 200 ms of CPU, so kills land while the hog runs and never in
//! an RT-throttled window, where the responder thread is held too: that
//! case is not sampled here). The DUT runs the xdp backend. Per kill, on the observer's capture:
//! the DUT's Down (diag 1) after the peer's last packet, and the kernel's
//! detection instant from the engine's status against the same packet.
//! LINECARD_KILLS overrides KILLS (default 10: enough to place a median and
//! a maximum per batch; the test suite pays two seconds a kill).

mod common;

use common::*;
use linecard_capture_analyzer::analysis::{PacketRecord, PacketSink};
use linecard_capture_analyzer::{analyze, Options};
use linecard_harness::lab::spec::{DUT, PEER};
use linecard_harness::run::daemons::{pairs, start_peer};
use linecard_harness::scenario::{PeerImplementation, Sessions};
use std::time::Duration;

/// One kill: when SIGKILL was sent, when the peer was reaped (it can send
/// nothing after), and when the kernel said it was silent.
struct Kill {
    stressed: bool,
    at_unix_ns: i64,
    reaped_unix_ns: i64,
    kernel_unix_ns: i64,
}

/// Every gap of 29 ms or more on the capture: (flow, end, gap).
#[derive(Default)]
struct Silences(Vec<(usize, i64, u64)>);

impl PacketSink for Silences {
    fn control(&mut self, r: &PacketRecord) {
        if let Some(gap) = r.gap_ns.filter(|&g| g >= 29_000_000) {
            self.0.push((r.flow, r.ts_ns, gap));
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(label: &str, values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    eprintln!(
        "{label}: n {} min {:.2} p50 {:.2} p99 {:.2} max {:.2} ms",
        v.len(),
        v[0],
        percentile(&v, 0.5),
        percentile(&v, 0.99),
        v[v.len() - 1]
    );
    v
}

#[test]
fn a_killed_peer_is_detected_on_time_kill_after_kill_idle_and_under_l4() {
    if !privileged("a_killed_peer_is_detected_on_time_kill_after_kill") {
        return;
    }
    retrying_invalid("detection", || once(Control::Faithful));
}

/// The negative control: the kernel's sweep re-armed on its fixed 0.5 ms
/// period (`engine.xdp_sweep_fixed_period = true`) must fail the checks
/// the faithful engine passes above: its Down lands anywhere up to a
/// period after the expiry, so the median passes 30.15 ms (p = 0.78 a
/// kill) or two kills pass 30.5 ms (p = 0.16 a kill). Sixteen idle kills
/// leave the control under a 1 % chance of passing by luck.
#[test]
fn with_the_sweep_on_its_fixed_period_the_detection_checks_fail() {
    if !privileged("with_the_sweep_on_its_fixed_period") {
        return;
    }
    retrying_invalid("detection, fixed sweep", || once(Control::FixedSweep));
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Control {
    /// The engine as shipped: idle and L4 batches, every check must hold.
    Faithful,
    /// The fixed-period sweep: one idle batch of 16, the checks must fail.
    FixedSweep,
}

/// One run. `Err` means invalid (not failed): the peer host itself fell
/// silent for a detection time outside any kill, and the DUT rightly
/// declared it down (seen in CI: the peer linecardd silent 33 ms).
fn once(control: Control) -> Result<(), String> {
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let (kills, batches, engine_extra) = match control {
        Control::Faithful => (env_seconds("LINECARD_KILLS", 10) as usize, 2, ""),
        Control::FixedSweep => (16, 1, "xdp_sweep_fixed_period = true\n"),
    };
    let dir = scratch_dir("detection");
    // What the hypervisor takes from the DUT's CPU, placed in time.
    let steal_witness = StealWitness::start(&dir, 40 * kills as u64 + 60);
    let capture = capture_dut_port(&dir);
    let socket = dir.join("dut.sock");
    let session = DutSession {
        peer: PEER.ipv4.to_string(),
        local: DUT.ipv4.to_string(),
        backend: "xdp",
        interface: Some("eth0"),
    };
    let mut dut = start_linecardd(&dir, &socket, engine_extra, &[session]);
    let sessions = Sessions {
        count: 1,
        ipv6: false,
        dual_stack: false,
        tx_interval_ms: 10,
        rx_interval_ms: 10,
        multiplier: 3,
        multihop: false,
        min_ttl: None,
        echo: false,
        auth: None,
        demand: None,
    };
    let pairs = pairs(&sessions);
    // The runner finds linecardd beside `linecard`; this test binary lives
    // elsewhere. The only test in this binary: no other thread reads it.
    // SAFETY: single-threaded at this point of this test binary.
    unsafe { std::env::set_var("LINECARD_LINECARDD", linecardd()) };
    let witness = CpuWitness::start(&dir, 600);
    let mut done: Vec<Kill> = Vec::new();
    let mut last_kernel: Option<i64> = None;
    for i in 0..batches * kills {
        let stressed = i >= kills;
        let mut peer =
            start_peer(PeerImplementation::Linecardd, 0, &sessions, &pairs, &dir).unwrap();
        wait_sessions(
            &socket,
            &mut dut,
            Duration::from_secs(10),
            "the session Up and offloaded",
            |s| s[0]["state"] == "up" && s[0]["offloaded"] == true,
        );
        // Steady (RX-clocked) for a moment; under L4 the stress bites first.
        let mut stress = stressed.then(|| spawn_stress(&dir, "stress", &L4_HOG, 4));
        if let Some(stress) = stress.as_ref() {
            wait_for_hog(stress.pid());
        }
        std::thread::sleep(Duration::from_millis(200));
        let at_unix_ns = epoch_ns();
        peer.daemon.kill().unwrap();
        let reaped_unix_ns = epoch_ns();
        let down = wait_sessions(
            &socket,
            &mut dut,
            Duration::from_secs(5),
            "the kernel's sweep to report the dead peer",
            |s| {
                s[0]["state"] == "down"
                    && s[0]["kernel_detection_unix_ns"].as_i64().is_some()
                    && s[0]["kernel_detection_unix_ns"].as_i64() != last_kernel
            },
        );
        let kernel_unix_ns = down[0]["kernel_detection_unix_ns"].as_i64().unwrap();
        last_kernel = Some(kernel_unix_ns);
        if let Some(stress) = stress.as_mut() {
            stress.stop().unwrap();
        }
        done.push(Kill {
            stressed,
            at_unix_ns,
            reaped_unix_ns,
            kernel_unix_ns,
        });
    }
    let stalls = witness.finish();
    let steal = steal_witness.finish();
    dut.stop().unwrap();
    let pcap = capture.finish().unwrap();
    let mut silences = Silences::default();
    let a = analyze(
        &[pcap],
        &Options {
            phases: Vec::new(),
            timeline: false,
        },
        Some(&mut silences),
    )
    .unwrap();
    let ours = a
        .all
        .flows
        .iter()
        .find(|f| f.src == DUT.ipv4 && f.dst == PEER.ipv4)
        .expect("the DUT's flow on the capture");
    // Every kill, and nothing else, took the session down on the wire.
    let downs: Vec<_> = ours.flap_events.iter().filter(|e| e.diag == 1).collect();
    let after = |kill: &Kill, at: i64| at > kill.at_unix_ns && at < kill.at_unix_ns + 1_000_000_000;
    let strays: Vec<_> = downs
        .iter()
        .filter(|e| !done.iter().any(|k| after(k, e.at_ns)))
        .collect();
    if !strays.is_empty() {
        // A Down with no kill is the DUT's fault unless the peer had just
        // been silent for a detection time on its own.
        let peer_flow = a
            .all
            .flows
            .iter()
            .position(|f| f.src == PEER.ipv4 && f.dst == DUT.ipv4)
            .expect("the peer's flow on the capture");
        let peer_stalls: Vec<f64> = strays
            .iter()
            .filter_map(|e| {
                silences
                    .0
                    .iter()
                    .find(|&&(flow, end, gap)| {
                        // Silent from `end - gap`: detection due 30 ms
                        // later; the Down within 40 ms of the silence's end.
                        let start = end - gap as i64;
                        flow == peer_flow
                            && gap >= 30_000_000
                            && start + 30_000_000 <= e.at_ns
                            && e.at_ns <= end + 40_000_000
                    })
                    .map(|&(_, _, gap)| gap as f64 / 1e6)
            })
            .collect();
        assert_eq!(
            peer_stalls.len(),
            strays.len(),
            "Downs (diag 1) with no kill and no stall of the peer before them: {strays:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "invalid run: the peer host fell silent on its own ({peer_stalls:?} ms) and the DUT declared it down"
        ));
    }
    let (mut kernel, mut wire) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    // Steal the witness placed between the peer's last packet and our
    // Down, per kill (in the order of `kernel` and `wire`).
    let mut stolen: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for kill in &done {
        let down = downs
            .iter()
            .find(|e| after(kill, e.at_ns))
            .unwrap_or_else(|| panic!("no Down on the wire after the kill at {}", kill.at_unix_ns));
        let wire_ms = down
            .detection_latency_ms
            .expect("a Down with diag 1 has a latency");
        let peer_last_ns = down.at_ns - (wire_ms * 1e6) as i64;
        // SIGKILL lands a moment after the instant taken before it (5.2 ms
        // later in CI, the hypervisor stealing): the peer's last packet is
        // bounded by its reaping, plus its way to the capture, which queues
        // on a stolen or stressed CPU (seen: captured 1.95 ms after the
        // reaping) but never for an interval (10 ms), when a live peer
        // would have sent again.
        assert!(
            peer_last_ns <= kill.reaped_unix_ns + 10_000_000,
            "the peer's last packet ({peer_last_ns}) came after the peer was reaped ({}; SIGKILL at {})",
            kill.reaped_unix_ns,
            kill.at_unix_ns
        );
        let k = usize::from(kill.stressed);
        kernel[k].push((kill.kernel_unix_ns - peer_last_ns) as f64 / 1e6);
        wire[k].push(wire_ms);
        stolen[k].push(steal.within(peer_last_ns, down.at_ns));
    }
    if control == Control::FixedSweep {
        let (v, label) = (
            summary("kernel detection, idle, fixed sweep", &kernel[0]),
            "fixed sweep",
        );
        let p50 = percentile(&v, 0.5);
        let late = v.iter().filter(|&&ms| ms > 30.5).count();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            p50 > 30.15 || late > (v.len() / 20).max(1),
            "{label}: the negative control passed the detection checks (median {p50:.2} ms, {late} kills past 30.5 ms): the checks cannot tell a fixed period from the deadline"
        );
        eprintln!("{label}: median {p50:.2} ms, {late} of {} kills past 30.5 ms: fails the checks, as it must", v.len());
        return Ok(());
    }
    // The stress bit, for the L4 batch: the canary on the DUT's CPU was kept
    // from running for a detection time or more while it ran. (Per kill it
    // is not asserted: this kernel's fair server serves the canary now and
    // then even under the hog, seen around one kill in CI; each kill waits
    // until the hog itself has had 200 ms of CPU instead.)
    let stressed_from = done
        .iter()
        .find(|k| k.stressed)
        .map(|k| k.at_unix_ns - 5_000_000_000);
    let starved = stalls
        .iter()
        .filter(|s| stressed_from.is_some_and(|from| s.from_unix_ns >= from))
        .filter(|s| s.to_unix_ns - s.from_unix_ns >= 30_000_000)
        .count();
    assert!(
        starved > 0,
        "L4 never starved the DUT's CPU for 30 ms: {} stalls",
        stalls.len()
    );
    eprintln!(
        "L4: the canary on the DUT's CPU was kept from running for 30 ms or more {starved} times"
    );
    let kernel_idle = summary("kernel detection, idle", &kernel[0]);
    let wire_idle = summary("Down on the wire, idle", &wire[0]);
    let kernel_l4 = summary("kernel detection, L4", &kernel[1]);
    let wire_l4 = summary("Down on the wire, L4", &wire[1]);
    // Detection time 30 ms. Issue 11: the Down within 0.5 ms of the
    // expiry. The kernel's sweep runs at the earliest detection deadline
    // (at most 0.1 ms late by design), so its median sits within 0.15 ms
    // of the expiry: with a fixed 0.5 ms sweep it was 30.22-30.37 ms, here
    // 30.07. This VM stalls a CPU for 2-4 ms now and then, the sweep's
    // timer with it: one kill in twenty may be that late (seen in CI:
    // 33.36 ms under L4, every other kill of the batch within 30.49 ms),
    // none beyond 35 ms. The Down leaves from the responder at
    // SCHED_DEADLINE, which RT throttling cannot hold (at SCHED_FIFO a
    // kill inside the throttled window sent it up to ~50 ms late); under
    // L4 it then crosses the veth's backlog on the DUT's CPU, whose softirq
    // the kernel may defer to ksoftirqd at normal priority: one such Down
    // in twenty reached the wire 35.18 ms and, in another run, 37.17 ms
    // after the peer's last packet (the kernel's detection 30.99 ms), so
    // that one may take up to 40 ms.
    // A late kill while the hypervisor stole from the DUT's CPU between
    // the peer's last packet and our Down says nothing about the sweep
    // (seen: 6 of 20 idle kills 30.5-32.3 ms late on a VM losing seconds a
    // minute): if the batch is on time without the kills that saw steal
    // inside their own window, the run is invalid and repeated once.
    let (kernel_raw, wire_raw) = (kernel.clone(), wire.clone());
    for (k, v, cap, label) in [
        (0, &kernel_idle, 35.0, "kernel detection, idle"),
        (1, &kernel_l4, 35.0, "kernel detection, L4"),
        (0, &wire_idle, 35.0, "Down on the wire, idle"),
        (1, &wire_l4, 40.0, "Down on the wire, L4"),
    ] {
        let precise = 30.5;
        // One kill in twenty may be late (within the cap), and one at least.
        let allowed_late = (v.len() / 20).max(1);
        let late = v.iter().filter(|&&ms| ms > precise).count();
        let on_time = v[0] >= 29.9 && late <= allowed_late && v[v.len() - 1] <= cap;
        if !on_time {
            let raw = if label.starts_with("kernel") {
                &kernel_raw[k]
            } else {
                &wire_raw[k]
            };
            let unexcused: Vec<f64> = raw
                .iter()
                .zip(&stolen[k])
                .filter(|&(&ms, &st)| !(ms > precise && st > 0.0))
                .map(|(&ms, _)| ms)
                .collect();
            let late_unexcused = unexcused.iter().filter(|&&ms| ms > precise).count();
            let excused = late - late_unexcused;
            let worst = unexcused.iter().copied().fold(0.0, f64::max);
            if v[0] >= 29.9 && excused > 0 && late_unexcused <= allowed_late && worst <= cap {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!(
                    "invalid run: {label}: {late} later than {precise} ms, {excused} of them with the hypervisor's steal inside their own window"
                ));
            }
        }
        assert!(
            on_time,
            "{label}: {late} later than {precise} ms (at most {cap}): {v:?}"
        );
    }
    for (v, label) in [
        (&kernel_idle, "kernel detection, idle"),
        (&kernel_l4, "kernel detection, L4"),
    ] {
        let p50 = percentile(v, 0.5);
        assert!(
            p50 <= 30.15,
            "{label}: median {p50:.2} ms: the sweep waited for its period, not the deadline"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
