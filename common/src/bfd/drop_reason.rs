//! The one list of drop reasons (see [`DropReason`]).

/// Why a packet was refused, by the fast path or by the engine: the one
/// list the XDP program counts by (the index into the per-CPU `LC_DROPS`
/// array), the engine counts by (`ctl drops`), and the reports, the
/// injection matrix and people read by name. Dense; [`DROP_REASONS`] is
/// the count. A reason only one plane can produce is never counted by the
/// other (the kernel does not see AdminDown; the engine never sees an IP
/// option).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "user",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
pub enum DropReason {
    /// IPv4 header with options: the UDP header is not where a fixed-offset
    /// parser looks, so such packets never reach the checks below.
    IpOptions = 0,
    /// TTL (hop limit) not 255 on a single-hop packet (RFC 5881 section
    /// 5), checked before any map lookup; below the configured minimum on
    /// a multihop one.
    BadTtl = 1,
    /// Shorter than the headers and the 24-byte mandatory section.
    Truncated = 2,
    /// Version is not 1 (6.8.6).
    BadVersion = 3,
    /// Length field below the minimum or beyond the payload (6.8.6).
    BadLength = 4,
    /// Detect Mult is zero (6.8.6).
    ZeroMultiplier = 5,
    /// Multipoint bit set (6.8.6).
    Multipoint = 6,
    /// My Discriminator is zero (6.8.6).
    ZeroMyDiscriminator = 7,
    /// Your Discriminator 0 in a state other than Down or AdminDown (6.8.6).
    ZeroYourDiscriminator = 8,
    /// Your Discriminator names no session (6.8.6).
    NoSession = 9,
    /// The session exists but not between these addresses.
    AddressMismatch = 10,
    /// IP fragment on the BFD port.
    Fragment = 11,
    /// A single-hop packet naming a multihop session, or a multihop one
    /// naming a single-hop session: the GTSM relaxation of RFC 5883 is the
    /// multihop sessions' alone.
    HopMismatch = 12,
    /// The A bit where the session has no authentication, its absence
    /// where it has, or an Auth Type other than the session's (RFC 5880
    /// 6.7.1 and 6.8.6).
    AuthMismatch = 13,
    /// An Auth Key ID the session does not hold, a wrong password or a
    /// wrong digest (6.7.2-6.7.4).
    AuthFailed = 14,
    /// A Sequence Number outside bfd.RcvAuthSeq's window: a replay or a
    /// stale packet (6.7.3-6.7.4).
    AuthSequence = 15,
    /// A malformed authentication section: an Auth Len wrong for its type,
    /// or a Length other than 24 + Auth Len.
    BadAuth = 16,
    /// A frame that needed a digest computed while the session's budget
    /// was spent (`crate::verify`): refused uncomputed, in the kernel.
    VerifyBudget = 17,
    /// The session is administratively down: received packets are ignored
    /// (6.8.6). The engine's only.
    AdminDown = 18,
    /// IPv6 with extension headers: single-hop BFD carries none (RFC 5881),
    /// and the fast path, which does not walk them, passes such packets
    /// up. The engine's only.
    ExtensionHeader = 19,
}

/// How many [`DropReason`]s there are: the length of every counter array.
pub const DROP_REASONS: u32 = 20;

impl DropReason {
    /// Every reason, by index.
    pub const ALL: [DropReason; DROP_REASONS as usize] = [
        Self::IpOptions,
        Self::BadTtl,
        Self::Truncated,
        Self::BadVersion,
        Self::BadLength,
        Self::ZeroMultiplier,
        Self::Multipoint,
        Self::ZeroMyDiscriminator,
        Self::ZeroYourDiscriminator,
        Self::NoSession,
        Self::AddressMismatch,
        Self::Fragment,
        Self::HopMismatch,
        Self::AuthMismatch,
        Self::AuthFailed,
        Self::AuthSequence,
        Self::BadAuth,
        Self::VerifyBudget,
        Self::AdminDown,
        Self::ExtensionHeader,
    ];

    /// Its index in every counter array.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Its name, as the JSON, the reports and people spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::IpOptions => "ip_options",
            Self::BadTtl => "bad_ttl",
            Self::Truncated => "truncated",
            Self::BadVersion => "bad_version",
            Self::BadLength => "bad_length",
            Self::ZeroMultiplier => "zero_multiplier",
            Self::Multipoint => "multipoint",
            Self::ZeroMyDiscriminator => "zero_my_discriminator",
            Self::ZeroYourDiscriminator => "zero_your_discriminator",
            Self::NoSession => "no_session",
            Self::AddressMismatch => "address_mismatch",
            Self::Fragment => "fragment",
            Self::HopMismatch => "hop_mismatch",
            Self::AuthMismatch => "auth_mismatch",
            Self::AuthFailed => "auth_failed",
            Self::AuthSequence => "auth_sequence",
            Self::BadAuth => "bad_auth",
            Self::VerifyBudget => "verify_budget",
            Self::AdminDown => "admin_down",
            Self::ExtensionHeader => "extension_header",
        }
    }
}

/// [`DropReason`]s as the `u32` indices the XDP program returns and
/// counts by (an enum is not what a BPF `Result<_, u32>` carries).
pub mod drop {
    use super::DropReason;

    pub const IP_OPTIONS: u32 = DropReason::IpOptions as u32;
    pub const BAD_TTL: u32 = DropReason::BadTtl as u32;
    pub const TRUNCATED: u32 = DropReason::Truncated as u32;
    pub const BAD_VERSION: u32 = DropReason::BadVersion as u32;
    pub const BAD_LENGTH: u32 = DropReason::BadLength as u32;
    pub const ZERO_MULTIPLIER: u32 = DropReason::ZeroMultiplier as u32;
    pub const MULTIPOINT: u32 = DropReason::Multipoint as u32;
    pub const ZERO_MY_DISCRIMINATOR: u32 = DropReason::ZeroMyDiscriminator as u32;
    pub const ZERO_YOUR_DISCRIMINATOR: u32 = DropReason::ZeroYourDiscriminator as u32;
    pub const NO_SESSION: u32 = DropReason::NoSession as u32;
    pub const ADDRESS_MISMATCH: u32 = DropReason::AddressMismatch as u32;
    pub const FRAGMENT: u32 = DropReason::Fragment as u32;
    pub const HOP_MISMATCH: u32 = DropReason::HopMismatch as u32;
    pub const AUTH_MISMATCH: u32 = DropReason::AuthMismatch as u32;
    pub const AUTH_FAILED: u32 = DropReason::AuthFailed as u32;
    pub const AUTH_SEQUENCE: u32 = DropReason::AuthSequence as u32;
    pub const BAD_AUTH: u32 = DropReason::BadAuth as u32;
    pub const VERIFY_BUDGET: u32 = DropReason::VerifyBudget as u32;

    /// The reasons only an authenticated session can produce: a matrix
    /// against a session without authentication covers every other one.
    pub const ONLY_AUTHENTICATED: [u32; 4] = [AUTH_FAILED, AUTH_SEQUENCE, BAD_AUTH, VERIFY_BUDGET];

    /// The reasons only the engine can produce: the kernel's counters
    /// never move for them.
    pub const ONLY_USERSPACE: [u32; 2] = [
        DropReason::AdminDown as u32,
        DropReason::ExtensionHeader as u32,
    ];

    /// The name of reason `index`, or `unknown` past the list.
    pub fn name(index: u32) -> &'static str {
        super::DropReason::ALL
            .get(index as usize)
            .map_or("unknown", |r| r.name())
    }
}
