//! Compression of handoff fields to their limits: the model's summary when it keeps to the
//! limit, truncation otherwise, every repair returned.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use trellis_agents::compress::{FieldRepairMethod, normalise_compressing};
use trellis_agents::compress_field;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

#[tokio::test]
async fn compress_field_uses_a_summary_within_the_limit_else_truncates() {
    let cancel = CancellationToken::new();
    let long = "the plan touches src/a.rs and src/b.rs; ".repeat(25); // 1,000 chars
    assert_eq!(long.chars().count(), 1000);

    let good = ScriptedProvider::new([Turn::Text("Touches src/a.rs and src/b.rs.".into())]);
    let c = compress_field(Some(&good), "qa_feedback", &long, 500, &cancel)
        .await
        .unwrap();
    assert_eq!(c.text, "Touches src/a.rs and src/b.rs.");
    let r = c.repair.unwrap();
    assert_eq!(r.method, FieldRepairMethod::Summarised);
    assert_eq!((r.from_chars, r.to_chars, r.max_chars), (1000, 30, 500));
    assert!(r.usage.prompt_tokens > 0);
    let asked = &good.requests()[0];
    assert!(asked.messages[0].content.contains("at most 500 characters"));
    assert!(asked.messages[1].content.contains(&long));

    let verbose = ScriptedProvider::new([Turn::Text("word ".repeat(120))]);
    let c = compress_field(Some(&verbose), "qa_feedback", &long, 500, &cancel)
        .await
        .unwrap();
    assert_eq!(c.text.chars().count(), 500);
    assert!(c.text.starts_with("the plan touches") && c.text.ends_with('…'));
    let r = c.repair.unwrap();
    assert_eq!(r.method, FieldRepairMethod::Truncated);
    assert_eq!(
        r.reason.as_deref(),
        Some("the model's summary had 599 characters (limit 500)")
    );

    let down = ScriptedProvider::new([]);
    let c = compress_field(Some(&down), "qa_feedback", &long, 500, &cancel)
        .await
        .unwrap();
    let r = c.repair.unwrap();
    assert_eq!(r.method, FieldRepairMethod::Truncated);
    assert!(r.reason.unwrap().starts_with("the summary call failed"));

    // Within the limit: no call, no repair.
    let c = compress_field(Some(&down), "qa_feedback", "short", 500, &cancel)
        .await
        .unwrap();
    assert_eq!((c.text.as_str(), c.repair), ("short", None));
    assert_eq!(down.requests().len(), 1);
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Handoff {
    /// What was done.
    #[schemars(length(max = 40))]
    result_summary: String,
    files: Vec<String>,
}

#[tokio::test]
async fn typed_outputs_compress_their_over_long_fields_before_truncating() {
    let cancel = CancellationToken::new();
    let answer = json!({
        "result_summary": "Added the flag parser, wired it into main, and wrote three tests for it.",
        "files": ["src/flags.rs"]
    })
    .to_string();
    let model = ScriptedProvider::new([Turn::Text("Flag parser added, wired, tested.".into())]);
    let (n, repairs) =
        normalise_compressing::<Handoff>(&answer, Default::default(), Some(&model), &cancel)
            .await
            .unwrap();
    assert_eq!(n.value.result_summary, "Flag parser added, wired, tested.");
    assert_eq!(n.value.files, ["src/flags.rs"]);
    assert_eq!(repairs.len(), 1);
    assert_eq!(repairs[0].field, "/result_summary");
    assert_eq!(repairs[0].method, FieldRepairMethod::Summarised);
    assert_eq!((repairs[0].from_chars, repairs[0].max_chars), (72, 40));
    // The normaliser logged its own repair too.
    assert!(
        n.repairs
            .iter()
            .any(|r| matches!(r, trellis_llm::normalise::Repair::Truncated { path, .. } if path == "/result_summary"))
    );

    // No model: truncated to the limit, and said so.
    let (n, repairs) = normalise_compressing::<Handoff>(&answer, Default::default(), None, &cancel)
        .await
        .unwrap();
    assert_eq!(n.value.result_summary.chars().count(), 40);
    assert!(n.value.result_summary.starts_with("Added the flag parser"));
    assert_eq!(repairs[0].method, FieldRepairMethod::Truncated);
}
