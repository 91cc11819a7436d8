//! YAML as the cluster reads it. `kubectl` (and Helm, and the API server's
//! YAML endpoint) read manifests with go-yaml v2 through sigs.k8s.io/yaml:
//! YAML 1.1, where a plain `yes`, `no`, `on`, `off`, `y` or `n` is a
//! boolean, a leading zero makes a number octal (`0100` is 64) and `0X1F`,
//! `-0x1F` or `+0b101` are numbers. serde-saphyr reads YAML 1.2, where they
//! are text or another number.
//!
//! [`crate::source`] reads every plain scalar of a YAML file as
//! kubectl will, so `check` judges what the filter will be given, and
//! flags each scalar the two readings disagree on, at its path: a
//! boolean word as a warning (the intent is usually what kubectl reads),
//! a number or a mapping key that changes as an error (the value the
//! cluster gets is not the one written).

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::Value;
use serde_saphyr::granit_parser;
use std::collections::HashMap;

/// How go-yaml v2 resolves an untagged plain scalar (its `resolve`).
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str,
}

/// go-yaml v2's `resolve` for an untagged plain scalar: its fixed words,
/// then (for a scalar that starts with a digit or a sign) Go's
/// `strconv.ParseInt(s, 0, 64)`, `ParseUint` and the YAML float syntax,
/// with underscores taken out first; a scalar that starts with `.` is
/// `ParseFloat`'s. Timestamps stay text (v2 keeps them as strings when the
/// target is untyped, as sigs.k8s.io/yaml's is).
pub fn resolve(s: &str) -> Resolved {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Resolved::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Resolved::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match s.as_bytes().first() {
        Some(b'.') => {
            if is_yaml_float(s) {
                if let Ok(f) = s.parse::<f64>() {
                    return Resolved::Float(f);
                }
            }
            Resolved::Str
        }
        Some(b'0'..=b'9' | b'+' | b'-') => {
            let plain = s.replace('_', "");
            if let Some(r) = go_parse_int(&plain) {
                return r;
            }
            if is_yaml_float(&plain) {
                if let Ok(f) = plain.parse::<f64>() {
                    return Resolved::Float(f);
                }
            }
            Resolved::Str
        }
        _ => Resolved::Str,
    }
}

/// `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`: a sign (not
/// for the unsigned), then `0x`, `0o`, `0b` (either case) or a lone leading
/// `0` (octal) for the base.
fn go_parse_int(s: &str) -> Option<Resolved> {
    let (negative, signed, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, true, s.get(1..)?),
        Some(b'+') => (false, true, s.get(1..)?),
        _ => (false, false, s),
    };
    let lower = rest.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match lower.as_deref() {
        Some("0x") => (16, rest.get(2..)?),
        Some("0o") => (8, rest.get(2..)?),
        Some("0b") => (2, rest.get(2..)?),
        _ if rest.len() > 1 && rest.starts_with('0') => (8, rest.get(1..)?),
        _ => (10, rest),
    };
    // Rust's from_str_radix takes a sign; Go's digits after a prefix do not.
    if digits.is_empty() || !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        // i64::MIN's magnitude is one more than i64::MAX.
        return match i64::try_from(magnitude) {
            Ok(m) => Some(Resolved::Int(-m)),
            Err(_) if magnitude == i64::MIN.unsigned_abs() => Some(Resolved::Int(i64::MIN)),
            Err(_) => None,
        };
    }
    match i64::try_from(magnitude) {
        Ok(m) => Some(Resolved::Int(m)),
        Err(_) if !signed => Some(Resolved::UInt(magnitude)),
        Err(_) => None,
    }
}

/// go-yaml's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (s.get(..i).unwrap_or(""), s.get(i + 1..)),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

impl Resolved {
    /// As sigs.k8s.io/yaml hands it on: JSON, where Go's encoder writes a
    /// float without a fraction as a whole number (`64.0` is `64`).
    pub fn to_json(&self, text: &str) -> Value {
        match self {
            Resolved::Null => Value::Null,
            Resolved::Bool(b) => Value::Bool(*b),
            Resolved::Int(i) => Value::from(*i),
            Resolved::UInt(u) => Value::from(*u),
            Resolved::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => Value::from(*f as i64),
            Resolved::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            Resolved::Str => Value::String(text.to_string()),
        }
    }

