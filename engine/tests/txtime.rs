//! The txtime backend's qdisc scoping and SO_TXTIME, on a real interface:
//! etf drops every packet without a transmit time, so it must see our BFD
//! packets and nothing else, ARP must keep working while it is installed,
//! and it must be gone afterwards.
//!
//! This kernel may have no etf: then the test asserts that the backend
//! says so, and proves the same tree with a FIFO in etf's place (the
//! classification is htb's, by SO_PRIORITY, independent of the leaf). On a
//! kernel with etf it installs etf itself and sends every BFD packet with a
//! transmit time.
//!
//! Root only: two network namespaces of its own joined by a veth pair
//! (`lc-etf-*`: `linecard lab down` removes them should this test crash),
//! so that the test needs no lab and its traffic stays inside them.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
use linecard_api::{Availability, BackendKind};
use linecard_engine::backend::availability;
use linecard_engine::backend::txtime::{self, EtfScope, Leaf, BFD_CLASS, OTHER_CLASS};
use linecard_engine::io::{clock_ns, TxSocket};
use std::fs::File;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::Command;

const PACKETS: u64 = 20;
const OURS: &str = "lc-etf-dut";
const THEIRS: &str = "lc-etf-peer";
const OUR_ADDRESS: &str = "198.51.100.1";
const THEIR_ADDRESS: &str = "198.51.100.2";

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("running ip");
    assert!(status.success(), "ip {}", args.join(" "));
}

/// Two namespaces, each with an `eth0` of one veth pair, addressed and up;
/// deleted on drop.
struct Namespaces;

impl Namespaces {
    fn create() -> Self {
        // A crashed run's namespaces go first.
        drop(Namespaces);
        for ns in [OURS, THEIRS] {
            ip(&["netns", "add", ns]);
        }
        let namespaces = Namespaces;
        ip(&[
            "link", "add", "lc-etf-a", "netns", OURS, "type", "veth", "peer", "lc-etf-b", "netns",
            THEIRS,
        ]);
        for (ns, link, address) in [
            (OURS, "lc-etf-a", OUR_ADDRESS),
            (THEIRS, "lc-etf-b", THEIR_ADDRESS),
        ] {
            ip(&["-n", ns, "link", "set", link, "name", "eth0"]);
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", ns, "link", "set", "eth0", "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        namespaces
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in [OURS, THEIRS] {
            if std::path::Path::new("/run/netns").join(ns).exists() {
                let _ = Command::new("ip").args(["netns", "delete", ns]).status();
            }
        }
    }
}

/// Runs `f` on a thread inside network namespace `ns`.
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let handle = File::open(format!("/run/netns/{ns}")).expect("the namespace exists");
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // SAFETY: `handle` is an open namespace file for the call;
                // setns affects only this scoped thread.
                let entered = unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("the namespace's thread panicked")
    })
}

fn root_qdisc() -> String {
    let out = Command::new("tc")
        .args(["qdisc", "show", "dev", "eth0", "root"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn etf_sees_only_our_bfd_packets_and_arp_keeps_working() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var_os("LINECARD_REQUIRE_PRIVILEGED").is_none_or(|v| v != "1"),
            "LINECARD_REQUIRE_PRIVILEGED=1 but not running as root"
        );
        eprintln!("skipped: needs root (network namespaces, qdiscs)");
        return;
    }
    let leaf = match availability(BackendKind::Txtime) {
        Availability::Available => Leaf::Etf,
        Availability::Unavailable { reason } => {
            assert!(reason.contains("no etf qdisc"), "{reason}");
            eprintln!("no etf here ({reason}): proving the scoping with a FIFO leaf");
            Leaf::Fifo
        }
    };
    let _namespaces = Namespaces::create();
    in_netns(OURS, || {
        let before = root_qdisc();
        let scope = EtfScope::install("eth0", leaf).unwrap();
        let again = EtfScope::install("eth0", leaf)
            .err()
            .expect("a second tree is refused");
        assert!(
            again.to_string().contains("already has a root qdisc"),
            "{again}"
        );

        let local: IpAddr = OUR_ADDRESS.parse().unwrap();
        let peer: IpAddr = THEIR_ADDRESS.parse().unwrap();
        let mut socket = TxSocket::open(local, peer, 3784, Some("eth0"), &|_| false).unwrap();
        socket.set_priority(BFD_CLASS).unwrap();
        // The kernel checks an SCM_TXTIME message's length and refuses it
        // on a socket without SO_TXTIME: a wrong layout cannot pass unseen.
        let soon = clock_ns(libc::CLOCK_TAI) + 1_000_000;
        let refused = socket.send_at(&[0; 24], soon).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EINVAL), "{refused}");
        socket.enable_txtime(txtime::URGENT_LEAD_NS as u64).unwrap();
        for i in 0..PACKETS {
            let at = clock_ns(libc::CLOCK_TAI) + 1_000_000 + i * 100_000;
            socket.send_at(&[0; 24], at).unwrap();
        }
        // ARP from scratch while the tree is installed.
        ip(&["neigh", "flush", "dev", "eth0"]);
        let ping = Command::new("ping")
            .args(["-c", "3", "-i", "0.2", "-W", "1", THEIR_ADDRESS])
            .output()
            .unwrap();
        assert!(
            ping.status.success(),
            "ping with the tree installed: {ping:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
        let bfd = scope.class_packets(BFD_CLASS).unwrap();
        let other = scope.class_packets(OTHER_CLASS).unwrap();
        assert_eq!(bfd, PACKETS, "exactly our BFD packets in the etf class");
        // Three echo requests and at least one ARP request.
        assert!(other >= 4, "ARP and ICMP went elsewhere: {other}");
        drop(scope);
        assert_eq!(root_qdisc(), before, "the tree is removed on drop");
    });
}
