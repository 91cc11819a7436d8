//! The usage event the filter asked for, taken out of the event stream of
//! a caller that did not ask for it: the stream it sees is the one it
//! expects. An event is held only until its end (an empty line), then goes
//! on or, if it is the usage event, is dropped.

use super::json_scan::JsonScan;

/// One stream's events, as they pass.
#[derive(Debug)]
pub(crate) struct UsageEvents {
    /// The cost's pointer: an event whose data names it is a usage event.
    usage: JsonScan,
    /// A choice's index: an event that has one carries an answer.
    choice: JsonScan,
    /// The start of an event not yet ended.
    carry: Vec<u8>,
}

impl UsageEvents {
    /// Events whose usage is at `pointer` (the cost's).
    pub fn new(pointer: &str) -> UsageEvents {
        UsageEvents {
            usage: JsonScan::new(&super::cost_scan::tokens(pointer)),
            choice: JsonScan::new(&["choices".into(), "0".into(), "index".into()]),
            carry: Vec::new(),
        }
    }

    /// What the client is sent of `chunk` (`end`: the last): the events
    /// it ends, but the usage event; what it starts of the next is kept
    /// for the next chunk. `None`: the chunk goes on as it is.
    pub fn pass(&mut self, chunk: &[u8], end: bool) -> Option<Vec<u8>> {
        let mut buf = std::mem::take(&mut self.carry);
        let carried = !buf.is_empty();
        buf.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(buf.len());
        let mut from = 0;
        let mut dropped = false;
        while let Some(len) = event_len(buf.get(from..).unwrap_or_default()) {
            let event = buf.get(from..from + len).unwrap_or_default();
            if self.is_usage(event) {
                dropped = true;
            } else {
                out.extend_from_slice(event);
            }
            from += len;
        }
        let rest = buf.get(from..).unwrap_or_default();
        if end {
            out.extend_from_slice(rest);
        } else {
            self.carry = rest.to_vec();
        }
        (carried || dropped || !self.carry.is_empty()).then_some(out)
    }

    /// An event with the usage and no answer: the one asked for.
    fn is_usage(&mut self, event: &[u8]) -> bool {
        self.usage.reset();
        self.choice.reset();
        let mut first = true;
        for line in event.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(value) = line.strip_prefix(b"data:") else {
                continue;
            };
            let value = value.strip_prefix(b" ").unwrap_or(value);
            for scan in [&mut self.usage, &mut self.choice] {
                if !first {
                    scan.feed(b"\n");
                }
                scan.feed(value);
            }
            first = false;
        }
        let text = self.usage.text_bytes();
        self.usage.end().is_some() && text == 0 && self.choice.end().is_none()
    }
}

/// The length of the first event in `buf`, up to and with the empty line
/// that ends it; `None` if it has not ended.
fn event_len(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(at) = buf.get(i..)?.iter().position(|&b| b == b'\n') {
        let next = i + at + 1;
        match buf.get(next..) {
            Some([b'\n', ..]) => return Some(next + 1),
            Some([b'\r', b'\n', ..]) => return Some(next + 2),
            _ => i = next,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTENT: &[u8] =
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n";
    const USAGE: &[u8] = b"data: {\"choices\":[],\"usage\":{\"total_tokens\":12}}\n\n";
    const DONE: &[u8] = b"data: [DONE]\n\n";

    fn seen(chunks: &[&[u8]]) -> Vec<u8> {
        let mut u = UsageEvents::new("/usage/total_tokens");
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            match u.pass(c, i + 1 == chunks.len()) {
                Some(o) => out.extend(o),
                None => out.extend_from_slice(c),
            }
        }
        out
    }

    #[test]
    fn the_usage_event_is_dropped_wherever_the_chunks_split_it() {
        let whole = [CONTENT, CONTENT, USAGE, DONE].concat();
        let want = [CONTENT, CONTENT, DONE].concat();
        assert_eq!(seen(&[&whole]), want);
        for cut in 1..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(seen(&[a, b]), want, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(seen(&bytes), want);
    }

    #[test]
    fn events_with_an_answer_or_without_usage_go_on_unchanged() {
        // Usage on every content event (vLLM's continuous usage): kept.
        let with = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}],\"usage\":{\"total_tokens\":3}}\n\n";
        // A finishing choice with usage but no text: kept.
        let finish = b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"total_tokens\":3}}\r\n\r\n";
        let whole = [&with[..], &finish[..], CONTENT, DONE].concat();
        let mut u = UsageEvents::new("/usage/total_tokens");
        assert_eq!(u.pass(&whole, true), None);
        // A stream that ends mid-event passes what it has.
        assert_eq!(seen(&[b"data: {\"usage\":"]), b"data: {\"usage\":");
    }
}
