//! Context fusion: budget packing, dedup, grounding, strategies, attribution.

use trellis_index::retrieve::is_test_path;
use trellis_index::{
    Category, ChunkKind, Index, RepoMapRequest, RetrievalRequest, RetrievalScope, UpdateOptions,
};

use super::common::{HashEmbedder, open, update, write};

fn body(name: &str, lines: usize) -> String {
    let mut s = format!("pub fn {name}(token: &str) -> bool {{\n");
    for i in 0..lines {
        s.push_str(&format!("    let step_{i} = validate_token(token, {i});\n"));
    }
    s.push_str("    true\n}\n");
    s
}

fn workspace() -> (tempfile::TempDir, Index) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "src/auth.rs",
        &format!(
            "{}\n{}\n{}",
            body("check_token", 5),
            body("refresh_token", 30),
            body("revoke_token", 60)
        ),
    );
    write(root, "src/copy.rs", &body("check_token", 5));
    write(root, "tests/auth_test.rs", &body("test_token_roundtrip", 3));
    write(
        root,
        "docs/adr/0002-jwt.md",
        "# Use JWT tokens\n\n## Status\n\nAccepted.\n\n## Decision\n\nWe validate tokens with JWT.\n",
    );
    write(
        root,
        "docs/guide.md",
        "# Guide\n\n## Tokens\n\nHow a token is validated.\n",
    );
    let mut index = open(root);
    update(&mut index);
    (dir, index)
}

#[test]
fn packs_within_budget_with_attribution() {
    let (_d, index) = workspace();
    let scope = RetrievalScope::code();
    let pack = index
        .retrieve(&RetrievalRequest {
            query: "validate token".into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(400),
            candidates: None,
        })
        .unwrap();
    assert!(!pack.items.is_empty());
    assert!(pack.used_tokens <= 400, "{}", pack.used_tokens);
    assert_eq!(
        pack.used_tokens,
        pack.items.iter().map(|i| i.tokens).sum::<usize>()
    );
    assert!(
        pack.dropped.over_budget > 0,
        "the long functions do not fit: {:?}",
        pack.dropped
    );
    for item in &pack.items {
        assert_eq!(item.category, Category::Code);
        let a = &item.attribution;
        assert!(a.start_line >= 1 && a.end_line >= a.start_line);
        if item.kind == ChunkKind::Function {
            assert!(a.symbol.is_some());
        }
    }
    // A larger budget takes more.
    let big = index
        .retrieve(&RetrievalRequest {
            query: "validate token".into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(20_000),
            candidates: None,
        })
        .unwrap();
    assert!(big.used_tokens > pack.used_tokens);
    assert!(big.items.len() > pack.items.len());
}

#[test]
fn exact_duplicates_are_dropped() {
    let (_d, index) = workspace();
    let scope = RetrievalScope::code();
    let pack = index
        .retrieve(&RetrievalRequest {
            query: "check_token".into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(20_000),
            candidates: None,
        })
        .unwrap();
    let checks = pack
        .items
        .iter()
        .filter(|i| i.attribution.symbol.as_deref() == Some("check_token"))
        .count();
    assert_eq!(checks, 1, "the copy in src/copy.rs is a duplicate");
    assert!(
        pack.dropped.duplicates + pack.dropped.overlapping >= 1,
        "{:?}",
        pack.dropped
    );
}

#[test]
fn near_duplicates_are_dropped_by_cosine() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.rs", &body("parse_config", 8));
    // Same body, one extra line: cosine of the bag-of-words vectors is > 0.95.
    let mut near = body("parse_config", 8);
    near.insert_str(near.len() - 2, "    let extra = 1;\n");
    write(root, "b.rs", &near);
    let mut index = open(root);
    index.set_embedder(Box::new(HashEmbedder));
    index
        .update(&UpdateOptions {
            embed: true,
            ..UpdateOptions::default()
        })
        .unwrap();
    let scope = RetrievalScope::code();
    let pack = index
        .retrieve(&RetrievalRequest {
            query: "parse_config".into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(20_000),
            candidates: None,
        })
        .unwrap();
    let fns = pack
        .items
        .iter()
        .filter(|i| i.kind == ChunkKind::Function)
        .count();
    assert_eq!(fns, 1, "{:?}", pack.dropped);
    assert!(pack.dropped.near_duplicates >= 1);
    assert!(pack.items.iter().all(|i| i.cosine.is_some()));
}

