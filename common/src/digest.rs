//! MD5 (RFC 1321) and SHA-1 (RFC 3174) of a message that fits one 64-byte
//! block, for the fast path's verification of keyed authentication (RFC
//! 5880 sections 6.7.3 and 6.7.4).
//!
//! A BFD packet with a keyed MD5 section is 48 bytes and one with a keyed
//! SHA1 section 52: with the padding byte and the 8-byte length each is a
//! single block, so one compression, no streaming state and no slices of
//! run-time length, which is what the BPF verifier can follow. Loops have
//! constant bounds and every index is masked to its array: no bounds
//! check, no panic path. Userspace's general digests (the `md-5` and
//! `sha1` crates) stay the reference; the tests below hold these to them.

/// The longest message one block holds: 64 bytes less the 0x80 byte and
/// the 8-byte bit count.
pub const MAX_SINGLE_BLOCK: usize = 55;

/// Byte `i` of the one padded block: the message, its 0x80 terminator,
/// zeros, and its length in bits in the last 8 bytes (little-endian for
/// MD5, big-endian for SHA-1). Computed per byte rather than copied into
/// a block: the fast path's stack is 512 bytes in all.
#[inline(always)]
fn padded_byte<const N: usize>(message: &[u8; N], i: usize, big_endian: bool) -> u8 {
    const { assert!(N <= MAX_SINGLE_BLOCK, "the message must fit one block") };
    if i < N {
        message[i]
    } else if i == N {
        0x80
    } else if i >= 56 {
        // A shift, not an index into the count's bytes: LLVM addresses a
        // small stack array with `|`, which the verifier refuses.
        let byte = if big_endian { 63 - i } else { i - 56 };
        ((N as u64 * 8) >> (8 * (byte & 7))) as u8
    } else {
        0
    }
}

/// Word `w` (0-15) of the padded block.
#[inline(always)]
fn word<const N: usize>(message: &[u8; N], w: usize, big_endian: bool) -> u32 {
    let b = |k: usize| padded_byte(message, 4 * w + k, big_endian);
    let bytes = [b(0), b(1), b(2), b(3)];
    if big_endian {
        u32::from_be_bytes(bytes)
    } else {
        u32::from_le_bytes(bytes)
    }
}

/// RFC 1321 section 3.4: floor(abs(sin(i + 1)) x 2^32).
const MD5_K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// RFC 1321 section 3.4: each round's four rotation amounts.
const MD5_SHIFTS: [[u32; 4]; 4] = [
    [7, 12, 17, 22],
    [5, 9, 14, 20],
    [4, 11, 16, 23],
    [6, 10, 15, 21],
];

/// MD5 of a message of at most [`MAX_SINGLE_BLOCK`] bytes.
#[inline(always)]
pub fn md5_single_block<const N: usize>(message: &[u8; N]) -> [u8; 16] {
    md5_single_block_in(message, &mut [0; 16])
}

