//! One problem in a configuration, with its JSON path and its kind: what
//! `parse` returns and every check writes.

use std::fmt;

/// One problem in a configuration: where it is, what kind it is, and what
/// would be valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub kind: ErrorKind,
    pub message: String,
}

/// What kind of problem a [`ConfigError`] is: what its readers decide by
/// (where a file's position points, what the schema already says), never
/// the message's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The text is no configuration: too big, not UTF-8, not JSON (or
    /// YAML), nothing to read.
    Text,
    /// A member the configuration has no place for.
    UnknownField,
    /// A member the configuration needs is not there.
    MissingField,
    /// A value of the wrong type or shape: text where a number goes, a word
    /// that is none of the allowed ones.
    WrongType,
    /// A value of the right type that is not valid: out of range, a bad
    /// name or window, settings that cannot work together.
    Invalid,
}

impl ErrorKind {
    /// The kind of a serde error, said where serde's error is received:
    /// serde says it only in its words.
    pub(crate) fn of_serde(e: &serde_json::Error) -> ErrorKind {
        if !e.is_data() {
            return ErrorKind::Text;
        }
        let m = e.to_string();
        if m.starts_with("unknown field") {
            ErrorKind::UnknownField
        } else if m.starts_with("missing field") {
            ErrorKind::MissingField
        } else if m.starts_with("invalid value") {
            ErrorKind::Invalid
        } else {
            ErrorKind::WrongType
        }
    }

    /// A problem of the configuration's structure (a member or a type),
    /// which the JSON Schema finds too.
    pub fn is_structural(self) -> bool {
        matches!(
            self,
            ErrorKind::UnknownField | ErrorKind::MissingField | ErrorKind::WrongType
        )
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// A value that is not valid, at `path`: what every check writes.
pub(super) fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.into(),
        kind: ErrorKind::Invalid,
        message: message.into(),
    }
}

/// The text is no configuration (`parse`, before the structure is read).
pub(super) fn text_err(message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: "$".into(),
        kind: ErrorKind::Text,
        message: message.into(),
    }
}

/// A whole number with thousands separators: `1000` → `"1,000"`.
pub fn number(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
