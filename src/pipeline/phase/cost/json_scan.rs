//! A JSON document read as it passes, chunk by chunk, keeping nothing of
//! it but the scanner's state: the value at one JSON pointer (the last of
//! duplicate keys wins, as in a parsed document) and how many bytes of
//! text the document carries (string values under a text key, such as an
//! answer's `content`), from which what a cut answer delivered is
//! estimated. Memory is the nesting depth, whatever the document's size:
//! no answer is too large to count.
//!
//! The steps a byte may take are out of line (`#[inline(never)]`): inlined
//! into the loop over the bytes they cost the meter's JSON answer 62% more
//! fuel (meter/, "cost in a JSON answer").

/// Keys whose string values are text an answer delivers (OpenAI's
/// `content` and `refusal`, tool-call `arguments`; Anthropic's `text`,
/// `thinking`, `partial_json`; the Responses API's `delta`; the reasoning
/// DeepSeek, vLLM and OpenRouter stream as `reasoning_content` or
/// `reasoning`).
const TEXT_KEYS: [&[u8]; 9] = [
    b"content",
    b"reasoning_content",
    b"reasoning",
    b"text",
    b"delta",
    b"arguments",
    b"refusal",
    b"thinking",
    b"partial_json",
];

/// The longest key compared with a pointer token or a text key; a longer
/// one is neither.
const KEY_MAX: usize = 64;
/// The longest number kept (longer ones are read, and name no cost).
const NUMBER_MAX: usize = 40;
/// Levels kept as frames; deeper ones (never on the pointer's path) as one
/// bit each, so a deep document costs an eighth of a byte a level.
const DEPTH_MAX: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// A value may start (after `[`, `:`, `,` in an array, or at the top).
    Value,
    /// After a value: `,`, a closing bracket, or the end.
    After,
    /// In an object, a key (or `}`) may start.
    Key,
    /// After a key: `:`.
    Colon,
    /// In a string (a key's, or a value's).
    Str,
    /// After a backslash in a string.
    Escape,
    /// In `\uXXXX`: how many hex digits are still to come.
    Unicode(u8),
    /// In a number or a literal (`true`, `false`, `null`).
    Bare,
    /// The document is not JSON: nothing more is read.
    Broken,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    object: bool,
    /// The array's next index.
    index: usize,
    /// The current key or index is the pointer's token at this depth (and
    /// every frame above matched).
    on_path: bool,
}

#[derive(Debug)]
pub(crate) struct JsonScan {
    pointer: Vec<Vec<u8>>,
    stack: Vec<Frame>,
    /// Levels past `DEPTH_MAX`: whether each is an object, a bit each.
    deep: Vec<u64>,
    deep_len: usize,
    lex: Lex,
    /// The string being read is a key.
    in_key: bool,
    key: Vec<u8>,
    key_long: bool,
    /// The last key read names text.
    text_key: bool,
    /// The value being read is at the pointer, and what it holds so far.
    at_pointer: bool,
    number: Vec<u8>,
    number_long: bool,
    unicode: u32,
    /// A complete top-level value was read.
    done: bool,
    /// A `,` was the last token: a closing bracket may not follow.
    after_comma: bool,
    found: Option<u32>,
    text: u64,
}

impl JsonScan {
    /// A scan for the value at `pointer`'s tokens (unescaped).
    pub fn new(pointer: &[String]) -> JsonScan {
        JsonScan {
            pointer: pointer.iter().map(|t| t.as_bytes().to_vec()).collect(),
            stack: Vec::new(),
            deep: Vec::new(),
            deep_len: 0,
            lex: Lex::Value,
            in_key: false,
            key: Vec::new(),
            key_long: false,
            text_key: false,
            at_pointer: false,
            number: Vec::new(),
            number_long: false,
            unicode: 0,
            done: false,
            after_comma: false,
            found: None,
            text: 0,
        }
    }

