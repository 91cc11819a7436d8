//! A response body read for its cost as it passes (`cost.response_json`):
//! chunk by chunk, never held, within a byte cap. A JSON body is kept up
//! to the cap and read at its end; a server-sent-events stream
//! (`text/event-stream`, as LLM APIs stream) is read a line at a time,
//! and the last `data:` event that names the cost wins, so its memory is
//! one line whatever the stream's length.

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
            return;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        if let Some(cost) = self.cost_in(data) {
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
            self.end_line();
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
            b"\"}\ndata: {\"usage\":{\"total_tokens\":9}}\n".to_vec(),
        ]
        .concat();
        assert_eq!(read(&long, true, 64, 100), Some(9));
        assert_eq!(read(b"data: [DONE]\n", true, 4, 256), None);
    }
}
