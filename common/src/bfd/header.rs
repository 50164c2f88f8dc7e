//! The BFD Control packet's mandatory section (RFC 5880 section 4.1),
//! byte by byte: the one definition the XDP program and the engine's codec
//! read and write it by. The capture analyzer and the conformance prober
//! decode it on their own, on purpose: independent parsers check each
//! other.
//!
//! ```text
//!  0: Vers(3) Diag(5) | 1: Sta(2) P F C A D M | 2: Detect Mult | 3: Length
//!  4: My Discriminator          8: Your Discriminator
//! 12: Desired Min TX Interval  16: Required Min RX Interval
//! 20: Required Min Echo RX Interval   24: the authentication section
//! ```

/// Length of the mandatory section.
pub const HEADER_LEN: usize = 24;
/// The protocol version (section 4.1): the top three bits of byte 0.
pub const VERSION: u8 = 1;
pub const VERSION_SHIFT: u8 = 5;
/// The Diag field: the low five bits of byte 0.
pub const DIAG_MASK: u8 = 0x1f;
/// The state: the top two bits of byte 1, above the flag bits.
pub const STATE_SHIFT: u8 = 6;

/// Where each field starts; the 32-bit ones are four bytes in network
/// order.
pub mod field {
    pub const VERS_DIAG: usize = 0;
    pub const STATE_FLAGS: usize = 1;
    pub const DETECT_MULT: usize = 2;
    pub const LENGTH: usize = 3;
    pub const MY_DISCR: usize = 4;
    pub const YOUR_DISCR: usize = 8;
    pub const DESIRED_MIN_TX: usize = 12;
    pub const REQUIRED_MIN_RX: usize = 16;
    pub const REQUIRED_MIN_ECHO_RX: usize = 20;
    /// The authentication section, present with the A bit.
    pub const AUTH: usize = 24;
}

/// The flag bits of byte 1, below the state.
pub mod flag {
    /// Poll (P): a Poll Sequence is in progress (6.5).
    pub const POLL: u8 = 0x20;
    /// Final (F): the answer to a Poll.
    pub const FINAL: u8 = 0x10;
    /// Control Plane Independent (C).
    pub const CPI: u8 = 0x08;
    /// Authentication Present (A).
    pub const AUTH: u8 = 0x04;
    /// Demand (D): the sender asks for no periodic packets (6.6).
    pub const DEMAND: u8 = 0x02;
    /// Multipoint (M): reserved, must be zero (6.8.6).
    pub const MULTIPOINT: u8 = 0x01;
}