    /// A mapping key as sigs.k8s.io/yaml writes it (a key is always text
    /// in JSON); `None` for a null key, which it refuses.
    pub fn key(&self, text: &str) -> Option<String> {
        match self {
            Resolved::Null => None,
            Resolved::Bool(b) => Some(b.to_string()),
            Resolved::Int(i) => Some(i.to_string()),
            Resolved::UInt(u) => Some(u.to_string()),
            Resolved::Float(f) => Some(f.to_string()),
            Resolved::Str => Some(text.to_string()),
        }
    }
}

/// The untagged plain scalars of a YAML text by byte offset, each with
/// its text (an explicit tag, `!!str yes`, is read alike by both readers).
/// `None` when the text does not parse (the caller has said why already).
pub fn plain_scalars(text: &str) -> Option<HashMap<usize, String>> {
    let mut plain = HashMap::new();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.ok()?;
        if let Event::Scalar(value, ScalarStyle::Plain, _, None) = event {
            plain.insert(span.start.byte_offset()?, value.into_owned());
        }
    }
    Some(plain)
}

/// A scalar the two readings disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    /// The JSON path (as kubectl reads the keys).
    pub path: String,
    /// A number or a key that changes: the cluster gets another value
    /// than the one written. Otherwise a boolean word, a warning.
    pub error: bool,
    pub message: String,
}

/// What YAML 1.2 made of a scalar, in words.
fn said(v: &Value) -> String {
    match v {
        Value::String(s) => format!("the text {s:?}"),
        // serde-saphyr reads `0100` as the float 100: it is the number 100.
        Value::Number(n)
            if n.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e15) =>
        {
            format!("{}", n.as_f64().map_or(0, |f| f as i64))
        }
        other => other.to_string(),
    }
}

/// The value kubectl reads for the plain scalar `text` that YAML 1.2 read
/// as `ours`, and a flag when the two differ (numbers compared by value).
pub fn value(text: &str, ours: &Value, path: &str) -> (Value, Option<Flag>) {
    let resolved = resolve(text);
    let theirs = resolved.to_json(text);
    let same = match (&theirs, ours) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    };
    if same {
        // A number is handed on as Go writes it (`08` is 8, not 8.0).
        let v = if theirs.is_number() {
            theirs
        } else {
            ours.clone()
        };
        return (v, None);
    }
    let (error, why, fix) = match &resolved {
        Resolved::Bool(b) => (
            false,
            "YAML 1.1".to_string(),
            format!("write {b} (or {text:?}, quoted, for the text)"),
        ),
        Resolved::Int(_) | Resolved::UInt(_)
            if text.trim_start_matches(['-', '+']).starts_with('0')
                && text.trim_start_matches(['-', '+']).len() > 1
                && text
                    .trim_start_matches(['-', '+'])
                    .as_bytes()
                    .get(1)
                    .is_some_and(u8::is_ascii_digit) =>
        {
            (
                true,
                "YAML 1.1: a leading zero makes it octal".to_string(),
                format!("write {theirs} if it is meant, else drop the leading zero"),
            )
        }
        _ => (
            true,
            "YAML 1.1".to_string(),
            format!("write {theirs}, or {text:?} in quotes for the text"),
        ),
    };
    let message = format!(
        "kubectl reads {text} as {} ({why}), YAML 1.2 as {}; checked as kubectl reads it: {fix}",
        said(&theirs),
        said(ours)
    );
    (
        theirs,
        Some(Flag {
            path: path.to_string(),
            error,
            message,
        }),
    )
}

