//! The request body of an OpenAI-compatible API, read whole before
//! admission on a route whose cost its answer names (`response_json`):
//! whether it streams, whether it asked for the usage, and the most output
//! tokens it allows. The reservation comes from the last; a stream that did
//! not ask for its usage is made to (`stream_options.include_usage`), so
//! what the answer costs is always named (docs/cost.md).
//!
//! The fields are read as the servers behind such APIs read them: a
//! document parsed whole, one value per field (a field named twice is
//! refused: parsers differ on which one wins, and so is a name in another
//! case, which Go's decoder takes for the field), numbers as lax readers
//! take them (`"1000"`), keys with their escapes undone (`"str\u0065am"` is
//! `stream`). Where readers differ on a value, the reading that keeps the
//! request on its counter wins: it streams unless every reader says no,
//! it asked for its usage only if every reader says yes. The readers
//! themselves are the oracle: tests/oracle/chat.

/// What a request asks of its answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked {
    /// `stream` is true, or a value no reader takes for false.
    pub stream: bool,
    /// `stream_options.include_usage` is true: the caller reads the usage.
    pub usage_asked: bool,
    /// The most output tokens allowed: the largest of `max_tokens`,
    /// `max_completion_tokens` (OpenAI's Chat Completions) and
    /// `max_output_tokens` (its Responses API).
    pub ceiling: Option<u32>,
}

/// Why a body cannot be read with certainty (refused with 400 or 415).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unclear {
    /// It starts as a JSON object but is not one.
    NotJson,
    /// JSON in UTF-16 or UTF-32 (some parsers detect it; this one does not).
    NotUtf8,
    /// A field read here is named twice.
    Repeated(&'static str),
    /// A field read here is named in another case (`"Stream"`): Go's
    /// decoder takes it for the field, Python's and JavaScript's do not.
    Spelled(&'static str),
    /// Larger than the route reads (its `max_request_bytes`).
    TooLarge(usize),
    /// Compressed (`content-encoding`): read by no one here.
    Encoded,
}

impl Unclear {
    pub fn status(self) -> u16 {
        match self {
            Unclear::NotUtf8 | Unclear::Encoded => 415,
            Unclear::TooLarge(_) => 413,
            _ => 400,
        }
    }

    /// The reason's word, for the problem body and the response details.
    pub fn reason(self) -> &'static str {
        match self {
            Unclear::NotJson => "not_json",
            Unclear::NotUtf8 => "not_utf8",
            Unclear::Repeated(_) | Unclear::Spelled(_) => "ambiguous",
            Unclear::TooLarge(_) => "too_large",
            Unclear::Encoded => "encoded",
        }
    }

    pub(crate) fn detail(self) -> String {
        match self {
            Unclear::NotJson => "the request body starts as a JSON object but is not one".into(),
            Unclear::NotUtf8 => "send the JSON request body in UTF-8".into(),
            Unclear::Repeated(f) => {
                format!("`{f}` is named twice in the request body: name it once")
            }
            Unclear::Spelled(f) => format!(
                "a field of the request body is `{f}` to some servers and not to others: \
                 name it `{f}`, in lowercase"
            ),
            Unclear::TooLarge(cap) => {
                format!("the request body is over the {cap} bytes this route reads")
            }
            Unclear::Encoded => "send the request body without content-encoding".into(),
        }
    }
}

/// Fields read at the top of the document.
const STREAM_OPTIONS: &[u8] = b"stream_options";
const INCLUDE_USAGE: &[u8] = b"include_usage";
const CEILINGS: [&str; 3] = ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// Deeper documents are refused (Python's parser stops near 1,000).
const DEPTH_MAX: usize = 512;

/// One member of an object: its key (escapes undone), and where it lies.
#[derive(Debug, Clone)]
struct Member {
    key: Vec<u8>,
    /// From the key's opening quote to the value's end.
    span: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
}

