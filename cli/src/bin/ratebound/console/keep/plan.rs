//! The edits of FILE's text that turn its configuration `old` into `new`:
//! a changed scalar rewritten where it stands; a removed key or item's
//! lines taken out, with the comment lines just above it at its column
//! (they are its) and the comment lines after it indented deeper (they are
//! inside it); a new key put after the key the new configuration has
//! before it (first when none), a new item after the item before it, both
//! as block lines at their siblings' column; a value that changed shape
//! (a scalar become a mapping, a list emptied) written anew after its key
//! or dash; a flow collection (`{a: 1}`, `[x, y]`) that gains or loses
//! something written whole on its line.

use super::tree::{Body, Item, Member, Node, Style};
use super::write::{self, Indent};
use serde_json::{Map, Value};

/// Replace the bytes `.0..1` with `.2`.
pub type Edit = (usize, usize, String);

pub struct Planner<'t> {
    text: &'t str,
    ind: Indent,
    pub edits: Vec<Edit>,
}

/// What a node's change needs of its parent.
enum Done {
    /// Its edits are made.
    Edited,
    /// It changed shape: the parent writes its value anew after its key
    /// or dash.
    Anew,
}

impl<'t> Planner<'t> {
    pub fn new(text: &'t str, root: &Node) -> Planner<'t> {
        Planner {
            text,
            ind: indent(text, root),
            edits: Vec::new(),
        }
    }

    /// The edits from `old` to `new` at the root; `None` when they cannot
    /// be placed (the root changed shape or was emptied, a key is written
    /// twice, an item's `-` is not first on its line, a long list changed
    /// too much to compare cheaply…).
    pub fn plan(&mut self, root: &Node, old: &Value, new: &Value) -> Option<()> {
        match self.node(root, old, new)? {
            Done::Edited => Some(()),
            Done::Anew => None,
        }
    }

    fn node(&mut self, n: &Node, old: &Value, new: &Value) -> Option<Done> {
        if old == new {
            return Some(Done::Edited);
        }
        match (&n.body, old, new) {
            (Body::Map(Style::Block, members), Value::Object(o), Value::Object(w)) => {
                self.map(members, o, w)
            }
            (Body::Seq(Style::Block, items), Value::Array(o), Value::Array(w)) => {
                self.seq(items, o, w)
            }
            (Body::Map(Style::Flow, members), Value::Object(o), Value::Object(w))
                if members.len() == w.len()
                    && members.iter().zip(w.keys()).all(|(m, k)| m.key == *k) =>
            {
                for m in members {
                    self.child(&m.value, o.get(&m.key)?, w.get(&m.key)?)?;
                }
                Some(Done::Edited)
            }
            (Body::Seq(Style::Flow, items), Value::Array(o), Value::Array(w))
                if items.len() == w.len() && o.len() == w.len() =>
            {
                for ((i, a), b) in items.iter().zip(o).zip(w) {
                    self.child(&i.node, a, b)?;
                }
                Some(Done::Edited)
            }
            // A flow collection that gains or loses something: written
            // whole where it stands.
            (Body::Map(Style::Flow, _) | Body::Seq(Style::Flow, _), _, _) => {
                self.edits.push((n.start, n.end, write::flow(new)?));
                Some(Done::Edited)
            }
            (Body::Scalar(style), _, b) if !write::is_block(b) => {
                let mut s = write::scalar(b, *style).or_else(|| write::flow(b))?;
                if n.start == n.end {
                    // An empty value (`key:`): a space after the colon.
                    s.insert(0, ' ');
                }
                self.edits.push((n.start, n.end, s));
                Some(Done::Edited)
            }
            (Body::Alias, _, b) if !write::is_block(b) => {
                self.edits.push((n.start, n.end, write::flow(b)?));
                Some(Done::Edited)
            }
            _ => Some(Done::Anew),
        }
    }

    /// A child of a flow collection: a shape change is written in flow.
    fn child(&mut self, n: &Node, old: &Value, new: &Value) -> Option<()> {
        match self.node(n, old, new)? {
            Done::Edited => Some(()),
            Done::Anew => {
                self.edits.push((n.start, n.end, write::flow(new)?));
                Some(())
            }
        }
    }

    fn map(
        &mut self,
        members: &[Member],
        o: &Map<String, Value>,
        w: &Map<String, Value>,
    ) -> Option<Done> {
        if w.is_empty() {
            return Some(Done::Anew);
        }
        let first = members.first()?;
        let col = self.col(first.key_start);
        // Kept keys stay in the file's order (the configuration's reading
        // does not depend on it); a key written twice is not placed.
        let kept: Vec<&Member> = members.iter().filter(|m| w.contains_key(&m.key)).collect();
        let mut seen = std::collections::HashSet::new();
        if !members.iter().all(|m| seen.insert(m.key.as_str())) {
            return None;
        }
        if kept.is_empty() {
            return Some(Done::Anew);
        }
        for m in members {
            match w.get(&m.key) {
                None => {
                    self.edits.push(self.member_region(m, col));
                }
                Some(b) => {
                    if let Done::Anew = self.node(&m.value, o.get(&m.key)?, b)? {
                        self.member_anew(m, b, col)?;
                    }
                }
            }
        }
        // New keys after the kept key before them, else before the first.
        let first_kept = w.contains_key(&first.key);
        let mut after: Option<&Member> = None;
        let mut pending = String::new();
        for (k, v) in w {
            if let Some(m) = kept.iter().find(|m| m.key == *k) {
                self.put_members(after, first, col, std::mem::take(&mut pending), first_kept)?;
                after = Some(m);
            } else {
                pending.push_str(&write::member(k, v, col, self.ind)?);
            }
        }
        self.put_members(after, first, col, pending, first_kept)?;
        Some(Done::Edited)
    }

    /// New members' lines after `after`, else before `first`.
    fn put_members(
        &mut self,
        after: Option<&Member>,
        first: &Member,
        col: usize,
        lines: String,
        first_kept: bool,
    ) -> Option<()> {
        if lines.is_empty() {
            return Some(());
        }
        let edit = match after {
            Some(m) => {
                let at = self.member_end(m, col);
                (at, at, self.at_line_start(at, lines))
            }
            None if self.first_on_line(first.key_start) => {
                let at = self.comments_above(self.line_start(first.key_start), col);
                (at, at, lines)
            }
            // `- name: api`: the new keys go after the dash, and the first
            // key moves to the next line at their column.
            None if first_kept => (
                first.key_start,
                first.key_start,
                format!("{}{}", lines.trim_start(), write::spaces(col)),
            ),
            // ... or, the first key removed, where it was.
            None => {
                let dash = self.after_dash(first.key_start);
                (
                    dash,
                    dash,
                    format!(" {}", lines.trim_start().trim_end_matches('\n')),
                )
            }
        };
        self.edits.push(edit);
        Some(())
    }

    /// A member's bytes, taken out when it is removed.
    fn member_region(&self, m: &Member, col: usize) -> (usize, usize, String) {
        let end = self.member_end(m, col);
        match self.first_on_line(m.key_start) {
            true => (
                self.comments_above(self.line_start(m.key_start), col),
                end,
                String::new(),
            ),
            // The first key after a dash: the dash stays, alone on its
            // line (the next key, below it, starts the item's mapping).
            false => (self.after_dash(m.key_start), end, "\n".to_string()),
        }
    }

    /// Just after the `-` before `at`.
    fn after_dash(&self, at: usize) -> usize {
        self.text[..at].trim_end().len()
    }

    fn member_end(&self, m: &Member, col: usize) -> usize {
        self.comments_below(self.line_end(m.value.end.max(m.key_end)), col)
    }

    /// A member whose value changed shape: the value written anew after
    /// the colon, the key (and a comment on its line) kept.
    fn member_anew(&mut self, m: &Member, v: &Value, col: usize) -> Option<()> {
        let colon = m.key_end + self.text.get(m.key_end..)?.find(':')?;
        if !self.text.get(m.key_end..colon)?.trim().is_empty() {
            return None;
        }
        let old_end = m.value.end.max(colon + 1);
        let tail = write::tail(v, col, self.ind)?;
        let key_line_end = self.line_end(colon);
        match tail.strip_prefix('\n') {
            // The old value on the key's line (a scalar, a flow
            // collection): taken off it, the block on the lines after.
            Some(block) if self.line_end(old_end) == key_line_end => {
                let rest = self.text.get(old_end..key_line_end)?;
                let cut = match rest.trim().is_empty() {
                    true => old_end + rest.trim_end_matches('\n').len(),
                    false => old_end,
                };
                self.edits.push((colon + 1, cut, String::new()));
                let block = self.at_line_start(key_line_end, block.to_string());
                self.edits.push((key_line_end, key_line_end, block));
            }
            // The old value on the lines after the key's: replaced by them.
            Some(block) => {
                let end = self.comments_below(self.line_end(old_end), col);
                self.edits.push((key_line_end, end, block.to_string()));
            }
            // A scalar or an empty collection after a block: on the key's
            // line, before the comment there.
            None => {
                let end = self.comments_below(self.line_end(old_end), col);
                let rest = self
                    .text
                    .get(colon + 1..key_line_end)?
                    .trim_end_matches('\n');
                let comment = match rest.trim().is_empty() {
                    true => "",
                    false => rest,
                };
                self.edits.push((
                    colon + 1,
                    end,
                    format!("{}{comment}\n", tail.trim_end_matches('\n')),
                ));
            }
        }
        Some(())
    }

    fn seq(&mut self, items: &[Item], o: &[Value], w: &[Value]) -> Option<Done> {
        if w.is_empty() {
            return Some(Done::Anew);
        }
        if items.len() != o.len() || items.iter().any(|i| !self.first_on_line(i.dash)) {
            return None;
        }
        let col = self.col(items.first()?.dash);
        // How far an item's mapping stands right of its dash (`- name:`).
        let offset = items
            .iter()
            .find_map(|i| match &i.node.body {
                Body::Map(Style::Block, m) => self.col(m.first()?.key_start).checked_sub(col),
                _ => None,
            })
            .unwrap_or(2);
        let pairs = pair(o, w)?;
        let mut next_new = 0;
        let mut after: Option<&Item> = None;
        let mut any_kept = false;
        for (i, item) in items.iter().enumerate() {
            match pairs.get(i).copied().flatten() {
                None => {
                    let start = self.comments_above(self.line_start(item.dash), col);
                    self.edits
                        .push((start, self.item_end(item, col), String::new()));
                }
                Some(j) => {
                    let lines = self.new_items(w.get(next_new..j)?, col, offset)?;
                    self.put_items(after, items.first()?, col, lines);
                    next_new = j + 1;
                    after = Some(item);
                    any_kept = true;
                    if let Done::Anew = self.node(&item.node, o.get(i)?, w.get(j)?)? {
                        let tail = write::item_tail(w.get(j)?, col, self.ind, offset)?;
                        let end = self.line_end(item.node.end);
                        self.edits
                            .push((item.node.start, end, tail.trim_start().to_string()));
                    }
                }
            }
        }
        let lines = self.new_items(w.get(next_new..)?, col, offset)?;
        if !any_kept {
            // Every old item gone: the new ones where the first was.
            let at = self.comments_above(self.line_start(items.first()?.dash), col);
            self.edits.push((at, at, lines));
        } else {
            self.put_items(after, items.first()?, col, lines);
        }
        Some(Done::Edited)
    }

    fn new_items(&self, vs: &[Value], col: usize, offset: usize) -> Option<String> {
        vs.iter()
            .map(|v| write::item(v, col, self.ind, offset))
            .collect()
    }

    fn put_items(&mut self, after: Option<&Item>, first: &Item, col: usize, lines: String) {
        if lines.is_empty() {
            return;
        }
        let at = match after {
            Some(i) => self.item_end(i, col),
            None => self.comments_above(self.line_start(first.dash), col),
        };
        let lines = self.at_line_start(at, lines);
        self.edits.push((at, at, lines));
    }

    fn item_end(&self, i: &Item, col: usize) -> usize {
        self.comments_below(self.line_end(i.node.end.max(i.dash + 1)), col)
    }

    /// `lines` put at `at`: after a newline when the text ends there
    /// without one.
    fn at_line_start(&self, at: usize, lines: String) -> String {
        match at > 0 && !self.text[..at].ends_with('\n') {
            true => format!("\n{lines}"),
            false => lines,
        }
    }

    fn line_start(&self, at: usize) -> usize {
        self.text[..at].rfind('\n').map_or(0, |i| i + 1)
    }

    /// The start of the line after the one `at` is on (`at` itself when
    /// it starts a line).
    fn line_end(&self, at: usize) -> usize {
        if at == 0 || self.text[..at].ends_with('\n') {
            return at;
        }
        self.text[at..]
            .find('\n')
            .map_or(self.text.len(), |i| at + i + 1)
    }

    fn col(&self, at: usize) -> usize {
        self.text[self.line_start(at)..at].chars().count()
    }

    fn first_on_line(&self, at: usize) -> bool {
        self.text[self.line_start(at)..at].trim().is_empty()
    }

    /// `line` moved up over the comment lines just above it whose `#` is
    /// at `col`: a key's or an item's own comments. Comments that open the
    /// file are the file's.
    fn comments_above(&self, line: usize, col: usize) -> usize {
        let mut top = line;
        while top > 0 {
            let prev = self.line_start(top - 1);
            match comment_col(&self.text[prev..top]) {
                Some(c) if c == col => top = prev,
                _ => break,
            }
        }
        match self.text[..top].trim() {
            "" | "---" => line,
            _ => top,
        }
    }

    /// `line` moved down over the comment lines indented deeper than `col`:
    /// they are inside the key or item above them.
    fn comments_below(&self, mut line: usize, col: usize) -> usize {
        while line < self.text.len() {
            let next = self.line_end(line + 1).max(line + 1);
            match comment_col(&self.text[line..next]) {
                Some(c) if c > col => line = next,
                _ => break,
            }
        }
        line
    }
}

/// The column of a comment line's `#`; `None` for any other line.
fn comment_col(line: &str) -> Option<usize> {
    let t = line.trim_start_matches([' ', '\t']);
    t.starts_with('#').then(|| line.len() - t.len())
}

/// The new item each old item is (`None`: removed): the items that are
/// the same (same `name` for mappings that have one, else equal) first and
/// last, then the longest common run of such items in between, then,
/// between two of those, old and new items of the same kind paired in
/// order (a renamed item keeps its place and its comments). `None` when
/// the lists are too long and too changed to compare cheaply.
fn pair(o: &[Value], w: &[Value]) -> Option<Vec<Option<usize>>> {
    let id = |v: &Value| -> Value {
        match v.get("name") {
            Some(n) if n.is_string() => n.clone(),
            _ => v.clone(),
        }
    };
    let (a, b): (Vec<Value>, Vec<Value>) = (o.iter().map(id).collect(), w.iter().map(id).collect());
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    if ma.len().saturating_mul(mb.len()) > 1_000_000 {
        return None;
    }
    // lcs[i][j]: the longest common run of ma[i..] and mb[j..].
    let mut lcs = vec![vec![0u32; mb.len() + 1]; ma.len() + 1];
    for i in (0..ma.len()).rev() {
        for j in (0..mb.len()).rev() {
            lcs[i][j] = match ma[i] == mb[j] {
                true => lcs[i + 1][j + 1] + 1,
                false => lcs[i + 1][j].max(lcs[i][j + 1]),
            };
        }
    }
    let mut anchors: Vec<(usize, usize)> = (0..head).map(|k| (k, k)).collect();
    let (mut i, mut j) = (0, 0);
    while i < ma.len() && j < mb.len() {
        if ma[i] == mb[j] {
            anchors.push((head + i, head + j));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    anchors.extend((0..tail).map(|k| (a.len() - tail + k, b.len() - tail + k)));
    anchors.push((a.len(), b.len()));
    let kind = |v: &Value| (v.is_object(), v.is_array());
    let mut pairs = vec![None; a.len()];
    let (mut pi, mut pj) = (0, 0);
    for (ai, aj) in anchors {
        for (x, y) in (pi..ai).zip(pj..aj) {
            if kind(&o[x]) == kind(&w[y]) {
                pairs[x] = Some(y);
            }
        }
        if let Some(p) = pairs.get_mut(ai) {
            *p = Some(aj);
        }
        (pi, pj) = (ai + 1, aj + 1);
    }
    Some(pairs)
}

/// FILE's indentation: how far a nested mapping's keys and a sequence
/// under a key stand right of their key (2 and 2 when nothing says).
fn indent(text: &str, root: &Node) -> Indent {
    let col = |at: usize| {
        text[..at]
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().count())
    };
    let (mut unit, mut seq) = (None, None);
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        match &n.body {
            Body::Map(Style::Block, members) => {
                for m in members {
                    let k = col(m.key_start);
                    match &m.value.body {
                        Body::Map(Style::Block, sub) if unit.is_none() => {
                            unit = sub
                                .first()
                                .and_then(|s| col(s.key_start).checked_sub(k))
                                .filter(|u| *u > 0);
                        }
                        Body::Seq(Style::Block, sub) if seq.is_none() => {
                            seq = sub.first().and_then(|s| col(s.dash).checked_sub(k));
                        }
                        _ => {}
                    }
                    stack.push(&m.value);
                }
            }
            Body::Seq(_, items) => stack.extend(items.iter().map(|i| &i.node)),
            _ => {}
        }
    }
    let unit = unit.unwrap_or(2);
    Indent {
        unit,
        seq: seq.unwrap_or(unit),
    }
}
