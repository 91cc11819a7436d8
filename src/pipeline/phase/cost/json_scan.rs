//! A JSON document read as it passes, chunk by chunk, keeping nothing of
//! it but the scanner's state: the value at one JSON pointer (the last of
//! duplicate keys wins, as in a parsed document) and how many bytes of
//! text the document carries (string values under a text key, such as an
//! answer's `content`), from which what a cut answer delivered is
//! estimated. Memory is the nesting depth, whatever the document's size:
//! no answer is too large to count.
//!
//! Why the code is shaped as it is: the meter runs the module under
//! wasmi, whose fuel charges a function, or a loop's iteration, for every
//! instruction of its body outside a nested loop or `if`, run or not (a
//! `match` compiles to blocks: every arm is charged on entry). So the loop over the bytes is one indirect
//! call through [`STEPS`], by state, and each state's step is a small
//! function of its own, its rarer work out of line (`#[inline(never)]`): a
//! byte pays for its own state's step only (issue 41: a stream's event
//! went from about 40,000 fuel to under 10,000; BENCHMARKS.md, "Long event
//! streams"). Envoy compiles the module (V8), where none of this matters.

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
#[repr(u8)]
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
    /// In `\uXXXX` (`JsonScan::hex_left`: how many hex digits are still
    /// to come).
    Unicode,
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
}

