use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use trellis_llm::normalise::{
    NormaliseError, NormaliseOptions, Repair, normalise, normalise_value,
};

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Confidence {
    High,
    Medium,
    Low,
}

/// Shaped like the `task_tree` intent agent's output.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Intent {
    #[schemars(length(max = 20))]
    remit: String,
    explicit_needs: Vec<String>,
    implied_needs: Vec<String>,
    confidence: Confidence,
    priority: u32,
    blocking: bool,
    #[serde(default)]
    notes: Option<String>,
}

fn opts() -> NormaliseOptions {
    NormaliseOptions::default()
}

#[test]
fn valid_json_needs_no_repair() {
    let text = r#"{"remit":"Colonies","explicit_needs":["a"],"implied_needs":[],"confidence":"high","priority":1,"blocking":false}"#;
    let n = normalise::<Intent>(text, opts()).unwrap();
    assert!(n.repairs.is_empty(), "{:?}", n.repairs);
    assert_eq!(n.value.confidence, Confidence::High);
}

#[test]
fn fences_prose_and_type_coercion() {
    let text = "Sure! Here is the intent:\n```json\n{\"Remit\": \"Implement the colony system with data models\", \"explicit_needs\": \"- Add colonies\\n- Show them\", \"implied_needs\": \"UI\", \"confidence\": \"HIGH\", \"priority\": \"2\", \"blocking\": \"no\", \"extra\": 1,}\n```\nHope that helps.";
    let n = normalise::<Intent>(text, NormaliseOptions { max_repairs: 20 }).unwrap();
    assert_eq!(n.value.remit, "Implement the colony");
    assert_eq!(n.value.explicit_needs, ["Add colonies", "Show them"]);
    assert_eq!(n.value.implied_needs, ["UI"]);
    assert_eq!(n.value.confidence, Confidence::High);
    assert_eq!(n.value.priority, 2);
    assert!(!n.value.blocking);
    let kinds: Vec<&Repair> = n.repairs.iter().collect();
    assert!(kinds.contains(&&Repair::StrippedFences), "{kinds:?}");
    assert!(kinds.iter().any(|r| matches!(r, Repair::FixedSyntax)));
    assert!(
        kinds
            .iter()
            .any(|r| matches!(r, Repair::Renamed { from, .. } if from == "Remit"))
    );
    assert!(
        kinds
            .iter()
            .any(|r| matches!(r, Repair::DroppedField { path } if path == "/extra"))
    );
    assert!(
        kinds
            .iter()
            .any(|r| matches!(r, Repair::Truncated { path, to: 20, .. } if path == "/remit"))
    );
    assert!(kinds.iter().any(
        |r| matches!(r, Repair::Coerced { path, to, .. } if path == "/priority" && to == "integer")
    ));
}

#[test]
fn truncated_output_is_closed() {
    let text = r#"{"remit":"x","explicit_needs":["a","b"],"implied_needs":[],"confidence":"low","priority":3,"blocking":true,"notes":"cut here"#;
    let n = normalise::<Intent>(text, opts()).unwrap();
    assert_eq!(n.value.notes.as_deref(), Some("cut here"));
    assert!(matches!(n.repairs[0], Repair::ClosedTruncated { .. }));
}

#[test]
fn missing_lists_are_filled_but_missing_scalars_fail() {
    let text = r#"{"remit":"x","confidence":"low","priority":3,"blocking":true}"#;
    let n = normalise::<Intent>(text, opts()).unwrap();
    assert!(n.value.explicit_needs.is_empty());
    assert_eq!(
        n.repairs
            .iter()
            .filter(|r| matches!(r, Repair::FilledDefault { .. }))
            .count(),
        2
    );
    let err = normalise::<Intent>(r#"{"remit":"x"}"#, opts()).unwrap_err();
    assert!(
        matches!(&err, NormaliseError::Invalid { message, .. } if message.contains("confidence")),
        "{err}"
    );
}

#[test]
fn too_many_repairs_fail_fast() {
    let text = r#"{"Remit": 5, "Explicit_Needs": "a", "Implied_Needs": "b", "Confidence": "HIGH", "Priority": "1", "Blocking": "yes"}"#;
    let err = normalise::<Intent>(text, NormaliseOptions { max_repairs: 3 }).unwrap_err();
    match err {
        NormaliseError::TooExtensive { repairs, limit } => {
            assert_eq!(limit, 3);
            assert!(repairs.len() > 3);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn no_json_is_a_clear_error() {
    let err = normalise::<Intent>("I cannot help with that.", opts()).unwrap_err();
    assert!(err.to_string().contains("no parsable JSON"), "{err}");
}

#[test]
fn arrays_at_the_top_and_unique_items() {
    let schema =
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 2});
    let n = normalise_value(
        "The files: [\"a\", \"b\", \"a\", \"c\"] done",
        &schema,
        opts(),
    )
    .unwrap();
    assert_eq!(n.value, json!(["a", "b"]));
    assert!(
        n.repairs
            .iter()
            .any(|r| matches!(r, Repair::Deduplicated { removed: 1, .. }))
    );
}

fn json_fragments() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        "\"remit\"",
        "\"priority\"",
        "\"confidence\"",
        "\"high\"",
        "1",
        "-2.5e3",
        "true",
        "None",
        "```json",
        "```",
        "\n",
        " ",
        "é",
        "\u{1F600}",
        "\"explicit_needs\"",
        "[\"a\"]",
        "null",
    ]);
    prop::collection::vec(atoms, 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_arbitrary_text(s in any::<String>()) {
        let _ = normalise::<Intent>(&s, NormaliseOptions { max_repairs: usize::MAX });
    }

    #[test]
    fn never_panics_on_json_like_text(s in json_fragments()) {
        let _ = normalise::<Intent>(&s, NormaliseOptions { max_repairs: usize::MAX });
        let schema = json!({"type": "array", "items": {"type": "integer"}, "maxItems": 3});
        let _ = normalise_value(&s, &schema, opts());
    }

    #[test]
    fn valid_values_round_trip_unchanged(priority in 0u32..1000, blocking in any::<bool>(), remit in "[a-z ]{0,20}") {
        let v = json!({"remit": remit, "explicit_needs": [], "implied_needs": ["x"], "confidence": "medium", "priority": priority, "blocking": blocking});
        let n = normalise::<Intent>(&v.to_string(), opts()).unwrap();
        prop_assert!(n.repairs.is_empty());
        prop_assert_eq!(n.value.priority, priority);
    }
}
