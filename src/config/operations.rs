//! OpenAPI operations of a route: path templates parsed at configure time
//! into a tree, so a request finds its operation in one walk of its path
//! segments, whatever the number of operations.
//!
//! Matching follows OpenAPI: a path item is found first, concrete segments
//! before templated ones (`/orders/mine` before `/orders/{id}`), then the
//! method, exactly (a path item without the method is no operation: there
//! is no falling back to a templated path item). A template parameter
//! matches exactly one non-empty segment (`{name}.json` style prefixes and
//! suffixes allowed). The query string is ignored; one trailing slash is
//! ignored (`/orders/` is `/orders`); segments are compared percent-decoded,
//! after splitting, so `%2F` never splits a segment here. The path given is
//! normalised first ([`crate::config::normalize`]: dot segments, doubled slashes,
//! and an encoded slash tried both as a separator and as data); `HEAD` is
//! the path item's `GET` when the item lists no `HEAD` of its own.

use hashbrown::HashMap;
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    Literal(String),
    /// A parameter, with the literal text around it in its segment.
    Param {
        prefix: String,
        suffix: String,
    },
}

/// Parses `/orders/{id}/pay`. Errors say what is wrong in words.
pub fn parse_template(t: &str) -> Result<Vec<Segment>, String> {
    let Some(rest) = t.strip_prefix('/') else {
        return Err(format!("{t:?} must start with '/'"));
    };
    if t.contains('?') || t.contains('#') {
        return Err(format!(
            "{t:?} must be a path only, without query or fragment"
        ));
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Ok(Vec::new());
    }
    rest.split('/')
        .map(|seg| {
            if seg.is_empty() {
                return Err(format!("{t:?} has an empty segment ('//')"));
            }
            let opens = seg.matches('{').count();
            let closes = seg.matches('}').count();
            match (opens, closes) {
                (0, 0) => Ok(Segment::Literal(decode(seg))),
                (1, 1) => {
                    let (prefix, after) = seg.split_once('{').unwrap_or_default();
                    let (name, suffix) = after
                        .split_once('}')
                        .ok_or_else(|| format!("{t:?}: '}}' before '{{' in segment {seg:?}"))?;
                    if name.is_empty() {
                        return Err(format!("{t:?}: a parameter needs a name, e.g. {{id}}"));
                    }
                    Ok(Segment::Param {
                        prefix: decode(prefix),
                        suffix: decode(suffix),
                    })
                }
                _ => Err(format!(
                    "{t:?}: segment {seg:?} must hold at most one parameter, in braces"
                )),
            }
        })
        .collect()
}

/// Percent-decodes one segment (invalid escapes are kept as written).
fn decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let hex = |at: usize| b.get(at).and_then(|&c| (c as char).to_digit(16));
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            if let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2)) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Debug, Clone, Default)]
struct Node {
    literal: HashMap<String, Node>,
    /// Most specific (longest prefix + suffix) first.
    params: Vec<(String, String, Node)>,
    /// Method → operation index, when a path item ends here.
    methods: Vec<(String, usize)>,
}

/// The operations of one route, ready for matching.
#[derive(Debug, Clone, Default)]
pub struct OpTree {
    root: Node,
}

impl OpTree {
    /// `ops[i]` is (method, template); templates must have parsed.
    pub fn new<'a>(ops: impl IntoIterator<Item = (&'a str, &'a [Segment])>) -> OpTree {
        let mut root = Node::default();
        for (i, (method, segments)) in ops.into_iter().enumerate() {
            let mut node = &mut root;
            for seg in segments {
                node = match seg {
                    Segment::Literal(l) => node.literal.entry(l.clone()).or_default(),
                    Segment::Param { prefix, suffix } => {
                        let at = node
                            .params
                            .iter()
                            .position(|(p, s, _)| p == prefix && s == suffix);
                        let at = at.unwrap_or_else(|| {
                            node.params
                                .push((prefix.clone(), suffix.clone(), Node::default()));
                            node.params
                                .sort_by_key(|(p, s, _)| std::cmp::Reverse(p.len() + s.len()));
                            node.params
                                .iter()
                                .position(|(p, s, _)| p == prefix && s == suffix)
                                .unwrap_or(0)
                        });
                        // In range: found in `params`, or `params` was just
                        // pushed to (so 0 is too). A `get_mut` would need a
                        // fallback node the borrow checker cannot give.
                        #[allow(clippy::indexing_slicing)]
                        &mut node.params[at].2
                    }
                };
            }
            if !node.methods.iter().any(|(m, _)| m == method) {
                node.methods.push((method.to_string(), i));
            }
        }
        OpTree { root }
    }

    /// The operation a request is, if any.
    pub fn find(&self, method: &str, path: &str) -> Option<usize> {
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        let path = path.strip_prefix('/')?;
        let path = path.strip_suffix('/').unwrap_or(path);
        // Borrowed unless percent-encoded: one allocation per lookup.
        let segments: Vec<Cow<str>> = if path.is_empty() {
            Vec::new()
        } else {
            path.split('/')
                .map(|s| {
                    if s.contains('%') {
                        Cow::Owned(decode(s))
                    } else {
                        Cow::Borrowed(s)
                    }
                })
                .collect()
        };
        let item = find_item(&self.root, &segments)?;
        // The method exactly, else HEAD as the path item's GET.
        let exact = item.methods.iter().find(|(m, _)| m == method);
        exact
            .or_else(|| {
                item.methods
                    .iter()
                    .find(|(m, _)| crate::config::normalize::method_matches(m, method))
            })
            .map(|(_, i)| *i)
    }
}

