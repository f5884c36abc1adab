//! The compact encoding of one batch of events (the `events.data` blob).
//!
//! A blob is one format byte followed by the payload:
//!
//! | byte | payload |
//! | ---- | ------- |
//! | `0`  | the JSON text itself (used when compression would not shrink it) |
//! | `1`  | LZ4 block, uncompressed size prepended (`lz4_flex`), primed with [`DICT_V1`] |
//!
//! The JSON is `[ts, [dts…], [kind…], [seq…]]`: the first event's timestamp, the deltas of
//! the following ones, every `EventKind` in its wire form, and — only when the batch's seqs
//! are not the contiguous range `first_seq..=last_seq` kept in the row — the explicit seqs.
//! The run id is not repeated (the row's key names the run).
//!
//! Batches are small (a step is a handful of events), too small for LZ4 to find much
//! repetition inside one; the static dictionary supplies the JSON every event repeats (tags,
//! field names, node states), so even a one-event batch compresses. A dictionary is part of
//! the on-disk format forever: a new one gets a new format byte.

use serde::Serialize;
use trellis_protocol::{Event, EventKind, RunId};

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
    let json = if seqs.is_empty() {
        to_json(&(first.ts, deltas, kinds))?
    } else {
        to_json(&(first.ts, deltas, kinds, seqs))?
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
    let (ts, deltas, kinds, seqs) = match parts.as_slice() {
        [ts, d, k] => (ts, d, k, None),
        [ts, d, k, s] => (ts, d, k, Some(s)),
        _ => {
            return Err(format!(
                "payload has {} parts, expected 3 or 4",
                parts.len()
            ));
        }
    };
    let mut ts: i64 = parse(ts, "ts")?;
    let deltas: Vec<i64> = parse(deltas, "ts deltas")?;
    let kinds: Vec<EventKind> = parse(kinds, "event kinds")?;
    let seqs: Vec<u64> = match seqs {
        Some(s) => parse(s, "seqs")?,
        None => (first_seq..).take(kinds.len()).collect(),
    };
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
    }
}
