/// A bad input file (linecardd's config, a scenario, a profile, a
/// baseline): which file, which key, what value and why, so that the
/// message alone says what to change.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: {key} = {value}: {why}")]
    Invalid {
        file: String,
        key: String,
        value: String,
        why: String,
    },
}

impl InputError {
    pub fn read(file: &str, source: std::io::Error) -> Self {
        Self::Read {
            file: file.into(),
            source,
        }
    }

    pub fn syntax(file: &str, error: impl std::fmt::Display) -> Self {
        Self::Syntax {
            file: file.into(),
            message: error.to_string(),
        }
    }

    pub fn invalid(file: &str, key: &str, value: &dyn std::fmt::Display, why: &str) -> Self {
        Self::Invalid {
            file: file.into(),
            key: key.into(),
            value: value.to_string(),
            why: why.into(),
        }
    }
}
