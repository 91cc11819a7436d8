//! FILE's one document as a tree of nodes with where each is written
//! (byte offsets into the text): what the edits of [`super::plan`] are
//! placed by. Read with granit-parser, the parser serde-saphyr reads with.

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span, StructureStyle};

/// A node and the bytes it covers: from its first character to just after
/// its last (a block collection ends where its last child ends).
pub struct Node {
    pub start: usize,
    pub end: usize,
    pub body: Body,
}

pub enum Body {
    /// A scalar and how it was quoted.
    Scalar(ScalarStyle),
    /// An alias (`*name`): rewritten whole when its value changes.
    Alias,
    Seq(Style, Vec<Item>),
    Map(Style, Vec<Member>),
}

#[derive(Clone, Copy, PartialEq)]
pub enum Style {
    Block,
    Flow,
}

/// A sequence's item: where its `-` is (a flow item: where it starts).
pub struct Item {
    pub dash: usize,
    pub node: Node,
}

pub struct Member {
    pub key: String,
    pub key_start: usize,
    pub key_end: usize,
    pub value: Node,
}

/// The root node of `text`'s one document; `None` for an empty document,
/// a parse error, or a key that is not a plain string.
pub fn read(text: &str) -> Option<Node> {
    // Character indices (the parser's) to byte offsets.
    let bytes: Vec<usize> = text
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .collect();
    let mut events = Parser::new_from_str(text).map(|e| {
        e.ok().and_then(|(ev, span): (Event, Span)| {
            Some((
                ev,
                *bytes.get(span.start.index())?,
                *bytes.get(span.end.index())?,
            ))
        })
    });
    let mut r = Reader {
        text,
        events: &mut events,
    };
    loop {
        let (ev, start, end) = r.next()?;
        match ev {
            Event::StreamStart | Event::DocumentStart(..) => {}
            ev if is_node(&ev) => return r.node(ev, start, end),
            _ => return None,
        }
    }
}

struct Reader<'t, 'e, I> {
    text: &'t str,
    events: &'e mut I,
}

impl<'a, I> Reader<'_, '_, I>
where
    I: Iterator<Item = Option<(Event<'a>, usize, usize)>>,
{
    /// The next event that is no comment.
    fn next(&mut self) -> Option<(Event<'a>, usize, usize)> {
        loop {
            let e = self.events.next()??;
            if !is_meta(&e.0) {
                return Some(e);
            }
        }
    }

    fn node(&mut self, ev: Event<'a>, start: usize, end: usize) -> Option<Node> {
        match ev {
            Event::Scalar(_, style, ..) => Some(Node {
                start,
                end,
                body: Body::Scalar(style),
            }),
            Event::Alias(..) => Some(Node {
                start,
                end,
                body: Body::Alias,
            }),
            Event::SequenceStart(s, ..) => {
                let mut items = Vec::new();
                loop {
                    let (ev, s2, e2) = self.next()?;
                    if matches!(ev, Event::SequenceEnd) {
                        return self.collection(s, start, e2, Body::Seq(style(s), items));
                    }
                    if !is_node(&ev) {
                        return None;
                    }
                    let node = self.node(ev, s2, e2)?;
                    let dash = match s {
                        StructureStyle::Block => self.dash_before(node.start)?,
                        StructureStyle::Flow => node.start,
                    };
                    items.push(Item { dash, node });
                }
            }
            Event::MappingStart(s, ..) => {
                let mut members = Vec::new();
                loop {
                    let (ev, key_start, key_end) = self.next()?;
                    let key = match ev {
                        Event::MappingEnd => {
                            return self.collection(s, start, key_end, Body::Map(style(s), members))
                        }
                        Event::Scalar(k, ..) => k.into_owned(),
                        _ => return None,
                    };
                    let (ev, s2, e2) = self.next()?;
                    if !is_node(&ev) {
                        return None;
                    }
                    let value = self.node(ev, s2, e2)?;
                    members.push(Member {
                        key,
                        key_start,
                        key_end,
                        value,
                    });
                }
            }
            _ => None,
        }
    }

    /// A collection's bytes: a flow one from its bracket to its closing
    /// bracket, a block one from its first child to the end of its last.
    fn collection(&self, s: StructureStyle, start: usize, end: usize, body: Body) -> Option<Node> {
        let (start, end) = match (&body, s) {
            (_, StructureStyle::Flow) => (start, end),
            (Body::Seq(_, items), _) => (items.first()?.dash, items.last()?.node.end),
            (Body::Map(_, members), _) => (
                members.first()?.key_start,
                members.last().map(|m| m.value.end.max(m.key_end))?,
            ),
            _ => return None,
        };
        Some(Node { start, end, body })
    }

    /// Where the `-` of a block item starting at `at` is: the last
    /// character before it that is no space.
    fn dash_before(&self, at: usize) -> Option<usize> {
        let before = self.text.get(..at)?.trim_end();
        before.ends_with('-').then(|| before.len() - 1)
    }
}

fn style(s: StructureStyle) -> Style {
    match s {
        StructureStyle::Block => Style::Block,
        StructureStyle::Flow => Style::Flow,
    }
}

fn is_node(ev: &Event) -> bool {
    matches!(
        ev,
        Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..) | Event::Alias(..)
    )
}

/// Events that are no part of the data (comments, when the parser says
/// them, and anchors' names).
fn is_meta(ev: &Event) -> bool {
    !is_node(ev)
        && !matches!(
            ev,
            Event::SequenceEnd
                | Event::MappingEnd
                | Event::UnresolvedAlias(..)
                | Event::StreamEnd
                | Event::DocumentEnd
                | Event::DocumentStart(..)
                | Event::StreamStart
        )
}
