//! Recording tool calls: the [`ToolCallSink`] seam and its store implementation.

use std::sync::{Arc, Mutex};

use trellis_store::{ToolCallRecord, UsageStore};

/// Receives one record per tool call. Must not block for long: it is called on the
/// agent's async task.
pub trait ToolCallSink: Send + Sync {
    /// Records a finished call.
    fn record(&self, record: ToolCallRecord);
}

/// A store's usage domain as a sink (an `Arc<Store>` converts to it): each record is
/// queued, not waited for.
pub struct StoreSink(pub Arc<dyn UsageStore>);

impl ToolCallSink for StoreSink {
    fn record(&self, record: ToolCallRecord) {
        self.0.record_tool_call_nowait(record);
    }
}

/// Keeps records in memory (tests, and runs without a store).
#[derive(Debug, Default)]
pub struct MemorySink {
    records: Mutex<Vec<ToolCallRecord>>,
}

impl MemorySink {
    /// The records so far.
    pub fn records(&self) -> Vec<ToolCallRecord> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl ToolCallSink for MemorySink {
    fn record(&self, record: ToolCallRecord) {
        if let Ok(mut r) = self.records.lock() {
            r.push(record);
        }
    }
}

/// The first line of `text`, cut to `max` characters, for summaries.
pub fn summarize(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or("");
    let lines = text.lines().count();
    let mut s: String = first.chars().take(max).collect();
    if first.chars().count() > max {
        s.push('…');
    }
    if lines > 1 {
        s.push_str(&format!(" (+{} lines)", lines - 1));
    }
    s
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
