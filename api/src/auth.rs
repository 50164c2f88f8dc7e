use linecard_common::bfd::auth_type as code;

/// RFC 5880 section 4.1's authentication types. The fast path carries the
/// same types as the codes of `linecard_common::bfd::auth_type`; this is
/// their one userspace definition (the engine's codec, its config and the
/// harness's scenarios all name it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthType {
    SimplePassword,
    KeyedMd5,
    MeticulousKeyedMd5,
    KeyedSha1,
    MeticulousKeyedSha1,
}

/// The names of the authentication types, as linecardd's `auth.type`, a
/// scenario's `sessions.auth.type` and `ctl list` spell them.
pub const AUTH_TYPES: [(&str, AuthType); 5] = [
    ("simple_password", AuthType::SimplePassword),
    ("keyed_md5", AuthType::KeyedMd5),
    ("meticulous_keyed_md5", AuthType::MeticulousKeyedMd5),
    ("keyed_sha1", AuthType::KeyedSha1),
    ("meticulous_keyed_sha1", AuthType::MeticulousKeyedSha1),
];

/// The authentication type `name` stands for in [`AUTH_TYPES`], or the
/// reason, naming every type.
pub fn auth_type_named(name: &str) -> Result<AuthType, String> {
    AUTH_TYPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, t)| t)
        .ok_or_else(|| {
            let names: Vec<&str> = AUTH_TYPES.iter().map(|(n, _)| *n).collect();
            format!("must be one of {}", names.join(", "))
        })
}

impl AuthType {
    /// The Auth Type field (section 4.1).
    pub const fn code(self) -> u8 {
        match self {
            Self::SimplePassword => code::SIMPLE_PASSWORD,
            Self::KeyedMd5 => code::KEYED_MD5,
            Self::MeticulousKeyedMd5 => code::METICULOUS_KEYED_MD5,
            Self::KeyedSha1 => code::KEYED_SHA1,
            Self::MeticulousKeyedSha1 => code::METICULOUS_KEYED_SHA1,
        }
    }

    /// The type whose Auth Type field is `code`, if any.
    pub fn from_code(code: u8) -> Option<Self> {
        AUTH_TYPES
            .iter()
            .map(|&(_, t)| t)
            .find(|t| t.code() == code)
    }

    /// Its name in [`AUTH_TYPES`].
    pub fn name(self) -> &'static str {
        AUTH_TYPES
            .iter()
            .find(|&&(_, t)| t == self)
            .map(|&(n, _)| n)
            .expect("every type is named")
    }

    /// Bytes of the Auth Key/Digest field of the keyed types (16 for MD5,
    /// 20 for SHA1; sections 4.3 and 4.4); `None` for a simple password.
    pub const fn digest_len(self) -> Option<usize> {
        match self {
            Self::SimplePassword => None,
            Self::KeyedMd5 | Self::MeticulousKeyedMd5 => Some(16),
            Self::KeyedSha1 | Self::MeticulousKeyedSha1 => Some(20),
        }
    }

    /// Whether a key's secret of `len` bytes fits the type: a simple
    /// password of 1 to 16 bytes (section 4.2), a keyed secret of at most
    /// the digest's length, padded with zeros (4.3, 4.4).
    pub fn check_secret_len(self, len: usize) -> Result<(), String> {
        let shortest = usize::from(self == Self::SimplePassword);
        let longest = self.digest_len().unwrap_or(16);
        if (shortest..=longest).contains(&len) {
            return Ok(());
        }
        Err(format!(
            "{len} bytes; {} takes {} to {longest} (RFC 5880 section 4)",
            self.name(),
            shortest.max(1)
        ))
    }

    /// Meticulous: every packet carries the next Sequence Number (6.7.3).
    pub const fn meticulous(self) -> bool {
        matches!(self, Self::MeticulousKeyedMd5 | Self::MeticulousKeyedSha1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_found_by_its_name_and_its_code() {
        for (name, kind) in AUTH_TYPES {
            assert_eq!(auth_type_named(name), Ok(kind));
            assert_eq!(kind.name(), name);
            assert_eq!(AuthType::from_code(kind.code()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), name);
        }
        assert_eq!(AuthType::from_code(code::NONE), None);
        assert!(AuthType::SimplePassword.check_secret_len(0).is_err());
        assert!(AuthType::SimplePassword.check_secret_len(16).is_ok());
        assert!(AuthType::KeyedMd5.check_secret_len(17).is_err());
        assert!(AuthType::KeyedSha1.check_secret_len(20).is_ok());
        let why = auth_type_named("keyed_sha256").unwrap_err();
        assert!(why.contains("meticulous_keyed_sha1"), "{why}");
    }
}
