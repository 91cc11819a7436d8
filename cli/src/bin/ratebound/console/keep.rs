//! A YAML FILE saved as people wrote it: when a save changes only values
//! (the same keys in the same order, the same number of items in every
//! list), each changed value is rewritten where it stands in FILE's text,
//! in the quoting it was written in, and everything else — comments,
//! order, quoting, blank lines — is kept byte for byte. A save that adds or
//! removes a key or an item is written whole (comments are then lost, and
//! the diff shows it). Read with granit-parser, the YAML parser
//! serde-saphyr reads with (its events carry their spans).

use serde_json::Value;
use serde_saphyr::granit_parser::{self, Event, Parser, ScalarStyle};

/// A node of the document with where its scalars are written.
enum Node {
    /// A scalar: its span (character indices) and how it was quoted.
    Scalar(usize, usize, ScalarStyle),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

/// `before` (FILE's text, whose configuration is `old`) with the values
/// that `new` changes rewritten in place; `None` when `new` changes more
/// than values, or the text cannot be edited so (then FILE is written
/// whole). `read` turns YAML text into the configuration's JSON, as `check`
/// does: the edited text must read as `new`, else `None`.
pub fn edit(
    before: &str,
    old: &Value,
    new: &Value,
    read: impl Fn(&str) -> Option<Value>,
) -> Option<String> {
    let mut events = Parser::new_from_str(before).map(Result::ok);
    // StreamStart, DocumentStart, then the one document's root.
    let mut root = None;
    while let Some(e) = events.next() {
        let (ev, span) = e?;
        match ev {
            Event::StreamStart | Event::DocumentStart(..) => {}
            Event::StreamEnd => break,
            _ => {
                root = Some(node(ev, span.start.index(), span.end.index(), &mut events)?);
                break;
            }
        }
    }
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    changes(&root?, old, new, &mut edits)?;
    if edits.is_empty() {
        return Some(before.to_string());
    }
    // Character indices to byte offsets, then from the end backwards.
    let bytes: Vec<usize> = before
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(before.len()))
        .collect();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut text = before.to_string();
    for (start, end, with) in edits {
        let (s, e) = (*bytes.get(start)?, *bytes.get(end)?);
        text.replace_range(s..e, &with);
    }
    (read(&text)? == *new).then_some(text)
}

fn node<'a, I>(ev: Event<'a>, start: usize, end: usize, events: &mut I) -> Option<Node>
where
    I: Iterator<Item = Option<(Event<'a>, granit_parser::Span)>>,
{
    match ev {
        // An anchored or tagged node is not edited in place.
        Event::Scalar(_, style, 0, None) => Some(Node::Scalar(start, end, style)),
        Event::SequenceStart(_, 0, None) => {
            let mut items = Vec::new();
            loop {
                let (ev, span) = events.next()??;
                match ev {
                    Event::SequenceEnd => return Some(Node::Seq(items)),
                    ev if is_node(&ev) => {
                        items.push(node(ev, span.start.index(), span.end.index(), events)?)
                    }
                    _ if is_meta(&ev) => {}
                    _ => return None,
                }
            }
        }
        Event::MappingStart(_, 0, None) => {
            let mut members = Vec::new();
            loop {
                let (ev, _) = events.next()??;
                let key = match ev {
                    Event::MappingEnd => return Some(Node::Map(members)),
                    Event::Scalar(k, _, 0, None) => k.into_owned(),
                    ev if is_meta(&ev) => continue,
                    _ => return None,
                };
                let value = loop {
                    let (ev, span) = events.next()??;
                    if is_node(&ev) {
                        break node(ev, span.start.index(), span.end.index(), events)?;
                    }
                    if !is_meta(&ev) {
                        return None;
                    }
                };
                members.push((key, value));
            }
        }
        _ => None,
    }
}

fn is_node(ev: &Event) -> bool {
    matches!(
        ev,
        Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..)
    )
}

/// Events that are no node (comments, when the parser says them).
fn is_meta(ev: &Event) -> bool {
    !is_node(ev)
        && !matches!(
            ev,
            Event::SequenceEnd
                | Event::MappingEnd
                | Event::Alias(..)
                | Event::UnresolvedAlias(..)
                | Event::Anchor(..)
                | Event::StreamEnd
                | Event::DocumentEnd
                | Event::DocumentStart(..)
        )
}