/// The key kubectl reads for the plain mapping key `text`, and a flag when
/// it is not `text` (`on:` is the key "true").
pub fn key(text: &str, parent: &str) -> (String, Option<Flag>) {
    match resolve(text).key(text) {
        Some(k) if k != text => {
            let message = format!(
                "kubectl reads the key {text} as {k:?} (YAML 1.1), YAML 1.2 as {text:?}; checked as kubectl reads it: write {text:?}, quoted, to keep the name"
            );
            let flag = Flag {
                path: format!("{parent}.{k}"),
                error: true,
                message,
            };
            (k, Some(flag))
        }
        _ => (text.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_scalars_resolve_as_go_yaml_v2_does() {
        for (s, want) in [
            ("yes", Resolved::Bool(true)),
            ("Y", Resolved::Bool(true)),
            ("on", Resolved::Bool(true)),
            ("OFF", Resolved::Bool(false)),
            ("n", Resolved::Bool(false)),
            ("yEs", Resolved::Str),
            ("~", Resolved::Null),
            ("0100", Resolved::Int(64)),
            ("-010", Resolved::Int(-8)),
            ("0o17", Resolved::Int(15)),
            ("0X1F", Resolved::Int(31)),
            ("-0x1F", Resolved::Int(-31)),
            ("0b101", Resolved::Int(5)),
            ("1_000", Resolved::Int(1000)),
            ("+12", Resolved::Int(12)),
            ("0", Resolved::Int(0)),
            ("08", Resolved::Float(8.0)),
            ("1e3", Resolved::Float(1000.0)),
            (".5", Resolved::Float(0.5)),
            ("18446744073709551615", Resolved::UInt(u64::MAX)),
            ("2001-12-14", Resolved::Str),
            ("0x", Resolved::Str),
            ("PT1M", Resolved::Str),
            ("60s", Resolved::Str),
            ("1.2.3", Resolved::Str),
        ] {
            assert_eq!(resolve(s), want, "{s}");
        }
    }

    #[test]
    fn a_boolean_word_is_a_warning_a_changed_number_an_error() {
        let (v, f) = value("yes", &json!("yes"), "$.shadow");
        assert_eq!(v, json!(true));
        let f = f.unwrap();
        assert!(!f.error);
        assert_eq!(f.path, "$.shadow");
        assert_eq!(
            f.message,
            "kubectl reads yes as true (YAML 1.1), YAML 1.2 as the text \"yes\"; checked as kubectl reads it: write true (or \"yes\", quoted, for the text)"
        );
        let (v, f) = value("0100", &json!(100.0), "$.routes[0].bounds[0].limit");
        assert_eq!(v, json!(64));
        let f = f.unwrap();
        assert!(f.error);
        assert!(
            f.message.starts_with(
                "kubectl reads 0100 as 64 (YAML 1.1: a leading zero makes it octal), YAML 1.2 as 100;"
            ),
            "{}",
            f.message
        );
        let (v, f) = value("0X1F", &json!("0X1F"), "$.a");
        assert_eq!(v, json!(31));
        assert!(f.unwrap().error);
    }

    #[test]
    fn what_both_read_alike_is_not_flagged() {
        for (s, ours) in [
            ("true", json!(true)),
            ("PT1M", json!("PT1M")),
            ("100", json!(100)),
            ("1_000", json!(1000)),
            ("0o17", json!(15)),
            ("null", Value::Null),
            ("1.5", json!(1.5)),
        ] {
            let (v, f) = value(s, &ours, "$.a");
            assert_eq!(f, None, "{s}");
            assert_eq!(v, ours, "{s}");
        }
        // The same number, handed on as Go writes it.
        assert_eq!(value("08", &json!(8.0), "$.a"), (json!(8), None));
    }

    #[test]
    fn a_key_that_is_a_boolean_word_changes_name() {
        let (k, f) = key("on", "$.match");
        assert_eq!(k, "true");
        let f = f.unwrap();
        assert!(f.error);
        assert_eq!(f.path, "$.match.true");
        assert!(f.message.contains("write \"on\", quoted"), "{}", f.message);
        assert_eq!(key("routes", "$"), ("routes".to_string(), None));
        assert_eq!(key("010", "$").0, "8");
    }

    #[test]
    fn only_untagged_plain_scalars_are_plain() {
        let text = "a: yes\nb: 'yes'\nc: \"on\"\nd: !!str on\ne: |\n  on\nf: [on]\n";
        let plain = plain_scalars(text).unwrap();
        let at = |needle: &str| text.find(needle).unwrap();
        assert_eq!(plain.get(&at("yes")).map(String::as_str), Some("yes"));
        assert_eq!(plain.get(&0).map(String::as_str), Some("a"));
        assert!(!plain.contains_key(&at("'yes'")));
        assert!(!plain.contains_key(&(at("\"on\"") + 1)));
        assert!(!plain.contains_key(&at("on\nf")));
        assert!(plain.contains_key(&at("on]")));
        assert_eq!(plain.values().filter(|v| *v == "on").count(), 1);
        assert_eq!(plain_scalars("a: [\n"), None);
    }
}
