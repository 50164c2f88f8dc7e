//! The txtime backend's qdisc scoping and SO_TXTIME, on the DUT's real
//! interface: etf drops every packet without a transmit time, so it must
//! see our BFD packets and nothing else, ARP must keep working while it is
//! installed, and it must be gone afterwards.
//!
//! This kernel has no etf: the test asserts that the backend says so, and
//! proves the same tree with a FIFO in etf's place (the classification is
//! htb's, by SO_PRIORITY, independent of the leaf). On a kernel with etf it
//! installs etf itself and sends every BFD packet with a transmit time.

mod common;

use common::*;
use linecard_engine::backend::txtime::{self, EtfScope, Leaf, BFD_CLASS, OTHER_CLASS};
use linecard_engine::backend::{Availability, BackendKind};
use linecard_engine::io::{clock_ns, TxSocket};
use linecard_harness::lab::spec::{DUT, PEER};
use std::net::IpAddr;
use std::process::Command;

const PACKETS: u64 = 20;

fn root_qdisc() -> String {
    let out = Command::new("tc")
        .args(["qdisc", "show", "dev", "eth0", "root"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn etf_sees_only_our_bfd_packets_and_arp_keeps_working() {
    if !privileged("etf_sees_only_our_bfd_packets_and_arp_keeps_working") {
        return;
    }
    let _lock = lock_lab();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let leaf = match BackendKind::Txtime.availability() {
        Availability::Available => Leaf::Etf,
        Availability::Unavailable { reason } => {
            assert!(reason.contains("no etf qdisc"), "{reason}");
            eprintln!("no etf here ({reason}): proving the scoping with a FIFO leaf");
            Leaf::Fifo
        }
    };
    linecard_harness::sys::in_netns(DUT.namespace, || {
        let before = root_qdisc();
        let scope = EtfScope::install("eth0", leaf)?;
        let again = EtfScope::install("eth0", leaf)
            .err()
            .expect("a second tree is refused");
        assert!(
            again.to_string().contains("already has a root qdisc"),
            "{again}"
        );

        let local: IpAddr = DUT.ipv4.parse()?;
        let peer: IpAddr = PEER.ipv4.parse()?;
        let mut socket = TxSocket::open(local, peer, 3784, Some("eth0"), &|_| false)?;
        socket.set_priority(BFD_CLASS)?;
        // The kernel checks an SCM_TXTIME message's length and refuses it
        // on a socket without SO_TXTIME: a wrong layout cannot pass unseen.
        let soon = clock_ns(libc::CLOCK_TAI) + 1_000_000;
        let refused = socket.send_at(&[0; 24], soon).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EINVAL), "{refused}");
        socket.enable_txtime(txtime::URGENT_LEAD_NS as u64)?;
        for i in 0..PACKETS {
            let at = clock_ns(libc::CLOCK_TAI) + 1_000_000 + i * 100_000;
            socket.send_at(&[0; 24], at)?;
        }
        // ARP from scratch while the tree is installed.
        Command::new("ip")
            .args(["neigh", "flush", "dev", "eth0"])
            .status()?;
        let ping = Command::new("ping")
            .args(["-c", "3", "-i", "0.2", "-W", "1", PEER.ipv4])
            .output()?;
        assert!(
            ping.status.success(),
            "ping with the tree installed: {ping:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        let bfd = scope.class_packets(BFD_CLASS)?;
        let other = scope.class_packets(OTHER_CLASS)?;
        assert_eq!(bfd, PACKETS, "exactly our BFD packets in the etf class");
        // Three echo requests and at least one ARP request.
        assert!(other >= 4, "ARP and ICMP went elsewhere: {other}");
        drop(scope);
        assert_eq!(root_qdisc(), before, "the tree is removed on drop");
        Ok(())
    })
    .unwrap();
}
