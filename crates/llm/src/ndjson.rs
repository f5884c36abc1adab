//! Newline-delimited JSON framing (`application/x-ndjson`, Ollama's streams): one JSON value
//! per line. Lines are cut at `\n` (a `\r` before it is dropped) as bytes arrive, so a line
//! split across reads, or a character split across them, is whole when it is handed on.

use crate::http::Framing;

/// Incremental line splitter: feed bytes as they arrive, take complete lines out.
#[derive(Debug, Default)]
pub(crate) struct LineDecoder {
    buf: Vec<u8>,
}

impl LineDecoder {
    /// A decoder with nothing buffered.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// `line` as text, or `None` when it is blank.
    fn text(mut line: Vec<u8>) -> Option<String> {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let text = String::from_utf8_lossy(&line);
        (!text.trim().is_empty()).then(|| text.into_owned())
    }
}

impl Framing for LineDecoder {
    type Frame = String;

    fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
            line.pop();
            out.extend(Self::text(line));
        }
        out
    }

    /// The last line, when the body ended without a newline after it.
    fn finish(&mut self) -> Vec<String> {
        Self::text(std::mem::take(&mut self.buf))
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_reads_are_whole_and_blank_lines_are_skipped() {
        let mut d = LineDecoder::new();
        assert!(d.feed(b"{\"a\":").is_empty());
        // "é" split between two reads.
        let first = d.feed(b"1}\r\n\n{\"b\":\"\xc3");
        assert_eq!(first, vec!["{\"a\":1}".to_string()]);
        assert_eq!(
            d.feed(b"\xa9\"}\n{\"c\""),
            vec!["{\"b\":\"é\"}".to_string()]
        );
        assert_eq!(d.finish(), vec!["{\"c\"".to_string()]);
        assert!(d.finish().is_empty());
    }
}
