//! A response body read for its cost as it passes (`cost.response_json`),
//! chunk by chunk, never held and never buffered: a JSON body is read by
//! one [`JsonScan`]; a server-sent-events stream (`text/event-stream`, as
//! LLM APIs stream) event by event (an event's `data:` lines joined by
//! newlines, ended by an empty line, as the event-stream format says), and
//! a stream of JSON lines (`application/x-ndjson`, Ollama's) line by line,
//! the last event or line that names the cost winning. Memory is the
//! scanner's state, whatever the answer's size: no answer is too large to
//! count.
//!
//! It also counts the text that passed (string values under text keys:
//! [`JsonScan::text_bytes`]), so an answer that names no usage — cut, hung
//! up on, or never asked for one — is charged an estimate of what it
//! delivered ([`CostScan::estimate`]).

use super::json_scan::JsonScan;

/// Bytes of text per token in the estimate (OpenAI's rule of thumb for
/// English text; a stream of one token an event is counted by its events).
pub(crate) const TEXT_BYTES_PER_TOKEN: u64 = 4;

/// `bytes` of text in tokens, at [`TEXT_BYTES_PER_TOKEN`].
pub(crate) fn tokens_in(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(TEXT_BYTES_PER_TOKEN)).unwrap_or(u32::MAX)
}

/// How a response body carries its JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// One document (`application/json` and anything else).
    Json,
    /// Server-sent events (`text/event-stream`).
    Events,
    /// A document a line (`application/x-ndjson`, `application/jsonl`).
    Lines,
}

impl Body {
    /// The form of a response whose content type is `media` (its media
    /// type, any case, parameters aside).
    pub fn of(media: &str) -> Body {
        let m = media.split(';').next().unwrap_or_default().trim();
        if m.eq_ignore_ascii_case("text/event-stream") {
            Body::Events
        } else if [
            "application/x-ndjson",
            "application/jsonl",
            "application/jsonlines",
        ]
        .iter()
        .any(|t| m.eq_ignore_ascii_case(t))
        {
            Body::Lines
        } else {
            Body::Json
        }
    }
}

/// What the line being read is, in an event stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Its first bytes: how many of `data:` it matched so far.
    Field(usize),
    /// A `data` line, after `data:`: an optional space, then the value.
    Space,
    Data,
    /// Another field, a comment: skipped to its end.
    Skip,
}

/// One bound's reading of one response.
#[derive(Debug)]
pub(crate) struct CostScan {
    body: Body,
    /// The JSON body's scan, or the scan of events (one reused).
    doc: JsonScan,
    /// Events: the event being read has data.
    open: bool,
    line: Line,
    /// Bytes in the line so far (a line ending `\r\n` counts no `\r`).
    line_len: usize,
    /// The last event's cost.
    last: Option<u32>,
    /// Text of finished events, in bytes; events that carried some.
    text_bytes: u64,
    text_events: u64,
}

impl CostScan {
    /// A reading of the cost at `pointer` in a body of form `body`.
    pub fn new(pointer: &str, body: Body) -> CostScan {
        CostScan {
            body,
            doc: JsonScan::new(&tokens(pointer)),
            open: false,
            line: Line::Field(0),
            line_len: 0,
            last: None,
            text_bytes: 0,
            text_events: 0,
        }
    }

