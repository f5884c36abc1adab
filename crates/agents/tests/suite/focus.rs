//! A `focus` role names the retrieved excerpt to change, is shown it again, and writes it
//! whole with the change made: the fence replaces the excerpt's lines.

use trellis_protocol::ToolStatus;

use super::blocks::{SOURCE, edits, notes, run_spec};

const FIXED: &str = "```python\ndef bits(val, len_):\n    if val >= 2 ** len_:\n        raise ValueError(val)\n    return val\n```\nThe bound is off by one.";

#[tokio::test]
async fn the_named_excerpt_is_shown_again_and_its_rewrite_replaces_it() {
    let ran = run_spec(vec!["pkg/math.py:1-4", FIXED], 1, None, false, true).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert_eq!(
        edits(&ran.events),
        [("edit_file".to_owned(), ToolStatus::Ok)]
    );
    assert!(!ran.report.report.failure);
    assert_eq!(ran.report.report.output, "The bound is off by one.");
    // The naming call: held to the headings of the excerpts, short.
    let naming = &ran.requests[0];
    assert_eq!(
        naming.grammar.as_deref(),
        Some("root ::= \"pkg/util.py:1-2\" | \"pkg/math.py:1-4\"\n")
    );
    assert!(naming.max_tokens.is_some_and(|n| n <= 64));
    let asked = &naming.messages.last().unwrap().content;
    assert!(asked.contains("- pkg/math.py:1-4 (bits)"), "{asked}");
    // The answer's turn: shown the excerpt to write whole, no grammar.
    let rewrite = &ran.requests[1];
    assert!(rewrite.grammar.is_none());
    let shown = &rewrite.messages.last().unwrap().content;
    assert!(
        shown.starts_with("The code to change is `pkg/math.py` lines 1-4:\n```python\ndef bits"),
        "{shown}"
    );
    assert!(
        !rewrite
            .messages
            .iter()
            .any(|m| m.content.contains("Before you change"))
    );
    let notes = notes(&ran.events);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("focus: pkg/math.py:1-4 (bits) named, of 2")),
        "{notes:?}"
    );
}

#[tokio::test]
async fn a_rewrite_that_leaves_lines_out_is_refused_and_the_model_told() {
    let elided = "```python\ndef bits(val, len_):\n    ...\n```";
    let ran = run_spec(vec!["pkg/math.py:1-4", elided, FIXED], 1, None, false, true).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    let told = &ran.requests[2].messages.last().unwrap().content;
    assert!(told.starts_with("Your rewrite was not applied:"), "{told}");
    assert!(told.contains("leaves lines out"), "{told}");
}

#[tokio::test]
async fn without_an_excerpt_named_the_role_writes_blocks_as_before() {
    let block = "pkg/math.py\n<<<<<<< SEARCH\n    if val > 2 ** len_:\n=======\n    if val >= 2 ** len_:\n>>>>>>> REPLACE";
    let ran = run_spec(vec!["the bits function", block], 1, None, false, true).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert!(
        !ran.requests[1]
            .messages
            .iter()
            .any(|m| m.content.starts_with("The code to change is")),
    );
    let notes = notes(&ran.events);
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("focus: the answer names none of the 2")),
        "{notes:?}"
    );
}

#[tokio::test]
async fn without_focus_no_naming_call_is_made() {
    let ran = run_spec(vec![FIXED], 1, None, false, false).await;
    assert_eq!(ran.requests.len(), 1);
    assert!(ran.requests[0].grammar.is_none());
}

#[tokio::test]
async fn a_change_stated_in_words_is_made_in_the_excerpt() {
    let said = "The bound is off by one: I replaced `val > 2 ** len_` with `val >= 2 ** len_`.";
    let ran = run_spec(vec!["pkg/math.py:1-4", said], 1, None, false, true).await;
    assert_eq!(ran.file, SOURCE.replace("val > 2", "val >= 2"));
    assert_eq!(
        edits(&ran.events),
        [("edit_file".to_owned(), ToolStatus::Ok)]
    );
}
