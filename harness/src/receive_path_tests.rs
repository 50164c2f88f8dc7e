use super::*;

/// What the lab's DUT interface (veth, the fast path attached natively)
/// answered here, section by section.
const VETH: &str = r#"#lc-section link
[{"ifindex":2,"link_index":3,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,"xdp":{"mode":1,"prog":{"id":107,"name":"lc_bfd","tag":"10501eccf43b934e","jited":1},"attached":[{"mode":1,"prog":{"id":107,"name":"lc_bfd","tag":"10501eccf43b934e","jited":1}}]},"qdisc":"noqueue","operstate":"UP","num_tx_queues":2,"num_rx_queues":2,"stats64":{"rx":{"bytes":684330,"packets":13030,"errors":0,"dropped":0,"over_errors":0,"multicast":0},"tx":{"bytes":849798,"packets":13025,"errors":0,"dropped":0,"carrier_errors":0,"collisions":0}}}]
#lc-section stats
NIC statistics:
     peer_ifindex: 3
     rx_queue_0_xdp_packets: 13013
     rx_queue_0_xdp_bytes: 683032
     rx_queue_0_drops: 0
     rx_queue_0_xdp_redirect: 0
     rx_queue_0_xdp_drops: 932
     rx_queue_0_xdp_tx: 11854
     rx_queue_0_xdp_tx_errors: 0
     tx_queue_0_xdp_xmit: 0
     tx_queue_0_xdp_xmit_errors: 0
#lc-section driver
driver: veth
version: 1.0
firmware-version: 
expansion-rom-version: 
bus-info: 
supports-statistics: yes
#lc-section udp4
Cannot get RX network flow hashing options: Operation not supported
#lc-section udp6
Cannot get RX network flow hashing options: Operation not supported
#lc-section pause
netlink error: Operation not supported
#lc-section coalesce
netlink error: Operation not supported
#lc-section threaded
0
#lc-section irqs
"#;