/// [`md5_single_block`] with the caller's 16-word buffer for the block's
/// words (the fast path keeps it in a map, off its stack).
#[inline(always)]
pub fn md5_single_block_in<const N: usize>(message: &[u8; N], m: &mut [u32; 16]) -> [u8; 16] {
    let mut i = 0;
    while i < 16 {
        m[i] = word(message, i, false);
        i += 1;
    }
    let initial = [0x6745_2301u32, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    let [mut a, mut b, mut c, mut d] = initial;
    let mut step = 0;
    while step < 64 {
        let round = step / 16;
        let (f, g) = match round {
            0 => ((b & c) | (!b & d), step),
            1 => ((d & b) | (!d & c), 5 * step + 1),
            2 => (b ^ c ^ d, 3 * step + 5),
            _ => (c ^ (b | !d), 7 * step),
        };
        let sum = f
            .wrapping_add(a)
            .wrapping_add(MD5_K[step & 63])
            .wrapping_add(m[g & 15]);
        a = d;
        d = c;
        c = b;
        b = b.wrapping_add(sum.rotate_left(MD5_SHIFTS[round & 3][step & 3]));
        step += 1;
    }
    let words = [
        initial[0].wrapping_add(a),
        initial[1].wrapping_add(b),
        initial[2].wrapping_add(c),
        initial[3].wrapping_add(d),
    ];
    let mut digest = [0u8; 16];
    let mut w = 0;
    while w < 4 {
        let bytes = words[w].to_le_bytes();
        digest[4 * w] = bytes[0];
        digest[4 * w + 1] = bytes[1];
        digest[4 * w + 2] = bytes[2];
        digest[4 * w + 3] = bytes[3];
        w += 1;
    }
    digest
}

/// SHA-1 of a message of at most [`MAX_SINGLE_BLOCK`] bytes. The message
/// schedule is the 16-word ring of RFC 3174 section 6.2 (method 2): 64
/// bytes, not 320.
#[inline(always)]
pub fn sha1_single_block<const N: usize>(message: &[u8; N]) -> [u8; 20] {
    sha1_single_block_in(message, &mut [0; 16])
}

/// [`sha1_single_block`] with the caller's 16-word schedule (the fast
/// path keeps it in a map, off its stack).
#[inline(always)]
pub fn sha1_single_block_in<const N: usize>(message: &[u8; N], w: &mut [u32; 16]) -> [u8; 20] {
    let mut i = 0;
    while i < 16 {
        w[i] = word(message, i, true);
        i += 1;
    }
    let initial = [
        0x6745_2301u32,
        0xefcd_ab89,
        0x98ba_dcfe,
        0x1032_5476,
        0xc3d2_e1f0,
    ];
    let [mut a, mut b, mut c, mut d, mut e] = initial;
    let mut t = 0;
    while t < 80 {
        let s = t & 15;
        if t >= 16 {
            w[s] = (w[(s + 13) & 15] ^ w[(s + 8) & 15] ^ w[(s + 2) & 15] ^ w[s]).rotate_left(1);
        }
        let (f, k) = match t / 20 {
            0 => ((b & c) | (!b & d), 0x5a82_7999u32),
            1 => (b ^ c ^ d, 0x6ed9_eba1),
            2 => ((b & c) | (b & d) | (c & d), 0x8f1b_bcdc),
            _ => (b ^ c ^ d, 0xca62_c1d6),
        };
        let temp = a
            .rotate_left(5)
            .wrapping_add(f)
            .wrapping_add(e)
            .wrapping_add(w[s])
            .wrapping_add(k);
        e = d;
        d = c;
        c = b.rotate_left(30);
        b = a;
        a = temp;
        t += 1;
    }
    let words = [
        initial[0].wrapping_add(a),
        initial[1].wrapping_add(b),
        initial[2].wrapping_add(c),
        initial[3].wrapping_add(d),
        initial[4].wrapping_add(e),
    ];
    let mut digest = [0u8; 20];
    let mut j = 0;
    while j < 5 {
        let bytes = words[j].to_be_bytes();
        digest[4 * j] = bytes[0];
        digest[4 * j + 1] = bytes[1];
        digest[4 * j + 2] = bytes[2];
        digest[4 * j + 3] = bytes[3];
        j += 1;
    }
    digest
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use md5::Digest as _;

    fn hex(bytes: &[u8]) -> std::string::String {
        bytes.iter().map(|b| std::format!("{b:02x}")).collect()
    }

    #[test]
    fn the_rfcs_own_test_vectors() {
        // RFC 1321 appendix A.5 and RFC 3174 section 7.3 (test 1).
        assert_eq!(
            hex(&md5_single_block(b"")),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        assert_eq!(
            hex(&md5_single_block(b"abc")),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(
            hex(&md5_single_block(b"abcdefghijklmnopqrstuvwxyz")),
            "c3fcd3d76192e4007dfb496cca67e13b"
        );
        assert_eq!(
            hex(&sha1_single_block(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        // The block's edge: 55 bytes, the longest single-block message.
        let edge = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            .first_chunk::<55>()
            .unwrap();
        assert_eq!(sha1_single_block(edge)[..], sha1::Sha1::digest(edge)[..]);
    }

    /// Every byte value at every position of the BFD lengths (48 and 52)
    /// and the block's edge (55), against the general implementations.
    fn agrees<const N: usize>() {
        let mut message = [0u8; N];
        let mut x: u32 = 0x1234_5678;
        for round in 0..200 {
            for byte in message.iter_mut() {
                // xorshift: reproducible, no dependency.
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *byte = x as u8;
            }
            if round < N {
                message[round] = 0xff;
            }
            assert_eq!(
                md5_single_block(&message)[..],
                md5::Md5::digest(message)[..],
                "MD5 of {N} bytes, round {round}"
            );
            assert_eq!(
                sha1_single_block(&message)[..],
                sha1::Sha1::digest(message)[..],
                "SHA-1 of {N} bytes, round {round}"
            );
        }
    }

    #[test]
    fn agree_with_the_general_digests_at_bfd_lengths() {
        agrees::<48>();
        agrees::<52>();
        agrees::<55>();
        agrees::<1>();
    }
}