/// The edits that turn `old` into `new` at `n`'s scalars; `None` when a
/// key or an item is added or removed, or a value changes its kind.
fn changes(
    n: &Node,
    old: &Value,
    new: &Value,
    out: &mut Vec<(usize, usize, String)>,
) -> Option<()> {
    match (n, old, new) {
        (Node::Map(members), Value::Object(o), Value::Object(w)) => {
            let keys: Vec<&String> = members.iter().map(|(k, _)| k).collect();
            if keys.len() != w.len() || keys.iter().zip(w.keys()).any(|(a, b)| *a != b) {
                return None;
            }
            for (k, child) in members {
                changes(child, o.get(k)?, w.get(k)?, out)?;
            }
            Some(())
        }
        (Node::Seq(items), Value::Array(o), Value::Array(w)) => {
            if items.len() != w.len() || o.len() != w.len() {
                return None;
            }
            for ((child, a), b) in items.iter().zip(o).zip(w) {
                changes(child, a, b, out)?;
            }
            Some(())
        }
        (Node::Scalar(..), a, b) if a == b => Some(()),
        (Node::Scalar(start, end, style), _, b) => {
            out.push((*start, *end, scalar(b, *style)?));
            Some(())
        }
        _ => None,
    }
}

/// A scalar written in the style it had: a number or a boolean plain, a
/// string plain when it reads back as the same string, else quoted as it
/// was (double quotes when it was plain).
fn scalar(v: &Value, style: ScalarStyle) -> Option<String> {
    match v {
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

#[cfg(test)]
mod tests {
    use super::*;
    use ratebound_cli::input::{self, Format};

    fn read(text: &str) -> Option<Value> {
        serde_json::from_slice(&input::to_json(text.as_bytes(), Format::Yaml).ok()?).ok()
    }

    const COMMENTED: &str = concat!(
        "# Rate limits of the shop (owned by the platform team).\n",
        "instance: shop   # the counters' prefix\n",
        "routes:\n",
        "  # The public API.\n",
        "  - name: api\n",
        "    match: {path_prefix: /api}\n",
        "    bounds:\n",
        "      - name: partner        # the partner tier\n",
        "        per: user\n",
        "        limit: 1000\n",
        "        window: 'PT1M'\n",
        "        applies_to: {roles: [partner]}\n",
        "      - {name: trial, per: user, limit: 60, window: \"PT1M\", applies_to: {roles: [trial]}}\n",
    );

    #[test]
    fn a_changed_value_is_rewritten_where_it_stands_and_the_rest_is_kept() {
        let old = read(COMMENTED).unwrap();
        let mut new = old.clone();
        new["routes"][0]["bounds"][0]["limit"] = serde_json::json!(2000);
        new["routes"][0]["bounds"][1]["window"] = serde_json::json!("PT1H");
        new["routes"][0]["bounds"][0]["window"] = serde_json::json!("PT30S");
        new["routes"][0]["bounds"][1]["applies_to"]["roles"][0] = serde_json::json!("free trial");
        let text = edit(COMMENTED, &old, &new, read).unwrap();
        let want = COMMENTED
            .replace("limit: 1000", "limit: 2000")
            .replace("window: 'PT1M'", "window: 'PT30S'")
            .replace("window: \"PT1M\"", "window: \"PT1H\"")
            .replace("roles: [trial]", "roles: [\"free trial\"]");
        assert_eq!(text, want);
        assert_eq!(read(&text).unwrap(), new);
    }

    #[test]
    fn nothing_changed_is_the_same_text_and_a_new_member_is_written_whole() {
        let old = read(COMMENTED).unwrap();
        assert_eq!(
            edit(COMMENTED, &old, &old, read).as_deref(),
            Some(COMMENTED)
        );
        let mut added = old.clone();
        added["routes"][0]["bounds"][0]["scope"] = serde_json::json!("fleet");
        assert!(edit(COMMENTED, &old, &added, read).is_none());
        let mut fewer = old.clone();
        fewer["routes"][0]["bounds"].as_array_mut().unwrap().pop();
        assert!(edit(COMMENTED, &old, &fewer, read).is_none());
        assert!(edit("", &Value::Null, &old, read).is_none());
    }
}
