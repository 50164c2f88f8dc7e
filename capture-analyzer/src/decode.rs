//! Frame -> IP -> UDP -> BFD, written for the analyzer alone.
//!
//! Deliberately independent of the engine's codec: if both decoded BFD with
//! the same code, a decoding bug would be invisible to the measurement.

use crate::reader::LinkType;

pub const PORT_SINGLE_HOP: u16 = 3784;
pub const PORT_ECHO: u16 = 3785;
pub const PORT_MULTI_HOP: u16 = 4784;

/// Which BFD service a packet belongs to, by UDP destination port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    SingleHop,
    MultiHop,
    Echo,
}

/// BFD session state (RFC 5880 section 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    AdminDown,
    Down,
    Init,
    Up,
}

impl State {
    fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => Self::AdminDown,
            1 => Self::Down,
            2 => Self::Init,
            _ => Self::Up,
        }
    }
}

/// The fields of a BFD control packet the analysis uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Control {
    pub diag: u8,
    pub state: State,
    pub poll: bool,
    pub final_: bool,
    /// D: the sender asks the other side to stop its periodic packets
    /// (Demand mode, RFC 5880 6.6).
    pub demand: bool,
    pub detect_mult: u8,
    pub my_discr: u32,
    pub your_discr: u32,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    /// The authentication section's header, as sent (never verified here:
    /// the analyzer holds no keys).
    pub auth: Option<AuthSeen>,
}

/// What the wire shows of a packet's authentication (RFC 5880 4.1-4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthSeen {
    /// Auth Type: 1 simple password, 2/3 (meticulous) keyed MD5, 4/5
    /// (meticulous) keyed SHA1.
    pub auth_type: u8,
    pub key_id: u8,
    /// The keyed types' Sequence Number.
    pub sequence: Option<u32>,
}

/// A UDP datagram on a BFD port, with its addresses (IPv4 as v4-mapped).
#[derive(Clone, Copy, Debug)]
pub struct Datagram<'a> {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub ipv6: bool,
    pub src_port: u16,
    pub dst_port: u16,
    pub ttl: u8,
    pub service: Service,
    pub payload: &'a [u8],
}

/// Why a frame on a BFD port was refused. Each indexes a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Malformed {
    /// Frame shorter than its headers claim (snapped or cut).
    TruncatedFrame,
    /// BFD payload under 24 bytes.
    TooShort,
    BadVersion,
    /// Length field under 24 or beyond the payload.
    BadLength,
    ZeroMultiplier,
    ZeroMyDiscriminator,
}

pub const MALFORMED_REASONS: [Malformed; 6] = [
    Malformed::TruncatedFrame,
    Malformed::TooShort,
    Malformed::BadVersion,
    Malformed::BadLength,
    Malformed::ZeroMultiplier,
    Malformed::ZeroMyDiscriminator,
];

impl Malformed {
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Outcome of decoding one frame.
#[derive(Debug)]
pub enum Decoded<'a> {
    /// Not UDP to a BFD port (or a fragment, or behind an IPv6 extension header).
    NotBfd,
    Bfd(Datagram<'a>),
    Malformed(Malformed),
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("a 4-byte slice"))
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// Finds the network-layer header: (ethertype, offset).
fn network_layer(link: LinkType, frame: &[u8]) -> Option<(u16, usize)> {
    match link {
        LinkType::Ethernet => {
            let mut at = 12;
            let mut ethertype = u16_at(frame, at)?;
            // Up to two VLAN tags (802.1Q, 802.1ad).
            for _ in 0..2 {
                if ethertype == 0x8100 || ethertype == 0x88a8 {
                    at += 4;
                    ethertype = u16_at(frame, at)?;
                }
            }
            Some((ethertype, at + 2))
        }
        LinkType::LinuxSll => Some((u16_at(frame, 14)?, 16)),
        LinkType::LinuxSll2 => Some((u16_at(frame, 0)?, 20)),
        LinkType::RawIp => match frame.first()? >> 4 {
            4 => Some((ETHERTYPE_IPV4, 0)),
            6 => Some((ETHERTYPE_IPV6, 0)),
            _ => None,
        },
        LinkType::Other(_) => None,
    }
}

pub fn decode(link: LinkType, frame: &[u8]) -> Decoded<'_> {
    let Some((ethertype, at)) = network_layer(link, frame) else {
        return Decoded::NotBfd;
    };
    let ip = &frame[at.min(frame.len())..];
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    let (udp_at, ttl, ipv6, ip_end) = match ethertype {
        ETHERTYPE_IPV4 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 || ip[9] != 17 {
                return Decoded::NotBfd;
            }
            // Fragments never carry a whole BFD packet we could time.
            if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
                return Decoded::NotBfd;
            }
            src[10] = 0xff;
            src[11] = 0xff;
            dst[10] = 0xff;
            dst[11] = 0xff;
            src[12..].copy_from_slice(&ip[12..16]);
            dst[12..].copy_from_slice(&ip[16..20]);
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            (usize::from(ip[0] & 0x0f) * 4, ip[8], false, total)
        }
        ETHERTYPE_IPV6 => {
            // No extension-header walking: next header must be UDP.
            if ip.len() < 40 || ip[0] >> 4 != 6 || ip[6] != 17 {
                return Decoded::NotBfd;
            }
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
            (
                40,
                ip[7],
                true,
                40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])),
            )
        }
        _ => return Decoded::NotBfd,
    };
    let Some(udp) = ip.get(udp_at..udp_at + 8) else {
        return Decoded::NotBfd;
    };
    let src_port = u16::from_be_bytes([udp[0], udp[1]]);
    let dst_port = u16::from_be_bytes([udp[2], udp[3]]);
    let service = match dst_port {
        PORT_SINGLE_HOP => Service::SingleHop,
        PORT_MULTI_HOP => Service::MultiHop,
        PORT_ECHO => Service::Echo,
        _ => return Decoded::NotBfd,
    };
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    let payload_end = (udp_at + udp_len).min(ip_end);
    if udp_len < 8 || payload_end < udp_at + 8 || payload_end > ip.len() {
        return Decoded::Malformed(Malformed::TruncatedFrame);
    }
    let payload = &ip[udp_at + 8..payload_end];
    Decoded::Bfd(Datagram {
        src,
        dst,
        ipv6,
        src_port,
        dst_port,
        ttl,
        service,
        payload,
    })
}

