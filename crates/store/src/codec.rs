//! The compact encoding of one batch of events (the `events.data` blob).
//!
//! A blob is one format byte followed by the payload:
//!
//! | byte | payload |
//! | ---- | ------- |
//! | `0`  | the JSON text itself (used when compression would not shrink it) |
//! | `1`  | LZ4 block, uncompressed size prepended (`lz4_flex`), primed with [`DICT_V1`] |
//!
//! The JSON is `[ts, [dts…], [kind…], [seq…], [[cause, n]…]]`: the first event's timestamp,
//! the deltas of the following ones, every `EventKind` in its wire form, the explicit seqs
//! — only when the batch's seqs are not the contiguous range `first_seq..=last_seq` kept in
//! the row (otherwise `null`, or nothing when no causes follow) — and the events' causes
//! (submission ids), run-length encoded as `[cause or null, count]` pairs in event order —
//! only when some event of the batch has one, so runs without causes pay nothing. Blobs of
//! three or four parts (all blobs written before causes existed) decode with no causes. The
//! run id is not repeated (the row's key names the run).
//!
//! Batches are small (a step is a handful of events), too small for LZ4 to find much
//! repetition inside one; the static dictionary supplies the JSON every event repeats (tags,
//! field names, node states), so even a one-event batch compresses. A dictionary is part of
//! the on-disk format forever: a new one gets a new format byte.

use serde::Serialize;
use trellis_graph::{Batch, JournalError};
use trellis_protocol::{Event, EventKind, RunId, SubmissionId};

const RAW: u8 = 0;
const LZ4_DICT_V1: u8 = 1;

