//! One problem in a configuration, with its JSON path: what `parse`
//! returns and every check writes.

use std::fmt;

/// One problem in a configuration: where it is and what would be valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

pub(super) fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.into(),
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