/// A request body read: what it asks, and its members to rewrite it by.
#[derive(Debug, Clone)]
pub struct ChatBody {
    pub asked: Asked,
    /// The `model` asked for (a price table's key), when it is a string.
    pub model: Option<String>,
    members: Vec<Member>,
    /// The `stream_options` object's own members, if it is one.
    options: Vec<Member>,
}

/// Reads `body`: `Ok(None)` when it is not a JSON object (a form, an upload:
/// nothing is read, nothing changed).
pub fn read(body: &[u8]) -> Result<Option<ChatBody>, Unclear> {
    let start = body.strip_prefix(b"\xEF\xBB\xBF").map_or(0, |_| 3);
    let mut p = Parser { b: body, i: start };
    // RFC 4627's detection: a NUL in the first four bytes, or a UTF-16
    // byte-order mark, is JSON in another encoding.
    let head = body.get(..4).unwrap_or(body);
    if head.contains(&0) || body.starts_with(b"\xFF\xFE") || body.starts_with(b"\xFE\xFF") {
        return Err(Unclear::NotUtf8);
    }
    p.ws();
    if p.peek() != Some(b'{') {
        return Ok(None);
    }
    let members = p.object(0)?;
    p.ws();
    if p.i != body.len() {
        return Err(Unclear::NotJson);
    }
    let one = |name: &'static str| named(&members, name);
    let value = |m: &Member| body.get(m.value.clone()).unwrap_or_default();
    let stream = one("stream")?.is_some_and(|m| !plainly_false(value(m)));
    let mut options = Vec::new();
    if let Some(m) = one("stream_options")? {
        let mut q = Parser {
            b: body,
            i: m.value.start,
        };
        if q.peek() == Some(b'{') {
            options = q.object(1)?;
        }
    }
    let usage_asked = named(&options, "include_usage")
        .map_err(|why| match why {
            Unclear::Spelled(_) => Unclear::Spelled("stream_options.include_usage"),
            _ => Unclear::Repeated("stream_options.include_usage"),
        })?
        .is_some_and(|m| value(m) == b"true");
    let mut ceiling = None;
    for name in CEILINGS {
        if let Some(n) = one(name)?.and_then(|m| whole_number(value(m))) {
            ceiling = Some(ceiling.map_or(n, |c: u32| c.max(n)));
        }
    }
    let model = one("model")?
        .map(value)
        .filter(|v| v.first() == Some(&b'"'))
        .and_then(unquoted)
        .and_then(|v| String::from_utf8(v).ok());
    Ok(Some(ChatBody {
        model,
        asked: Asked {
            stream,
            usage_asked,
            ceiling,
        },
        members,
        options,
    }))
}

/// The member of `members` named `name`, as every decoder reads it: the
/// one whose key is `name`, or none; refused when two keys are `name` (with
/// escapes undone) or when a key differs from it only in case (Go's
/// decoder matches field names case-insensitively, with Unicode's simple
/// folding: `"Stream"`, `"ſtream"`).
fn named<'m>(members: &'m [Member], name: &'static str) -> Result<Option<&'m Member>, Unclear> {
    let mut found = None;
    for m in members {
        if m.key == name.as_bytes() {
            if found.is_some() {
                return Err(Unclear::Repeated(name));
            }
            found = Some(m);
        } else if folds_to(&m.key, name) {
            return Err(Unclear::Spelled(name));
        }
    }
    Ok(found)
}

/// `key` case-folded is `name` (ASCII lowercase).
fn folds_to(key: &[u8], name: &str) -> bool {
    // A fold never takes more than three bytes to one ASCII letter.
    if key.len() < name.len() || key.len() > name.len() * 3 {
        return false;
    }
    let Ok(key) = std::str::from_utf8(key) else {
        return false;
    };
    let mut folded = key
        .chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase);
    name.chars().all(|c| folded.next() == Some(c)) && folded.next().is_none()
}

