//! BFD control packets (RFC 5880 section 4.1) in the style of smoltcp's
//! `wire` module: a zero-copy [`Packet`] view over bytes with the field
//! ranges in a private `field` module, and a typed [`Repr`] whose `parse`
//! enforces the session-independent discard rules of section 6.8.6 and
//! whose `emit` writes into a caller's buffer.
//!
//! Independent of the capture analyzer's decoder on purpose: the two
//! parsers check each other.

use linecard_api::control::{Diagnostic, State};
use linecard_api::AuthType;
use linecard_common::bfd::header::{field, flag, HEADER_LEN, STATE_SHIFT, VERSION, VERSION_SHIFT};

use linecard_common::bfd::DropReason;

#[cfg(test)]
mod tests;

/// The 32-bit fields are four bytes from where they start.
const WORD: usize = 4;

/// Longest control packet this codec emits: the mandatory section and the
/// longest authentication section (keyed SHA1, 28 bytes).
pub const MAX_LEN: usize = HEADER_LEN + 28;
/// Where the Auth Key/Digest field starts in a keyed packet: after Auth
/// Type, Auth Len, Auth Key ID, Reserved and Sequence Number (4.3, 4.4).
pub const KEYED_DIGEST_AT: usize = field::AUTH + 8;

/// The authentication section.
///
/// Parsed from the wire, `bytes` holds what was received (password, digest
/// or hash), unverified: verification is the session's, with its keys. To
/// emit, `bytes` holds the password or the key, zero-padded, which is
/// exactly what the keyed types' digest is computed over (6.7.3, 6.7.4):
/// [`Repr::emit`] then overwrites it with the digest.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AuthSection {
    pub auth_type: AuthType,
    /// How a keyed digest is computed (emit only: the wire does not say;
    /// parsed sections say [`Construction::Rfc5880`]).
    pub construction: Construction,
    pub key_id: u8,
    /// Sequence number (all types but simple password).
    pub sequence: Option<u32>,
    /// Password, key, digest or hash: `len` bytes of `bytes`.
    pub bytes: [u8; 20],
    pub len: u8,
}

impl core::fmt::Debug for AuthSection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // An outgoing section holds the password or key: never printed.
        f.debug_struct("AuthSection")
            .field("auth_type", &self.auth_type)
            .field("key_id", &self.key_id)
            .field("sequence", &self.sequence)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl AuthSection {
    /// The Auth Len field: the whole section's length.
    pub const fn wire_len(&self) -> usize {
        match self.auth_type.digest_len() {
            None => 3 + self.len as usize,
            Some(digest) => 8 + digest,
        }
    }

    /// Writes the section into `out` (at least [`AuthSection::wire_len`]
    /// bytes): the key in the digest field, as the digest is computed.
    fn emit(&self, out: &mut [u8]) {
        out[0] = self.auth_type.code();
        out[1] = self.wire_len() as u8;
        out[2] = self.key_id;
        match self.auth_type.digest_len() {
            None => out[3..3 + self.len as usize].copy_from_slice(&self.bytes[..self.len as usize]),
            Some(digest) => {
                out[3] = 0;
                out[4..8].copy_from_slice(&self.sequence.unwrap_or(0).to_be_bytes());
                out[8..8 + digest].copy_from_slice(&self.bytes[..digest]);
            }
        }
    }

    /// Parses the section at `bytes` (starting at Auth Type).
    fn parse(bytes: &[u8]) -> Result<Self, DropReason> {
        let (&kind, rest) = bytes.split_first().ok_or(DropReason::BadAuth)?;
        let &len = rest.first().ok_or(DropReason::BadAuth)?;
        let len = usize::from(len);
        if len > bytes.len() || len < 3 {
            return Err(DropReason::BadAuth);
        }
        let key_id = bytes[2];
        let (auth_type, sequence, data) = match kind {
            // Simple password: 1 to 16 bytes of password (section 4.2).
            1 if (4..=19).contains(&len) => (AuthType::SimplePassword, None, &bytes[3..len]),
            // MD5: length 24, 4 reserved... sequence at 4, 16-byte digest (section 4.3).
            2 | 3 if len == 24 => (
                if kind == 2 {
                    AuthType::KeyedMd5
                } else {
                    AuthType::MeticulousKeyedMd5
                },
                Some(u32::from_be_bytes(
                    bytes[4..8].try_into().expect("a 4-byte slice"),
                )),
                &bytes[8..24],
            ),
            // SHA1: length 28, sequence at 4, 20-byte hash (section 4.4).
            4 | 5 if len == 28 => (
                if kind == 4 {
                    AuthType::KeyedSha1
                } else {
                    AuthType::MeticulousKeyedSha1
                },
                Some(u32::from_be_bytes(
                    bytes[4..8].try_into().expect("a 4-byte slice"),
                )),
                &bytes[8..28],
            ),
            _ => return Err(DropReason::BadAuth),
        };
        let mut out = [0u8; 20];
        out[..data.len()].copy_from_slice(data);
        Ok(Self {
            auth_type,
            construction: Construction::Rfc5880,
            key_id,
            sequence,
            bytes: out,
            len: data.len() as u8,
        })
    }
}

