//! The bounds file (a pick, an operationId or `"METHOD /path"`, to its
//! bounds) and which operation of the document each pick names.

use super::document::{OpenapiDocument, Ordered, METHODS};
use super::{error, Error, OpenapiRequest};
use crate::input::{self, Format};
use ratebound::config::operations::parse_template;
use serde_json::Value;
use std::collections::HashMap;

/// How a key of the bounds file names an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    Id(String),
    Route { method: String, path: String },
}

impl Pick {
    /// `"POST /orders/{id}/pay"` is a method and a path; anything else an
    /// operationId. A method that is not an OpenAPI one is an error.
    pub fn parse(key: &str) -> Result<Pick, String> {
        if let Some((m, p)) = key.split_once(' ') {
            if p.starts_with('/') && !m.is_empty() && m.bytes().all(|b| b.is_ascii_alphabetic()) {
                let lower = m.to_ascii_lowercase();
                if !METHODS.contains(&lower.as_str()) {
                    return Err(format!(
                        "{m} is not an OpenAPI operation method (one of {})",
                        METHODS.join(", ").to_ascii_uppercase()
                    ));
                }
                return Ok(Pick::Route {
                    method: lower.to_ascii_uppercase(),
                    path: p.trim().to_string(),
                });
            }
        }
        Ok(Pick::Id(key.to_string()))
    }
}

/// The bounds file: keys (picks) in the order written, each with its bounds
/// as written.
pub fn read_picks(
    bytes: &[u8],
    format: Format,
    label: &str,
) -> Result<Vec<(String, Value)>, Error> {
    let json = input::to_json(bytes, format).map_err(|e| error(label, e.message))?;
    let text = std::str::from_utf8(&json)
        .map_err(|e| error(label, format!("not UTF-8 (byte {})", e.valid_up_to())))?;
    let text = if text.trim().is_empty() { "{}" } else { text };
    let picks: Ordered<Value> = serde_json::from_str(text).map_err(|e| {
        error(
            label,
            format!("write a map from operationId (or \"METHOD /path\") to a list of bounds: {e}"),
        )
    })?;
    Ok(picks.0)
}

/// A key of the bounds file that picks an operation: the operation's
/// index in the document, the key, and the bounds written for it.
pub(super) type Picked<'a> = (usize, &'a str, &'a Value);

/// Which operation each key picks, in the order written; a key that picks
/// none, or one already picked, is an error.
pub(super) fn pick<'a>(
    doc: &OpenapiDocument,
    picks: &'a [(String, Value)],
    req: &OpenapiRequest,
    errors: &mut Vec<Error>,
) -> Vec<Picked<'a>> {
    let mut picked: Vec<Picked> = Vec::new();
    let mut by_op: HashMap<usize, &str> = HashMap::new();
    let mut keys_seen: HashMap<&str, ()> = HashMap::new();
    for (key, bounds) in picks {
        if keys_seen.insert(key.as_str(), ()).is_some() {
            errors.push(error(
                req.at_key(key),
                "is written twice in the bounds file",
            ));
            continue;
        }
        let found = match Pick::parse(key) {
            Err(m) => Err(m),
            Ok(Pick::Id(id)) => find_by_id(doc, &id, &req.spec_label),
            Ok(Pick::Route { method, path }) => find_by_route(doc, &method, &path, &req.spec_label),
        };
        match found {
            Err(m) => errors.push(error(req.at_key(key), m)),
            Ok(i) => {
                if let Some(first) = by_op.get(&i) {
                    errors.push(error(
                        req.at_key(key),
                        format!(
                            "picks {}, which {first:?} already picks; give each operation its bounds once",
                            doc.operations[i].title()
                        ),
                    ));
                } else {
                    by_op.insert(i, key.as_str());
                    picked.push((i, key.as_str(), bounds));
                }
            }
        }
    }

    picked
}

fn find_by_id(doc: &OpenapiDocument, id: &str, spec: &str) -> Result<usize, String> {
    let found: Vec<usize> = (0..doc.operations.len())
        .filter(|&i| doc.operations[i].operation_id.as_deref() == Some(id))
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => {
            let mut m = format!("no operation of {spec} has operationId {id:?}");
            if let Some(near) = nearest(doc, id) {
                m.push_str(&format!("; did you mean {near:?}?"));
            }
            if !doc.references.is_empty() {
                m.push_str(&format!(
                    " ({} path item(s) are a $ref, which is not followed: {})",
                    doc.references.len(),
                    doc.references.join(", ")
                ));
            }
            Err(m)
        }
        many => Err(format!(
            "operationId {id:?} occurs {} times in {spec} ({}); OpenAPI requires it to be unique: pick by \"METHOD /path\" instead, or fix the document",
            many.len(),
            many.iter()
                .map(|&i| format!("{} {}", doc.operations[i].method, doc.operations[i].path))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn find_by_route(
    doc: &OpenapiDocument,
    method: &str,
    path: &str,
    spec: &str,
) -> Result<usize, String> {
    let same_path = |p: &str| -> bool {
        p == path
            || match (parse_template(p), parse_template(path)) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
    };
    if let Some(i) = doc
        .operations
        .iter()
        .position(|o| o.method == method && o.path == path)
    {
        return Ok(i);
    }
    let found: Vec<usize> = (0..doc.operations.len())
        .filter(|&i| doc.operations[i].method == method && same_path(&doc.operations[i].path))
        .collect();
    match found.as_slice() {
        [one] => Ok(*one),
        [] => {
            let there: Vec<&str> = doc
                .operations
                .iter()
                .filter(|o| same_path(&o.path))
                .map(|o| o.method.as_str())
                .collect();
            Err(if there.is_empty() {
                format!("{spec} has no path {path}")
            } else {
                format!(
                    "{spec} has no {method} {path}: that path has {}",
                    there.join(", ")
                )
            })
        }
        many => Err(format!(
            "{method} {path} is {} paths of {spec} ({}); write the one meant",
            many.len(),
            many.iter()
                .map(|&i| doc.operations[i].path.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Says once, as a note, that operationIds occur twice (picking them is an
/// error; leaving them alone is the document's business).
pub(super) fn duplicate_ids(doc: &OpenapiDocument, req: &OpenapiRequest, notes: &mut Vec<String>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for o in &doc.operations {
        if let Some(id) = &o.operation_id {
            *seen.entry(id.as_str()).or_default() += 1;
        }
    }
    let mut twice: Vec<&str> = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, _)| id)
        .collect();
    twice.sort_unstable();
    if !twice.is_empty() {
        notes.push(format!(
            "{}: operationId {} occur(s) more than once; OpenAPI requires them to be unique",
            req.spec_label,
            twice
                .iter()
                .map(|id| format!("{id:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// The operationId closest to `id`, when close (case, or a few edits).
fn nearest<'a>(doc: &'a OpenapiDocument, id: &str) -> Option<&'a str> {
    doc.operations
        .iter()
        .filter_map(|o| o.operation_id.as_deref())
        .map(|c| {
            (
                distance(&c.to_ascii_lowercase(), &id.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, for suggestions.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
