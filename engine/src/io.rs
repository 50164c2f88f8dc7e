//! Sockets for single-hop BFD (RFC 5881): a receive socket per address
//! family on port 3784 that reports each packet's TTL/hop limit and
//! destination address, and a transmit socket per session bound to its
//! local address and a source port of its own, sending at TTL 255.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};

/// Source ports for our sessions. RFC 5881 section 4 requires 49152-65535;
/// FRR's bfdd allocates upward from 49152, so we take the top of the range.
pub const SOURCE_PORTS: std::ops::RangeInclusive<u16> = 60000..=65535;

/// Every control packet leaves with TTL/hop limit 255 (RFC 5881 section 5)
/// and DSCP CS6 (network control).
const TTL: u32 = 255;
const TOS_CS6: u32 = 0xc0;
/// Receive buffer of the shared receive sockets.
const RECEIVE_BUFFER_BYTES: i32 = 8 << 20;

/// A packet received with what GTSM and demultiplexing need.
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub len: usize,
    pub src: SocketAddr,
    /// Destination address (IP_PKTINFO / IPV6_PKTINFO): the session's local
    /// address for demultiplexing.
    pub dst: IpAddr,
    /// The interface it arrived on (IP_PKTINFO / IPV6_PKTINFO): whether
    /// our XDP program saw it first.
    pub ifindex: u32,
    /// TTL or hop limit as received; 0 if the kernel did not say.
    pub ttl: u8,
    /// IPv6 with a hop-by-hop, destination options or routing header:
    /// single-hop BFD has none, and the fast path does not walk them.
    pub extension_headers: bool,
}

pub struct RxSocket {
    socket: Socket,
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live i32 and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl RxSocket {
    /// Binds the wildcard address of `ipv6`'s family on `port`, non-blocking.
    pub fn bind(ipv6: bool, port: u16) -> io::Result<Self> {
        let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
        let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        let fd = socket.as_raw_fd();
        if ipv6 {
            socket.set_only_v6(true)?;
            setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, 1)?;
            setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
            // Reported so that they can be refused.
            for option in [
                libc::IPV6_RECVHOPOPTS,
                libc::IPV6_RECVDSTOPTS,
                libc::IPV6_RECVRTHDR,
            ] {
                setsockopt_int(fd, libc::IPPROTO_IPV6, option, 1)?;
            }
        } else {
            setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTTL, 1)?;
            setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)?;
        }
        // One socket receives every session's packets: at 1024 sessions and
        // 10 ms that is 100 k packets/s, and a loop that was not scheduled
        // for a while must find them queued, not dropped. Root may exceed
        // rmem_max (SO_RCVBUFFORCE); otherwise the kernel caps the request.
        if setsockopt_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            RECEIVE_BUFFER_BYTES,
        )
        .is_err()
        {
            socket.set_recv_buffer_size(RECEIVE_BUFFER_BYTES as usize)?;
        }
        let any: IpAddr = if ipv6 {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        socket.bind(&SocketAddr::new(any, port).into())?;
        socket.set_nonblocking(true)?;
        Ok(Self { socket })
    }

    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// Receives one packet into `buf`; `None` when nothing is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        // SAFETY: an all-zero sockaddr_storage is valid; recvmsg fills it.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut control = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a zeroed msghdr is valid; every pointer refers to a live
        // local buffer with its true length.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg is fully initialised above.
        let n = unsafe { libc::recvmsg(self.fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(e)
            };
        }
        // SAFETY: the kernel wrote a sockaddr of msg_namelen bytes.
        let src = unsafe { SockAddr::new(addr, msg.msg_namelen) }
            .as_socket()
            .ok_or_else(|| io::Error::other("recvmsg returned a non-IP source"))?;
        let (mut dst, mut ifindex, mut ttl, mut extension_headers) = (None, 0u32, 0u8, false);
        // SAFETY: CMSG_* walk the control buffer the kernel filled, within
        // msg_controllen; each data pointer is read with its cmsg's type.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                let data = libc::CMSG_DATA(cmsg);
                match ((*cmsg).cmsg_level, (*cmsg).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TTL) => {
                        ttl = std::ptr::read_unaligned(data.cast::<i32>()) as u8
                    }
                    (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                        let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                        dst = Some(IpAddr::from(
                            u32::from_be(info.ipi_addr.s_addr).to_be_bytes(),
                        ));
                        ifindex = info.ipi_ifindex as u32;
                    }
                    (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT) => {
                        ttl = std::ptr::read_unaligned(data.cast::<i32>()) as u8
                    }
                    (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                        let info = std::ptr::read_unaligned(data.cast::<libc::in6_pktinfo>());
                        dst = Some(IpAddr::from(info.ipi6_addr.s6_addr));
                        ifindex = info.ipi6_ifindex;
                    }
                    (
                        libc::IPPROTO_IPV6,
                        libc::IPV6_HOPOPTS | libc::IPV6_DSTOPTS | libc::IPV6_RTHDR,
                    ) => extension_headers = true,
                    _ => {}
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        let dst = dst.ok_or_else(|| {
            io::Error::other("no destination address (IP_PKTINFO) on a received packet")
        })?;
        Ok(Some(Received {
            len: n as usize,
            src,
            dst,
            ifindex,
            ttl,
            extension_headers,
        }))
    }
}

/// A session's transmit socket. Deliberately not connected: a connected
/// UDP socket turns the ICMP port-unreachable of a dead peer into an error
/// on the next send, and that send (our Down packet) is then never
/// transmitted.
pub struct TxSocket {
    socket: Socket,
    peer: SockAddr,
    pub source_port: u16,
    /// Set once SO_TXTIME is on: the lead of an urgent packet, ns.
    txtime_lead_ns: Option<u64>,
}

