//! Frames and capture files built byte by byte for the analyzer's tests
//! (one copy, shared by every test file that writes captures).
#![allow(dead_code)] // each test file uses its part

pub const MS: i64 = 1_000_000;
pub const T0: i64 = 1_764_480_000 * 1_000_000_000;

/// Ethernet + IPv4 or IPv6 + UDP around a payload.
pub fn frame(src: &str, dst: &str, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    let mut udp = Vec::new();
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    match (
        src.parse::<std::net::IpAddr>().unwrap(),
        dst.parse::<std::net::IpAddr>().unwrap(),
    ) {
        (std::net::IpAddr::V4(s), std::net::IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0xc0]);
            f.extend_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0, 0x40, 0, 255, 17, 0, 0]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        (std::net::IpAddr::V6(s), std::net::IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(udp.len() as u16).to_be_bytes());
            f.extend_from_slice(&[17, 255]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => panic!("mixed families"),
    }
    f.extend_from_slice(&udp);
    f
}

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= b.abs() * 0.002 + 1e-6
}

/// A pcapng file: one interface per `(if_tsresol, if_tsoffset)`, then
/// each packet as `(interface, timestamp units, frame)`.
pub fn pcapng(interfaces: &[(u8, Option<i64>)], packets: &[(u32, u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let block = |out: &mut Vec<u8>, kind: u32, body: &[u8]| {
        let len = (12 + body.len().div_ceil(4) * 4) as u32;
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(body);
        out.resize(out.len() + (4 - body.len() % 4) % 4, 0);
        out.extend_from_slice(&len.to_le_bytes());
    };
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    block(&mut out, 0x0a0d_0d0a, &shb);
    for &(tsresol, tsoffset) in interfaces {
        // Ethernet, no snap length; options if_tsresol (9), if_tsoffset
        // (14), end of options.
        let mut idb = vec![1, 0, 0, 0, 0, 0, 0, 0];
        idb.extend_from_slice(&[9, 0, 1, 0, tsresol, 0, 0, 0]);
        if let Some(offset) = tsoffset {
            idb.extend_from_slice(&[14, 0, 8, 0]);
            idb.extend_from_slice(&offset.to_le_bytes());
        }
        idb.extend_from_slice(&[0, 0, 0, 0]);
        block(&mut out, 1, &idb);
    }
    for (interface, units, data) in packets {
        let mut epb = Vec::new();
        epb.extend_from_slice(&interface.to_le_bytes());
        epb.extend_from_slice(&((units >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(*units as u32).to_le_bytes());
        epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(data.len() as u32).to_le_bytes());
        epb.extend_from_slice(data);
        epb.resize(20 + data.len().div_ceil(4) * 4, 0);
        block(&mut out, 6, &epb);
    }
    out
}