#[test]
fn stale_chunks_fail_the_grounding_check() {
    let (dir, index) = workspace();
    // Edit the file behind the index's back.
    let p = dir.path().join("src/auth.rs");
    let text = std::fs::read_to_string(&p)
        .unwrap()
        .replace("check_token", "check_tokn");
    std::fs::write(&p, text).unwrap();
    let scope = RetrievalScope::code();
    let pack = index
        .retrieve(&RetrievalRequest {
            query: "check_token validate".into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(20_000),
            candidates: None,
        })
        .unwrap();
    assert!(pack.dropped.ungrounded >= 1, "{:?}", pack.dropped);
    assert!(
        pack.items
            .iter()
            .all(|i| i.attribution.path != "src/auth.rs" || !i.text.contains("check_token"))
    );
    for item in &pack.items {
        let chunk_text = &item.text;
        let file = std::fs::read_to_string(dir.path().join(&item.attribution.path)).unwrap();
        assert!(file.contains(chunk_text.as_str()));
    }
}

#[test]
fn document_strategy_skips_code_and_honours_avoid() {
    let (_d, index) = workspace();
    let scope = RetrievalScope::docs();
    let pack = index
        .retrieve(&RetrievalRequest {
            query: "token validation decision".into(),
            scope: &scope,
            stage: None,
            budget_tokens: Some(5000),
            candidates: None,
        })
        .unwrap();
    assert!(!pack.items.is_empty());
    assert!(pack.items.iter().all(|i| i.kind == ChunkKind::Section));
    assert!(pack.items.iter().any(|i| i.category == Category::Decision));
    assert!(pack.items.iter().all(|i| i.attribution.section.is_some()));

    let mut code = RetrievalScope::code();
    code.hints.avoid = vec!["test_code".into()];
    let pack = index
        .retrieve(&RetrievalRequest {
            query: "test_token_roundtrip".into(),
            scope: &code,
            stage: None,
            budget_tokens: Some(5000),
            candidates: None,
        })
        .unwrap();
    assert!(
        pack.items
            .iter()
            .all(|i| !is_test_path(&i.attribution.path))
    );
    assert!(pack.dropped.avoided >= 1);
}

#[test]
fn repo_map_ranks_definitions_used_by_files_in_play() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "src/store.rs",
        "pub struct StoreHandle;\nimpl StoreHandle { pub fn open_store() -> StoreHandle { StoreHandle } }\n",
    );
    write(
        root,
        "src/cache.rs",
        "pub struct CacheLayer;\npub fn build_cache() -> CacheLayer { CacheLayer }\n",
    );
    write(root, "src/unused.rs", "pub fn lonely_function() {}\n");
    write(
        root,
        "src/main.rs",
        "fn main() { let s = StoreHandle::open_store(); let _ = s; }\n",
    );
    write(
        root,
        "src/other.rs",
        "fn other() { let c = build_cache(); let _ = c; }\n",
    );
    let mut index = open(root);
    update(&mut index);
    let map = index
        .repo_map(&RepoMapRequest {
            files_in_play: vec!["src/main.rs".into()],
            mentioned: vec![],
            budget_tokens: 1000,
        })
        .unwrap();
    let first = &map.definitions[0];
    assert_eq!(first.path, "src/store.rs", "{:?}", map.definitions);
    assert!(map.text.starts_with("src/store.rs:\n"), "{}", map.text);
    assert!(map.text.contains("pub struct StoreHandle"));
    assert!(
        !map.text.contains("src/main.rs"),
        "files in play are left out"
    );
    // Personalising on the other file flips the order.
    let map2 = index
        .repo_map(&RepoMapRequest {
            files_in_play: vec!["src/other.rs".into()],
            mentioned: vec![],
            budget_tokens: 1000,
        })
        .unwrap();
    assert_eq!(
        map2.definitions[0].path, "src/cache.rs",
        "{:?}",
        map2.definitions
    );
    // A tiny budget renders less.
    let small = index
        .repo_map(&RepoMapRequest {
            files_in_play: vec!["src/main.rs".into()],
            mentioned: vec![],
            budget_tokens: 12,
        })
        .unwrap();
    assert!(small.tokens <= 12);
    assert!(small.definitions.len() < map.definitions.len());
}

#[test]
fn ast_context_map_lists_functions_classes_and_imports() {
    let (_d, index) = workspace();
    let map = index.ast_context_map(&["src/auth.rs".to_string()]).unwrap();
    assert_eq!(map.files.len(), 1);
    let f = &map.files[0];
    let names: Vec<&str> = f.functions.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["check_token", "refresh_token", "revoke_token"]);
    assert_eq!(f.functions[0].params, "(token: &str)");
    assert_eq!(f.functions[0].returns, "bool");
    let json = serde_json::to_value(&map).unwrap();
    assert_eq!(json["files"][0]["functions"][0]["name"], "check_token");
}
