//! A YAML FILE saved as people wrote it: a save is applied to FILE's text
//! as edits, and every byte they do not touch — comments, blank lines,
//! order, quoting, anchors — is kept. A changed value is rewritten where
//! it stands in the quoting it had; a removed key or item takes its lines
//! with it (and the comment lines just above it at its column); a new key
//! goes after the key the new configuration has before it, a new item
//! after the item before it, in block style at the file's indentation;
//! a value that changed shape is written anew after its key; a flow
//! collection that gains or loses something is written whole on its line.
//! The edited text must read back as the new configuration, else `None`:
//! FILE is then written whole (and its comments lost; the diff shows it).
//!
//! - [`tree`]: the document's nodes and where each is written;
//! - [`plan`]: the edits from the old configuration to the new;
//! - [`write`]: the text of new scalars and new block or flow content.

mod plan;
mod tree;
mod write;

use serde_json::Value;

/// `before` (FILE's text, whose configuration is `old`) edited so that it
/// reads as `new`; `None` when the edits cannot be placed or the edited
/// text does not read back as `new` (then FILE is written whole). `read`
/// turns YAML text into the configuration's JSON, as `check` does.
pub fn edit(
    before: &str,
    old: &Value,
    new: &Value,
    read: impl Fn(&str) -> Option<Value>,
) -> Option<String> {
    let root = tree::read(before)?;
    let mut planner = plan::Planner::new(before, &root);
    planner.plan(&root, old, new)?;
    let text = apply(before, planner.edits)?;
    (read(&text)? == *new).then_some(text)
}

/// The edits applied from the end of the text backwards; `None` when two
/// overlap. At one place, an insertion lands where a removal took its
/// text out, and of two insertions the one planned first comes first.
fn apply(before: &str, edits: Vec<plan::Edit>) -> Option<String> {
    let mut edits: Vec<(usize, plan::Edit)> = edits.into_iter().enumerate().collect();
    edits.sort_by_key(|(i, (s, e, _))| std::cmp::Reverse((*s, *e, *i)));
    let mut text = before.to_string();
    let mut limit = before.len();
    for (_, (start, end, with)) in edits {
        if start > end
            || end > limit
            || !text.is_char_boundary(start)
            || !text.is_char_boundary(end)
        {
            return None;
        }
        text.replace_range(start..end, &with);
        limit = start;
    }
    Some(text)
}

#[cfg(test)]
mod prop;
#[cfg(test)]
mod tests;