#[derive(Debug)]
pub(crate) struct JsonScan {
    pointer: Vec<Vec<u8>>,
    /// Each token as an array index, if it is one (digits without a sign
    /// or a leading zero, RFC 6901).
    indices: Vec<Option<usize>>,
    stack: Vec<Frame>,
    /// How many frames from the top have the pointer's token as their
    /// current key or index, each under one that has: a count kept as
    /// keys and indices change, so no step walks the stack.
    path: usize,
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
    hex_left: u8,
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
            indices: pointer.iter().map(|t| index_of(t)).collect(),
            stack: Vec::new(),
            path: 0,
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
            hex_left: 0,
            done: false,
            after_comma: false,
            found: None,
            text: 0,
        }
    }

    /// The next bytes of the document.
    #[inline(never)]
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let step = STEPS
                .get(self.lex as usize)
                .copied()
                .unwrap_or(JsonScan::broken_step);
            let used = step(self, rest);
            rest = rest.get(used..).unwrap_or_default();
        }
    }

    // Each state's step: what it takes of `rest` (never empty), in bytes.
    // Most of a document is the inside of strings and the space between
    // tokens: taken a run at a time.

    fn value_step(&mut self, rest: &[u8]) -> usize {
        match space(rest) {
            0 => self.value_byte(first(rest)),
            n => n,
        }
    }

    fn after_step(&mut self, rest: &[u8]) -> usize {
        match space(rest) {
            0 => self.after_value(first(rest)),
            n => n,
        }
    }

    fn key_step(&mut self, rest: &[u8]) -> usize {
        match space(rest) {
            0 => self.key_byte(first(rest)),
            n => n,
        }
    }

    fn colon_step(&mut self, rest: &[u8]) -> usize {
        match space(rest) {
            0 => self.colon(first(rest)),
            n => n,
        }
    }

    fn str_step(&mut self, rest: &[u8]) -> usize {
        let run = super::find::string_run(rest);
        if run > 0 {
            self.string_run(rest.get(..run).unwrap_or_default());
        }
        // The byte that ended the run (a quote, most often), in this step.
        match rest.get(run) {
            Some(&b) => run + self.in_string(b),
            None => run,
        }
    }

    fn escape_step(&mut self, rest: &[u8]) -> usize {
        self.escaped(first(rest));
        1
    }

    fn unicode_step(&mut self, rest: &[u8]) -> usize {
        self.hex_digit(first(rest));
        1
    }

    fn bare_step(&mut self, rest: &[u8]) -> usize {
        let run = rest.iter().position(|&c| !is_bare(c)).unwrap_or(rest.len());
        let (bare, tail) = rest.split_at(run);
        let room = NUMBER_MAX.saturating_sub(self.number.len());
        if bare.len() > room {
            self.number_long = true;
        }
        self.number
            .extend_from_slice(bare.get(..room.min(bare.len())).unwrap_or_default());
        if !tail.is_empty() {
            // The byte after the value: read again in the state it leaves
            // (after a value, or broken).
            self.end_bare();
        }
        run
    }

    fn broken_step(&mut self, rest: &[u8]) -> usize {
        rest.len()
    }

    /// A run of a string's bytes with no quote, backslash or control.
    #[inline(never)]
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
        self.path = 0;
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
        self.deep_len == 0 && self.path == self.stack.len()
    }

    /// Every frame but the innermost is on the pointer's path (and there
    /// is one).
    fn above_on_path(&self) -> bool {
        !self.stack.is_empty() && self.path + 1 >= self.stack.len()
    }

    /// The innermost frame's current key or index is (`on`) or is not its
    /// token.
    fn set_on_path(&mut self, on: bool) {
        let inner = self.stack.len().saturating_sub(1);
        if !on {
            self.path = self.path.min(inner);
        } else if self.path >= inner {
            self.path = self.stack.len();
        }
    }

    /// Whether the innermost level is an object (`None` at the top).
    fn top_object(&self) -> Option<bool> {
        if self.deep_len > 0 {
            return Some(self.deep_object());
        }
        self.stack.last().map(|f| f.object)
    }

    /// Whether the innermost of the levels past the frames is an object.
    #[inline(never)]
    fn deep_object(&self) -> bool {
        let i = self.deep_len.saturating_sub(1);
        self.deep
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    fn push_level(&mut self, object: bool) {
        if self.stack.len() < DEPTH_MAX {
            self.stack.push(Frame { object, index: 0 });
            return;
        }
        self.push_deep(object);
    }

    #[inline(never)]
    fn push_deep(&mut self, object: bool) {
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
            self.path = self.path.min(self.stack.len());
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
            b'{' | b'[' => self.open(b == b'{'),
            b'"' => {
                self.in_key = false;
                self.lex = Lex::Str;
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => self.start_bare(b),
            _ => self.broken(),
        }
    }

    /// An object (`object`) or an array opens.
    #[inline(never)]
    fn open(&mut self, object: bool) {
        let parent_on_path = self.all_on_path();
        self.push_level(object);
        if object {
            self.lex = Lex::Key;
        } else {
            self.set_index(parent_on_path);
            self.lex = Lex::Value;
        }
        self.text_key = false;
    }

    #[inline(never)]
    fn start_bare(&mut self, b: u8) {
        self.number.clear();
        self.number_long = false;
        self.number.push(b);
        self.lex = Lex::Bare;
    }

    /// The current array frame's index is its next element's.
    #[inline(never)]
    fn set_index(&mut self, parent_on_path: bool) {
        if self.deep_len > 0 {
            return;
        }
        let Some(f) = self.stack.last() else {
            return;
        };
        let token = self
            .indices
            .get(self.stack.len().saturating_sub(1))
            .copied()
            .flatten();
        let on = parent_on_path && token == Some(f.index);
        self.set_on_path(on);
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
        let ok = match self.number.first() {
            Some(b'-' | b'0'..=b'9') => true,
            _ => self.literal(),
        };
        if !ok {
            return self.broken();
        }
        if self.at_pointer {
            self.found = self.number_read();
        }
        self.end_value();
    }

    /// The bare value read is `true`, `false` or `null`.
    #[inline(never)]
    fn literal(&self) -> bool {
        matches!(self.number.as_slice(), b"true" | b"false" | b"null")
    }

    /// The number just read, as a cost.
    #[inline(never)]
    fn number_read(&self) -> Option<u32> {
        (!self.number_long)
            .then(|| std::str::from_utf8(&self.number).ok())
            .flatten()
            .and_then(super::units)
    }

    #[inline(never)]
    fn in_string(&mut self, b: u8) -> usize {
        match b {
            b'"' => self.end_string(),
            b'\\' => self.lex = Lex::Escape,
            // A control character is no JSON unless escaped.
            0..=0x1F => self.broken(),
            _ => self.string_byte(b),
        }
        1
    }

    #[inline(never)]
    fn escaped(&mut self, b: u8) {
        self.lex = Lex::Str;
        match b {
            b'u' => {
                self.unicode = 0;
                self.hex_left = 4;
                self.lex = Lex::Unicode;
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

    #[inline(never)]
    fn hex_digit(&mut self, b: u8) {
        let Some(d) = char::from(b).to_digit(16) else {
            return self.broken();
        };
        self.unicode = self.unicode << 4 | d;
        if self.hex_left > 1 {
            self.hex_left -= 1;
            return;
        }
        self.lex = Lex::Str;
        // A key compares its code points as UTF-8; a surrogate half stands
        // for itself (two halves: two bytes each, which only text counts).
        let mut buf = [0u8; 4];
        let bytes =
            char::from_u32(self.unicode).map_or(&b"??"[..], |c| c.encode_utf8(&mut buf).as_bytes());
        for &x in bytes {
            self.string_byte(x);
        }
    }

    #[inline(never)]
    fn value_byte(&mut self, b: u8) -> usize {
        if b == b']' && !self.after_comma && self.top_object() == Some(false) {
            // An empty array.
            self.pop_level();
            self.end_value();
        } else {
            self.start_value(b);
        }
        1
    }

    #[inline(never)]
    fn key_byte(&mut self, b: u8) -> usize {
        match b {
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
        }
        1
    }

    fn colon(&mut self, b: u8) -> usize {
        match b {
            b':' => self.lex = Lex::Value,
            _ => self.broken(),
        }
        1
    }

    #[inline(never)]
    fn after_value(&mut self, b: u8) -> usize {
        match (b, self.top_object()) {
            (b',', Some(true)) => {
                self.after_comma = true;
                self.lex = Lex::Key;
            }
            (b',', Some(false)) => self.next_element(),
            (b'}', Some(true)) | (b']', Some(false)) => {
                self.pop_level();
                self.end_value();
            }
            _ => self.broken(),
        }
        1
    }

    /// A `,` in an array: its next element.
    #[inline(never)]
    fn next_element(&mut self) {
        self.after_comma = true;
        if self.deep_len == 0 {
            let parent_on_path = self.above_on_path();
            if let Some(f) = self.stack.last_mut() {
                f.index += 1;
            }
            self.set_index(parent_on_path);
        }
        self.text_key = false;
        self.lex = Lex::Value;
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
        self.end_key();
    }

    #[inline(never)]
    fn end_key(&mut self) {
        self.in_key = false;
        let key = (!self.key_long).then_some(self.key.as_slice());
        self.text_key = key.is_some_and(is_text_key);
        self.lex = Lex::Colon;
        if self.deep_len > 0 {
            return; // never on the pointer's path
        }
        if self.stack.is_empty() {
            return;
        }
        let token = self.pointer.get(self.stack.len().saturating_sub(1));
        let on = self.above_on_path() && key.is_some() && key == token.map(Vec::as_slice);
        self.set_on_path(on);
    }
}

/// Each state's step, by its `Lex` (in the enum's order).
const STEPS: [fn(&mut JsonScan, &[u8]) -> usize; 9] = [
    JsonScan::value_step,
    JsonScan::after_step,
    JsonScan::key_step,
    JsonScan::colon_step,
    JsonScan::str_step,
    JsonScan::escape_step,
    JsonScan::unicode_step,
    JsonScan::bare_step,
    JsonScan::broken_step,
];

/// How many bytes of JSON white space `rest` starts with.
fn space(rest: &[u8]) -> usize {
    rest.iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        .unwrap_or(rest.len())
}

/// `rest`'s first byte (a step is never given none).
fn first(rest: &[u8]) -> u8 {
    rest.first().copied().unwrap_or(0)
}

/// A byte of a number or a literal (`true`, `false`, `null`), as read
/// until the next token shows it ended.
fn is_bare(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'.' | b'+' | b'-')
}

/// A pointer token as an array index: digits without a sign or a leading
/// zero (RFC 6901), as `usize`'s parser alone would not say.
fn index_of(token: &str) -> Option<usize> {
    let t = token.as_bytes();
    let digits = !t.is_empty() && t.iter().all(u8::is_ascii_digit);
    (digits && (t == b"0" || !t.starts_with(b"0")))
        .then(|| token.parse().ok())
        .flatten()
}

/// A key whose string value is text: compared by length first, so most
/// keys are ruled out by one comparison.
fn is_text_key(key: &[u8]) -> bool {
    matches!(key.len(), 4 | 5 | 7 | 8 | 9 | 12 | 17) && text_key(key)
}

#[inline(never)]
fn text_key(key: &[u8]) -> bool {
    TEXT_KEYS.contains(&key)
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
            // A form feed is no JSON white space (a parser refuses it).
            b"{\"usage\":\x0c{\"total_tokens\":5}}",
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