    /// The next chunk of the body.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        match self.body {
            Body::Json => return self.doc.feed(chunk),
            Body::Lines => return self.feed_lines(chunk),
            Body::Events => {}
        }
        let mut rest = chunk;
        while !rest.is_empty() {
            let end = super::find::newline(rest);
            let (part, after) = match end {
                Some(at) => (rest.get(..at).unwrap_or_default(), rest.get(at + 1..)),
                None => (rest, None),
            };
            self.line_part(part);
            match after {
                Some(after) => {
                    self.end_line();
                    rest = after;
                }
                None => break,
            }
        }
    }

    /// JSON lines: each line one document, as an event's data.
    fn feed_lines(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        loop {
            let end = super::find::newline(rest);
            let part = end.map_or(rest, |at| rest.get(..at).unwrap_or_default());
            if !part.is_empty() {
                if !self.open {
                    self.open = true;
                    self.doc.reset();
                }
                self.doc.feed(part);
            }
            match end {
                Some(at) => {
                    self.end_event();
                    rest = rest.get(at + 1..).unwrap_or_default();
                }
                None => return,
            }
        }
    }

    /// Bytes of the line being read (no newline among them).
    fn line_part(&mut self, mut part: &[u8]) {
        const DATA: &[u8] = b"data:";
        // A line that starts `data:` in this chunk, as nearly all do: its
        // field taken at once, not a byte at a time.
        if self.line == Line::Field(0) {
            if let Some(value) = part.strip_prefix(DATA) {
                self.line_len += DATA.len();
                self.line = Line::Space;
                part = value;
            }
        }
        while let Some((&b, after)) = part.split_first() {
            match self.line {
                Line::Field(n) => {
                    if b != b'\r' {
                        self.line_len += 1;
                    }
                    if DATA.get(n) == Some(&b) {
                        self.line = if n + 1 == DATA.len() {
                            Line::Space
                        } else {
                            Line::Field(n + 1)
                        };
                    } else if b != b'\r' {
                        self.line = Line::Skip;
                    }
                    part = after;
                }
                Line::Space => {
                    self.line = Line::Data;
                    self.data_start();
                    if b == b' ' {
                        part = after;
                    }
                }
                Line::Data => {
                    self.line_len += part.len();
                    self.doc.feed(part);
                    return;
                }
                Line::Skip => {
                    self.line_len += part.len();
                    return;
                }
            }
        }
    }

    /// A data line's value starts: the event's first, or its next joined
    /// by a newline.
    fn data_start(&mut self) {
        if self.open {
            self.doc.feed(b"\n");
        } else {
            self.open = true;
            self.doc.reset();
        }
    }

    fn end_line(&mut self) {
        let (line, len) = (self.line, self.line_len);
        self.line = Line::Field(0);
        self.line_len = 0;
        match line {
            // `data` alone: data with an empty value.
            Line::Field(4) if len == 4 => self.data_start(),
            Line::Space => self.data_start(),
            _ if len == 0 => self.end_event(),
            _ => {}
        }
    }

    /// An empty line: the event's cost, if it names one, is the last.
    fn end_event(&mut self) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let text = self.doc.text_bytes();
        self.text_bytes += text;
        self.text_events += u64::from(text > 0);
        if let Some(cost) = self.doc.end() {
            self.last = Some(cost);
        }
    }

    /// What the answer delivered so far, in tokens: its text at
    /// [`TEXT_BYTES_PER_TOKEN`], and at least one for each event that
    /// carried text.
    pub fn estimate(&self) -> u32 {
        let streamed = self.body != Body::Json;
        let open = if self.open || !streamed {
            self.doc.text_bytes()
        } else {
            0
        };
        let bytes = self.text_bytes + open;
        let events = self.text_events + u64::from(streamed && open > 0);
        tokens_in(bytes).max(u32::try_from(events).unwrap_or(u32::MAX))
    }

    /// The body ended: the cost it named, if it named one that reads.
    pub fn finish(mut self) -> Option<u32> {
        match self.body {
            Body::Json => return self.doc.finish(),
            Body::Lines => {
                self.end_event();
                return self.last;
            }
            Body::Events => {}
        }
        // A last event without its empty line still counts: the body
        // ended, nothing more can come.
        self.end_line();
        self.end_event();
        self.last
    }
}

