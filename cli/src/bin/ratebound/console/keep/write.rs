//! New YAML text for what the page added or reshaped: scalars in the
//! quoting they had (plain for new ones when that reads back the same),
//! flow collections whole, block content at the file's indentation.

use serde_json::Value;
use serde_saphyr::granit_parser::ScalarStyle;

/// How FILE indents: a nested mapping's keys `unit` columns right of its
/// key; a sequence under a key `seq` columns right of it (0 or `unit`).
#[derive(Clone, Copy)]
pub struct Indent {
    pub unit: usize,
    pub seq: usize,
}

/// A scalar written in the style it had: a number, a boolean or null
/// plain, a string plain when it reads back as the same string, else
/// quoted as it was (double quotes when it was plain).
pub fn scalar(v: &Value, style: ScalarStyle) -> Option<String> {
    match v {
        Value::Null => Some("null".to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => match style {
            ScalarStyle::SingleQuoted if !s.contains('\n') => {
                Some(format!("'{}'", s.replace('\'', "''")))
            }
            ScalarStyle::Plain if plain(s) => Some(s.clone()),
            ScalarStyle::Plain | ScalarStyle::DoubleQuoted | ScalarStyle::SingleQuoted => {
                serde_json::to_string(s).ok()
            }
            _ => None,
        },
        _ => None,
    }
}

/// A value on one line: a scalar, or a flow collection (`{a: 1}`,
/// `[x, y]`).
pub fn flow(v: &Value) -> Option<String> {
    match v {
        Value::Object(o) => {
            let members: Option<Vec<String>> = o
                .iter()
                .map(|(k, x)| Some(format!("{}: {}", key(k)?, flow(x)?)))
                .collect();
            Some(format!("{{{}}}", members?.join(", ")))
        }
        Value::Array(a) => {
            let items: Option<Vec<String>> = a.iter().map(flow).collect();
            Some(format!("[{}]", items?.join(", ")))
        }
        _ => scalar(v, ScalarStyle::Plain),
    }
}

/// A key as written: plain when it reads back as itself, else quoted.
pub fn key(k: &str) -> Option<String> {
    match plain(k) {
        true => Some(k.to_string()),
        false => serde_json::to_string(k).ok(),
    }
}

/// Whether `v` is written as block lines of its own (a collection with
/// something in it); anything else fits on its key's or its dash's line.
pub fn is_block(v: &Value) -> bool {
    match v {
        Value::Object(o) => !o.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    }
}

/// A mapping member at `col`: `key: value` and the lines of its value.
pub fn member(k: &str, v: &Value, col: usize, ind: Indent) -> Option<String> {
    Some(format!("{}{}:{}", spaces(col), key(k)?, tail(v, col, ind)?))
}

/// A sequence item whose `-` is at `col`.
pub fn item(v: &Value, col: usize, ind: Indent, offset: usize) -> Option<String> {
    Some(format!(
        "{}-{}",
        spaces(col),
        item_tail(v, col, ind, offset)?
    ))
}

/// What follows a key's colon: ` scalar\n`, or a newline and the block.
pub fn tail(v: &Value, col: usize, ind: Indent) -> Option<String> {
    match v {
        Value::Object(_) if is_block(v) => Some(format!("\n{}", block(v, col + ind.unit, ind)?)),
        Value::Array(_) if is_block(v) => Some(format!("\n{}", block(v, col + ind.seq, ind)?)),
        _ => Some(format!(" {}\n", flow(v)?)),
    }
}

/// What follows an item's `-` at `col`: ` scalar\n`, or the block with
/// its first line on the dash's (`- name: api`), the rest `offset`
/// columns right of the dash.
pub fn item_tail(v: &Value, col: usize, ind: Indent, offset: usize) -> Option<String> {
    match is_block(v) {
        true => {
            let b = block(v, col + offset, ind)?;
            Some(format!(
                "{}{}",
                spaces(offset.saturating_sub(1).max(1)),
                b.trim_start()
            ))
        }
        false => Some(format!(" {}\n", flow(v)?)),
    }
}

/// A collection's lines at `col`, each ending in a newline.
pub fn block(v: &Value, col: usize, ind: Indent) -> Option<String> {
    match v {
        Value::Object(o) => o.iter().map(|(k, x)| member(k, x, col, ind)).collect(),
        Value::Array(a) => a.iter().map(|x| item(x, col, ind, 2)).collect(),
        _ => None,
    }
}

pub fn spaces(n: usize) -> String {
    " ".repeat(n)
}

/// A string YAML reads back as itself when written plain: words of
/// letters, digits and `_-./`, not starting with a digit, `-` or `.`
/// (a number), and none of YAML's other words.
fn plain(s: &str) -> bool {
    let first_ok = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '/');
    first_ok
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        )
}