impl ChatBody {
    /// The request must be made to ask for its usage: it streams and did
    /// not ask.
    pub(crate) fn needs_usage(&self) -> bool {
        self.asked.stream && !self.asked.usage_asked
    }

    /// `body` (the one read) asking for the usage: its members as they
    /// were, but `stream_options`, written last with `include_usage: true`
    /// beside the caller's other options. One member each: no reader can
    /// take the caller's instead.
    pub(crate) fn asking_usage(&self, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(body.len() + 40);
        out.push(b'{');
        for m in self.members.iter().filter(|m| m.key != STREAM_OPTIONS) {
            out.extend_from_slice(body.get(m.span.clone()).unwrap_or_default());
            out.push(b',');
        }
        out.extend_from_slice(b"\"stream_options\":{");
        for m in self.options.iter().filter(|m| m.key != INCLUDE_USAGE) {
            out.extend_from_slice(body.get(m.span.clone()).unwrap_or_default());
            out.push(b',');
        }
        out.extend_from_slice(b"\"include_usage\":true}}");
        out
    }
}

/// A value every reader takes for "no": JSON's `false`, `null`, a zero, an
/// empty string. Anything else streams for some reader (JavaScript's
/// truthiness takes `"no"` and `"0"` for yes; pydantic's lax mode `"yes"`
/// and `1`), so the request is taken to stream: asked for its usage, it is
/// charged exactly by every reader that streams (one that does not and
/// refuses `stream_options` without `stream` refuses the request: nothing
/// is delivered).
fn plainly_false(v: &[u8]) -> bool {
    match v {
        b"false" | b"null" | b"\"\"" => true,
        _ => {
            let zero = v.first().is_some_and(|c| c.is_ascii_digit() || *c == b'-');
            zero && std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .is_some_and(|n| n == 0.0)
        }
    }
}

/// A number, or a string holding one as lax readers take it (JavaScript's
/// `Number` reads `"0x10"` too), rounded up: `None` for anything else, or a
/// negative.
fn whole_number(v: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(&unquoted(v)?)
        .ok()?
        .trim()
        .to_ascii_lowercase();
    let radix = [("0x", 16), ("0o", 8), ("0b", 2)]
        .into_iter()
        .find_map(|(p, r)| Some((text.strip_prefix(p)?, r)));
    let n = match radix {
        Some((digits, r)) => u64::from_str_radix(digits, r).ok()? as f64,
        None if text == "infinity" || text == "+infinity" => f64::INFINITY,
        None => text.parse::<f64>().ok()?,
    };
    (n >= 0.0 && !n.is_nan()).then(|| n.ceil().min(f64::from(u32::MAX)) as u32)
}

