//! Relevance judgement by the configured model (`RetrievalOptions::judge`): after a stage's
//! pack is filled, the model reads the task and the best packed candidates (numbered, each
//! its place and first lines) and answers `{"relevant": [numbers]}` under a JSON Schema whose
//! numbers are an `enum` of the candidates shown — on the embedded model a llama.cpp grammar,
//! on an OpenAI-wire endpoint `json_schema`, so the answer can only name candidates that
//! exist. The candidates it names come first, in its order; those it leaves out are dropped
//! (their tokens freed); items beyond the judged ones and failure regions keep their place.
//! A failure, a timeout or an empty answer keeps the ranking, with a note.

use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use trellis_llm::types::ResponseFormat;
use trellis_llm::{ChatRequest, Message, ModelProvider, StructuredOptions, complete_structured_as};

use super::queries::truncate_chars;
use super::{FAILURE_SOURCE, PackedItem, RetrievalOptions, StagePack};

/// The model's answer.
#[derive(Debug, Deserialize, JsonSchema)]
struct Judged {
    /// Numbers of the relevant candidates, most useful first.
    relevant: Vec<usize>,
}

const SYSTEM: &str = "You judge which search results help a software agent with its task. \
Answer only with JSON: the numbers of the helpful results, most helpful first; leave out \
results that do not help.";

/// Characters of the task shown.
const TASK_CHARS: usize = 1500;
/// Characters of each candidate's text shown.
const CANDIDATE_CHARS: usize = 600;
/// Lines of each candidate's text shown.
const CANDIDATE_LINES: usize = 12;

/// The schema: `relevant` holds at most `n` numbers among `1..=n` (repeats are ignored when
/// applied; `uniqueItems` is left out, as llama.cpp's grammar converter cannot express it).
fn schema(n: usize) -> serde_json::Value {
    let numbers: Vec<usize> = (1..=n).collect();
    serde_json::json!({
        "type": "object",
        "properties": {
            "relevant": {
                "type": "array",
                "items": { "type": "integer", "enum": numbers },
                "maxItems": n
            }
        },
        "required": ["relevant"],
        "additionalProperties": false
    })
}

fn prompt(task: &str, stage: &str, candidates: &[&PackedItem]) -> String {
    let mut p = format!(
        "Task:\n{}\n\nStage: {stage}\n\nResults:\n",
        truncate_chars(task.trim(), TASK_CHARS)
    );
    for (i, c) in candidates.iter().enumerate() {
        let what = c
            .symbol
            .as_deref()
            .or(c.section.as_deref())
            .unwrap_or(&c.kind);
        let head: String = c
            .text
            .lines()
            .take(CANDIDATE_LINES)
            .collect::<Vec<_>>()
            .join("\n");
        p.push_str(&format!(
            "[{}] {}:{}-{} ({what})\n{}\n\n",
            i + 1,
            c.path,
            c.start_line,
            c.end_line,
            truncate_chars(&head, CANDIDATE_CHARS)
        ));
    }
    p.push_str("Which results help with the task? Answer {\"relevant\": [numbers]}.");
    p
}

