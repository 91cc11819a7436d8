//! Random adds, removals and value changes applied to a commented YAML
//! file built from a random configuration: the edited text reads as the
//! new configuration, and the comments of every key and item not removed
//! are still there, in order (those of the removed ones are gone).

use super::edit;
use super::tests::read;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// The configuration as the test knows it: every key and item with an id,
/// which its comments carry (`# c7` above it, `# t7` after a scalar).
#[derive(Clone, Debug)]
enum T {
    Leaf(Value),
    Map(Vec<(usize, String, T)>),
    Seq(Vec<(usize, T)>),
}

impl T {
    fn value(&self) -> Value {
        match self {
            T::Leaf(v) => v.clone(),
            T::Map(ms) => {
                Value::Object(ms.iter().map(|(_, k, t)| (k.clone(), t.value())).collect())
            }
            T::Seq(is) => Value::Array(is.iter().map(|(_, t)| t.value()).collect()),
        }
    }

    fn ids(&self, out: &mut Vec<usize>) {
        match self {
            T::Leaf(_) => {}
            T::Map(ms) => ms.iter().for_each(|(id, _, t)| {
                out.push(*id);
                t.ids(out)
            }),
            T::Seq(is) => is.iter().for_each(|(id, t)| {
                out.push(*id);
                t.ids(out)
            }),
        }
    }
}

/// Ids handed out in order.
struct Ids(usize);

impl Ids {
    fn next(&mut self) -> usize {
        self.0 += 1;
        self.0
    }

    fn tree(&mut self, v: &Value) -> T {
        match v {
            Value::Object(o) => T::Map(
                o.iter()
                    .map(|(k, x)| (self.next(), k.clone(), self.tree(x)))
                    .collect(),
            ),
            Value::Array(a) => T::Seq(a.iter().map(|x| (self.next(), self.tree(x))).collect()),
            _ => T::Leaf(v.clone()),
        }
    }
}

fn config() -> impl Strategy<Value = Value> {
    let word = prop::sample::select(vec![
        "shop", "web-1", "PT1M", "a b", "yes", "/api", "x: y", "#7",
    ]);
    let bound = (
        prop::sample::select(vec!["user", "address"]),
        1u32..100_000,
        prop::sample::select(vec!["PT1M", "PT1H", "PT30S"]),
        prop::sample::subsequence(vec!["partner", "trial", "staff"], 0..3),
    );
    let route = (
        prop::option::of(word.clone()),
        prop::collection::vec(bound, 1..4),
    );
    (word, prop::collection::vec(route, 1..4)).prop_map(|(instance, routes)| {
        let routes: Vec<Value> = routes
            .into_iter()
            .enumerate()
            .map(|(r, (prefix, bounds))| {
                let mut route = Map::new();
                route.insert("name".into(), format!("r{r}").into());
                if let Some(p) = prefix {
                    route.insert("match".into(), json!({ "path_prefix": p }));
                }
                let bounds: Vec<Value> = bounds
                    .into_iter()
                    .enumerate()
                    .map(|(b, (per, limit, window, roles))| {
                        let mut bound = json!({"name": format!("b{b}"), "per": per, "limit": limit, "window": window});
                        if !roles.is_empty() {
                            bound["applies_to"] = json!({ "roles": roles });
                        }
                        bound
                    })
                    .collect();
                route.insert("bounds".into(), bounds.into());
                Value::Object(route)
            })
            .collect();
        json!({"instance": instance, "routes": routes})
    })
}

/// How the file is written: mappings `unit` in, lists `seq` in under
/// their key, `match` in flow style or not, blank lines or not.
#[derive(Clone, Copy, Debug)]
struct Layout {
    unit: usize,
    seq: usize,
    flow_match: bool,
    blanks: bool,
}

struct Render {
    out: String,
    /// The comments written, in order: (id, "c" or "t").
    comments: Vec<(usize, char)>,
    l: Layout,
}

impl Render {
    fn scalar(v: &Value, id: usize) -> String {
        match v {
            Value::String(s)
                if s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/-".contains(c))
                    && s != "yes" =>
            {
                match id % 3 {
                    0 => s.clone(),
                    1 => format!("'{s}'"),
                    _ => format!("\"{s}\""),
                }
            }
            v => v.to_string(),
        }
    }

