//! Tool outputs too large for the prompt: stored whole, given to the model as their head and
//! tail and a handle, read back with the [`READ_TOOL_OUTPUT`] tool.
//!
//! The agent loop grants `read_tool_output` to an activation once its store holds an
//! output; it answers the call itself (it is not a registry tool). A run's agents store
//! their outputs under `<repo>/.trellis/runs/<run>/tool-outputs/<node>/` ([`DirOutputs`]), so
//! a handle still reads after the process restarts; without a store the loop keeps them in
//! memory for the activation ([`MemoryOutputs`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::{Value, json};
use trellis_llm::ToolSpec;

/// The name of the tool that reads a stored output back.
pub const READ_TOOL_OUTPUT: &str = "read_tool_output";

/// Where stored tool outputs live, by handle. Handles are letters, digits, `-` and `_`.
pub trait OutputStore: Send + Sync {
    /// Stores `text` under `handle`.
    fn put(&self, handle: &str, text: &str) -> std::io::Result<()>;
    /// The output stored under `handle`, if any.
    fn get(&self, handle: &str) -> std::io::Result<Option<String>>;
    /// Whether any output is stored.
    fn is_empty(&self) -> bool;
}

/// Outputs in memory (tests, and activations without a directory).
#[derive(Debug, Default)]
pub struct MemoryOutputs {
    outputs: Mutex<BTreeMap<String, String>>,
}

impl OutputStore for MemoryOutputs {
    fn put(&self, handle: &str, text: &str) -> std::io::Result<()> {
        self.outputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(handle.to_owned(), text.to_owned());
        Ok(())
    }

    fn get(&self, handle: &str) -> std::io::Result<Option<String>> {
        Ok(self
            .outputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(handle)
            .cloned())
    }

    fn is_empty(&self) -> bool {
        self.outputs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty()
    }
}

/// Outputs as files `<dir>/<handle>.txt` (created on the first output).
#[derive(Clone, Debug)]
pub struct DirOutputs {
    dir: PathBuf,
}

impl DirOutputs {
    /// A store in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    fn path(&self, handle: &str) -> Option<PathBuf> {
        valid_handle(handle).then(|| self.dir.join(format!("{handle}.txt")))
    }
}

impl OutputStore for DirOutputs {
    fn put(&self, handle: &str, text: &str) -> std::io::Result<()> {
        let path = self.path(handle).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("invalid handle `{handle}`"),
            )
        })?;
        std::fs::create_dir_all(&self.dir)?;
        std::fs::write(path, text)
    }

    fn get(&self, handle: &str) -> std::io::Result<Option<String>> {
        let Some(path) = self.path(handle) else {
            return Ok(None);
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn is_empty(&self) -> bool {
        std::fs::read_dir(&self.dir).map_or(true, |mut d| d.next().is_none())
    }
}

fn valid_handle(handle: &str) -> bool {
    !handle.is_empty()
        && handle.len() <= 128
        && handle
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A file-name-safe form of `text` (a node id, a call id): letters, digits, `-` and `_`.
pub fn slug(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(96)
        .collect();
    if s.is_empty() { "_".into() } else { s }
}

/// The handle of the output of call `call_id`, asked for by model call `turn` (turn numbers
/// count per session, so handles do not repeat across attempts).
pub fn handle_for(turn: u32, call_id: &str) -> String {
    format!("t{turn}-{}", slug(call_id))
}

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut i = at.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Where to cut `text` near `at` going back to a line start, unless that loses more than a
/// quarter of the span.
fn line_floor(text: &str, at: usize, from: usize) -> usize {
    let at = floor_boundary(text, at);
    match text[from..at].rfind('\n') {
        Some(nl) if from + nl + 1 >= from + (at - from) * 3 / 4 => from + nl + 1,
        _ => at,
    }
}

/// What the model gets instead of `output` (stored under `handle`): a header naming the
/// handle and how to read on, the first two thirds and the last third of `budget` bytes.
pub fn excerpt(output: &str, handle: &str, budget: usize) -> String {
    let head_end = line_floor(output, budget * 2 / 3, 0);
    let tail_start = {
        let want = output.len().saturating_sub(budget / 3).max(head_end);
        let mut i = want.min(output.len());
        while !output.is_char_boundary(i) {
            i += 1;
        }
        // Start the tail at a line start when one is near.
        if i == 0 || output.as_bytes()[i - 1] == b'\n' {
            i
        } else {
            match output[i..].find('\n') {
                Some(nl) if nl < (output.len() - i) / 4 => i + nl + 1,
                _ => i,
            }
        }
    };
    format!(
        "[output of {} bytes, {} lines, stored as `{handle}`: the first {} and the last {} bytes \
         are shown. Read the rest with {READ_TOOL_OUTPUT} {{\"handle\": \"{handle}\", \"offset\": \
         {head_end}}}]\n{}\n… [{} bytes not shown: bytes {head_end}–{tail_start}] …\n{}",
        output.len(),
        output.lines().count(),
        head_end,
        output.len() - tail_start,
        &output[..head_end],
        tail_start - head_end,
        &output[tail_start..],
    )
}

/// The `read_tool_output` tool's spec.
pub fn read_spec(max: usize) -> ToolSpec {
    ToolSpec {
        name: READ_TOOL_OUTPUT.into(),
        description: format!(
            "Reads a stored tool output (one too large for the conversation) by its handle: \
             `limit` bytes (at most {max}) from byte `offset`."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "handle": { "type": "string", "description": "The handle, e.g. `t3-call_7`." },
                "offset": { "type": "integer", "minimum": 0, "description": "Byte offset (default 0)." },
                "limit": { "type": "integer", "minimum": 1, "description": format!("Bytes to read (default and maximum {max}).") }
            },
            "required": ["handle"]
        }),
    }
}

