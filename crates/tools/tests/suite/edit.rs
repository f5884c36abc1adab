//! Exact edits, atomic multi-edits and patches.

use serde_json::json;
use trellis_tools::ToolsConfig;

use super::support::{Tools, auto};

#[tokio::test]
async fn edit_on_a_non_unique_or_missing_match_fails_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let text = "let x = 1;\nlet y = 2;\nlet x = 1;\n";
    std::fs::write(dir.path().join("a.rs"), text).unwrap();
    let t = Tools::new(dir.path(), ToolsConfig::default(), auto());
    let r = t
        .call(
            "edit_file",
            json!({"path": "a.rs", "old_string": "let x = 1;", "new_string": "let x = 9;"}),
        )
        .await;
    assert!(r.is_error);
    assert!(
        r.content.contains("2 times") && r.content.contains("lines 1, 3"),
        "{}",
        r.content
    );
    let r = t
        .call(
            "edit_file",
            json!({"path": "a.rs", "old_string": "let z", "new_string": "q"}),
        )
        .await;
    assert!(r.is_error && r.content.contains("not found"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        text
    );

    let r = t
        .call(
            "edit_file",
            json!({"path": "a.rs", "old_string": "let y = 2;", "new_string": "let y = 3;"}),
        )
        .await;
    assert!(!r.is_error, "{}", r.content);
    let r = t
        .call("edit_file", json!({"path": "a.rs", "old_string": "let x = 1;", "new_string": "let x = 0;", "replace_all": true}))
        .await;
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        "let x = 0;\nlet y = 3;\nlet x = 0;\n"
    );
}

#[tokio::test]
async fn multi_edit_is_all_or_nothing_across_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "gamma\n").unwrap();
    let t = Tools::new(dir.path(), ToolsConfig::default(), auto());
    let r = t
        .call(
            "multi_edit",
            json!({"edits": [
                {"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"},
                {"path": "b.txt", "old_string": "gamma", "new_string": "GAMMA"},
                {"path": "a.txt", "old_string": "missing", "new_string": "x"}
            ]}),
        )
        .await;
    assert!(r.is_error);
    assert!(r.content.contains("edit 3"), "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "gamma\n"
    );
    // No temporary files left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

    let r = t
        .call(
            "multi_edit",
            json!({"edits": [
                {"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"},
                {"path": "a.txt", "old_string": "ALPHA\nbeta", "new_string": "ALPHA\nBETA"},
                {"path": "b.txt", "old_string": "gamma", "new_string": "GAMMA"}
            ]}),
        )
        .await;
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "ALPHA\nBETA\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("b.txt")).unwrap(),
        "GAMMA\n"
    );
}

#[tokio::test]
async fn apply_patch_is_exact_and_atomic() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "1\n2\n3\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "x\ny\n").unwrap();
    let t = Tools::new(dir.path(), ToolsConfig::default(), auto());
    let bad = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n x\n-WRONG\n+z\n";
    let r = t.call("apply_patch", json!({ "patch": bad })).await;
    assert!(r.is_error);
    assert!(
        r.content.contains("b.txt hunk 1") && r.content.contains("WRONG"),
        "{}",
        r.content
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "1\n2\n3\n"
    );
    let good = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n--- /dev/null\n+++ b/c/new.txt\n@@ -0,0 +1 @@\n+new\n--- a/b.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n-y\n";
    let r = t.call("apply_patch", json!({ "patch": good })).await;
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "1\ntwo\n3\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("c/new.txt")).unwrap(),
        "new\n"
    );
    assert!(!dir.path().join("b.txt").exists());
}

#[tokio::test]
async fn read_file_pages_and_detects_binary() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), text).unwrap();
    std::fs::write(dir.path().join("b.bin"), [0u8, 1, 2, 3]).unwrap();
    let t = Tools::new(dir.path(), ToolsConfig::default(), auto());
    let r = t
        .call(
            "read_file",
            json!({"path": "a.txt", "offset": 10, "limit": 2}),
        )
        .await;
    assert_eq!(r.content.lines().next().unwrap().trim(), "10\tline 10");
    assert!(r.content.contains("offset=12"), "{}", r.content);
    let r = t.call("read_file", json!({"path": "b.bin"})).await;
    assert!(r.content.contains("binary"));
    let r = t.call("glob_search", json!({"pattern": "*.txt"})).await;
    assert_eq!(r.content.trim(), "a.txt");
    let r = t.call("grep", json!({"pattern": "line 4[0-1]$"})).await;
    assert!(
        r.content.contains("a.txt:40:line 40") && r.content.contains("a.txt:41:line 41"),
        "{}",
        r.content
    );
}
