//! A response body read for its cost as it passes (`cost.response_json`):
//! chunk by chunk, never held, within a byte cap. A JSON body is kept up
//! to the cap and read at its end; a server-sent-events stream
//! (`text/event-stream`, as LLM APIs stream) is read a line at a time
//! into events (an event's `data:` lines joined by newlines, ended by an
//! empty line, as the event-stream format says), and the last event that
//! names the cost wins, so its memory is one event whatever the stream's
//! length.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// One bound's reading of one response.
#[derive(Debug)]
pub struct CostScan {
    /// A JSON pointer (`/usage/total_tokens`), as its unescaped tokens.
    pointer: Vec<String>,
    /// For events, the key the pointer ends in, quoted as a key is written:
    /// what an event's data must hold to name the cost. None when it ends
    /// in an array index (not written), and for a JSON body, read once
    /// whole (formatting it would cost the meter's scenario 6%).
    named_by: Option<Vec<u8>>,
    cap: usize,
    events: bool,
    /// The body so far (JSON), or the line being read (events).
    buf: Vec<u8>,
    /// More than `cap` bytes came: the body (or a line) is not read.
    over: bool,
    /// The data of the event being read, and whether it went over `cap`.
    event: Vec<u8>,
    event_over: bool,
    /// The last event's cost.
    last: Option<u32>,
}

impl CostScan {
    /// A reading of the cost at `pointer`, in at most `cap` bytes; `events`
    /// for a `text/event-stream` response.
    pub fn new(pointer: &str, cap: usize, events: bool) -> CostScan {
        let pointer = tokens(pointer);
        // An array's index is not written in the document.
        let named_by = pointer
            .last()
            .filter(|_| events)
            .filter(|t| t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()))
            .map(|t| format!("\"{t}\"").into_bytes());
        CostScan {
            pointer,
            named_by,
            cap,
            events,
            buf: Vec::new(),
            over: false,
            event: Vec::new(),
            event_over: false,
            last: None,
        }
    }

    /// The next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if !self.events {
            if self.over || self.buf.len() + chunk.len() > self.cap {
                self.over = true;
                self.buf = Vec::new();
            } else {
                self.buf.extend_from_slice(chunk);
            }
            return;
        }
        let mut rest = chunk;
        while let Some(at) = rest.iter().position(|b| *b == b'\n') {
            let (line, after) = rest.split_at(at);
            self.line_part(line);
            self.end_line();
            rest = after.get(1..).unwrap_or_default();
        }
        self.line_part(rest);
    }

    fn line_part(&mut self, part: &[u8]) {
        if self.over || self.buf.len() + part.len() > self.cap {
            self.over = true;
        } else {
            self.buf.extend_from_slice(part);
        }
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.buf);
        if std::mem::take(&mut self.over) {
            // A line over the cap: its event is not read.
            self.event_over = true;
            return;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.is_empty() {
            self.end_event();
            return;
        }
        // `data` with no colon is data with an empty value; one space after
        // the colon is not part of the value.
        let data = match line.strip_prefix(b"data") {
            Some(b"") => &b""[..],
            Some(rest) => match rest.strip_prefix(b":") {
                Some(v) => v.strip_prefix(b" ").unwrap_or(v),
                None => return,
            },
            None => return,
        };
        if self.event_over || self.event.len() + data.len() + 1 > self.cap {
            self.event_over = true;
            self.event = Vec::new();
            return;
        }
        if !self.event.is_empty() {
            self.event.push(b'\n');
        }
        self.event.extend_from_slice(data);
    }

    /// An empty line: the event's data, if it names the cost, is the last.
    fn end_event(&mut self) {
        let data = std::mem::take(&mut self.event);
        if std::mem::take(&mut self.event_over) || data.is_empty() {
            return;
        }
        if let Some(cost) = self.cost_in(&data) {
            self.last = Some(cost);
        }
    }

    /// Whether a document may name the cost: it holds `named_by` or an
    /// escape that could spell it (any may, without `named_by`). Data that
    /// cannot is not parsed (most of a stream's events).
    fn may_name(&self, data: &[u8]) -> bool {
        let Some(quoted) = &self.named_by else {
            return true;
        };
        data.windows(quoted.len()).any(|w| w == quoted.as_slice()) || data.contains(&b'\\')
    }

    /// The cost at the pointer in a JSON document: the document read whole
    /// (a malformed one names none), only the values on the pointer's path
    /// kept, the rest skipped.
    fn cost_in(&self, json: &[u8]) -> Option<u32> {
        if !self.may_name(json) {
            return None;
        }
        let mut de = serde_json::Deserializer::from_slice(json);
        let found = At(&self.pointer).deserialize(&mut de).ok()?;
        de.end().ok()?;
        found
    }

    /// The body ended: the cost it named, if it named one that reads.
    pub fn finish(mut self) -> Option<u32> {
        if self.events {
            // A last event without its empty line still counts: the body
            // ended, nothing more can come.
            self.end_line();
            self.end_event();
            return self.last;
        }
        if self.over {
            return None;
        }
        self.cost_in(&self.buf)
    }
}

