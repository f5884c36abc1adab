//! The spans Trellis exports, independent of any SDK: ids, timing, attributes, events and
//! status, as both writers (OTLP JSON, Chrome trace) and the live exporter need them.

use std::fmt;

/// A trace id (16 bytes). A run's trace id is its run id (32 hex digits), so the spans of a
/// run recorded by several processes — the service, workers, a later `runs trace` — share one
/// trace without any context being passed between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub [u8; 16]);

/// A span id (8 bytes, never zero). Derived from what the span is (`node code #2 of run R`),
/// so the same activation gets the same id whichever process or command maps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// The trace of `key`: its 16 bytes when it is 32 hex digits (a run id), else a hash.
    pub fn of(key: &str) -> Self {
        let mut bytes = [0u8; 16];
        if key.len() == 32 && decode_hex(key, &mut bytes) && bytes != [0; 16] {
            return Self(bytes);
        }
        bytes[..8].copy_from_slice(&fnv1a(0xcbf2_9ce4_8422_2325, key).to_be_bytes());
        bytes[8..].copy_from_slice(&fnv1a(0x6c62_272e_07bb_0142, key).to_be_bytes());
        Self(bytes)
    }

    /// Lower-case hex, as OTLP JSON writes it.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl SpanId {
    /// The span named by `parts` within `trace`.
    pub fn of(trace: TraceId, parts: &[&str]) -> Self {
        let mut h = fnv1a_bytes(0xcbf2_9ce4_8422_2325, &trace.0);
        for p in parts {
            h = fnv1a_bytes(h, p.as_bytes());
            h = fnv1a_bytes(h, &[0xff]);
        }
        // Zero is the invalid span id.
        let h = if h == 0 { 1 } else { h };
        Self(h.to_be_bytes())
    }

    /// Lower-case hex, as OTLP JSON writes it.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// The span kind (OTLP's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// Work inside the process (runs, nodes, agents, tools).
    Internal = 1,
    /// A call to another service (a model call).
    Client = 3,
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Text.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Double(f64),
    /// A flag.
    Bool(bool),
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

/// Attributes in the order they were set (a key set twice keeps its last value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attributes(Vec<(&'static str, Value)>);

impl Attributes {
    /// No attributes yet, room for `n`.
    pub fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    /// Sets `key`.
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The text value of `key`.
    pub fn str(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// The integer value of `key`.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key) {
            Some(Value::Int(i)) => Some(*i),
            _ => None,
        }
    }

    /// Every attribute, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.0.iter().map(|(k, v)| (*k, v))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl IntoIterator for Attributes {
    type Item = (&'static str, Value);
    type IntoIter = std::vec::IntoIter<(&'static str, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// Milliseconds since the epoch as OTLP's nanoseconds (negative times, which no event has,
/// clamp to 0).
pub(crate) fn unix_nanos(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

/// Something that happened during a span (an interrupt, a command, a compaction).
#[derive(Clone, Debug, PartialEq)]
pub struct SpanEvent {
    /// When, ms since the epoch.
    pub at_ms: i64,
    /// What (the event's topic, e.g. `graph:input_requested`).
    pub name: String,
    /// Details.
    pub attributes: Attributes,
}

/// How a span ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Status {
    /// Not said (success, by OTLP's convention).
    #[default]
    Unset,
    /// Failed, with why.
    Error(String),
}

/// One finished span. Times are milliseconds since the epoch: the unit of Trellis's event
/// log, which is where every span comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Its trace.
    pub trace: TraceId,
    /// Its id.
    pub id: SpanId,
    /// Its parent (`None` for a trace's root).
    pub parent: Option<SpanId>,
    /// `invoke_workflow feature`, `chat gpt-4o`, `execute_tool read_file`, …
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// Start, ms since the epoch.
    pub start_ms: i64,
    /// End, ms since the epoch (≥ start).
    pub end_ms: i64,
    /// Attributes.
    pub attributes: Attributes,
    /// Events during the span.
    pub events: Vec<SpanEvent>,
    /// How it ended.
    pub status: Status,
}

fn fnv1a(seed: u64, s: &str) -> u64 {
    fnv1a_bytes(seed, s.as_bytes())
}

fn fnv1a_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn decode_hex(s: &str, out: &mut [u8]) -> bool {
    let digits = s.as_bytes();
    for (i, slot) in out.iter_mut().enumerate() {
        let (Some(hi), Some(lo)) = (nibble(digits[2 * i]), nibble(digits[2 * i + 1])) else {
            return false;
        };
        *slot = hi << 4 | lo;
    }
    true
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_its_trace_id_and_other_keys_hash() {
        let run = "0191f0c4a2b37c5e8d9a0b1c2d3e4f50";
        assert_eq!(TraceId::of(run).hex(), run);
        let other = TraceId::of("ses-1");
        assert_ne!(other, TraceId::of("ses-2"));
        assert_eq!(other.hex().len(), 32);
    }

    #[test]
    fn span_ids_depend_on_every_part_and_its_boundaries() {
        let t = TraceId::of("r");
        let a = SpanId::of(t, &["node", "ab", "1"]);
        assert_eq!(a, SpanId::of(t, &["node", "ab", "1"]));
        assert_ne!(a, SpanId::of(t, &["node", "a", "b1"]));
        assert_ne!(a, SpanId::of(TraceId::of("s"), &["node", "ab", "1"]));
        assert_eq!(a.hex().len(), 16);
    }
}
