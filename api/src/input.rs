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

    /// A file that does not parse. The parser's message quotes the
    /// offending line; a line that names a secret or password is cut
    /// after that word, so that a typo beside a key never prints the key
    /// (into a log, a CI transcript).
    pub fn syntax(file: &str, error: impl std::fmt::Display) -> Self {
        Self::Syntax {
            file: file.into(),
            message: redact_secrets(&error.to_string()),
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

/// `text` with every line that names a `secret` or `password` cut after
/// that word.
pub fn redact_secrets(text: &str) -> String {
    text.lines()
        .map(|line| {
            let lower = line.to_ascii_lowercase();
            match ["secret", "password"]
                .iter()
                .filter_map(|word| lower.find(word).map(|at| at + word.len()))
                .min()
            {
                Some(end) => format!(
                    "{} ... (the rest of this line is not shown: it may hold a secret)",
                    &line[..end]
                ),
                None => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syntax_error_beside_a_secret_never_prints_it() {
        let text = "[[session]]\nauth = { type = \"keyed_sha1\", keys = [{ id = 1, secret = \"hunter2 }] }\n";
        let error = toml::from_str::<toml::Table>(text).unwrap_err();
        assert!(
            error.to_string().contains("hunter2"),
            "the parser quotes the line"
        );
        let said = InputError::syntax("c.toml", error).to_string();
        assert!(!said.contains("hunter2"), "{said}");
        assert!(
            said.contains("secret ... (the rest of this line is not shown"),
            "{said}"
        );
        assert!(
            said.starts_with("c.toml: TOML parse error at line 2"),
            "{said}"
        );
    }
}