/// A read/write view of a BFD control packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; accessors may panic on short input.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps untrusted input: the mandatory section must be present and the
    /// Length field must be sane, so that no accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    pub fn check_len(&self) -> Result<(), DropReason> {
        let data = self.buffer.as_ref();
        if data.len() < HEADER_LEN {
            return Err(DropReason::Truncated);
        }
        // Section 6.8.6: Length below the minimum (24, or 26 with the A
        // bit) or beyond the payload.
        let length = usize::from(self.length());
        let minimum = if self.auth_present() {
            HEADER_LEN + 2
        } else {
            HEADER_LEN
        };
        if length < minimum || length > data.len() {
            return Err(DropReason::BadLength);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn byte(&self, at: usize) -> u8 {
        self.buffer.as_ref()[at]
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes(
            self.buffer.as_ref()[at..at + WORD]
                .try_into()
                .expect("a 4-byte range"),
        )
    }

    pub fn version(&self) -> u8 {
        self.byte(field::VERS_DIAG) >> VERSION_SHIFT
    }
    pub fn diag(&self) -> Diagnostic {
        Diagnostic::from_bits(self.byte(field::VERS_DIAG))
    }
    pub fn state(&self) -> State {
        State::from_bits(self.byte(field::STATE_FLAGS) >> STATE_SHIFT)
    }
    pub fn poll(&self) -> bool {
        self.byte(field::STATE_FLAGS) & flag::POLL != 0
    }
    pub fn final_(&self) -> bool {
        self.byte(field::STATE_FLAGS) & flag::FINAL != 0
    }
    pub fn control_plane_independent(&self) -> bool {
        self.byte(field::STATE_FLAGS) & flag::CPI != 0
    }
    pub fn auth_present(&self) -> bool {
        self.byte(field::STATE_FLAGS) & flag::AUTH != 0
    }
    pub fn demand(&self) -> bool {
        self.byte(field::STATE_FLAGS) & flag::DEMAND != 0
    }
    pub fn multipoint(&self) -> bool {
        self.byte(field::STATE_FLAGS) & flag::MULTIPOINT != 0
    }
    pub fn detect_mult(&self) -> u8 {
        self.byte(field::DETECT_MULT)
    }
    pub fn length(&self) -> u8 {
        self.byte(field::LENGTH)
    }
    pub fn my_discr(&self) -> u32 {
        self.u32_at(field::MY_DISCR)
    }
    pub fn your_discr(&self) -> u32 {
        self.u32_at(field::YOUR_DISCR)
    }
    /// Microseconds.
    pub fn desired_min_tx(&self) -> u32 {
        self.u32_at(field::DESIRED_MIN_TX)
    }
    /// Microseconds.
    pub fn required_min_rx(&self) -> u32 {
        self.u32_at(field::REQUIRED_MIN_RX)
    }
    /// Microseconds.
    pub fn required_min_echo_rx(&self) -> u32 {
        self.u32_at(field::REQUIRED_MIN_ECHO_RX)
    }
    /// The authentication section, within Length (call after `check_len`).
    pub fn auth_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[field::AUTH..usize::from(self.length())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_byte(&mut self, at: usize, value: u8) {
        self.buffer.as_mut()[at] = value;
    }
    fn set_u32(&mut self, at: usize, value: u32) {
        self.buffer.as_mut()[at..at + WORD].copy_from_slice(&value.to_be_bytes());
    }
    pub fn set_version_diag(&mut self, version: u8, diag: Diagnostic) {
        self.set_byte(field::VERS_DIAG, (version << VERSION_SHIFT) | diag.bits());
    }
    pub fn set_state_flags(&mut self, state: State, flags: u8) {
        self.set_byte(
            field::STATE_FLAGS,
            ((state as u8) << STATE_SHIFT) | (flags & 0x3f),
        );
    }
    pub fn set_detect_mult(&mut self, value: u8) {
        self.set_byte(field::DETECT_MULT, value);
    }
    pub fn set_length(&mut self, value: u8) {
        self.set_byte(field::LENGTH, value);
    }
    pub fn set_my_discr(&mut self, value: u32) {
        self.set_u32(field::MY_DISCR, value);
    }
    pub fn set_your_discr(&mut self, value: u32) {
        self.set_u32(field::YOUR_DISCR, value);
    }
    pub fn set_desired_min_tx(&mut self, value: u32) {
        self.set_u32(field::DESIRED_MIN_TX, value);
    }
    pub fn set_required_min_rx(&mut self, value: u32) {
        self.set_u32(field::REQUIRED_MIN_RX, value);
    }
    pub fn set_required_min_echo_rx(&mut self, value: u32) {
        self.set_u32(field::REQUIRED_MIN_ECHO_RX, value);
    }
}

/// A control packet as a typed value. Intervals in microseconds, as on the
/// wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub diag: Diagnostic,
    pub state: State,
    pub poll: bool,
    pub final_: bool,
    pub control_plane_independent: bool,
    pub demand: bool,
    pub detect_mult: u8,
    pub my_discr: u32,
    pub your_discr: u32,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub required_min_echo_rx_us: u32,
    pub auth: Option<AuthSection>,
}