    fn flow(t: &T) -> String {
        match t {
            T::Leaf(v) => Render::scalar(v, 2),
            T::Map(ms) => format!(
                "{{{}}}",
                ms.iter()
                    .map(|(_, k, t)| format!("{k}: {}", Render::flow(t)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            T::Seq(is) => format!(
                "[{}]",
                is.iter()
                    .map(|(_, t)| Render::flow(t))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn above(&mut self, id: usize, col: usize) {
        if self.l.blanks && id.is_multiple_of(4) {
            self.out.push('\n');
        }
        self.out.push_str(&format!("{}# c{id}\n", " ".repeat(col)));
        self.comments.push((id, 'c'));
    }

    /// A member at `col`; `inline`: just after a dash (no line above it).
    fn member(&mut self, id: usize, k: &str, t: &T, col: usize, inline: bool) {
        if !inline {
            self.above(id, col);
            self.out.push_str(&" ".repeat(col));
        }
        match t {
            T::Leaf(v) => {
                self.out
                    .push_str(&format!("{k}: {}   # t{id}\n", Render::scalar(v, id)));
                self.comments.push((id, 't'));
            }
            T::Map(ms) if ms.is_empty() || (k == "match" && self.l.flow_match) => {
                self.out.push_str(&format!("{k}: {}\n", Render::flow(t)));
            }
            T::Seq(is) if is.is_empty() => self.out.push_str(&format!("{k}: []\n")),
            T::Map(ms) => {
                self.out.push_str(&format!("{k}:\n"));
                for (i, k, t) in ms {
                    self.member(*i, k, t, col + self.l.unit, false);
                }
            }
            T::Seq(is) => {
                self.out.push_str(&format!("{k}:\n"));
                for (i, t) in is {
                    self.item(*i, t, col + self.l.seq);
                }
            }
        }
    }

    fn item(&mut self, id: usize, t: &T, col: usize) {
        self.above(id, col);
        self.out.push_str(&format!("{}- ", " ".repeat(col)));
        match t {
            T::Map(ms) if !ms.is_empty() => {
                for (n, (i, k, t)) in ms.iter().enumerate() {
                    self.member(*i, k, t, col + 2, n == 0);
                }
            }
            T::Leaf(v) => {
                self.out
                    .push_str(&format!("{}   # t{id}\n", Render::scalar(v, id)));
                self.comments.push((id, 't'));
            }
            t => self.out.push_str(&format!("{}\n", Render::flow(t))),
        }
    }
}

/// Where a node stands: the path of child positions from the root.
fn paths(t: &T, at: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    out.push(at.clone());
    let children: Vec<&T> = match t {
        T::Leaf(_) => vec![],
        T::Map(ms) => ms.iter().map(|(_, _, t)| t).collect(),
        T::Seq(is) => is.iter().map(|(_, t)| t).collect(),
    };
    for (i, c) in children.into_iter().enumerate() {
        at.push(i);
        paths(c, at, out);
        at.pop();
    }
}

fn get<'a>(t: &'a mut T, path: &[usize]) -> Option<&'a mut T> {
    let Some((first, rest)) = path.split_first() else {
        return Some(t);
    };
    let child = match t {
        T::Leaf(_) => return None,
        T::Map(ms) => &mut ms.get_mut(*first)?.2,
        T::Seq(is) => &mut is.get_mut(*first)?.1,
    };
    get(child, rest)
}

fn fresh(ids: &mut Ids, b: usize) -> T {
    let n = ids.next();
    match b % 4 {
        0 => T::Leaf(json!(b)),
        1 => T::Leaf(json!(format!("n{n}"))),
        2 => ids.tree(&json!({"name": format!("n{n}"), "limit": b})),
        _ => ids.tree(&json!(["x", b])),
    }
}

/// The id of the key or item at `path` (0 for the root).
fn id_at(t: &T, path: &[usize]) -> usize {
    let (Some((first, rest)), T::Map(_) | T::Seq(_)) = (path.split_first(), t) else {
        return 0;
    };
    let (id, child) = match t {
        T::Map(ms) => (ms[*first].0, &ms[*first].2),
        T::Seq(is) => (is[*first].0, &is[*first].1),
        T::Leaf(_) => return 0,
    };
    match rest.is_empty() {
        true => id,
        false => id_at(child, rest),
    }
}

/// One change of the configuration. An item is known by its name, or by
/// its value when it has none; between two items known in both, old and
/// new items are paired in order (a renamed item keeps its comments). So
/// that the test knows which item is which: names and list items stay
/// what they are (values change at keys other than `name`), and a list
/// that loses an item gains none in the same save (`lists`: the lists
/// that lost one, as `-id`, or gained one, as `+id`).
fn mutate(t: &mut T, ids: &mut Ids, lists: &mut Vec<i64>, (op, a, b): (u8, usize, usize)) {
    let mut all = Vec::new();
    paths(t, &mut Vec::new(), &mut all);
    let path = all[a % all.len()].clone();
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    // The node's key (`None` for an item).
    let key = match get(t, parent_path) {
        Some(T::Map(ms)) => Some(ms[*last].1.clone()),
        _ => None,
    };
    let list = id_at(t, &path) as i64;
    let empties_root = parent_path.is_empty() && all.iter().filter(|p| p.len() == 1).count() == 1;
    let is_name = key.as_deref() == Some("name");
    match op % 5 {
        // The root keeps a key (an empty file is written whole).
        1 if !is_name && !empties_root => {
            let list = id_at(t, parent_path) as i64;
            match get(t, parent_path) {
                Some(T::Map(ms)) => drop(ms.remove(*last)),
                Some(T::Seq(is)) if !lists.contains(&list) => {
                    is.remove(*last);
                    lists.push(-list);
                }
                _ => {}
            }
        }
        _ => {
            let Some(node) = get(t, &path) else {
                return;
            };
            match (op % 5, node) {
                (0, T::Leaf(v)) if key.is_some() && !is_name => {
                    let now = match (v.as_u64(), b % 2) {
                        (Some(n), _) => json!(n + (b % 1000) as u64 + 1),
                        (None, 0) => json!(format!("s{b}")),
                        (None, _) => json!(format!("needs quotes: {b}")),
                    };
                    *v = now;
                }
                (2, T::Map(ms)) => {
                    let id = ids.next();
                    let v = fresh(ids, b);
                    ms.insert(b % (ms.len() + 1), (id, format!("k{id}"), v));
                }
                (3, T::Seq(is)) if !lists.contains(&-list) => {
                    let id = ids.next();
                    let v = fresh(ids, b);
                    is.insert(b % (is.len() + 1), (id, v));
                    lists.push(list);
                }
                (4, node) if key.is_some() && !is_name => {
                    *node = match node {
                        T::Leaf(v) => {
                            let id = ids.next();
                            T::Map(vec![(id, "v".into(), T::Leaf(v.clone()))])
                        }
                        _ => T::Leaf(json!(b)),
                    }
                }
                _ => {}
            }
        }
    }
}

/// The `# c7` and `# t7` comments of `text`, in order.
fn comments(text: &str) -> Vec<(usize, char)> {
    text.lines()
        .filter_map(|l| {
            let c = &l[l.find("# ")? + 2..];
            let kind = c.chars().next().filter(|k| *k == 'c' || *k == 't')?;
            Some((c[1..].parse().ok()?, kind))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn edits_read_as_the_new_configuration_and_keep_every_comment_not_removed(
        config in config(),
        unit in prop::sample::select(vec![2usize, 4]),
        indented in any::<bool>(),
        flow_match in any::<bool>(),
        blanks in any::<bool>(),
        ops in prop::collection::vec((any::<u8>(), any::<usize>(), any::<usize>()), 1..5),
    ) {
        let mut ids = Ids(0);
        let tree = ids.tree(&config);
        let l = Layout { unit, seq: if indented { unit } else { 0 }, flow_match, blanks };
        let mut r = Render { out: "# A generated configuration.\n\n".into(), comments: Vec::new(), l };
        if let T::Map(ms) = &tree {
            for (i, k, t) in ms {
                r.member(*i, k, t, 0, false);
            }
        }
        let before = r.out;
        let old = tree.value();
        prop_assert_eq!(read(&before), Some(old.clone()), "{}", before);

        let mut changed = tree.clone();
        let mut lists = Vec::new();
        for op in ops {
            mutate(&mut changed, &mut ids, &mut lists, op);
        }
        let new = changed.value();
        let text = edit(&before, &old, &new, read);
        prop_assert!(text.is_some(), "not edited in place:\n{}\n{:#}", before, new);
        let text = text.unwrap_or_default();
        prop_assert_eq!(read(&text), Some(new), "{}", text);

        let mut kept = Vec::new();
        changed.ids(&mut kept);
        let want: Vec<(usize, char)> = r.comments.into_iter().filter(|(id, _)| kept.contains(id)).collect();
        prop_assert_eq!(comments(&text), want, "before:\n{}\nafter:\n{}", before, text);
    }
}
