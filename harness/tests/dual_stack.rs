//! The controlled experiment the reference found by accident (issue 6): one
//! linecardd on the xdp backend with an IPv4 and an IPv6 session to FRR
//! bfdd 8.4.4, 3 x 300 ms, under L3 and L4 at once on the DUT's CPU (the
//! timer storm and the real-time hog). First the IPv4 session on the kernel
//! path and the IPv6 one transmitted from userspace (`offload = false`):
//! same engine, same instant, same load, and only the userspace session
//! may flap (it must: the positive control); then both on the kernel path,
//! 0 flaps. Every figure from the observer's capture. Window:
//! LINECARD_DUAL_SECONDS per run (default 20).

mod common;

use common::*;
use linecard_capture_analyzer::decode::Service;
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::{start_frr_bfdd, PeerSession};
use std::time::Duration;

#[test]
fn ipv6_from_userspace_flaps_where_ipv4_from_the_kernel_holds_then_both_hold() {
    if !privileged("ipv6_from_userspace_flaps_where_ipv4_from_the_kernel_holds") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let seconds = env_seconds("LINECARD_DUAL_SECONDS", 20);
    retrying_invalid("IPv6 in userspace", || {
        let [v4, v6] = run(false, seconds);
        eprintln!(
            "IPv4 from the kernel, IPv6 from userspace, L3+L4 {seconds} s: IPv4 {} flaps (max gap {:.2} ms), IPv6 {} flaps (max gap {:.2} ms)",
            v4.flaps, v4.max_ms, v6.flaps, v6.max_ms
        );
        // The positive control: without it, the load proved nothing.
        if v6.flaps == 0 {
            return Err(format!(
                "the userspace IPv6 session did not flap (max gap {:.2} ms): the stress did not bite",
                v6.max_ms
            ));
        }
        assert_eq!(v4.flaps, 0, "the kernel's IPv4 session flapped beside it");
        Ok(())
    });
    let [v4, v6] = run(true, seconds);
    eprintln!(
        "both from the kernel, L3+L4 {seconds} s: IPv4 {} flaps (max gap {:.2} ms), IPv6 {} flaps (max gap {:.2} ms)",
        v4.flaps, v4.max_ms, v6.flaps, v6.max_ms
    );
    assert_eq!(
        (v4.flaps, v6.flaps),
        (0, 0),
        "both sessions on the kernel path"
    );
}

/// One family's session on the capture: flaps either side, the DUT's
/// longest gap.
struct Family {
    flaps: u64,
    max_ms: f64,
}

fn run(ipv6_offloaded: bool, seconds: u64) -> [Family; 2] {
    let dir = scratch_dir(if ipv6_offloaded {
        "dual-kernel"
    } else {
        "dual-split"
    });
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let session = |local: &str, peer: &str| PeerSession {
        local: local.parse().unwrap(),
        peer: peer.parse().unwrap(),
        tx_ms: 300,
        rx_ms: 300,
        multiplier: 3,
        multihop: false,
        min_ttl: None,
    };
    let _frr = start_frr_bfdd(
        "frr",
        PEER.namespace,
        Some(&rest),
        &dir,
        &[session(PEER.ipv4, DUT.ipv4), session(PEER.ipv6, DUT.ipv6)],
    )
    .unwrap();
    let socket = dir.join("dut.sock");
    let dut_session = |peer: &str, local: &str, offload: bool| {
        format!(
            "\n[[session]]\npeer = \"{peer}\"\nlocal = \"{local}\"\ntx_interval_ms = 300\nrx_interval_ms = 300\nmultiplier = 3\nbackend = \"xdp\"\ninterface = \"eth0\"\noffload = {offload}\n"
        )
    };
    let config = format!(
        "[engine]\ncontrol_socket = \"{}\"\n{}{}",
        socket.display(),
        dut_session(PEER.ipv4, DUT.ipv4, true),
        dut_session(PEER.ipv6, DUT.ipv6, ipv6_offloaded)
    );
    let mut dut = start_linecardd_toml(&dir, &config);
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(20),
        "both sessions Up, each on its path",
        |s| {
            s.len() == 2
                && s.iter().all(|s| s["state"] == "up")
                && s.iter().all(|s| {
                    let v6 = s["peer"].as_str().is_some_and(|p| p.contains(':'));
                    s["offloaded"] == (!v6 || ipv6_offloaded)
                })
        },
    );
    let capture = capture_dut_port(&dir);
    // L3 (a timer storm) and L4 (a real-time hog) together, per DUT CPU.
    let mut l3 = spawn_stress(&dir, "l3", &L3_STORM, seconds);
    let mut l4 = spawn_stress(&dir, "l4", &L4_HOG, seconds);
    wait_for_hog(l4.pid());
    let start = epoch_ns();
    wait_stress(&mut [&mut l3, &mut l4], seconds);
    let end = epoch_ns();
    std::thread::sleep(Duration::from_millis(300));
    let pcap = capture.finish().unwrap();
    dut.stop().unwrap();
    let a = analyze_window(pcap, "L3+L4", start, end);
    let flows = &a.phases[0].result.flows;
    let family = |ours: &str, theirs: &str| {
        let of = |src: &str, dst: &str| {
            flows
                .iter()
                .find(|f| f.service == Service::SingleHop && f.src == src && f.dst == dst)
                .unwrap_or_else(|| panic!("no {src} -> {dst} on the capture"))
        };
        let (out, back) = (of(ours, theirs), of(theirs, ours));
        Family {
            flaps: out.flaps.max(back.flaps),
            max_ms: out.gap_ms.max,
        }
    };
    let result = [family(DUT.ipv4, PEER.ipv4), family(DUT.ipv6, PEER.ipv6)];
    let _ = std::fs::remove_dir_all(&dir);
    result
}
