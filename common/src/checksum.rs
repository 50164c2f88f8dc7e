//! The RFC 1071 Internet checksum, for the frames userspace builds (the
//! engine's echoes, the tests' crafted frames) and checks. The BPF side
//! sums fixed-size headers with its own verifier-friendly loop.

/// The one's-complement sum of `bytes` (an odd tail padded with zero),
/// folded: 0xffff over data that carries its own valid checksum; its
/// complement is the checksum to write.
pub fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_with_its_checksum_sums_to_all_ones() {
        // RFC 1071's example IPv4 header, checksum 0xb861 filled in.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ones_complement_sum(&header), 0xffff);
        assert_eq!(ones_complement_sum(&[0x01]), 0x0100, "odd tail padded");
    }
}
