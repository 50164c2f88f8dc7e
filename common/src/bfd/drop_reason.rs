//! The one list of drop reasons (see [`DropReason`]).

/// The table every list of reasons below is generated from: the variant,
/// its index in every counter array, its name (as the JSON, the reports
/// and people spell it) and its `u32` constant for the XDP program.
macro_rules! drop_reasons {
    ($($(#[$doc:meta])* $variant:ident = $index:literal, $name:literal, $constant:ident;)*) => {
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
            $($(#[$doc])* $variant = $index,)*
        }

        /// How many [`DropReason`]s there are: the length of every counter
        /// array.
        pub const DROP_REASONS: u32 = [$($index),*].len() as u32;

        impl DropReason {
            /// Every reason, by index.
            pub const ALL: [DropReason; DROP_REASONS as usize] = [$(Self::$variant),*];

            /// Its name, as the JSON, the reports and people spell it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }

        /// [`DropReason`]s as the `u32` indices the XDP program returns and
        /// counts by (an enum is not what a BPF `Result<_, u32>` carries).
        pub mod drop {
            use super::DropReason;

            $(pub const $constant: u32 = DropReason::$variant as u32;)*

            /// The reasons only an authenticated session can produce: a matrix
            /// against a session without authentication covers every other one.
            pub const ONLY_AUTHENTICATED: [u32; 4] =
                [AUTH_FAILED, AUTH_SEQUENCE, BAD_AUTH, VERIFY_BUDGET];

            /// The reasons only the engine can produce: the kernel's counters
            /// never move for them.
            pub const ONLY_USERSPACE: [u32; 2] = [ADMIN_DOWN, EXTENSION_HEADER];

            /// The name of reason `index`, or `unknown` past the list.
            pub fn name(index: u32) -> &'static str {
                super::DropReason::ALL
                    .get(index as usize)
                    .map_or("unknown", |r| r.name())
            }
        }
    };
}

drop_reasons! {
    /// IPv4 header with options: the UDP header is not where a fixed-offset
    /// parser looks, so such packets never reach the checks below.
    IpOptions = 0, "ip_options", IP_OPTIONS;
    /// TTL (hop limit) not 255 on a single-hop packet (RFC 5881 section
    /// 5), checked before any map lookup; below the configured minimum on
    /// a multihop one.
    BadTtl = 1, "bad_ttl", BAD_TTL;
    /// Shorter than the headers and the 24-byte mandatory section.
    Truncated = 2, "truncated", TRUNCATED;
    /// Version is not 1 (6.8.6).
    BadVersion = 3, "bad_version", BAD_VERSION;
    /// Length field below the minimum or beyond the payload (6.8.6).
    BadLength = 4, "bad_length", BAD_LENGTH;
    /// Detect Mult is zero (6.8.6).
    ZeroMultiplier = 5, "zero_multiplier", ZERO_MULTIPLIER;
    /// Multipoint bit set (6.8.6).
    Multipoint = 6, "multipoint", MULTIPOINT;
    /// My Discriminator is zero (6.8.6).
    ZeroMyDiscriminator = 7, "zero_my_discriminator", ZERO_MY_DISCRIMINATOR;
    /// Your Discriminator 0 in a state other than Down or AdminDown (6.8.6).
    ZeroYourDiscriminator = 8, "zero_your_discriminator", ZERO_YOUR_DISCRIMINATOR;
    /// Your Discriminator names no session (6.8.6).
    NoSession = 9, "no_session", NO_SESSION;
    /// The session exists but not between these addresses.
    AddressMismatch = 10, "address_mismatch", ADDRESS_MISMATCH;
    /// IP fragment on the BFD port.
    Fragment = 11, "fragment", FRAGMENT;
    /// A single-hop packet naming a multihop session, or a multihop one
    /// naming a single-hop session: the GTSM relaxation of RFC 5883 is the
    /// multihop sessions' alone.
    HopMismatch = 12, "hop_mismatch", HOP_MISMATCH;
    /// The A bit where the session has no authentication, its absence
    /// where it has, or an Auth Type other than the session's (RFC 5880
    /// 6.7.1 and 6.8.6).
    AuthMismatch = 13, "auth_mismatch", AUTH_MISMATCH;
    /// An Auth Key ID the session does not hold, a wrong password or a
    /// wrong digest (6.7.2-6.7.4).
    AuthFailed = 14, "auth_failed", AUTH_FAILED;
    /// A Sequence Number outside bfd.RcvAuthSeq's window: a replay or a
    /// stale packet (6.7.3-6.7.4).
    AuthSequence = 15, "auth_sequence", AUTH_SEQUENCE;
    /// A malformed authentication section: an Auth Len wrong for its type,
    /// or a Length other than 24 + Auth Len.
    BadAuth = 16, "bad_auth", BAD_AUTH;
    /// A frame that needed a digest computed while the session's budget
    /// was spent (`crate::verify`): refused uncomputed, in the kernel.
    VerifyBudget = 17, "verify_budget", VERIFY_BUDGET;
    /// The session is administratively down: received packets are ignored
    /// (6.8.6). The engine's only.
    AdminDown = 18, "admin_down", ADMIN_DOWN;
    /// IPv6 with extension headers: single-hop BFD carries none (RFC 5881),
    /// and the fast path, which does not walk them, passes such packets
    /// up. The engine's only.
    ExtensionHeader = 19, "extension_header", EXTENSION_HEADER;
}

impl DropReason {
    /// Its index in every counter array.
    pub const fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;
    use std::string::String;

    #[test]
    fn the_table_is_dense_and_each_name_is_its_variant_in_snake_case() {
        for (i, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i, "{reason:?}");
            // serde's rename_all = "snake_case" spells the JSON the same.
            let mut snake = String::new();
            for (j, c) in format!("{reason:?}").chars().enumerate() {
                if c.is_ascii_uppercase() && j > 0 {
                    snake.push('_');
                }
                snake.push(c.to_ascii_lowercase());
            }
            assert_eq!(reason.name(), snake);
            assert_eq!(drop::name(i as u32), snake);
        }
        assert_eq!(drop::name(DROP_REASONS), "unknown");
        assert_eq!(drop::ONLY_USERSPACE, [18, 19]);
    }
}
