//! The span tree of a scripted run: names, parents, attributes, content only when asked.

use trellis_protocol::RunStatus;
use trellis_telemetry::semconv::{self, trellis};
use trellis_telemetry::{Mapper, Options, Span, Status, TraceId, run_spans};

use super::fixture::{self, RUN, SECRET_ARGS, SECRET_PROMPT, T0};

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "{name}: {:#?}", names(spans));
    found[0]
}

fn names(spans: &[Span]) -> Vec<(String, Option<String>)> {
    spans
        .iter()
        .map(|s| {
            let parent = s
                .parent
                .and_then(|p| spans.iter().find(|x| x.id == p))
                .map(|p| p.name.clone());
            (s.name.clone(), parent)
        })
        .collect()
}

#[test]
fn a_scripted_run_maps_to_run_node_agent_turn_and_tool_spans() {
    let spans = run_spans(
        fixture::stored(Some(RunStatus::Succeeded)),
        Options::default(),
    );
    let tree = names(&spans);
    let expected: Vec<(&str, Option<&str>)> = vec![
        ("invoke_workflow feature", None),
        ("node plan", Some("invoke_workflow feature")),
        ("chat planner-model", Some("node plan")),
        ("node code", Some("invoke_workflow feature")),
        ("invoke_agent coder", Some("node code")),
        ("chat coder-model", Some("invoke_agent coder")),
        ("execute_tool read_file", Some("invoke_agent coder")),
        ("chat coder-model", Some("invoke_agent coder")),
        ("node review", Some("invoke_workflow feature")),
        ("node review", Some("invoke_workflow feature")),
    ];
    let expected: Vec<(String, Option<String>)> = expected
        .into_iter()
        .map(|(n, p)| (n.to_owned(), p.map(str::to_owned)))
        .collect();
    assert_eq!(tree, expected);
    assert!(spans.iter().all(|s| s.trace == TraceId::of(RUN)));
    assert_eq!(spans[0].trace.hex(), RUN, "a run's trace id is its id");

    let run = one(&spans, "invoke_workflow feature");
    assert_eq!((run.start_ms, run.end_ms), (T0, T0 + 1000));
    assert_eq!(run.attributes.str(trellis::RUN_STATUS), Some("succeeded"));
    assert_eq!(run.attributes.str(trellis::RUN_GRAPH), Some("planning"));
    assert_eq!(
        run.attributes.str(semconv::GEN_AI_WORKFLOW_NAME),
        Some("feature")
    );
    assert_eq!(
        run.attributes.str(semconv::GEN_AI_OPERATION_NAME),
        Some("invoke_workflow")
    );

    let agent = one(&spans, "invoke_agent coder");
    assert_eq!(
        agent.attributes.str(semconv::GEN_AI_AGENT_NAME),
        Some("coder")
    );
    let session = format!("{RUN}:code");
    assert_eq!(
        agent.attributes.str(semconv::GEN_AI_CONVERSATION_ID),
        Some(session.as_str())
    );
    assert_eq!((agent.start_ms, agent.end_ms), (T0 + 62, T0 + 801));

    let turns = named(&spans, "chat coder-model");
    assert_eq!((turns[0].start_ms, turns[0].end_ms), (T0 + 63, T0 + 300));
    let a = &turns[0].attributes;
    assert_eq!(a.str(semconv::GEN_AI_REQUEST_MODEL), Some("coder-model"));
    assert_eq!(a.int(semconv::GEN_AI_USAGE_INPUT_TOKENS), Some(1200));
    assert_eq!(a.int(semconv::GEN_AI_USAGE_OUTPUT_TOKENS), Some(40));
    assert_eq!(a.int(trellis::TURN), Some(1));
    assert_eq!(
        turns[1].attributes.int(semconv::GEN_AI_USAGE_INPUT_TOKENS),
        Some(1500)
    );

    let tool = one(&spans, "execute_tool read_file");
    assert_eq!(
        tool.attributes.str(semconv::GEN_AI_TOOL_NAME),
        Some("read_file")
    );
    assert_eq!(
        tool.attributes.str(semconv::GEN_AI_TOOL_CALL_ID),
        Some("call-1")
    );
    assert_eq!(
        tool.attributes.str(semconv::GEN_AI_TOOL_TYPE),
        Some("function")
    );
    assert_eq!(tool.attributes.str(trellis::TOOL_STATUS), Some("ok"));
    assert_eq!((tool.start_ms, tool.end_ms), (T0 + 301, T0 + 340));

    let reviews = named(&spans, "node review");
    assert_eq!(reviews[0].status, Status::Error("tests failed".into()));
    assert_eq!(
        reviews[0].attributes.str(trellis::NODE_STATE),
        Some("FAILED")
    );
    assert_eq!(reviews[1].status, Status::Unset);
    assert_eq!(reviews[1].attributes.int(trellis::NODE_ATTEMPT), Some(2));
    assert!(
        spans
            .iter()
            .all(|s| s.attributes.get(trellis::UNFINISHED).is_none())
    );
}

fn mentions(spans: &[Span], text: &str) -> bool {
    spans.iter().any(|s| {
        s.attributes
            .iter()
            .any(|(_, v)| format!("{v:?}").contains(text))
            || s.events.iter().any(|e| {
                e.attributes
                    .iter()
                    .any(|(_, v)| format!("{v:?}").contains(text))
            })
    })
}