/// Fragments every batch repeats. LZ4 matches reach back 64 KiB, so all of it is usable; the
/// most common fragments sit at the end, closest to the data.
const DICT_V1: &[u8] = br#"{"type":"runStarted","graph":"","fingerprint":"","params":{},"input":{"task":"","fork":{"run":"","seq":
{"type":"runResumed","requeued":["
{"type":"nodeAdded","node":"","template":"","parent":"","input":{
{"type":"edgeAdded","edge":{"from":"","to":"
{"type":"interruptRaised","node":"","attempt":1,"interrupt":{"kind":"question","prompt":"","data":{},"scratch":{
{"type":"interruptRaised","node":"","attempt":1,"interrupt":{"kind":"approval","prompt":"
{"type":"inputReceived","node":"","attempt":1,"answer":{"approved":true,"comment":"
{"type":"commandReceived","id":1,"command":{"type":"sendMessage","node":"","message":{"text":"","from":"user"}}}
{"type":"commandReceived","id":1,"command":{"type":"cancel","reason":"
{"type":"commandRefused","id":1,"reason":"
{"type":"messageQueued","id":1,"node":"","attempt":1,"delivered":false}
{"type":"runStatusChanged","status":"waitingInput"}
{"type":"runStatusChanged","status":"failed","terminal":"ABORT","error":"
{"type":"runStatusChanged","status":"cancelled"}
{"type":"runStatusChanged","status":"succeeded","terminal":"DONE"}
{"type":"nodeTransition","node":"","attempt":1,"from":"RUNNING","to":"FAILED","reason":"
{"type":"nodeTransition","node":"","attempt":1,"from":"READY","to":"SKIPPED"}
{"type":"nodeTransition","node":"","attempt":1,"from":"READY","to":"PRUNED","reason":"
{"type":"nodeTransition","node":"","attempt":1,"from":"RUNNING","to":"WAITING_INPUT"}
{"type":"nodeTransition","node":"","attempt":1,"from":"WAITING_INPUT","to":"READY"}
{"type":"nodeOutput","node":"","attempt":1,"failure":true,"error":"
{"type":"nodeOutput","node":"","attempt":1,"result":{"summary":"","files":["src/lib.rs"]},"writes":[["
"],"counters":[["","spawns":[["
{"role":"system","content":"
{"role":"tool","content":"
{"role":"user","content":"
"messages",[{"role":"assistant","content":"","stage":"
"summary":"","error":null,"ok":true,"passed":false,"failure":false}
{"type":"routed","from":"","attempt":1,"to":[],"reason":"failure"}
{"type":"routed","from":"","attempt":1,"to":["
"],"reason":"success"}]
{"type":"stepStarted","step":1}
{"type":"stepCompleted","step":1,"changed":["
{"type":"nodeTransition","node":"","attempt":1,"to":"READY"}
{"type":"nodeTransition","node":"","attempt":1,"from":"READY","to":"RUNNING"}
{"type":"nodeTransition","node":"","attempt":1,"from":"RUNNING","to":"COMPLETED"}"#;

/// Encodes `events` (all of one run, in seq order) into a blob.
pub(crate) fn encode(events: &[Event]) -> Result<Vec<u8>, serde_json::Error> {
    let Some(first) = events.first() else {
        return Ok(vec![RAW, b'[', b']']);
    };
    let contiguous = events.iter().zip(first.seq..).all(|(e, s)| e.seq == s);
    let deltas: Vec<i64> = events
        .windows(2)
        .map(|w| w[1].ts.wrapping_sub(w[0].ts))
        .collect();
    let kinds: Vec<&EventKind> = events.iter().map(|e| &e.kind).collect();
    let seqs: Vec<u64> = if contiguous {
        Vec::new()
    } else {
        events.iter().map(|e| e.seq).collect()
    };
    let json = match causes(events) {
        Some(causes) => {
            let seqs = (!seqs.is_empty()).then_some(seqs);
            to_json(&(first.ts, deltas, kinds, seqs, causes))?
        }
        None if seqs.is_empty() => to_json(&(first.ts, deltas, kinds))?,
        None => to_json(&(first.ts, deltas, kinds, seqs))?,
    };

    let compressed = lz4_flex::block::compress_prepend_size_with_dict(&json, DICT_V1);
    let mut blob = Vec::with_capacity(1 + json.len().min(compressed.len()));
    if compressed.len() < json.len() {
        blob.push(LZ4_DICT_V1);
        blob.extend_from_slice(&compressed);
    } else {
        blob.push(RAW);
        blob.extend_from_slice(&json);
    }
    Ok(blob)
}

/// Encodes a batch's events on the appending caller's thread (every backend's
/// [`Journal::append`](trellis_graph::Journal::append)), so the writer spends its time in the
/// database; an event that cannot be encoded fails the batch.
pub(crate) fn encode_batch(batch: &Batch) -> Result<Vec<u8>, JournalError> {
    encode(&batch.events).map_err(|e| {
        JournalError::Backend(format!(
            "cannot encode the events of run {}: {e}",
            batch.run
        ))
    })
}

/// The events with `from <= seq <= to` of a run's stored batches, given as `(first_seq,
/// last_seq, blob)` rows in key order (every backend's read of an event log). A blob that
/// does not decode is answered with `corrupt(first_seq, detail)`.
pub(crate) fn decode_rows<E>(
    run: &RunId,
    rows: impl IntoIterator<Item = (u64, u64, Vec<u8>)>,
    from: u64,
    to: u64,
    corrupt: impl Fn(u64, String) -> E,
) -> Result<Vec<Event>, E> {
    let mut out = Vec::new();
    for (first_seq, last_seq, data) in rows {
        let batch =
            decode(run, first_seq, last_seq, &data).map_err(|detail| corrupt(first_seq, detail))?;
        out.extend(batch.into_iter().filter(|e| e.seq >= from && e.seq <= to));
    }
    Ok(out)
}

/// The events' causes as `(cause, count)` runs, or `None` when no event has one.
fn causes(events: &[Event]) -> Option<Vec<(Option<&SubmissionId>, usize)>> {
    if events.iter().all(|e| e.cause.is_none()) {
        return None;
    }
    let mut runs: Vec<(Option<&SubmissionId>, usize)> = Vec::new();
    for e in events {
        match runs.last_mut() {
            Some((cause, n)) if *cause == e.cause.as_ref() => *n += 1,
            _ => runs.push((e.cause.as_ref(), 1)),
        }
    }
    Some(runs)
}

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(value)
}

/// Decodes a blob written by [`encode`] for the row `(run, first_seq..=last_seq)`.
pub(crate) fn decode(
    run: &RunId,
    first_seq: u64,
    last_seq: u64,
    blob: &[u8],
) -> Result<Vec<Event>, String> {
    let (&format, payload) = blob.split_first().ok_or("empty blob")?;
    let json = match format {
        RAW => payload.to_vec(),
        LZ4_DICT_V1 => lz4_flex::block::decompress_size_prepended_with_dict(payload, DICT_V1)
            .map_err(|e| format!("lz4: {e}"))?,
        other => {
            return Err(format!(
                "unknown blob format {other} (written by a newer trellis? upgrade)"
            ));
        }
    };
    if json == b"[]" {
        return Ok(Vec::new());
    }
    let value: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| format!("json: {e}"))?;
    let parts = value.as_array().ok_or("payload is not an array")?;
    let (ts, deltas, kinds, seqs, causes) = match parts.as_slice() {
        [ts, d, k] => (ts, d, k, None, None),
        [ts, d, k, s] => (ts, d, k, Some(s), None),
        [ts, d, k, s, c] => (ts, d, k, Some(s), Some(c)),
        _ => {
            return Err(format!(
                "payload has {} parts, expected 3 to 5",
                parts.len()
            ));
        }
    };
    let mut ts: i64 = parse(ts, "ts")?;
    let deltas: Vec<i64> = parse(deltas, "ts deltas")?;
    let kinds: Vec<EventKind> = parse(kinds, "event kinds")?;
    let seqs: Vec<u64> = match seqs.filter(|s| !s.is_null()) {
        Some(s) => parse(s, "seqs")?,
        None => (first_seq..).take(kinds.len()).collect(),
    };
    let causes: Vec<(Option<SubmissionId>, usize)> = match causes {
        Some(c) => parse(c, "causes")?,
        None => vec![(None, kinds.len())],
    };
    let counted = causes
        .iter()
        .try_fold(0usize, |sum, (_, n)| sum.checked_add(*n));
    if counted != Some(kinds.len()) {
        return Err(format!(
            "causes cover {} events, but the batch has {}",
            counted.map_or_else(|| "too many".to_owned(), |n| n.to_string()),
            kinds.len()
        ));
    }
    let mut causes = causes
        .into_iter()
        .flat_map(|(cause, n)| std::iter::repeat_n(cause, n));
    if deltas.len() + 1 != kinds.len() || seqs.len() != kinds.len() {
        return Err(format!(
            "{} kinds, {} ts deltas and {} seqs do not line up",
            kinds.len(),
            deltas.len(),
            seqs.len()
        ));
    }
    if seqs.first() != Some(&first_seq) || seqs.last() != Some(&last_seq) {
        return Err(format!(
            "seqs {:?}..{:?} do not match the row's {first_seq}..{last_seq}",
            seqs.first(),
            seqs.last()
        ));
    }
    let mut out = Vec::with_capacity(kinds.len());
    for (i, (kind, seq)) in kinds.into_iter().zip(seqs).enumerate() {
        if i > 0 {
            ts = ts.wrapping_add(deltas[i - 1]);
        }
        out.push(Event {
            run: run.clone(),
            seq,
            ts,
            cause: causes.next().flatten(),
            kind,
        });
    }
    Ok(out)
}

fn parse<T: serde::de::DeserializeOwned>(v: &serde_json::Value, what: &str) -> Result<T, String> {
    T::deserialize(v).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_protocol::{NodeId, NodeState};

    fn ev(seq: u64, ts: i64) -> Event {
        Event {
            run: RunId::from_string("r"),
            seq,
            ts,
            cause: None,
            kind: EventKind::NodeTransition {
                node: NodeId::new("plan"),
                attempt: 1,
                from: Some(NodeState::Ready),
                to: NodeState::Running,
                reason: None,
            },
        }
    }

    #[test]
    fn contiguous_round_trip_and_dictionary_pays() {
        let events = vec![
            ev(4, 1_700_000_000_000),
            ev(5, 1_700_000_000_007),
            ev(6, 1_699_999_999_999),
        ];
        let blob = encode(&events).unwrap();
        assert_eq!(blob[0], LZ4_DICT_V1);
        assert_eq!(
            decode(&RunId::from_string("r"), 4, 6, &blob).unwrap(),
            events
        );
        // A lone transition costs about half its ~100-byte JSON, most of it the timestamp.
        let one = encode(&events[..1]).unwrap();
        assert!(one.len() < 55, "one transition took {} bytes", one.len());
    }

    #[test]
    fn gaps_keep_explicit_seqs() {
        let events = vec![ev(2, 10), ev(9, 11)];
        let blob = encode(&events).unwrap();
        assert_eq!(
            decode(&RunId::from_string("r"), 2, 9, &blob).unwrap(),
            events
        );
    }

    /// The JSON inside a blob.
    fn payload(blob: &[u8]) -> serde_json::Value {
        let json = match blob[0] {
            RAW => blob[1..].to_vec(),
            _ => lz4_flex::block::decompress_size_prepended_with_dict(&blob[1..], DICT_V1).unwrap(),
        };
        serde_json::from_slice(&json).unwrap()
    }

    fn caused(mut e: Event, cause: Option<&str>) -> Event {
        e.cause = cause.map(SubmissionId::from_string);
        e
    }

    #[test]
    fn causes_round_trip_run_length_encoded() {
        let r = RunId::from_string("r");
        let events = vec![
            caused(ev(1, 10), Some("sub-a")),
            caused(ev(2, 11), Some("sub-a")),
            caused(ev(3, 12), None),
            caused(ev(4, 13), Some("sub-b")),
            caused(ev(5, 14), Some("sub-a")),
        ];
        let blob = encode(&events).unwrap();
        let parts = payload(&blob);
        assert_eq!(
            parts[3],
            serde_json::Value::Null,
            "contiguous seqs stay implicit"
        );
        assert_eq!(
            parts[4],
            serde_json::json!([["sub-a", 2], [null, 1], ["sub-b", 1], ["sub-a", 1]])
        );
        assert_eq!(decode(&r, 1, 5, &blob).unwrap(), events);
        // With explicit seqs too.
        let gaps = vec![caused(ev(2, 10), None), caused(ev(9, 11), Some("sub-c"))];
        let blob = encode(&gaps).unwrap();
        assert_eq!(payload(&blob)[3], serde_json::json!([2, 9]));
        assert_eq!(decode(&r, 2, 9, &blob).unwrap(), gaps);
    }

    #[test]
    fn batches_without_causes_keep_the_old_layout() {
        let events = vec![ev(4, 1_700_000_000_000), ev(5, 1_700_000_000_007)];
        assert_eq!(
            payload(&encode(&events).unwrap()).as_array().unwrap().len(),
            3
        );
        let gaps = vec![ev(2, 10), ev(9, 11)];
        assert_eq!(
            payload(&encode(&gaps).unwrap()).as_array().unwrap().len(),
            4
        );
        // Adding a cause costs only the cause part.
        let with = vec![
            caused(ev(4, 1_700_000_000_000), Some("sub-0199")),
            caused(ev(5, 1_700_000_000_007), Some("sub-0199")),
        ];
        assert!(encode(&with).unwrap().len() > encode(&events).unwrap().len());
    }

    #[test]
    fn blobs_written_before_causes_decode_without_them() {
        let r = RunId::from_string("r");
        let kind =
            r#"{"type":"nodeTransition","node":"plan","attempt":1,"from":"READY","to":"RUNNING"}"#;
        let three = format!("[1700000000000,[7],[{kind},{kind}]]");
        let mut blob = vec![RAW];
        blob.extend_from_slice(three.as_bytes());
        assert_eq!(
            decode(&r, 4, 5, &blob).unwrap(),
            vec![ev(4, 1_700_000_000_000), ev(5, 1_700_000_000_007)]
        );
        let four = format!("[10,[1],[{kind},{kind}],[2,9]]");
        let mut blob = vec![RAW];
        blob.extend_from_slice(four.as_bytes());
        let events = decode(&r, 2, 9, &blob).unwrap();
        assert_eq!(events, vec![ev(2, 10), ev(9, 11)]);
        assert!(events.iter().all(|e| e.cause.is_none()));
    }

    #[test]
    fn corrupt_blobs_are_reported_not_panicked() {
        let r = RunId::from_string("r");
        assert!(decode(&r, 1, 1, &[]).is_err());
        assert!(
            decode(&r, 1, 1, &[7, 1, 2])
                .unwrap_err()
                .contains("unknown blob format")
        );
        assert!(decode(&r, 1, 1, &[LZ4_DICT_V1, 200, 0, 0, 0, 1]).is_err());
        let blob = encode(&[ev(1, 1)]).unwrap();
        assert!(decode(&r, 1, 2, &blob).is_err(), "row range must match");
        let kind = r#"{"type":"stepStarted","step":1}"#;
        for causes in [
            r#"[["sub-a",2]]"#,
            r#"[["sub-a",18446744073709551615],[null,1]]"#,
        ] {
            let mut blob = vec![RAW];
            blob.extend_from_slice(format!("[1,[],[{kind}],null,{causes}]").as_bytes());
            let err = decode(&r, 1, 1, &blob).unwrap_err();
            assert!(err.starts_with("causes cover"), "{err}");
        }
    }
}
