//! A response body read for its cost as it passes (`cost.response_json`):
//! chunk by chunk, never held, within a byte cap. A JSON body is kept up
//! to the cap and read at its end; a server-sent-events stream
//! (`text/event-stream`, as LLM APIs stream) is read a line at a time
//! into events (an event's `data:` lines joined by newlines, ended by an
//! empty line, as the event-stream format says), and the last event that
//! names the cost wins, so its memory is one event whatever the stream's
//! length.

use serde_json::Value;

/// One bound's reading of one response.
#[derive(Debug)]
pub struct CostScan {
    /// A JSON pointer (`/usage/total_tokens`).
    pointer: String,
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
        CostScan {
            pointer: pointer.to_string(),
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

    fn cost_in(&self, json: &[u8]) -> Option<u32> {
        let v: Value = serde_json::from_slice(json).ok()?;
        match v.pointer(&self.pointer)? {
            Value::Number(n) => crate::pipeline::units(&n.to_string()),
            _ => None,
        }
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
}