/// Judges the best `options.judge_candidates` searched items of `pack` (failure regions are
/// neither shown nor moved) and reorders and filters them by the answer; notes what happened.
pub(crate) async fn judge(
    provider: &dyn ModelProvider,
    options: &RetrievalOptions,
    task: &str,
    pack: &mut StagePack,
    cancel: &CancellationToken,
) {
    let judged: Vec<usize> = pack
        .items
        .iter()
        .enumerate()
        .filter(|(_, it)| it.source != FAILURE_SOURCE)
        .map(|(i, _)| i)
        .take(options.judge_candidates)
        .collect();
    if judged.len() < 2 {
        return;
    }
    let shown: Vec<&PackedItem> = judged.iter().map(|&i| &pack.items[i]).collect();
    let mut request = ChatRequest::new(vec![
        Message::system(SYSTEM),
        Message::user(prompt(task, &pack.stage, &shown)),
    ]);
    request.max_tokens = Some(options.judge_max_tokens);
    request.temperature = Some(0.0);
    request.response_format = Some(ResponseFormat {
        name: "relevance".into(),
        schema: schema(judged.len()),
    });
    let call = complete_structured_as::<Judged>(
        provider,
        request,
        StructuredOptions {
            reask: false,
            ..StructuredOptions::default()
        },
        cancel.child_token(),
    );
    let answer = match tokio::time::timeout(options.judge_timeout, call).await {
        Ok(Ok(a)) => a.value.relevant,
        Ok(Err(e)) => {
            pack.notes
                .push(format!("relevance judgement failed: {e}; ranking kept"));
            return;
        }
        Err(_) => {
            pack.notes.push(format!(
                "relevance judgement ran out of its {} s; ranking kept",
                options.judge_timeout.as_secs_f32()
            ));
            return;
        }
    };
    // Numbers as shown (1-based), each once; anything else is ignored.
    let mut order: Vec<usize> = Vec::new();
    for n in answer {
        if (1..=judged.len()).contains(&n) && !order.contains(&(n - 1)) {
            order.push(n - 1);
        }
    }
    if order.is_empty() {
        pack.notes.push(format!(
            "the model judged none of the top {} results relevant; ranking kept",
            judged.len()
        ));
        return;
    }
    apply(pack, &judged, &order);
}

/// Puts the judged slots' items in `order` (indices into `judged`), drops the judged items
/// not in it, and updates the token count, the sources' packed counts and the notes.
fn apply(pack: &mut StagePack, judged: &[usize], order: &[usize]) {
    let mut items: Vec<Option<PackedItem>> = std::mem::take(&mut pack.items)
        .into_iter()
        .map(Some)
        .collect();
    let kept: Vec<PackedItem> = order
        .iter()
        .filter_map(|&k| items[judged[k]].take())
        .collect();
    let dropped: Vec<PackedItem> = judged.iter().filter_map(|&i| items[i].take()).collect();
    // The judged slots, in their positions, receive the kept items in the model's order.
    let mut kept = kept.into_iter();
    let mut out = Vec::with_capacity(items.len());
    for (i, slot) in items.into_iter().enumerate() {
        match slot {
            Some(it) => out.push(it),
            None if judged.contains(&i) => out.extend(kept.next()),
            None => {}
        }
    }
    let freed: usize = dropped.iter().map(|d| d.tokens).sum();
    pack.used_tokens = pack.used_tokens.saturating_sub(freed);
    for s in &mut pack.sources {
        s.packed = out.iter().filter(|i| i.source == s.name).count();
    }
    pack.notes.push(format!(
        "the model judged {} of the top {} results relevant; {} left out ({freed} tokens)",
        order.len(),
        judged.len(),
        dropped.len()
    ));
    pack.items = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(path: &str, source: &str, tokens: usize) -> PackedItem {
        PackedItem {
            source: source.into(),
            path: path.into(),
            start_line: 1,
            end_line: 2,
            symbol: None,
            section: None,
            kind: "function".into(),
            text: "fn x() {}".into(),
            tokens,
            score: 0.0,
            note: None,
        }
    }

    #[test]
    fn judged_items_are_reordered_and_the_rest_dropped() {
        let mut pack = StagePack {
            items: vec![
                item("fail.rs", FAILURE_SOURCE, 5),
                item("a.rs", "codebase_semantic_search", 10),
                item("b.rs", "codebase_semantic_search", 20),
                item("c.rs", "codebase_semantic_search", 30),
                item("d.rs", "codebase_semantic_search", 40),
            ],
            used_tokens: 105,
            ..StagePack::default()
        };
        // a, b, c judged (slots 1..=3); the model keeps c then a; d was not shown.
        apply(&mut pack, &[1, 2, 3], &[2, 0]);
        let paths: Vec<&str> = pack.items.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["fail.rs", "c.rs", "a.rs", "d.rs"]);
        assert_eq!(pack.used_tokens, 85);
        assert!(
            pack.notes[0].contains("judged 2 of the top 3"),
            "{:?}",
            pack.notes
        );
    }

    #[test]
    fn the_schema_allows_only_the_numbers_shown() {
        let s = schema(3);
        assert_eq!(
            s["properties"]["relevant"]["items"]["enum"],
            serde_json::json!([1, 2, 3])
        );
        assert_eq!(s["required"], serde_json::json!(["relevant"]));
    }
}