impl Repr {
    /// Parses with the discard rules of section 6.8.6 that need no session:
    /// version, length, multiplier, multipoint, my discriminator, and your
    /// discriminator zero outside Down/AdminDown.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self, DropReason> {
        packet.check_len()?;
        if packet.version() != VERSION {
            return Err(DropReason::BadVersion);
        }
        if packet.detect_mult() == 0 {
            return Err(DropReason::ZeroMultiplier);
        }
        if packet.multipoint() {
            return Err(DropReason::Multipoint);
        }
        if packet.my_discr() == 0 {
            return Err(DropReason::ZeroMyDiscriminator);
        }
        let state = packet.state();
        if packet.your_discr() == 0 && !matches!(state, State::Down | State::AdminDown) {
            return Err(DropReason::ZeroYourDiscriminator);
        }
        let auth = if packet.auth_present() {
            Some(AuthSection::parse(packet.auth_bytes())?)
        } else {
            None
        };
        Ok(Self {
            diag: packet.diag(),
            state,
            poll: packet.poll(),
            final_: packet.final_(),
            control_plane_independent: packet.control_plane_independent(),
            demand: packet.demand(),
            detect_mult: packet.detect_mult(),
            my_discr: packet.my_discr(),
            your_discr: packet.your_discr(),
            desired_min_tx_us: packet.desired_min_tx(),
            required_min_rx_us: packet.required_min_rx(),
            required_min_echo_rx_us: packet.required_min_echo_rx(),
            auth,
        })
    }

    /// Parses untrusted bytes.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Self, DropReason> {
        Self::parse(&Packet::new_checked(bytes)?)
    }

    /// Bytes `emit` writes: the Length field.
    pub const fn buffer_len(&self) -> usize {
        match &self.auth {
            Some(auth) => HEADER_LEN + auth.wire_len(),
            None => HEADER_LEN,
        }
    }

    /// Writes the packet into `packet` (at least [`Repr::buffer_len`]
    /// bytes): the mandatory section, and the authentication section with
    /// the A bit, a keyed type's digest computed over the whole packet with
    /// the key in its place (6.7.3, 6.7.4).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version_diag(VERSION, self.diag);
        let flags = (if self.poll { flag::POLL } else { 0 })
            | (if self.auth.is_some() { flag::AUTH } else { 0 })
            | (if self.final_ { flag::FINAL } else { 0 })
            | (if self.control_plane_independent {
                flag::CPI
            } else {
                0
            })
            | (if self.demand { flag::DEMAND } else { 0 });
        packet.set_state_flags(self.state, flags);
        packet.set_detect_mult(self.detect_mult);
        packet.set_length(self.buffer_len() as u8);
        packet.set_my_discr(self.my_discr);
        packet.set_your_discr(self.your_discr);
        packet.set_desired_min_tx(self.desired_min_tx_us);
        packet.set_required_min_rx(self.required_min_rx_us);
        packet.set_required_min_echo_rx(self.required_min_echo_rx_us);
        if let Some(auth) = &self.auth {
            let len = self.buffer_len();
            let bytes = &mut packet.buffer.as_mut()[..len];
            auth.emit(&mut bytes[field::AUTH..]);
            if let Some(digest_len) = auth.auth_type.digest_len() {
                let digest = digest_of(auth.auth_type, auth.construction, bytes);
                bytes[KEYED_DIGEST_AT..KEYED_DIGEST_AT + digest_len]
                    .copy_from_slice(&digest[..digest_len]);
            }
        }
    }

    /// Emits into a fresh buffer.
    pub fn to_bytes(&self) -> Encoded {
        let mut encoded = Encoded {
            bytes: [0u8; MAX_LEN],
            len: self.buffer_len(),
        };
        self.emit(&mut Packet::new_unchecked(&mut encoded.bytes[..]));
        encoded
    }

    /// The mandatory section as emitted (the fast path's reply template):
    /// with authentication, its A bit and Length count a section the fast
    /// path writes itself.
    pub fn header_bytes(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0u8; HEADER_LEN];
        bytes.copy_from_slice(&self.to_bytes()[..HEADER_LEN]);
        bytes
    }
}