/// Answers a `read_tool_output` call with `args` from `store` (at most `max` bytes):
/// `Ok(text)` for the model, `Err(message)` for an error result.
pub fn read(
    store: &dyn OutputStore,
    args: &Value,
    max: usize,
) -> std::result::Result<String, String> {
    let handle = args
        .get("handle")
        .and_then(Value::as_str)
        .ok_or_else(|| "`handle` is required (a string such as `t3-call_7`)".to_owned())?;
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(max as u64)
        .clamp(1, max as u64);
    let text = match store.get(handle) {
        Ok(Some(text)) => text,
        Ok(None) => {
            return Err(format!(
                "no stored output `{handle}` (handles are named in the excerpts, e.g. `t3-call_7`)"
            ));
        }
        Err(e) => return Err(format!("cannot read stored output `{handle}`: {e}")),
    };
    let start = floor_boundary(&text, usize::try_from(offset).unwrap_or(usize::MAX));
    let end = floor_boundary(
        &text,
        start.saturating_add(usize::try_from(limit).unwrap_or(usize::MAX)),
    );
    let footer = if end < text.len() {
        format!(
            "[bytes {start}–{end} of {}; continue with {READ_TOOL_OUTPUT} {{\"handle\": \"{handle}\", \"offset\": {end}}}]",
            text.len()
        )
    } else {
        format!("[bytes {start}–{end} of {}; end of output]", text.len())
    };
    Ok(format!("{}\n{footer}", &text[start..end]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn numbered(lines: usize) -> String {
        (0..lines).map(|i| format!("line {i:04}\n")).collect()
    }

    #[test]
    fn an_excerpt_shows_head_and_tail_and_names_the_handle() {
        let out = numbered(1000); // 10 bytes a line
        let e = excerpt(&out, "t2-call_1", 600);
        assert!(e.starts_with("[output of 10000 bytes, 1000 lines, stored as `t2-call_1`"));
        assert!(e.contains("line 0000") && e.contains("line 0039"), "{e}");
        assert!(e.contains("line 0999"), "{e}");
        assert!(!e.contains("line 0500"), "{e}");
        assert!(e.len() < 900, "{}", e.len());
        // The offset it names continues where the head stops.
        let store = MemoryOutputs::default();
        store.put("t2-call_1", &out).unwrap();
        let next = e
            .split("\"offset\": ")
            .nth(1)
            .and_then(|s| s.split('}').next())
            .unwrap();
        let text = read(
            &store,
            &json!({"handle": "t2-call_1", "offset": next.parse::<u64>().unwrap(), "limit": 10}),
            100,
        )
        .unwrap();
        assert!(text.starts_with("line 0040"), "{text}");
    }

    #[test]
    fn reading_pages_through_the_output_and_refuses_bad_handles() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirOutputs::new(dir.path().join("outs"));
        assert!(store.is_empty());
        let out = numbered(30);
        store.put(&handle_for(3, "call/7"), &out).unwrap();
        assert!(!store.is_empty());
        let h = handle_for(3, "call/7");
        assert_eq!(h, "t3-call_7");
        let first = read(&store, &json!({"handle": h}), 100).unwrap();
        assert!(first.starts_with("line 0000"), "{first}");
        assert!(first.contains("\"offset\": 100"), "{first}");
        let last = read(&store, &json!({"handle": h, "offset": 250}), 100).unwrap();
        assert!(last.ends_with("end of output]"), "{last}");
        assert!(read(&store, &json!({"handle": "../etc"}), 100).is_err());
        assert!(read(&store, &json!({"handle": "t9-x"}), 100).is_err());
        assert!(read(&store, &json!({}), 100).is_err());
        assert!(store.put("../x", "y").is_err());
    }
}