/// A JSON pointer's tokens, unescaped (`~1` is `/`, `~0` is `~`).
fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Reads the value at a pointer's remaining tokens: `Some(cost)` for a
/// non-negative number there (rounded up), `None` for anything else. The
/// last of duplicate keys wins, as in a parsed document.
struct At<'a>(&'a [String]);

impl<'de> DeserializeSeed<'de> for At<'_> {
    type Value = Option<u32>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for At<'_> {
    type Value = Option<u32>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<u32>, E> {
        Ok(self
            .0
            .is_empty()
            .then(|| u32::try_from(v).unwrap_or(u32::MAX)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<u32>, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Ok(None),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<u32>, E> {
        Ok(self
            .0
            .is_empty()
            .then(|| crate::pipeline::units(&v.to_string()))
            .flatten())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Option<u32>, E> {
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<u32>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<u32>, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<u32>, A::Error> {
        let Some((first, rest)) = self.0.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(None);
        };
        let mut found = None;
        while let Some(hit) = map.next_key_seed(Key(first))? {
            if hit {
                found = map.next_value_seed(At(rest))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<u32>, A::Error> {
        // An index is digits without a leading zero (RFC 6901).
        let index = self.0.split_first().and_then(|(t, rest)| {
            let digits = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
            (digits && (t == "0" || !t.starts_with('0')))
                .then(|| t.parse::<usize>().ok())
                .flatten()
                .map(|i| (i, rest))
        });
        let mut found = None;
        let mut i = 0usize;
        loop {
            let more = match index {
                Some((want, rest)) if i == want => seq.next_element_seed(At(rest))?.map(|v| {
                    found = v;
                }),
                _ => seq.next_element::<IgnoredAny>()?.map(drop),
            };
            if more.is_none() {
                return Ok(found);
            }
            i += 1;
        }
    }
}

/// A map key: whether it is the token wanted (unescaped, compared whole).
struct Key<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn read(body: &[u8], events: bool, chunk: usize, cap: usize) -> Option<u32> {
        let mut s = CostScan::new("/usage/total_tokens", cap, events);
        for c in body.chunks(chunk.max(1)) {
            s.feed(c);
        }
        s.finish()
    }

    #[test]
    fn every_byte_cap_is_inclusive() {
        // A JSON body of exactly the cap is read; one byte less is not.
        let body = br#"{"usage":{"total_tokens":7}}"#;
        for chunk in [1, 5, body.len()] {
            assert_eq!(read(body, false, chunk, body.len()), Some(7));
            assert_eq!(read(body, false, chunk, body.len() - 1), None);
        }
        // An event: each line (`data: ` and its value) within the cap, and
        // the event's data (its lines joined by a newline) within it too.
        let one = b"data: {\"usage\":{\"total_tokens\":7}}\n\n";
        let line = one.len() - 2;
        for chunk in [1, 5, one.len()] {
            assert_eq!(read(one, true, chunk, line), Some(7), "chunks of {chunk}");
            assert_eq!(read(one, true, chunk, line - 1), None, "chunks of {chunk}");
        }
        // Two data lines of 9 and 19 bytes: lines of 15 and 25, data of 29.
        let two = b"data: {\"usage\":\ndata: {\"total_tokens\":7}}\n\n";
        assert_eq!(read(two, true, 4, 29), Some(7));
        assert_eq!(read(two, true, 4, 28), None);
    }

    #[test]
    fn a_json_body_in_any_chunks_names_its_cost() {
        let body = br#"{"id":"x","choices":[{"text":"hi"}],"usage":{"prompt_tokens":12,"total_tokens":300}}"#;
        for chunk in [1, 7, 64, body.len()] {
            assert_eq!(
                read(body, false, chunk, 4_096),
                Some(300),
                "chunks of {chunk}"
            );
        }
        // Past the cap, or without the field, or not a number: unknown.
        assert_eq!(read(body, false, 8, 40), None);
        assert_eq!(read(br#"{"usage":{}}"#, false, 8, 4_096), None);
        assert_eq!(
            read(br#"{"usage":{"total_tokens":"300"}}"#, false, 8, 4_096),
            None
        );
        assert_eq!(
            read(br#"{"usage":{"total_tokens":-3}}"#, false, 8, 4_096),
            None
        );
        assert_eq!(read(b"{not json", false, 8, 4_096), None);
        assert_eq!(
            read(br#"{"usage":{"total_tokens":2.5}}"#, false, 8, 4_096),
            Some(3)
        );
    }

    #[test]
    fn an_event_stream_names_its_cost_in_its_last_event_that_has_it() {
        let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}],\"usage\":null}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\"llo\"}}],\"usage\":null}\r\n\r\n\
: keep-alive\n\n\
data: {\"choices\":[],\"usage\":{\"total_tokens\":42}}\n\n\
data: [DONE]\n\n";
        for chunk in [1, 3, 17, stream.len()] {
            assert_eq!(
                read(stream, true, chunk, 256),
                Some(42),
                "chunks of {chunk}"
            );
        }
        // Without a final newline, the last line still counts.
        let tail = b"data: {\"usage\":{\"total_tokens\":7}}";
        assert_eq!(read(tail, true, 5, 256), Some(7));
        // A line over the cap is skipped, not the stream: memory is a line.
        let long = [
            b"data: {\"pad\":\"".to_vec(),
            vec![b'x'; 500],
            b"\"}\n\ndata: {\"usage\":{\"total_tokens\":9}}\n\n".to_vec(),
        ]
        .concat();
        assert_eq!(read(&long, true, 64, 100), Some(9));
        assert_eq!(read(b"data: [DONE]\n", true, 4, 256), None);
    }

    /// An event's data may span lines (joined by newlines): its JSON is
    /// read whole, whatever the chunks, and a later event that names a cost
    /// still wins over it.
    #[test]
    fn an_event_over_several_data_lines_is_read_whole() {
        let stream = b"data: {\"usage\":\ndata: {\"total_tokens\": 300}}\n\n";
        for chunk in [1, 4, stream.len()] {
            assert_eq!(
                read(stream, true, chunk, 256),
                Some(300),
                "chunks of {chunk}"
            );
        }
        let later = b"data: {\"usage\":\ndata:{\"total_tokens\":300}}\r\n\r\ndata\ndata: {\"usage\":{\"total_tokens\":5}}\n\n";
        assert_eq!(read(later, true, 3, 256), Some(5));
        // An event over the cap is skipped, lines of it or not.
        let big = [
            b"data: {\"usage\":\n".to_vec(),
            vec![b'x'; 300],
            b"\n\n".to_vec(),
        ]
        .concat();
        assert_eq!(read(&big, true, 7, 100), None);
    }

    /// An event whose next line goes over the cap is dropped whole, even
    /// when the lines before it named a cost: never read in part.
    #[test]
    fn an_event_cut_by_a_line_over_the_cap_names_nothing() {
        let cut = [
            b"data: {\"usage\":{\"total_tokens\":5}}\n".to_vec(),
            [b"data: ".to_vec(), vec![b'x'; 200]].concat(),
            b"\n\n".to_vec(),
        ]
        .concat();
        assert_eq!(read(&cut, true, 16, 100), None);
        let then = [cut, b"data: {\"usage\":{\"total_tokens\":6}}\n\n".to_vec()].concat();
        assert_eq!(
            read(&then, true, 16, 100),
            Some(6),
            "the next event is read"
        );
    }

    /// Events that cannot name the cost are not parsed: only those with the
    /// pointer's last key, quoted, or an escape that could spell it.
    #[test]
    fn only_events_that_may_name_the_cost_are_parsed() {
        let s = CostScan::new("/usage/total_tokens", 256, true);
        assert!(s.may_name(br#"{"usage":{"total_tokens":5}}"#));
        assert!(!s.may_name(br#"{"choices":[{"delta":{"content":"hi"}}],"usage":null}"#));
        assert!(!s.may_name(br#"{"usage":{"total_tokens_x":5}}"#));
        let escaped = br#"{"usage":{"total\u005ftokens":5}}"#;
        assert!(s.may_name(escaped));
        assert_eq!(
            read(&[b"data: ", &escaped[..], b"\n\n"].concat(), true, 7, 256),
            Some(5)
        );
        // A pointer that ends in an index: its key is not written.
        assert!(CostScan::new("/usage/0", 256, true).may_name(b"{}"));
    }

    /// An array index is digits without a sign or a leading zero (RFC 6901),
    /// as `usize`'s parser alone would not say.
    #[test]
    fn an_index_is_digits_without_a_sign_or_a_leading_zero() {
        let at = |pointer: &str| {
            let mut s = CostScan::new(pointer, 256, false);
            s.feed(br#"{"n":[1,2,3]}"#);
            s.finish()
        };
        assert_eq!(at("/n/1"), Some(2));
        assert_eq!(at("/n/0"), Some(1));
        for bad in ["/n/+1", "/n/01", "/n/", "/n/-0"] {
            assert_eq!(at(bad), None, "{bad}");
        }
    }
}

// proptest builds natively only (the lib's tests also run as wasm).
#[cfg(all(test, not(target_arch = "wasm32")))]
mod differential {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// What a parsed document names at `pointer` (the reading this one
    /// must equal, without building the document).
    fn parsed(json: &[u8], pointer: &str) -> Option<u32> {
        let v: Value = serde_json::from_slice(json).ok()?;
        match v.pointer(pointer)? {
            Value::Number(n) => crate::pipeline::units(&n.to_string()),
            _ => None,
        }
    }

    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "usage",
            "total_tokens",
            "a~b",
            "x/y",
            "0",
            "1",
            "+1",
            "01",
            "",
        ])
        .prop_map(str::to_string)
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e12f64..1e12).prop_map(Value::from),
            key().prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((key(), inner), 0..5)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn pointer() -> impl Strategy<Value = String> {
        prop::collection::vec(key(), 0..4).prop_map(|ts| {
            ts.iter()
                .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The cost read without building the document is the parsed
        /// document's, whatever its shape, the pointer, the chunks, and
        /// whether the bytes were cut or spoiled (then: none).
        #[test]
        fn the_reading_is_the_parsed_documents(
            doc in json(),
            pointer in pointer(),
            chunk in 1usize..40,
            cut in proptest::option::of(0usize..200),
            dup in any::<bool>(),
        ) {
            let mut bytes = serde_json::to_vec(&doc).unwrap_or_default();
            // A duplicate key: the last wins in both readings.
            if dup && bytes.first() == Some(&b'{') && bytes.len() > 2 {
                let extra = br#"{"usage":{"total_tokens":7},"#;
                bytes.splice(0..1, extra.iter().copied());
            }
            if let Some(at) = cut {
                bytes.truncate(at.min(bytes.len()));
            }
            let mut s = CostScan::new(&pointer, 1 << 20, false);
            for c in bytes.chunks(chunk) {
                s.feed(c);
            }
            prop_assert_eq!(s.finish(), parsed(&bytes, &pointer), "{}", String::from_utf8_lossy(&bytes));
            // As an event stream's one event, too.
            let mut e = CostScan::new(&pointer, 1 << 20, true);
            e.feed(b"data: ");
            e.feed(&bytes);
            e.feed(b"\n\n");
            let want = if bytes.contains(&b'\n') { None } else { parsed(&bytes, &pointer) };
            if !bytes.contains(&b'\n') {
                prop_assert_eq!(e.finish(), want);
            }
        }
    }
}