/// Decodes a control packet with the checks of RFC 5880 section 6.8.6 that
/// do not need session state.
pub fn control(payload: &[u8]) -> Result<Control, Malformed> {
    if payload.len() < 24 {
        return Err(Malformed::TooShort);
    }
    if payload[0] >> 5 != 1 {
        return Err(Malformed::BadVersion);
    }
    let length = usize::from(payload[3]);
    if length < 24 || length > payload.len() {
        return Err(Malformed::BadLength);
    }
    if payload[2] == 0 {
        return Err(Malformed::ZeroMultiplier);
    }
    let my_discr = u32_at(payload, 4);
    if my_discr == 0 {
        return Err(Malformed::ZeroMyDiscriminator);
    }
    Ok(Control {
        diag: payload[0] & 0x1f,
        state: State::from_bits(payload[1] >> 6),
        poll: payload[1] & 0x20 != 0,
        final_: payload[1] & 0x10 != 0,
        demand: payload[1] & 0x02 != 0,
        detect_mult: payload[2],
        my_discr,
        your_discr: u32_at(payload, 8),
        desired_min_tx_us: u32_at(payload, 12),
        required_min_rx_us: u32_at(payload, 16),
        auth: auth_seen(&payload[..length], payload[1] & 0x04 != 0),
    })
}

/// The authentication section's header, when the A bit is set and the
/// packet's Length holds it.
fn auth_seen(packet: &[u8], a_bit: bool) -> Option<AuthSeen> {
    if !a_bit || packet.len() < 27 {
        return None;
    }
    let auth_type = packet[24];
    Some(AuthSeen {
        auth_type,
        key_id: packet[26],
        sequence: ((2..=5).contains(&auth_type) && packet.len() >= 32).then(|| u32_at(packet, 28)),
    })
}

/// Formats an address as IPv4 when v4-mapped.
pub fn format_addr(addr: &[u8; 16]) -> String {
    let v6 = std::net::Ipv6Addr::from(*addr);
    match v6.to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => v6.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5880 control packet: Up, P set, mult 3, discrs 1/2, 10 ms timers.
    const GOLDEN: [u8; 24] = [
        0x20, 0xe0, 0x03, 0x18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0x27, 0x10, 0, 0, 0x27, 0x10, 0, 0,
        0, 0,
    ];

    #[test]
    fn golden_control_packet_decodes() {
        let c = control(&GOLDEN).unwrap();
        assert_eq!(c.state, State::Up);
        assert!(c.poll && !c.final_);
        assert_eq!((c.detect_mult, c.my_discr, c.your_discr), (3, 1, 2));
        assert_eq!(
            (c.desired_min_tx_us, c.required_min_rx_us),
            (10_000, 10_000)
        );
    }

    #[test]
    fn discard_rules_name_their_reason() {
        assert_eq!(control(&GOLDEN[..23]), Err(Malformed::TooShort));
        let mut bad = GOLDEN;
        bad[0] = 0x40;
        assert_eq!(control(&bad), Err(Malformed::BadVersion));
        let mut bad = GOLDEN;
        bad[3] = 30;
        assert_eq!(control(&bad), Err(Malformed::BadLength));
        let mut bad = GOLDEN;
        bad[2] = 0;
        assert_eq!(control(&bad), Err(Malformed::ZeroMultiplier));
        let mut bad = GOLDEN;
        bad[7] = 0;
        assert_eq!(control(&bad), Err(Malformed::ZeroMyDiscriminator));
    }

    #[test]
    fn garbage_frames_never_panic() {
        for len in 0..80 {
            let frame: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            for link in [
                LinkType::Ethernet,
                LinkType::LinuxSll,
                LinkType::LinuxSll2,
                LinkType::RawIp,
            ] {
                let _ = decode(link, &frame);
            }
        }
    }
}
