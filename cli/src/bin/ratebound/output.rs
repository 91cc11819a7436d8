//! What every command shares: the exit statuses and how text reaches
//! stdout and stderr.

use serde_json::Value;
use std::io::Write;

/// Exit statuses.
pub const VALID: u8 = 0;
pub const INVALID: u8 = 1;
pub const USAGE: u8 = 2;

pub fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

pub fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not worth a panic.
pub fn out(s: &str) {
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

pub fn err(s: &str) {
    let _ = std::io::stderr().lock().write_all(s.as_bytes());
}