#[test]
fn content_is_written_only_when_captured() {
    let spans = run_spans(
        fixture::stored(Some(RunStatus::Succeeded)),
        Options::default(),
    );
    assert!(!mentions(&spans, SECRET_PROMPT));
    assert!(!mentions(&spans, SECRET_ARGS));
    assert!(
        spans
            .iter()
            .all(|s| s.attributes.get(semconv::GEN_AI_OUTPUT_MESSAGES).is_none())
    );

    let captured = run_spans(
        fixture::stored(Some(RunStatus::Succeeded)),
        Options {
            capture_content: true,
        },
    );
    let agent = one(&captured, "invoke_agent coder");
    let input = agent
        .attributes
        .str(semconv::GEN_AI_INPUT_MESSAGES)
        .unwrap();
    let input: serde_json::Value = serde_json::from_str(input).unwrap();
    assert_eq!(input[0]["content"], SECRET_PROMPT);
    let tool = one(&captured, "execute_tool read_file");
    assert!(
        tool.attributes
            .str(semconv::GEN_AI_TOOL_CALL_ARGUMENTS)
            .unwrap()
            .contains(SECRET_ARGS)
    );
    assert_eq!(
        tool.attributes.str(semconv::GEN_AI_TOOL_CALL_RESULT),
        Some("fn main() {}")
    );
    let turn = &named(&captured, "chat coder-model")[1];
    assert!(
        turn.attributes
            .str(semconv::GEN_AI_OUTPUT_MESSAGES)
            .unwrap()
            .contains("done")
    );
}

#[test]
fn an_unfinished_run_ends_its_open_spans_at_the_last_event() {
    // Cut the log in the middle of `review` #2 and of nothing else.
    let mut run = fixture::stored(None);
    run.streams[0].pop();
    let spans = run_spans(run, Options::default());
    let last = T0 + 953;
    let root = one(&spans, "invoke_workflow feature");
    assert_eq!(root.end_ms, last);
    assert_eq!(root.attributes.get(trellis::UNFINISHED), Some(&true.into()));
    let review = &named(&spans, "node review")[1];
    assert_eq!((review.start_ms, review.end_ms), (last, last));
    assert_eq!(
        review.attributes.get(trellis::UNFINISHED),
        Some(&true.into())
    );
    let code = one(&spans, "node code");
    assert_eq!(code.attributes.get(trellis::UNFINISHED), None);
}

#[test]
fn live_events_fed_one_by_one_give_the_stored_runs_spans() {
    // The live exporter's path: the same mapper, events as the broadcast delivers them
    // (streams interleaved), spans taken as they end. Without model-call records the turns
    // are named after the model their `turnStarted` names; the tree and ids are the same.
    let stored = fixture::stored(Some(RunStatus::Succeeded));
    let mut all: Vec<_> = stored.streams.concat();
    all.sort_by_key(|e| e.ts);
    let mut mapper = Mapper::new(Options::default());
    let mut live = Vec::new();
    for ev in &all {
        mapper.event(ev);
        live.extend(mapper.take_finished());
    }
    assert_eq!(mapper.open_spans(), 0);
    let mut after = run_spans(
        trellis_telemetry::StoredRun {
            streams: stored.streams,
            model_calls: Vec::new(),
        },
        Options::default(),
    );
    assert_eq!(live.len(), after.len());
    live.sort_by_key(|s| s.id);
    after.sort_by_key(|s| s.id);
    for (l, a) in live.iter().zip(&after) {
        assert_eq!(
            (l.id, l.parent, &l.name, l.start_ms, l.end_ms),
            (a.id, a.parent, &a.name, a.start_ms, a.end_ms)
        );
    }
}

#[test]
fn a_live_turn_names_its_model_and_an_old_turn_without_one_is_plain_chat() {
    let stored = fixture::stored(Some(RunStatus::Succeeded));
    let mut all: Vec<_> = stored.streams.concat();
    all.sort_by_key(|e| e.ts);
    let live = |events: &[trellis_protocol::ServiceEvent]| {
        let mut mapper = Mapper::new(Options::default());
        let mut spans = Vec::new();
        for ev in events {
            mapper.event(ev);
            spans.extend(mapper.take_finished());
        }
        spans
    };
    let spans = live(&all);
    let turns = named(&spans, "chat coder-model");
    assert_eq!(turns.len(), 2, "{:?}", names(&spans));
    for turn in &turns {
        assert_eq!(
            turn.attributes.get(semconv::GEN_AI_REQUEST_MODEL),
            Some(&"coder-model".into())
        );
        assert_eq!(
            turn.attributes.get(semconv::GEN_AI_OPERATION_NAME),
            Some(&"chat".into())
        );
    }

    // An event recorded before turns named their model decodes, and maps to `chat`.
    let old: Vec<_> = all
        .iter()
        .map(|ev| {
            let mut json = serde_json::to_value(ev).unwrap();
            if json["event"]["type"] == "turnStarted" {
                json["event"].as_object_mut().unwrap().remove("model");
            }
            serde_json::from_value(json).unwrap()
        })
        .collect();
    let spans = live(&old);
    let turns = named(&spans, "chat");
    assert_eq!(turns.len(), 2, "{:?}", names(&spans));
    assert!(
        turns
            .iter()
            .all(|t| t.attributes.get(semconv::GEN_AI_REQUEST_MODEL).is_none())
    );
}