/// A NIC's answers in ethtool's formats (hand-written: no NIC here).
const NIC: &str = "#lc-section link
[{\"ifname\":\"ens1f0\",\"xdp\":{\"mode\":1,\"prog\":{\"id\":9,\"name\":\"lc_bfd\"}},\"num_tx_queues\":8,\"num_rx_queues\":8,\"stats64\":{\"rx\":{\"dropped\":3,\"missed_errors\":7,\"packets\":10},\"tx\":{\"dropped\":0}}}]
#lc-section stats
NIC statistics:
     rx_packets: 10
     rx_queue_0_drops: 2
     rx_out_of_buffer: 5
     rx_discards_phy: 1
#lc-section driver
driver: mlx5_core
version: 6.1.0
firmware-version: 16.35.2000 (MT_0000000012)
bus-info: 0000:3b:00.0
#lc-section udp4
UDP over IPV4 flows use these fields for computing Hash flow key:
IP SA
IP DA
L4 bytes 0 & 1 [TCP/UDP src port]
L4 bytes 2 & 3 [TCP/UDP dst port]
#lc-section udp6
UDP over IPV6 flows use these fields for computing Hash flow key:
IP SA
IP DA
#lc-section pause
Pause parameters for ens1f0:
Autonegotiate:\toff
RX:\t\ton
TX:\t\ton
#lc-section coalesce
Coalesce parameters for ens1f0:
Adaptive RX: on  TX: on
rx-usecs: 8
rx-frames: 128
#lc-section threaded
1
#lc-section irqs
93 3 mlx5_comp0@pci:0000:3b:00.0
94 4-5 mlx5_comp1@pci:0000:3b:00.0
";

#[test]
fn veth_says_what_it_has_and_what_it_cannot_say() {
    let r = InterfaceRecord::parse("lc-dut", "eth0", VETH);
    assert_eq!(
        (r.driver.as_str(), r.driver_version.as_str()),
        ("veth", "1.0")
    );
    assert_eq!(
        r.xdp,
        Some(XdpAttachment {
            mode: "native".into(),
            program: "lc_bfd".into(),
            id: 107
        })
    );
    assert_eq!((r.rx_queues, r.tx_queues), (Some(2), Some(2)));
    assert_eq!(
        r.udp4_hash,
        "unsupported: Cannot get RX network flow hashing options: Operation not supported"
    );
    assert_eq!(
        r.flow_control,
        "unsupported: netlink error: Operation not supported"
    );
    assert_eq!(
        r.coalescing,
        "unsupported: netlink error: Operation not supported"
    );
    assert_eq!(r.threaded_napi, Some(false));
    assert!(r.irqs.is_empty());
    // The kernel's and the driver's drop counters; the program's own
    // XDP_DROP verdicts are not losses, a failed XDP_TX is.
    assert_eq!(
        r.drop_counters.keys().collect::<Vec<_>>(),
        [
            "rx.dropped",
            "rx.errors",
            "rx.over_errors",
            "rx_queue_0_drops",
            "rx_queue_0_xdp_tx_errors",
            "tx.carrier_errors",
            "tx.dropped",
            "tx.errors",
            "tx_queue_0_xdp_xmit_errors"
        ]
    );
    assert_eq!(r.incomplete(), None);
}

#[test]
fn a_nic_gives_its_firmware_hash_fields_pause_coalescing_and_irqs() {
    let r = InterfaceRecord::parse("dut", "ens1f0", NIC);
    assert_eq!(r.firmware, "16.35.2000 (MT_0000000012)");
    assert_eq!(r.bus_info, "0000:3b:00.0");
    assert_eq!(
        r.udp4_hash,
        "IP SA, IP DA, L4 bytes 0 & 1 [TCP/UDP src port], L4 bytes 2 & 3 [TCP/UDP dst port]"
    );
    assert_eq!(r.udp6_hash, "IP SA, IP DA");
    assert_eq!(r.flow_control, "Autonegotiate off, RX on, TX on");
    assert_eq!(r.coalescing, "adaptive-rx on, rx-usecs 8, rx-frames 128");
    assert_eq!(r.threaded_napi, Some(true));
    assert_eq!(
        r.irqs,
        [
            Irq {
                irq: 93,
                name: "mlx5_comp0@pci:0000:3b:00.0".into(),
                affinity: "3".into()
            },
            Irq {
                irq: 94,
                name: "mlx5_comp1@pci:0000:3b:00.0".into(),
                affinity: "4-5".into()
            }
        ]
    );
    assert_eq!(r.drop_counters.get("rx.missed_errors"), Some(&7));
    assert_eq!(r.drop_counters.get("rx_discards_phy"), Some(&1));
    assert_eq!(r.drop_counters.get("rx_packets"), None);
}

#[test]
fn an_interface_that_could_not_be_read_is_incomplete_and_says_what_is_missing() {
    let gone = InterfaceRecord::parse(
        "dut",
        "eth9",
        "#lc-section link\nDevice \"eth9\" does not exist.\n",
    );
    assert_eq!(
        gone.incomplete().as_deref(),
        Some("driver, queues, drop counters")
    );
}

#[test]
fn a_counter_that_moved_in_a_phase_is_named_with_its_delta() {
    let before = InterfaceRecord::parse("lc-dut", "eth0", VETH);
    let mut after = before.clone();
    *after.drop_counters.get_mut("rx_queue_0_drops").unwrap() += 4;
    let drops = drops_around(std::slice::from_ref(&before), &[after]);
    assert_eq!(drops.len(), 1);
    assert_eq!(drops[0].moved(), [("rx_queue_0_drops", 4)]);
    // Nothing moved, nothing named; an interface read only once, no pair.
    assert!(
        drops_around(std::slice::from_ref(&before), std::slice::from_ref(&before))[0]
            .moved()
            .is_empty()
    );
    assert!(drops_around(&[before], &[]).is_empty());
}

#[test]
fn the_script_quotes_the_interface_and_reads_counters_only_when_asked() {
    let full = script("eth0", Detail::Full);
    assert!(
        full.starts_with("IF='eth0'\n") || full.starts_with("IF=eth0\n"),
        "{full}"
    );
    assert!(full.contains("ethtool -i") && full.contains("rx-flow-hash udp4"));
    let counters = script("eth0", Detail::Counters);
    assert!(counters.contains("ethtool -S") && !counters.contains("ethtool -i"));
}