    /// The next bytes of the document.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some((&b, after)) = rest.split_first() {
            match self.lex {
                Lex::Broken => return,
                // Most of a document is the inside of strings and the space
                // between tokens: taken a run at a time.
                Lex::Str => {
                    let run = rest
                        .iter()
                        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                        .unwrap_or(rest.len());
                    if run > 0 {
                        let (text, tail) = rest.split_at(run);
                        self.string_run(text);
                        rest = tail;
                        continue;
                    }
                }
                Lex::Value | Lex::After | Lex::Key | Lex::Colon if b.is_ascii_whitespace() => {
                    let run = rest
                        .iter()
                        .position(|c| !c.is_ascii_whitespace())
                        .unwrap_or(rest.len());
                    rest = rest.get(run..).unwrap_or_default();
                    continue;
                }
                _ => {}
            }
            self.byte(b);
            rest = after;
        }
    }

    /// A run of a string's bytes with no quote, backslash or control.
    fn string_run(&mut self, run: &[u8]) {
        if self.in_key {
            let room = KEY_MAX.saturating_sub(self.key.len());
            if run.len() > room {
                self.key_long = true;
            }
            self.key
                .extend_from_slice(run.get(..room.min(run.len())).unwrap_or_default());
        } else if self.text_key {
            self.text += run.len() as u64;
        }
    }

    /// Reads another document with the same pointer, keeping the
    /// allocations (an event stream's next event).
    pub fn reset(&mut self) {
        self.stack.clear();
        self.deep.clear();
        self.deep_len = 0;
        self.lex = Lex::Value;
        self.in_key = false;
        self.key.clear();
        self.key_long = false;
        self.text_key = false;
        self.at_pointer = false;
        self.number.clear();
        self.number_long = false;
        self.done = false;
        self.after_comma = false;
        self.found = None;
        self.text = 0;
    }

    /// The document ended: [`JsonScan::finish`] without giving the scan up.
    pub fn end(&mut self) -> Option<u32> {
        if self.lex == Lex::Bare {
            self.end_bare();
        }
        (self.done && self.depth() == 0 && self.lex == Lex::After)
            .then_some(self.found)
            .flatten()
    }

    /// The document ended: the cost at the pointer (a non-negative number,
    /// rounded up) if the whole document was one JSON value.
    pub fn finish(mut self) -> Option<u32> {
        self.end()
    }

    /// Bytes of text read so far (whether or not the document ends well).
    pub(crate) fn text_bytes(&self) -> u64 {
        self.text
    }

    fn depth(&self) -> usize {
        self.stack.len() + self.deep_len
    }

    /// Every level is a frame, and each is on the pointer's path.
    fn all_on_path(&self) -> bool {
        self.deep_len == 0 && self.stack.iter().all(|f| f.on_path)
    }

    /// Whether the innermost level is an object (`None` at the top).
    fn top_object(&self) -> Option<bool> {
        if self.deep_len > 0 {
            let i = self.deep_len - 1;
            return Some(
                self.deep
                    .get(i / 64)
                    .is_some_and(|w| w >> (i % 64) & 1 == 1),
            );
        }
        self.stack.last().map(|f| f.object)
    }

    fn push_level(&mut self, object: bool) {
        if self.stack.len() < DEPTH_MAX {
            self.stack.push(Frame {
                object,
                index: 0,
                on_path: false,
            });
            return;
        }
        let i = self.deep_len;
        if i / 64 >= self.deep.len() {
            self.deep.push(0);
        }
        if let Some(w) = self.deep.get_mut(i / 64) {
            let bit = 1u64 << (i % 64);
            *w = if object { *w | bit } else { *w & !bit };
        }
        self.deep_len += 1;
    }

    fn pop_level(&mut self) {
        if self.deep_len > 0 {
            self.deep_len -= 1;
        } else {
            self.stack.pop();
        }
    }

    fn broken(&mut self) {
        self.lex = Lex::Broken;
    }

    /// Whether the value about to start is at the pointer.
    fn value_on_path(&self) -> bool {
        self.depth() == self.pointer.len() && self.all_on_path()
    }

    #[inline(never)]
    fn start_value(&mut self, b: u8) {
        self.after_comma = false;
        self.at_pointer = self.value_on_path();
        if self.depth() <= self.pointer.len() && self.all_on_path() {
            // A later value at the pointer, or at a key on its way,
            // replaces an earlier one, as in a parsed document.
            self.found = None;
        }
        match b {
            b'{' | b'[' => {
                let parent_on_path = self.all_on_path();
                let object = b == b'{';
                self.push_level(object);
                if object {
                    self.lex = Lex::Key;
                } else {
                    self.set_index(parent_on_path);
                    self.lex = Lex::Value;
                }
                self.text_key = false;
            }
            b'"' => {
                self.in_key = false;
                self.lex = Lex::Str;
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                self.number.clear();
                self.number_long = false;
                self.number.push(b);
                self.lex = Lex::Bare;
            }
            _ => self.broken(),
        }
    }

    /// The current array frame's index is its next element's.
    #[inline(never)]
    fn set_index(&mut self, parent_on_path: bool) {
        if self.deep_len > 0 {
            return;
        }
        let depth = self.stack.len();
        let token = depth
            .checked_sub(1)
            .and_then(|d| self.pointer.get(d))
            .map(Vec::as_slice);
        if let Some(f) = self.stack.last_mut() {
            // An index is digits without a sign or a leading zero (RFC 6901).
            f.on_path = parent_on_path
                && token.is_some_and(|t| {
                    !t.is_empty()
                        && t.iter().all(u8::is_ascii_digit)
                        && (t == b"0" || !t.starts_with(b"0"))
                        && std::str::from_utf8(t)
                            .ok()
                            .and_then(|t| t.parse::<usize>().ok())
                            == Some(f.index)
                });
        }
    }

    #[inline(never)]
    fn end_value(&mut self) {
        self.at_pointer = false;
        if self.depth() == 0 {
            self.done = true;
        }
        self.lex = Lex::After;
    }

    #[inline(never)]
    fn end_bare(&mut self) {
        let ok = match self.number.as_slice() {
            b"true" | b"false" | b"null" => true,
            n => n.first().is_some_and(|c| *c == b'-' || c.is_ascii_digit()),
        };
        if !ok {
            return self.broken();
        }
        if self.at_pointer {
            self.found = (!self.number_long)
                .then(|| std::str::from_utf8(&self.number).ok())
                .flatten()
                .and_then(super::units);
        }
        self.end_value();
    }

    fn byte(&mut self, b: u8) {
        match self.lex {
            Lex::Str => match b {
                b'"' => self.end_string(),
                b'\\' => self.lex = Lex::Escape,
                // A control character is no JSON unless escaped.
                0..=0x1F => self.broken(),
                _ => self.string_byte(b),
            },
            Lex::Escape => {
                self.lex = Lex::Str;
                match b {
                    b'u' => {
                        self.unicode = 0;
                        self.lex = Lex::Unicode(4);
                    }
                    b'"' | b'\\' | b'/' => self.string_byte(b),
                    b'b' => self.string_byte(8),
                    b'f' => self.string_byte(12),
                    b'n' => self.string_byte(b'\n'),
                    b'r' => self.string_byte(b'\r'),
                    b't' => self.string_byte(b'\t'),
                    _ => self.broken(),
                }
            }
            Lex::Unicode(left) => {
                let Some(d) = char::from(b).to_digit(16) else {
                    return self.broken();
                };
                self.unicode = self.unicode << 4 | d;
                if left > 1 {
                    self.lex = Lex::Unicode(left - 1);
                } else {
                    self.lex = Lex::Str;
                    // A key compares its code points as UTF-8; a surrogate
                    // half stands for itself (two halves: two bytes each,
                    // which only text counts).
                    let mut buf = [0u8; 4];
                    let bytes = char::from_u32(self.unicode)
                        .map_or(&b"??"[..], |c| c.encode_utf8(&mut buf).as_bytes());
                    for &x in bytes {
                        self.string_byte(x);
                    }
                }
            }
            Lex::Bare => match b {
                b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'.' | b'+' | b'-' => {
                    if self.number.len() < NUMBER_MAX {
                        self.number.push(b);
                    } else {
                        self.number_long = true;
                    }
                }
                _ => {
                    self.end_bare();
                    if self.lex != Lex::Broken {
                        self.byte(b);
                    }
                }
            },
            _ if b.is_ascii_whitespace() => {}
            Lex::Value => {
                if b == b']' && !self.after_comma && self.top_object() == Some(false) {
                    // An empty array.
                    self.pop_level();
                    return self.end_value();
                }
                self.start_value(b);
            }
            Lex::Key => match b {
                b'"' => {
                    self.after_comma = false;
                    self.in_key = true;
                    self.key.clear();
                    self.key_long = false;
                    self.lex = Lex::Str;
                }
                b'}' if !self.after_comma => {
                    self.pop_level();
                    self.end_value();
                }
                _ => self.broken(),
            },
            Lex::Colon => match b {
                b':' => self.lex = Lex::Value,
                _ => self.broken(),
            },
            Lex::After => match (b, self.top_object()) {
                (b',', Some(true)) => {
                    self.after_comma = true;
                    self.lex = Lex::Key;
                }
                (b',', Some(false)) => {
                    self.after_comma = true;
                    if self.deep_len == 0 {
                        let parent_on_path = self
                            .stack
                            .split_last()
                            .is_some_and(|(_, up)| up.iter().all(|f| f.on_path));
                        if let Some(f) = self.stack.last_mut() {
                            f.index += 1;
                        }
                        self.set_index(parent_on_path);
                    }
                    self.text_key = false;
                    self.lex = Lex::Value;
                }
                (b'}', Some(true)) | (b']', Some(false)) => {
                    self.pop_level();
                    self.end_value();
                }
                _ => self.broken(),
            },
            Lex::Broken => {}
        }
    }

    #[inline(never)]
    fn string_byte(&mut self, b: u8) {
        if self.in_key {
            if self.key.len() < KEY_MAX {
                self.key.push(b);
            } else {
                self.key_long = true;
            }
        } else if self.text_key {
            self.text += 1;
        }
    }

    #[inline(never)]
    fn end_string(&mut self) {
        if !self.in_key {
            if self.at_pointer {
                self.found = None;
            }
            return self.end_value();
        }
        self.in_key = false;
        let key = (!self.key_long).then_some(self.key.as_slice());
        self.text_key = key.is_some_and(|k| TEXT_KEYS.contains(&k));
        self.lex = Lex::Colon;
        if self.deep_len > 0 {
            return; // never on the pointer's path
        }
        let depth = self.stack.len();
        let above = self
            .stack
            .split_last()
            .is_some_and(|(_, up)| up.iter().all(|f| f.on_path));
        let token = depth.checked_sub(1).and_then(|d| self.pointer.get(d));
        let on_path = above && key.is_some() && key == token.map(Vec::as_slice);
        if let Some(f) = self.stack.last_mut() {
            f.on_path = on_path;
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn pointer(p: &str) -> Vec<String> {
        p.split('/').skip(1).map(str::to_string).collect()
    }

    /// The document fed in chunks of every size: one answer.
    fn scan(p: &str, doc: &[u8]) -> (Option<u32>, u64) {
        let mut answers = Vec::new();
        for size in 1..=doc.len().max(1) {
            let mut s = JsonScan::new(&pointer(p));
            for chunk in doc.chunks(size) {
                s.feed(chunk);
            }
            let text = s.text_bytes();
            answers.push((s.finish(), text));
        }
        answers.dedup();
        assert_eq!(answers.len(), 1, "{answers:?}");
        answers[0]
    }

    #[test]
    fn the_value_at_the_pointer_whatever_the_chunks() {
        let doc = br#"{"id":"x","choices":[{"message":{"content":"hello there"}}],
            "usage":{"prompt_tokens":9,"total_tokens":12.2}}"#;
        assert_eq!(scan("/usage/total_tokens", doc), (Some(13), 11));
        assert_eq!(scan("/usage/prompt_tokens", doc), (Some(9), 11));
        assert_eq!(scan("/usage/none", doc), (None, 11));
        assert_eq!(scan("/choices/0/index", doc), (None, 11));
        let arr = br#"{"a":[5,6,{"b":7}]}"#;
        assert_eq!(scan("/a/1", arr).0, Some(6));
        assert_eq!(scan("/a/2/b", arr).0, Some(7));
        assert_eq!(
            scan("/a/01", arr).0,
            None,
            "not an index as the pointer writes one"
        );
        // Escaped keys are what they decode to.
        assert_eq!(
            scan(
                "/usage/total_tokens",
                br#"{"\u0075sage":{"total_tokens":4}}"#
            )
            .0,
            Some(4)
        );
        // The last of duplicate keys, as a parsed document.
        let dup = br#"{"usage":{"total_tokens":4},"usage":{"total_tokens":40}}"#;
        assert_eq!(scan("/usage/total_tokens", dup).0, Some(40));
        let dup = br#"{"usage":{"total_tokens":4},"usage":{"other":1}}"#;
        assert_eq!(scan("/usage/total_tokens", dup).0, None);
        // Anything but a non-negative number is no cost.
        for v in [r#""12""#, "-1", "null", "true", "[1]", r#"{"a":1}"#] {
            let doc = format!(r#"{{"usage":{{"total_tokens":{v}}}}}"#);
            assert_eq!(scan("/usage/total_tokens", doc.as_bytes()).0, None, "{v}");
        }
        assert_eq!(scan("/n", br#"{"n":1e3}"#).0, Some(1000));
    }

    #[test]
    fn a_document_that_is_not_one_json_value_names_no_cost() {
        for doc in [
            &br#"{"usage":{"total_tokens":5}"#[..],
            br#"{"usage":{"total_tokens":5}} {}"#,
            br#"{"usage":{"total_tokens":5}} x"#,
            br#"<html>"#,
            br#""#,
            br#"{"usage" {"total_tokens":5}}"#,
            br#"{"usage":{"total_tokens":5,}}"#,
            br#"{"usage":{"total_tokens":tru}}"#,
        ] {
            assert_eq!(
                scan("/usage/total_tokens", doc).0,
                None,
                "{}",
                String::from_utf8_lossy(doc)
            );
        }
        assert_eq!(
            scan(
                "/usage/total_tokens",
                b" {\"usage\":{\"total_tokens\":5}} \n"
            )
            .0,
            Some(5)
        );
    }

    #[test]
    fn text_is_counted_in_text_keys_only_and_as_decoded() {
        let doc =
            br#"{"model":"gpt","choices":[{"delta":{"role":"assistant","content":"a\"b\u00e9"}}]}"#;
        // a, ", b, and é's two UTF-8 bytes.
        assert_eq!(scan("/usage/total_tokens", doc).1, 5);
        let anthropic =
            br#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi!"}}"#;
        assert_eq!(scan("/usage/output_tokens", anthropic).1, 3);
        // A text key's object or number is not text.
        assert_eq!(scan("/x", br#"{"content":[{"text":"ab"}],"text":7}"#).1, 2);
    }

    #[test]
    fn memory_is_the_depth_not_the_size() {
        let mut s = JsonScan::new(&pointer("/usage/total_tokens"));
        s.feed(br#"{"choices":[{"logprobs":{"content":["#);
        for _ in 0..20_000 {
            s.feed(
                br#"{"token":"ab","logprob":-0.1,"top_logprobs":[{"token":"c","logprob":-2}]},"#,
            );
        }
        s.feed(br#"{}]}}],"usage":{"total_tokens":1000}}"#);
        assert!(s.key.capacity() <= KEY_MAX.max(16) && s.stack.capacity() <= 16);
        assert_eq!(s.finish(), Some(1000));
        // Deeper than the frames: read, at a bit a level, and the cost
        // after it still counts.
        let deep = format!(
            r#"{{"tool":{}1{},"usage":{{"total_tokens":7}}}}"#,
            "[{\"a\":".repeat(5000),
            "}]".repeat(5000)
        );
        let mut s = JsonScan::new(&pointer("/usage/total_tokens"));
        s.feed(deep.as_bytes());
        assert!(s.stack.len() <= DEPTH_MAX && s.deep.len() <= 10_000 / 64 + 1);
        assert_eq!(s.finish(), Some(7));
        // A number longer than any kept: read, and the cost after it counts.
        let long = format!(
            r#"{{"n":{},"usage":{{"total_tokens":7}}}}"#,
            "9".repeat(500)
        );
        assert_eq!(scan("/usage/total_tokens", long.as_bytes()).0, Some(7));
        assert_eq!(scan("/n", long.as_bytes()).0, None);
    }
}
