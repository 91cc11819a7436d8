//! A bound's `applies_to` as people write it: the console's "applies to"
//! field takes the seed's words and turns them into the configuration's
//! [`Access`](crate::config::Access) (its JSON), or says in the page's words
//! what to write instead.
//!
//! What it takes, items separated by commas, "and" or "or" (any of them
//! matches, as the JSON's lists do: "partner and trial" is everyone
//! holding partner or trial, two pricing tiers' callers):
//! - `partner` or `role:partner`: a role (a bare word is a role; a plural
//!   whose singular the configuration already names is that role:
//!   "partners" → partner);
//! - `org:acme`: an organisation;
//! - `signed in` (or `authenticated`): any signed-in caller;
//! - `anonymous`: any caller without an identity;
//! - `everyone`, `everybody`, `anyone` or nothing: no `applies_to`.
//!
//! A leading "for", "anyone holding" or "holding" is read past, as the seed
//! writes its tiers ("for anyone holding partner"). A bare word within two
//! letters of a role or organisation the configuration names, or of one of
//! the words above, without being it, is refused with the fix
//! (`unknown word "partnr": write role:partner, …`): a typo would otherwise
//! be a new role nobody holds.

use crate::config::ConfigError;
use crate::config::ErrorKind;
use serde_json::{json, Map, Value};

/// The roles and organisations a configuration already names in its
/// bounds' `applies_to` (routes' and operations'), in the order written:
/// what a bare word is checked against and what the field suggests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Known {
    pub roles: Vec<String>,
    pub orgs: Vec<String>,
}

const KEYWORDS: [&str; 4] = ["signed in", "anonymous", "everyone", "authenticated"];
const EVERYBODY: [&str; 3] = ["everyone", "everybody", "anyone"];

/// Every bound of a configuration (as JSON), with its JSON path.
fn bounds_mut(config: &mut Value) -> Vec<(String, &mut Value)> {
    let mut out = Vec::new();
    let Some(routes) = config.get_mut("routes").and_then(Value::as_array_mut) else {
        return out;
    };
    for (i, route) in routes.iter_mut().enumerate() {
        let Some(route) = route.as_object_mut() else {
            continue;
        };
        let mut ops = None;
        let mut own = None;
        for (k, v) in route.iter_mut() {
            match k.as_str() {
                "bounds" => own = v.as_array_mut(),
                "operations" => ops = v.as_array_mut(),
                _ => {}
            }
        }
        if let Some(bs) = own {
            for (j, b) in bs.iter_mut().enumerate() {
                out.push((format!("$.routes[{i}].bounds[{j}]"), b));
            }
        }
        if let Some(ops) = ops {
            for (k, op) in ops.iter_mut().enumerate() {
                let Some(bs) = op.get_mut("bounds").and_then(Value::as_array_mut) else {
                    continue;
                };
                for (j, b) in bs.iter_mut().enumerate() {
                    out.push((format!("$.routes[{i}].operations[{k}].bounds[{j}]"), b));
                }
            }
        }
    }
    out
}

/// The roles and organisations `config`'s bounds name, written as JSON or
/// as the field's words (those that read without an error).
pub fn known(config: &Value) -> Known {
    let mut config = config.clone();
    let mut k = Known::default();
    let mut texts = Vec::new();
    for (_, b) in bounds_mut(&mut config) {
        match b.get("applies_to") {
            Some(Value::String(t)) => texts.push(t.clone()),
            Some(a) => add(&mut k, a),
            None => {}
        }
    }
    // Words typed are read against what the JSON and the bounds before
    // them name: a near miss of those (a typo) names nothing.
    for t in texts {
        if let Ok(a) = parse(&t, &k) {
            add(&mut k, &a);
        }
    }
    k
}