/// A JSON pointer's tokens, unescaped (`~1` is `/`, `~0` is `~`).
pub(super) fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn read(body: &[u8], events: bool, chunk: usize) -> Option<u32> {
        let form = if events { Body::Events } else { Body::Json };
        let mut s = CostScan::new("/usage/total_tokens", form);
        for c in body.chunks(chunk.max(1)) {
            s.feed(c);
        }
        s.finish()
    }

    #[test]
    fn a_json_body_in_any_chunks_names_its_cost() {
        let body = br#"{"id":"x","choices":[{"text":"hi"}],"usage":{"prompt_tokens":12,"total_tokens":300}}"#;
        for chunk in [1, 7, 64, body.len()] {
            assert_eq!(read(body, false, chunk), Some(300), "chunks of {chunk}");
        }
        // Without the field, or not a number: unknown.
        assert_eq!(read(br#"{"usage":{}}"#, false, 8), None);
        assert_eq!(read(br#"{"usage":{"total_tokens":"300"}}"#, false, 8), None);
        assert_eq!(read(br#"{"usage":{"total_tokens":-3}}"#, false, 8), None);
        assert_eq!(read(b"{not json", false, 8), None);
        assert_eq!(
            read(br#"{"usage":{"total_tokens":2.5}}"#, false, 8),
            Some(3)
        );
    }

    /// Issue 37: a caller inflated its answer past the old 1 MiB cap with
    /// its own `logprobs` and `top_logprobs: 20`, and was charged its
    /// reservation only. No body is too large now.
    #[test]
    fn no_json_answer_is_too_large_to_count() {
        let mut s = CostScan::new("/usage/total_tokens", Body::Json);
        s.feed(br#"{"choices":[{"message":{"content":"ok"},"logprobs":{"content":["#);
        let entry =
            br#"{"token":"ok","logprob":-0.01,"top_logprobs":[{"token":"a","logprob":-1}]},"#;
        for _ in 0..30_000 {
            s.feed(entry);
        }
        s.feed(br#"{}]}}],"usage":{"total_tokens":1000}}"#);
        assert_eq!(s.finish(), Some(1000));
    }

    #[test]
    fn an_event_stream_names_its_cost_in_its_last_event_that_has_it() {
        let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}],\"usage\":null}\n\n\
data: {\"choices\":[{\"delta\":{\"content\":\"llo\"}}],\"usage\":null}\r\n\r\n\
: keep-alive\n\n\
data: {\"choices\":[],\"usage\":{\"total_tokens\":42}}\n\n\
data: [DONE]\n\n";
        for chunk in [1, 3, 17, stream.len()] {
            assert_eq!(read(stream, true, chunk), Some(42), "chunks of {chunk}");
        }
        // Without a final newline, the last line still counts.
        let tail = b"data: {\"usage\":{\"total_tokens\":7}}";
        assert_eq!(read(tail, true, 5), Some(7));
        // A long line is read like any other: memory is the scanner's.
        let long = [
            b"data: {\"pad\":\"".to_vec(),
            vec![b'x'; 500_000],
            b"\"}\n\ndata: {\"usage\":{\"total_tokens\":9}}\n\n".to_vec(),
        ]
        .concat();
        assert_eq!(read(&long, true, 64), Some(9));
        assert_eq!(read(b"data: [DONE]\n", true, 4), None);
        // Not `data:`: another field, skipped.
        assert_eq!(
            read(b"dat: {\"usage\":{\"total_tokens\":7}}\n\n", true, 3),
            None
        );
        assert_eq!(
            read(b"datum: {\"usage\":{\"total_tokens\":7}}\n\n", true, 3),
            None
        );
        assert_eq!(
            read(b"data:{\"usage\":{\"total_tokens\":7}}\n\n", true, 3),
            Some(7)
        );
    }

    /// An event's data may span lines (joined by newlines): its JSON is
    /// read whole, whatever the chunks, and a later event that names a cost
    /// still wins over it.
    #[test]
    fn an_event_over_several_data_lines_is_read_whole() {
        let stream = b"data: {\"usage\":\ndata: {\"total_tokens\": 300}}\n\n";
        for chunk in [1, 4, stream.len()] {
            assert_eq!(read(stream, true, chunk), Some(300), "chunks of {chunk}");
        }
        let later = b"data: {\"usage\":\ndata:{\"total_tokens\":300}}\r\n\r\ndata\ndata: {\"usage\":{\"total_tokens\":5}}\n\n";
        assert_eq!(read(later, true, 3), Some(5));
        // A newline inside a string is no JSON: that event names nothing.
        let split = b"data: {\"usage\":{\"total_tokens\":5,\"x\":\"a\ndata: b\"}}\n\n";
        assert_eq!(read(split, true, 3), None);
    }

    /// What a stream delivered, when it names no usage: its text at four
    /// bytes a token, and at least one token for each event with text.
    #[test]
    fn the_estimate_counts_the_text_that_passed() {
        let one =
            |t: &str| format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{t}\"}}}}]}}\n\n");
        let mut s = CostScan::new("/usage/total_tokens", Body::Events);
        for t in ["Hi", " there", ",", " friend"] {
            s.feed(one(t).as_bytes());
        }
        // 16 bytes of text: 4 tokens; 4 events with text: 4.
        assert_eq!(s.estimate(), 4);
        s.feed(one("a much longer piece of text in one event").as_bytes());
        assert_eq!(s.estimate(), (16 + 40u32).div_ceil(4));
        // An event cut halfway counts what passed of it.
        s.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"abcdefgh");
        assert_eq!(s.estimate(), (16 + 40 + 8u32).div_ceil(4));
        assert_eq!(s.finish(), None);
        // A JSON answer: its text.
        let mut j = CostScan::new("/usage/total_tokens", Body::Json);
        j.feed(br#"{"choices":[{"message":{"role":"assistant","content":"twelve bytes"}}]"#);
        assert_eq!(j.estimate(), 3);
    }

    /// Ollama streams a JSON document a line; its last line names the usage
    /// (`eval_count`), and every line's text counts.
    #[test]
    fn json_lines_are_read_a_line_at_a_time() {
        let lines = b"{\"message\":{\"content\":\"Hel\"},\"done\":false}\n\
{\"message\":{\"content\":\"lo\"},\"done\":false}\n\
{\"done\":true,\"eval_count\":42}\n";
        for chunk in [1, 5, lines.len()] {
            let mut s = CostScan::new("/eval_count", Body::Lines);
            for c in lines.chunks(chunk) {
                s.feed(c);
            }
            assert_eq!(s.estimate(), 2, "two lines with text");
            assert_eq!(s.finish(), Some(42), "chunks of {chunk}");
        }
        assert_eq!(Body::of("Application/X-NDJSON; charset=utf-8"), Body::Lines);
        assert_eq!(Body::of("text/event-stream"), Body::Events);
        assert_eq!(Body::of("application/json"), Body::Json);
    }

    /// An array index is digits without a sign or a leading zero (RFC 6901),
    /// as `usize`'s parser alone would not say.
    #[test]
    fn an_index_is_digits_without_a_sign_or_a_leading_zero() {
        let at = |pointer: &str| {
            let mut s = CostScan::new(pointer, Body::Json);
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
#[allow(clippy::indexing_slicing)]
mod differential {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// What a parsed document names at `pointer` (the reading this one
    /// must equal, without building the document).
    fn parsed(json: &[u8], pointer: &str) -> Option<u32> {
        let v: Value = serde_json::from_slice(json).ok()?;
        match v.pointer(pointer)? {
            Value::Number(n) => crate::pipeline::phase::cost::units(&n.to_string()),
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

    /// What an event stream names, read as the event-stream format says
    /// (lines ended by LF or CRLF; an event's `data` values, one leading
    /// space off each, joined by newlines; an empty line ends it; other
    /// fields and comments ignored) and each event's data parsed whole:
    /// the last event whose data names the cost.
    fn parsed_stream(stream: &[u8], pointer: &str) -> Option<u32> {
        let mut last = None;
        let mut data: Option<Vec<u8>> = None;
        let mut end = |data: &mut Option<Vec<u8>>| {
            if let Some(cost) = data.take().and_then(|d| parsed(&d, pointer)) {
                last = Some(cost);
            }
        };
        for line in stream.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                end(&mut data);
                continue;
            }
            let value = match line.strip_prefix(b"data") {
                Some([]) => &[][..],
                Some([b':', v @ ..]) => v.strip_prefix(b" ").unwrap_or(v),
                _ => continue,
            };
            match &mut data {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
                None => data = Some(value.to_vec()),
            }
        }
        end(&mut data);
        last
    }

    /// An event's data: a generated document, or one of the ways a usage
    /// may be written or hidden (escaped keys, a duplicate, the word in a
    /// string, a cost that is not a number, spoiled JSON).
    fn event_data() -> impl Strategy<Value = String> {
        prop_oneof![
            json().prop_map(|v| v.to_string()),
            (0u32..5000).prop_map(|n| format!(r#"{{"choices":[],"usage":{{"total_tokens":{n}}}}}"#)),
            (0u32..5000).prop_map(|n| format!(r#"{{"us\u0061ge":{{"total_\u0074okens":{n}}}}}"#)),
            (0u32..5000).prop_map(|n| format!(r#"{{"usage":{{"total_tokens":{n}}},"usage":null}}"#)),
            (0u32..5000).prop_map(|n| format!(r#"{{"usage":null,"usage":{{"total_tokens":{n}}}}}"#)),
            (0u32..5000).prop_map(|n| format!(
                r#"{{"choices":[{{"delta":{{"content":"\"usage\":{{\"total_tokens\":{n}}}"}}}}],"usage":null}}"#
            )),
            (0u32..5000).prop_map(|n| format!(r#"{{"usage":{{"total_tokens":"{n}"}}}}"#)),
            (0u32..5000).prop_map(|n| format!(r#"{{"usage":{{"total_tokens":{n}}}"#)),
            (0u32..5000).prop_map(|n| format!("{{\"usage\":\t{{\"total_tokens\" : {n}.5 }} }}")),
            Just("[DONE]".to_string()),
        ]
    }

    /// An event's lines: other fields and comments around its data, which
    /// may be split over several `data` lines at any byte.
    fn event() -> impl Strategy<Value = Vec<String>> {
        let other = prop::sample::select(vec![
            ": keep-alive",
            "event: message",
            "id: 7",
            "retry: 100",
            "dat: x",
            "datum: {}",
            ":",
        ]);
        (
            event_data(),
            prop::collection::vec(0usize..200, 0..3),
            prop::collection::vec(any::<bool>(), 4),
            prop::option::of(other.clone()),
            prop::option::of(other),
        )
            .prop_map(|(data, mut cuts, spaces, before, after)| {
                let bytes = data.as_bytes();
                cuts.iter_mut().for_each(|c| *c = (*c).min(bytes.len()));
                cuts.sort_unstable();
                cuts.dedup();
                let mut parts = Vec::new();
                let mut from = 0;
                for c in cuts.into_iter().chain([bytes.len()]) {
                    parts.push(&bytes[from..c]);
                    from = c;
                }
                let mut lines: Vec<String> = before.iter().map(|l| (*l).to_string()).collect();
                for (i, p) in parts.iter().enumerate() {
                    let p = String::from_utf8_lossy(p);
                    let sep = if spaces[i % spaces.len()] {
                        "data: "
                    } else {
                        "data:"
                    };
                    lines.push(if p.is_empty() && !spaces[0] {
                        "data".to_string()
                    } else {
                        format!("{sep}{p}")
                    });
                }
                lines.extend(after.iter().map(|l| (*l).to_string()));
                lines
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Issue 41: an event stream read at the cost of its scan names
        /// what a JSON parser reads in it (each event's data parsed whole,
        /// the last that names the cost winning), whatever the line
        /// endings, the other fields and comments, the data split over
        /// lines, and wherever the chunks cut the bytes.
        #[test]
        fn a_streams_reading_is_its_parsed_events(
            events in prop::collection::vec(event(), 0..8),
            crlf in prop::collection::vec(any::<bool>(), 1..4),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
            ended in any::<bool>(),
        ) {
            let mut stream = Vec::new();
            let mut n = 0;
            for lines in &events {
                for line in lines.iter().map(String::as_str).chain([""]) {
                    stream.extend_from_slice(line.as_bytes());
                    stream.extend_from_slice(if crlf[n % crlf.len()] { b"\r\n" } else { b"\n" });
                    n += 1;
                }
            }
            if !ended {
                // A stream whose last event has no empty line (the body
                // ended there): that event still counts.
                while stream.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    stream.pop();
                }
            }
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
            at.sort_unstable();
            let mut s = CostScan::new("/usage/total_tokens", Body::Events);
            let mut from = 0;
            for c in at.into_iter().chain([stream.len()]) {
                s.feed(&stream[from..c]);
                from = c;
            }
            prop_assert_eq!(
                s.finish(),
                parsed_stream(&stream, "/usage/total_tokens"),
                "{}",
                String::from_utf8_lossy(&stream)
            );
        }

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
            let mut s = CostScan::new(&pointer, Body::Json);
            for c in bytes.chunks(chunk) {
                s.feed(c);
            }
            prop_assert_eq!(s.finish(), parsed(&bytes, &pointer), "{}", String::from_utf8_lossy(&bytes));
            // As an event stream's one event, too.
            let mut e = CostScan::new(&pointer, Body::Events);
            e.feed(b"data: ");
            for c in bytes.chunks(chunk) {
                e.feed(c);
            }
            e.feed(b"\n\n");
            if !bytes.contains(&b'\n') {
                prop_assert_eq!(e.finish(), parsed(&bytes, &pointer));
            }
        }
    }
}