/// A string's text (escapes undone), or a bare value's bytes.
fn unquoted(v: &[u8]) -> Option<Vec<u8>> {
    if v.first() == Some(&b'"') {
        let mut p = Parser { b: v, i: 0 };
        return p.string().ok();
    }
    Some(v.to_vec())
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Result<(), Unclear> {
        if self.peek() != Some(c) {
            return Err(Unclear::NotJson);
        }
        self.i += 1;
        Ok(())
    }

    /// An object at `self.i` (its `{`): its members.
    fn object(&mut self, depth: usize) -> Result<Vec<Member>, Unclear> {
        self.eat(b'{')?;
        let mut members = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(members);
        }
        loop {
            self.ws();
            let start = self.i;
            let key = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let v = self.i;
            self.value(depth + 1)?;
            members.push(Member {
                key,
                span: start..self.i,
                value: v..self.i,
            });
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(members);
                }
                _ => return Err(Unclear::NotJson),
            }
        }
    }

    /// Any value: its end is where `self.i` stops.
    fn value(&mut self, depth: usize) -> Result<(), Unclear> {
        if depth > DEPTH_MAX {
            return Err(Unclear::NotJson);
        }
        match self.peek() {
            Some(b'{') => self.object(depth).map(drop),
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        _ => return Err(Unclear::NotJson),
                    }
                }
            }
            Some(b'"') => self.string().map(drop),
            Some(_) => {
                // A number or a literal (Python's `NaN` and `Infinity` too).
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c))
                {
                    self.i += 1;
                }
                if self.i == start {
                    return Err(Unclear::NotJson);
                }
                Ok(())
            }
            None => Err(Unclear::NotJson),
        }
    }

    /// A string at `self.i` (its `"`): its text, escapes undone (a lone
    /// surrogate as U+FFFD: it names no field read here).
    fn string(&mut self) -> Result<Vec<u8>, Unclear> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(Unclear::NotJson);
            };
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(Unclear::NotJson);
                    };
                    self.i += 1;
                    let plain = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let ch = self.unicode()?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        _ => return Err(Unclear::NotJson),
                    };
                    out.push(plain);
                }
                c if c < 0x20 => return Err(Unclear::NotJson),
                c => out.push(c),
            }
        }
    }

    /// After `\u`: one character (a surrogate pair's two escapes joined).
    fn unicode(&mut self) -> Result<char, Unclear> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) && self.b.get(self.i..self.i + 2) == Some(b"\\u") {
            let at = self.i;
            self.i += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
            }
            self.i = at;
        }
        Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'))
    }

    fn hex4(&mut self) -> Result<u32, Unclear> {
        let digits = self.b.get(self.i..self.i + 4).ok_or(Unclear::NotJson)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(Unclear::NotJson);
        }
        let text = std::str::from_utf8(digits).map_err(|_| Unclear::NotJson)?;
        let n = u32::from_str_radix(text, 16).map_err(|_| Unclear::NotJson)?;
        self.i += 4;
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn asked(body: &str) -> Result<Option<Asked>, Unclear> {
        read(body.as_bytes()).map(|r| r.map(|r| r.asked))
    }

    #[test]
    fn the_fields_are_read_as_lax_readers_take_them() {
        let a = asked(r#"{"model":"m","stream":true,"max_tokens":300}"#);
        assert_eq!(
            a,
            Ok(Some(Asked {
                stream: true,
                usage_asked: false,
                ceiling: Some(300)
            }))
        );
        for (body, stream) in [
            (r#"{"stream":"true"}"#, true),
            (r#"{"stream":"YES"}"#, true),
            (r#"{"stream":1}"#, true),
            (r#"{"stream":2}"#, true),
            (r#"{"str\u0065am":true}"#, true),
            // JavaScript's truthiness: a non-empty string streams.
            (r#"{"stream":"no"}"#, true),
            (r#"{"stream":"0"}"#, true),
            (r#"{"stream":0}"#, false),
            (r#"{"stream":-0.0}"#, false),
            (r#"{"stream":""}"#, false),
            (r#"{"stream":null}"#, false),
            (r#"{"stream":false}"#, false),
            (r#"{"streams":true}"#, false),
        ] {
            assert_eq!(
                asked(body).map(|a| a.map(|a| a.stream)),
                Ok(Some(stream)),
                "{body}"
            );
        }
        for (body, ceiling) in [
            (r#"{"max_tokens":"1000"}"#, Some(1000)),
            (
                r#"{"max_tokens":10,"max_completion_tokens":4000}"#,
                Some(4000),
            ),
            (r#"{"max_output_tokens":2.5}"#, Some(3)),
            (r#"{"max_tokens":-5}"#, None),
            (r#"{"max_tokens":1e99}"#, Some(u32::MAX)),
            (r#"{"max_tokens":"0x10"}"#, Some(16)),
            (r#"{"max_tokens":" 12 "}"#, Some(12)),
        ] {
            assert_eq!(
                asked(body).map(|a| a.map(|a| a.ceiling)),
                Ok(Some(ceiling)),
                "{body}"
            );
        }
        let a = asked(r#"{"stream":true,"stream_options":{"include_usage":true}}"#);
        assert!(a.is_ok_and(|a| a.is_some_and(|a| a.usage_asked)));
        // Only JSON's `true` is asked by every reader (Go refuses a string).
        let a = asked(r#"{"stream":true,"stream_options":{"include_usage":"true"}}"#);
        assert!(a.is_ok_and(|a| a.is_some_and(|a| !a.usage_asked)));
    }

    #[test]
    fn a_field_named_twice_or_a_broken_document_is_refused() {
        for (body, why) in [
            (
                r#"{"stream":false,"stream":true}"#,
                Unclear::Repeated("stream"),
            ),
            (
                r#"{"stream":false,"str\u0065am":true}"#,
                Unclear::Repeated("stream"),
            ),
            (
                r#"{"max_tokens":1,"max_tokens":90000}"#,
                Unclear::Repeated("max_tokens"),
            ),
            (
                r#"{"stream_options":{"include_usage":true,"include_usage":false}}"#,
                Unclear::Repeated("stream_options.include_usage"),
            ),
            (r#"{"Stream":true}"#, Unclear::Spelled("stream")),
            (
                r#"{"stream":false,"STREAM":true}"#,
                Unclear::Spelled("stream"),
            ),
            ("{\"\u{17F}tream\":true}", Unclear::Spelled("stream")),
            (r#"{"MAX_TOKENS":900}"#, Unclear::Spelled("max_tokens")),
            (
                r#"{"stream_options":{"Include_Usage":false}}"#,
                Unclear::Spelled("stream_options.include_usage"),
            ),
            (r#"{"stream":true"#, Unclear::NotJson),
            (r#"{"stream":true} {}"#, Unclear::NotJson),
            ("{\"a\":\"\u{1}\"}", Unclear::NotJson),
        ] {
            assert_eq!(asked(body), Err(why), "{body}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(600), "]".repeat(600));
        assert_eq!(asked(&deep), Err(Unclear::NotJson));
        let utf16: Vec<u8> = "{\"stream\":true}"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(read(&utf16).map(|r| r.is_some()), Err(Unclear::NotUtf8));
        // Not a JSON object: nothing read, nothing refused.
        assert_eq!(asked("a=1&b=2"), Ok(None));
        assert_eq!(asked(""), Ok(None));
        // A byte-order mark is read past, as Python's parser does.
        assert!(read(b"\xEF\xBB\xBF{\"stream\":true}").is_ok_and(|r| r.is_some()));
    }

    #[test]
    fn the_rewrite_asks_for_the_usage_once_and_keeps_everything_else() {
        let body =
            br#"{ "model" : "m", "stream_options": {"include_usage": false, "x": [1,{"y":"}"}]},
            "messages":[{"role":"user","content":"hi \"there\""}], "stream": true }"#;
        let r = read(body).ok().flatten();
        let Some(r) = r else { panic!("not read") };
        assert!(r.needs_usage());
        let out = r.asking_usage(body);
        let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["stream_options"]["x"][1]["y"], "}");
        assert_eq!(v["messages"][0]["content"], "hi \"there\"");
        assert_eq!(v["model"], "m");
        assert_eq!(v["stream"], true);
        let again = read(&out).ok().flatten().map(|r| r.asked);
        assert_eq!(again.map(|a| (a.stream, a.usage_asked)), Some((true, true)));
        // No options at all, or options that are not an object.
        for body in [
            r#"{"stream":true}"#,
            r#"{"stream":true,"stream_options":null}"#,
        ] {
            let r = read(body.as_bytes()).ok().flatten();
            let out = r.map(|r| r.asking_usage(body.as_bytes()));
            let v: Option<serde_json::Value> = out.and_then(|o| serde_json::from_slice(&o).ok());
            assert_eq!(
                v.map(|v| v["stream_options"]["include_usage"].clone()),
                Some(serde_json::Value::Bool(true)),
                "{body}"
            );
        }
    }
}