/// `clock`'s time in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl TxSocket {
    /// Binds `local` and the first free port of [`SOURCE_PORTS`] not in
    /// `taken`, optionally to `interface`; sends go to `peer`:`port`.
    pub fn open(
        local: IpAddr,
        peer: IpAddr,
        port: u16,
        interface: Option<&str>,
        taken: &dyn Fn(u16) -> bool,
    ) -> io::Result<Self> {
        Self::open_sharing(local, peer, port, interface, taken, false)
    }

    /// [`TxSocket::open`]; `share_port`: with SO_REUSEPORT, so that a
    /// session handed over binds the source port its predecessor still
    /// holds until it exits (RFC 5881 section 4: one source port for all
    /// of a session's packets).
    pub fn open_sharing(
        local: IpAddr,
        peer: IpAddr,
        port: u16,
        interface: Option<&str>,
        taken: &dyn Fn(u16) -> bool,
        share_port: bool,
    ) -> io::Result<Self> {
        let domain = if local.is_ipv6() {
            Domain::IPV6
        } else {
            Domain::IPV4
        };
        let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        if local.is_ipv6() {
            socket.set_unicast_hops_v6(TTL)?;
            socket.set_tclass_v6(TOS_CS6)?;
        } else {
            socket.set_ttl(TTL)?;
            socket.set_tos(TOS_CS6)?;
        }
        if let Some(name) = interface {
            socket.bind_device(Some(name.as_bytes()))?;
        }
        if share_port {
            socket.set_reuse_port(true)?;
        }
        let mut bound = None;
        for source_port in SOURCE_PORTS.filter(|p| !taken(*p)) {
            match socket.bind(&SocketAddr::new(local, source_port).into()) {
                Ok(()) => {
                    bound = Some(source_port);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
                Err(e) => return Err(e),
            }
        }
        let source_port = bound.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrInUse,
                "every BFD source port (60000-65535) is in use",
            )
        })?;
        socket.set_nonblocking(true)?;
        Ok(Self {
            socket,
            peer: SocketAddr::new(peer, port).into(),
            source_port,
            txtime_lead_ns: None,
        })
    }

    /// Lets a successor process bind this socket's source port beside it
    /// (SO_REUSEPORT), for a take-over.
    pub fn share_port(&self) -> io::Result<()> {
        self.socket.set_reuse_port(true)
    }

    /// Sends at once. On a SO_TXTIME socket "at once" is the earliest
    /// departure etf accepts, the lead given to [`TxSocket::enable_txtime`]
    /// (etf drops a packet without a transmit time).
    /// A second descriptor of this socket and its peer, for a thread that
    /// sends on the session's behalf (the Down responder).
    pub fn duplicate(&self) -> io::Result<(Socket, SockAddr)> {
        Ok((self.socket.try_clone()?, self.peer.clone()))
    }

    pub fn send(&self, bytes: &[u8]) -> io::Result<usize> {
        match self.txtime_lead_ns {
            Some(lead) => self.send_at(bytes, clock_ns(libc::CLOCK_TAI) + lead),
            None => self.socket.send_to(bytes, &self.peer),
        }
    }

    /// Puts this socket's packets in traffic-control class `classid`
    /// (SO_PRIORITY; htb classifies by it directly).
    pub fn set_priority(&self, classid: u32) -> io::Result<()> {
        setsockopt_int(
            self.fd(),
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            classid as i32,
        )
    }

    /// Enables SO_TXTIME on CLOCK_TAI (the etf qdisc's clock), errors
    /// reported on the socket's error queue. `urgent_lead_ns`: how far
    /// ahead [`TxSocket::send`] times a packet that must leave at once.
    pub fn enable_txtime(&mut self, urgent_lead_ns: u64) -> io::Result<()> {
        let config = libc::sock_txtime {
            clockid: libc::CLOCK_TAI,
            flags: libc::SOF_TXTIME_REPORT_ERRORS,
        };
        // SAFETY: passes a pointer to a live sock_txtime and its size.
        let rc = unsafe {
            libc::setsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_TXTIME,
                (&config as *const libc::sock_txtime).cast(),
                std::mem::size_of::<libc::sock_txtime>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.txtime_lead_ns = Some(urgent_lead_ns);
        Ok(())
    }

    /// Sends `bytes` to leave at `tai_ns` (CLOCK_TAI): an SCM_TXTIME control
    /// message, honoured by the etf qdisc. Needs [`TxSocket::enable_txtime`].
    pub fn send_at(&self, bytes: &[u8], tai_ns: u64) -> io::Result<usize> {
        const SPACE: usize = 32; // CMSG_SPACE(8) on 64-bit Linux is 24.
        #[repr(C, align(8))]
        struct Control([u8; SPACE]);
        let mut control = Control([0; SPACE]);
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: a zeroed msghdr is valid; every pointer set below refers
        // to a live local (address, iovec, control buffer) for the duration
        // of sendmsg; CMSG_* stay within the control buffer sized by
        // CMSG_SPACE.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = self.peer.as_ptr() as *mut libc::c_void;
            msg.msg_namelen = self.peer.len();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.0.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(8) as usize;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_TXTIME;
            (*cmsg).cmsg_len = libc::CMSG_LEN(8) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u64>(), tai_ns);
            let n = libc::sendmsg(self.fd(), &msg, 0);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(n as usize)
        }
    }

    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}