fn add(k: &mut Known, a: &Value) {
    let names = |key: &str| -> Vec<String> {
        a.get(key)
            .and_then(Value::as_array)
            .map(|xs| {
                xs.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    for r in names("roles") {
        if !k.roles.contains(&r) {
            k.roles.push(r);
        }
    }
    for o in names("orgs") {
        if !k.orgs.contains(&o) {
            k.orgs.push(o);
        }
    }
}

/// The field's text read into `applies_to`'s JSON (`Null`: everybody, no
/// `applies_to`), or what to write instead.
pub fn parse(text: &str, known: &Known) -> Result<Value, String> {
    let mut roles: Vec<String> = Vec::new();
    let mut orgs: Vec<String> = Vec::new();
    let (mut authenticated, mut anonymous, mut everybody) = (false, false, false);
    for item in items(text) {
        let lower: Vec<String> = item.iter().map(|w| w.to_lowercase()).collect();
        let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
        match lower.as_slice() {
            ["signed", "in"] | ["signed-in"] | ["authenticated"] => authenticated = true,
            ["anonymous"] => anonymous = true,
            [one] if EVERYBODY.contains(one) => everybody = true,
            _ => match item.as_slice() {
                [one] => match prefixed(one)? {
                    Some(Grant::Role(r)) => push(&mut roles, r),
                    Some(Grant::Org(o)) => push(&mut orgs, o),
                    None => push(&mut roles, bare(one, known)?),
                },
                words => {
                    return Err(format!(
                        "unknown words \"{}\": write each role, role:NAME, org:NAME, signed in or anonymous, separated by \"and\" or commas",
                        words.join(" ")
                    ))
                }
            },
        }
    }
    let narrowed = !roles.is_empty() || !orgs.is_empty() || authenticated || anonymous;
    if everybody && narrowed {
        return Err(
            "\"everyone\" with others: everyone already includes them; write only everyone (or leave the field empty), or only whom the bound is about"
                .to_string(),
        );
    }
    if !narrowed {
        return Ok(Value::Null);
    }
    let mut a = Map::new();
    if !roles.is_empty() {
        a.insert("roles".into(), json!(roles));
    }
    if !orgs.is_empty() {
        a.insert("orgs".into(), json!(orgs));
    }
    if authenticated {
        a.insert("authenticated".into(), json!(true));
    }
    if anonymous {
        a.insert("anonymous".into(), json!(true));
    }
    Ok(Value::Object(a))
}

enum Grant {
    Role(String),
    Org(String),
}

fn push(xs: &mut Vec<String>, x: String) {
    if !xs.contains(&x) {
        xs.push(x);
    }
}

/// `role:NAME` or `org:NAME`; `None` for a bare word.
fn prefixed(word: &str) -> Result<Option<Grant>, String> {
    let Some((kind, name)) = word.split_once(':') else {
        return Ok(None);
    };
    if name.is_empty() {
        return Err(format!(
            "\"{word}\" names nobody: write {kind}:NAME, e.g. role:partner or org:acme"
        ));
    }
    match kind.to_lowercase().as_str() {
        "role" => Ok(Some(Grant::Role(name.to_string()))),
        "org" => Ok(Some(Grant::Org(name.to_string()))),
        _ => Err(format!(
            "unknown word \"{kind}:\": write role:NAME, org:NAME, signed in or anonymous"
        )),
    }
}

/// A bare word as a role: one the configuration names (or its singular),
/// else a new role unless it is a near miss of a known name or word.
fn bare(word: &str, known: &Known) -> Result<String, String> {
    if known.roles.iter().any(|r| r == word) {
        return Ok(word.to_string());
    }
    if let Some(one) = word.strip_suffix('s') {
        if known.roles.iter().any(|r| r == one) {
            return Ok(one.to_string());
        }
    }
    let lower = word.to_lowercase();
    if let Some(o) = known.orgs.iter().find(|o| **o == word) {
        return Err(format!(
            "\"{word}\" is an organisation here: write org:{o} (or role:{word} for a role of that name)"
        ));
    }
    let near =
        |name: &str| word.chars().count() >= 4 && distance(&lower, &name.to_lowercase()) <= 2;
    let fix = known
        .roles
        .iter()
        .find(|r| near(r))
        .map(|r| format!("role:{r}"))
        .or_else(|| {
            known
                .orgs
                .iter()
                .find(|o| near(o))
                .map(|o| format!("org:{o}"))
        })
        .or_else(|| KEYWORDS.iter().find(|k| near(k)).map(|k| (*k).to_string()));
    match fix {
        Some(fix) => {
            let rest: Vec<&str> = ["role:NAME", "org:NAME", "signed in", "anonymous"]
                .into_iter()
                .filter(|w| {
                    !(fix.starts_with("role:") && *w == "role:NAME"
                        || fix.starts_with("org:") && *w == "org:NAME"
                        || *w == fix)
                })
                .collect();
            let (last, init) = rest.split_last().map_or(("", &[][..]), |(l, i)| (*l, i));
            let mut all = vec![fix.as_str()];
            all.extend_from_slice(init);
            Err(format!(
                "unknown word \"{word}\": write {} or {last} (role:{word} for a new role of that name)",
                all.join(", ")
            ))
        }
        None => Ok(word.to_string()),
    }
}

/// The items of the field's text: groups of words between commas, "and",
/// "or" and "&", past a leading "for", "anyone holding" or "holding".
fn items(text: &str) -> Vec<Vec<String>> {
    let spaced = text.replace(',', " , ").replace('&', " & ");
    let mut words: Vec<&str> = spaced.split_whitespace().collect();
    let starts = |words: &[&str], w: &[&str]| {
        words.len() >= w.len() && words.iter().zip(w).all(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    for lead in [&["for"][..], &["anyone", "holding"], &["holding"]] {
        if starts(&words, lead) {
            words.drain(..lead.len());
        }
    }
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    for w in words {
        let sep =
            w == "," || w == "&" || w.eq_ignore_ascii_case("and") || w.eq_ignore_ascii_case("or");
        if sep {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(w.to_string());
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Levenshtein distance, for near misses (words of a field: short).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev.get(j).copied().unwrap_or(0) + usize::from(ca != *cb);
            let del = prev.get(j + 1).copied().unwrap_or(0) + 1;
            let ins = cur.get(j).copied().unwrap_or(0) + 1;
            cur.push(sub.min(del).min(ins));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// `applies_to`'s JSON as the field shows it: "partner and trial",
/// "org:acme", "signed in"; empty for everybody. A role that would read as
/// another word is written role:NAME.
pub fn write(applies_to: &Value) -> String {
    let Some(a) = applies_to.as_object() else {
        return String::new();
    };
    let mut parts: Vec<String> = Vec::new();
    for (key, v) in a {
        match (key.as_str(), v) {
            ("roles", Value::Array(rs)) => {
                for r in rs.iter().filter_map(Value::as_str) {
                    let plain = !r.is_empty()
                        && r.chars().all(|c| c.is_alphanumeric() || "-_.".contains(c))
                        && ![
                            "for",
                            "and",
                            "or",
                            "holding",
                            "anyone",
                            "anonymous",
                            "everyone",
                            "everybody",
                            "authenticated",
                            "signed-in",
                        ]
                        .contains(&r.to_lowercase().as_str());
                    parts.push(if plain {
                        r.to_string()
                    } else {
                        format!("role:{r}")
                    });
                }
            }
            ("orgs", Value::Array(os)) => parts.extend(
                os.iter()
                    .filter_map(Value::as_str)
                    .map(|o| format!("org:{o}")),
            ),
            ("authenticated", Value::Bool(true)) => parts.push("signed in".into()),
            ("anonymous", Value::Bool(true)) => parts.push("anonymous".into()),
            _ => {}
        }
    }
    match parts.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, init)) => format!("{} and {last}", init.join(", ")),
    }
}

/// What the field may go on with: its text with the word being typed
/// completed by a role or organisation the configuration names, or one of
/// the field's words.
pub fn suggest(text: &str, known: &Known) -> Vec<String> {
    let cut = text
        .rfind(|c: char| c.is_whitespace() || c == ',')
        .map_or(0, |i| i + 1);
    let (head, typed) = text.split_at(cut);
    let lower = typed.to_lowercase();
    let mut words: Vec<String> = known.roles.clone();
    words.extend(known.orgs.iter().map(|o| format!("org:{o}")));
    words.extend(["signed in", "anonymous"].map(String::from));
    if head.trim().is_empty() {
        words.push("everyone".into());
    }
    let already: Vec<String> = items(head).into_iter().map(|i| i.join(" ")).collect();
    words
        .into_iter()
        // A word equal to what is typed completes nothing (the field's own
        // text names it while it is typed).
        .filter(|w| {
            w.to_lowercase().starts_with(&lower) && w.len() > typed.len() && !already.contains(w)
        })
        .map(|w| format!("{head}{w}"))
        .collect()
}

/// Every `applies_to` of `config` written as the field's words (a string)
/// replaced by its JSON; the ones that do not read are removed, and said at
/// their paths in the page's words.
pub fn normalize(config: &mut Value) -> Vec<ConfigError> {
    let k = known(config);
    let mut errors = Vec::new();
    for (path, b) in bounds_mut(config) {
        let Some(obj) = b.as_object_mut() else {
            continue;
        };
        let Some(Value::String(text)) = obj.get("applies_to") else {
            continue;
        };
        match parse(text, &k) {
            Ok(Value::Null) => {
                obj.remove("applies_to");
            }
            Ok(a) => {
                obj.insert("applies_to".into(), a);
            }
            Err(message) => {
                obj.remove("applies_to");
                errors.push(ConfigError {
                    path: format!("{path}.applies_to"),
                    kind: ErrorKind::Invalid,
                    message,
                });
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(roles: &[&str], orgs: &[&str]) -> Known {
        Known {
            roles: roles.iter().map(|s| s.to_string()).collect(),
            orgs: orgs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_seeds_words_read_as_the_configurations() {
        let none = Known::default();
        assert_eq!(parse("partner", &none), Ok(json!({"roles": ["partner"]})));
        assert_eq!(
            parse("role:partner", &none),
            Ok(json!({"roles": ["partner"]}))
        );
        assert_eq!(
            parse("for anyone holding partner", &none),
            Ok(json!({"roles": ["partner"]}))
        );
        assert_eq!(
            parse("partners and trial", &k(&["partner"], &[])),
            Ok(json!({"roles": ["partner", "trial"]}))
        );
        assert_eq!(parse("org:acme", &none), Ok(json!({"orgs": ["acme"]})));
        assert_eq!(
            parse("signed in", &none),
            Ok(json!({"authenticated": true}))
        );
        assert_eq!(
            parse("Signed in", &none),
            Ok(json!({"authenticated": true}))
        );
        assert_eq!(parse("anonymous", &none), Ok(json!({"anonymous": true})));
        assert_eq!(parse("everyone", &none), Ok(Value::Null));
        assert_eq!(parse("  ", &none), Ok(Value::Null));
        assert_eq!(
            parse("partner, org:acme or anonymous", &none),
            Ok(json!({"roles": ["partner"], "orgs": ["acme"], "anonymous": true}))
        );
    }

    #[test]
    fn a_near_miss_is_refused_with_the_fix_in_the_pages_words() {
        let known = k(&["partner"], &["acme"]);
        assert_eq!(
            parse("partnr", &known),
            Err("unknown word \"partnr\": write role:partner, org:NAME, signed in or anonymous (role:partnr for a new role of that name)".to_string())
        );
        let e = parse("anonymus", &Known::default()).unwrap_err();
        assert!(
            e.starts_with("unknown word \"anonymus\": write anonymous, "),
            "{e}"
        );
        let e = parse("acme", &known).unwrap_err();
        assert!(e.contains("org:acme"), "{e}");
        let e = parse("team:x", &known).unwrap_err();
        assert!(e.contains("role:NAME, org:NAME"), "{e}");
        assert!(!e.contains("unknown field"), "{e}");
        let e = parse("everyone and partner", &known).unwrap_err();
        assert!(e.contains("everyone already includes"), "{e}");
        // Without a near miss, a bare word is a new role.
        assert_eq!(parse("gold", &known), Ok(json!({"roles": ["gold"]})));
    }

    #[test]
    fn written_back_it_reads_the_same() {
        for a in [
            json!({"roles": ["partner", "trial"]}),
            json!({"orgs": ["acme"], "authenticated": true}),
            json!({"roles": ["anonymous"]}),
            json!({"anonymous": true}),
        ] {
            let text = write(&a);
            assert_eq!(parse(&text, &Known::default()), Ok(a.clone()), "{text}");
        }
        assert_eq!(
            write(&json!({"roles": ["partner", "trial"]})),
            "partner and trial"
        );
        assert_eq!(write(&Value::Null), "");
    }

    #[test]
    fn suggestions_complete_the_word_being_typed_from_what_the_configuration_names() {
        let known = k(&["partner", "trial"], &["acme"]);
        assert_eq!(suggest("par", &known), ["partner"]);
        assert_eq!(suggest("partner and t", &known), ["partner and trial"]);
        assert_eq!(suggest("org:", &known), ["org:acme"]);
        assert_eq!(suggest("si", &known), ["signed in"]);
        assert!(suggest("trial", &known).is_empty());
    }

    #[test]
    fn a_configuration_with_words_reads_as_json_and_says_what_does_not() {
        let mut c = json!({"routes": [{"name": "api", "bounds": [
            {"per": "user", "limit": 1000, "window": "PT1M", "applies_to": "partner"},
            {"per": "user", "limit": 60, "window": "PT1M", "applies_to": "for trial"},
            {"per": "user", "limit": 60, "window": "PT1M", "applies_to": "partnr"},
            {"per": "user", "limit": 60, "window": "PT1M", "applies_to": "everyone"}]}]});
        let errors = normalize(&mut c);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].path, "$.routes[0].bounds[2].applies_to");
        assert_eq!(
            c["routes"][0]["bounds"][0]["applies_to"],
            json!({"roles": ["partner"]})
        );
        assert_eq!(
            c["routes"][0]["bounds"][1]["applies_to"],
            json!({"roles": ["trial"]})
        );
        assert!(c["routes"][0]["bounds"][3].get("applies_to").is_none());
        assert_eq!(known(&c), k(&["partner", "trial"], &[]));
    }
}