/// An emitted packet: `len` bytes (the Length field) of a fixed buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Encoded {
    bytes: [u8; MAX_LEN],
    len: usize,
}

impl core::ops::Deref for Encoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// How a keyed type's digest is computed. The wire carries the same Auth
/// Type either way: a session names its construction in its
/// configuration, never guessed from what arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Construction {
    /// RFC 5880 6.7.3-6.7.4: MD5 or SHA1 over the packet with the key,
    /// zero-padded, in the Auth Key/Digest field.
    #[default]
    Rfc5880,
    /// FRR bfdd's keyed SHA1 (bfd_packet.c, `ptm_bfd_snd` and
    /// `bfd_check_auth`, FRR 10.x): HMAC-SHA1 keyed with the key string,
    /// over the packet with the 20-byte field zeroed (FRR issue 23274:
    /// not interoperable with 6.7.4). SHA1 types only.
    FrrHmacSha1,
}

/// A keyed type's digest of `packet` (whole, the key zero-padded in the
/// Auth Key/Digest field, as [`AuthSection::emit`] leaves it) by
/// `construction`, in the first 16 or 20 bytes.
pub fn digest_of(auth_type: AuthType, construction: Construction, packet: &[u8]) -> [u8; 20] {
    match construction {
        Construction::Rfc5880 => keyed_digest(auth_type, packet),
        Construction::FrrHmacSha1 => frr_hmac_sha1(packet),
    }
}

/// FRR's construction: the key (the field's bytes; HMAC pads a short key
/// with zeros to its block, so the key string and the key zero-padded to
/// 20 bytes are the same HMAC key) taken out, the field zeroed, then
/// HMAC-SHA1 over the whole packet.
fn frr_hmac_sha1(packet: &[u8]) -> [u8; 20] {
    use hmac::Mac as _;
    let mut out = [0u8; 20];
    let Some(field) = packet.get(KEYED_DIGEST_AT..KEYED_DIGEST_AT + 20) else {
        return out;
    };
    if packet.len() > MAX_LEN {
        // Longer than any keyed SHA1 packet: no digest matches.
        return out;
    }
    let mut mac =
        hmac::Hmac::<sha1::Sha1>::new_from_slice(field).expect("HMAC takes a key of any length");
    let mut zeroed = [0u8; MAX_LEN];
    zeroed[..packet.len()].copy_from_slice(packet);
    zeroed[KEYED_DIGEST_AT..KEYED_DIGEST_AT + 20].fill(0);
    mac.update(&zeroed[..packet.len()]);
    out.copy_from_slice(&mac.finalize().into_bytes());
    out
}

/// The MD5 or SHA1 digest of `packet` (whole, the key in the digest
/// field), in the first 16 or 20 bytes: what a keyed type's Auth
/// Key/Digest field carries (6.7.3, 6.7.4).
pub fn keyed_digest(auth_type: AuthType, packet: &[u8]) -> [u8; 20] {
    use md5::Digest as _;
    let mut out = [0u8; 20];
    match auth_type.digest_len() {
        Some(16) => out[..16].copy_from_slice(&md5::Md5::digest(packet)),
        Some(_) => out.copy_from_slice(&sha1::Sha1::digest(packet)),
        None => {}
    }
    out
}