/// The path item for `segments`: concrete before templated, depth first.
fn find_item<'a>(node: &'a Node, segments: &[Cow<str>]) -> Option<&'a Node> {
    let Some((first, rest)) = segments.split_first() else {
        return (!node.methods.is_empty()).then_some(node);
    };
    let first: &str = first;
    if let Some(found) = node.literal.get(first).and_then(|n| find_item(n, rest)) {
        return Some(found);
    }
    node.params.iter().find_map(|(prefix, suffix, child)| {
        let fits = !first.is_empty()
            && first.len() > prefix.len() + suffix.len()
            && first.starts_with(prefix.as_str())
            && first.ends_with(suffix.as_str());
        fits.then(|| find_item(child, rest)).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(ops: &[(&str, &str)]) -> OpTree {
        let parsed: Vec<(&str, Vec<Segment>)> = ops
            .iter()
            .map(|(m, t)| (*m, parse_template(t).unwrap()))
            .collect();
        OpTree::new(parsed.iter().map(|(m, s)| (*m, s.as_slice())))
    }

    #[test]
    fn concrete_segments_win_over_templates() {
        let t = tree(&[
            ("GET", "/orders/{id}"),
            ("GET", "/orders/mine"),
            ("POST", "/orders/{id}/pay"),
        ]);
        assert_eq!(t.find("GET", "/orders/mine"), Some(1));
        assert_eq!(t.find("GET", "/orders/42"), Some(0));
        assert_eq!(t.find("POST", "/orders/42/pay"), Some(2));
        assert_eq!(
            t.find("POST", "/orders/mine/pay"),
            Some(2),
            "backtracks into the template"
        );
        assert_eq!(t.find("GET", "/orders/42/pay"), None, "methods are exact");
        assert_eq!(
            t.find("POST", "/orders/mine"),
            None,
            "no fallback to a templated path item"
        );
    }

    #[test]
    fn one_parameter_is_one_segment() {
        let t = tree(&[
            ("GET", "/files/{name}.json"),
            ("GET", "/files/{name}"),
            ("GET", "/a/{x}/b"),
        ]);
        assert_eq!(t.find("GET", "/files/report.json"), Some(0));
        assert_eq!(t.find("GET", "/files/report.csv"), Some(1));
        assert_eq!(
            t.find("GET", "/files/.json"),
            Some(1),
            "a parameter is never empty"
        );
        assert_eq!(t.find("GET", "/a/1/2/b"), None);
        assert_eq!(t.find("GET", "/a//b"), None);
        assert_eq!(t.find("GET", "/files"), None);
    }

    #[test]
    fn query_trailing_slash_and_percent_encoding() {
        let t = tree(&[("GET", "/orders/{id}"), ("GET", "/caf%C3%A9"), ("GET", "/")]);
        assert_eq!(t.find("GET", "/orders/42?x=/y"), Some(0));
        assert_eq!(t.find("GET", "/orders/42/"), Some(0));
        assert_eq!(t.find("GET", "/café"), Some(1));
        assert_eq!(t.find("GET", "/caf%c3%a9"), Some(1));
        assert_eq!(
            t.find("GET", "/orders/a%2Fb"),
            Some(0),
            "%2F stays inside its segment"
        );
        assert_eq!(t.find("GET", "/"), Some(2));
        assert_eq!(t.find("GET", "orders/1"), None);
    }

    #[test]
    fn head_is_the_get_of_its_path_item_unless_listed() {
        let t = tree(&[
            ("GET", "/a/{id}"),
            ("GET", "/b"),
            ("HEAD", "/b"),
            ("POST", "/c"),
        ]);
        assert_eq!(t.find("HEAD", "/a/1"), Some(0));
        assert_eq!(t.find("HEAD", "/b"), Some(2), "its own HEAD first");
        assert_eq!(t.find("GET", "/b"), Some(1));
        assert_eq!(t.find("HEAD", "/c"), None);
        assert_eq!(t.find("GET", "/c"), None);
    }

    #[test]
    fn bad_templates_say_why() {
        for bad in ["orders", "/a//b", "/{}", "/{a}{b}", "/a?b=1", "/}a{"] {
            assert!(parse_template(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_template("/").unwrap(), vec![]);
    }

    #[test]
    fn two_hundred_operations_match_by_walking_the_path() {
        let ops: Vec<(String, String)> = (0..200)
            .map(|i| ("GET".to_string(), format!("/r{}/{{id}}/s{}", i % 20, i)))
            .collect();
        let refs: Vec<(&str, &str)> = ops.iter().map(|(m, t)| (m.as_str(), t.as_str())).collect();
        let t = tree(&refs);
        assert_eq!(t.find("GET", "/r7/99/s187"), Some(187));
        assert_eq!(t.find("GET", "/r7/99/s188"), None);
    }
}
