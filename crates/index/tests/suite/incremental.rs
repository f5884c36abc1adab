//! Incremental updates by content hash, exclusions, interruption and resume.

use std::sync::atomic::{AtomicBool, Ordering};

use trellis_index::meta::Meta;
use trellis_index::{
    Category, Error, Index, IndexConfig, Progress, SearchMode, SearchRequest, UpdateOptions,
    index_dir,
};

use super::common::{open, update, write};

fn names(index: &trellis_index::Index, q: &str) -> Vec<String> {
    index
        .search(&SearchRequest {
            query: q.into(),
            limit: 10,
            mode: SearchMode::Bm25,
            ..SearchRequest::default()
        })
        .unwrap()
        .into_iter()
        .map(|h| h.chunk.decl.qualified_name)
        .collect()
}

#[test]
fn only_changed_files_are_reparsed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/a.rs", "pub fn alpha_handler() -> u32 { 1 }\n");
    write(
        root,
        "pkg/b.py",
        "def beta_loader(path):\n    return path\n",
    );
    write(
        root,
        "docs/guide.md",
        "# Guide\n\n## Setup\n\nInstall gamma.\n",
    );
    write(
        root,
        "node_modules/dep/x.js",
        "function excludedThing() {}\n",
    );
    write(
        root,
        "target/debug/out.rs",
        "fn excluded_build_output() {}\n",
    );
    write(root, ".gitignore", "ignored.txt\n");
    write(root, "ignored.txt", "zqxjunique\n");

    let mut index = open(root);
    let s = update(&mut index);
    assert_eq!(s.files_seen, 4, "{s:?}"); // a.rs, b.py, guide.md, .gitignore
    assert_eq!(s.files_indexed, 4);
    assert_eq!(s.symbols, 2);
    assert_eq!(s.sections, 2);
    assert!(names(&index, "excludedThing").is_empty());
    assert!(names(&index, "zqxjunique").is_empty());
    assert!(names(&index, "excluded_build_output").is_empty());
    assert!(names(&index, "alpha handler").contains(&"alpha_handler".to_string()));

    // Nothing changed: nothing is read.
    let s = update(&mut index);
    assert_eq!((s.files_read, s.files_indexed), (0, 0), "{s:?}");

    // One file changed: only it is re-parsed.
    write(
        root,
        "src/a.rs",
        "pub fn alpha_renamed() -> u32 { 2 }\n\npub fn delta() {}\n",
    );
    let s = update(&mut index);
    assert_eq!((s.files_read, s.files_indexed), (1, 1), "{s:?}");
    assert!(!names(&index, "alpha_handler").contains(&"alpha_handler".to_string()));
    assert!(names(&index, "alpha_renamed").contains(&"alpha_renamed".to_string()));
    assert_eq!(s.symbols, 3);

    // Same content rewritten (new mtime): read and hashed, not re-parsed.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(
        root,
        "pkg/b.py",
        "def beta_loader(path):\n    return path\n",
    );
    let s = update(&mut index);
    assert_eq!((s.files_read, s.files_indexed), (1, 0), "{s:?}");

    // Deleted: removed from both indexes.
    std::fs::remove_file(root.join("pkg/b.py")).unwrap();
    let s = update(&mut index);
    assert_eq!(s.files_removed, 1);
    assert!(!names(&index, "beta_loader").contains(&"beta_loader".to_string()));
    assert_eq!(s.files, 3);

    // The single-path fast path.
    write(root, "src/a.rs", "pub fn epsilon_fast() {}\n");
    let s = index.update_paths(&["src/a.rs"], false).unwrap();
    assert_eq!(s.files_indexed, 1);
    assert!(names(&index, "epsilon_fast").contains(&"epsilon_fast".to_string()));
    assert!(!names(&index, "alpha_renamed").contains(&"alpha_renamed".to_string()));
}

#[test]
fn documents_scope_skips_code() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/a.rs", "pub fn code_only() {}\n");
    write(
        root,
        "docs/adr/0001-storage.md",
        "# Use SQLite\n\n## Status\n\nAccepted.\n",
    );
    let mut index = open(root);
    let s = index
        .update(&UpdateOptions {
            scope: trellis_index::Scope::Documents,
            ..UpdateOptions::default()
        })
        .unwrap();
    assert_eq!(s.files_indexed, 1);
    assert_eq!(s.symbols, 0);
    let hits = index
        .search(&SearchRequest {
            query: "sqlite".into(),
            categories: vec![Category::Decision],
            limit: 5,
            mode: SearchMode::Bm25,
        })
        .unwrap();
    assert_eq!(hits[0].chunk.path, "docs/adr/0001-storage.md");
}

#[test]
fn interrupted_index_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..10 {
        write(
            root,
            &format!("src/m{i}.rs"),
            &format!("pub fn func_number_{i}() {{}}\n"),
        );
    }
    let cancel = AtomicBool::new(false);
    let stop_after_first = |p: Progress| {
        if matches!(p, Progress::Parsed { .. }) {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    {
        let mut index = open(root);
        let err = index
            .update(&UpdateOptions {
                progress: Some(&stop_after_first),
                cancel: Some(&cancel),
                batch_files: Some(3),
                ..UpdateOptions::default()
            })
            .unwrap_err();
        assert!(matches!(err, Error::Cancelled));
        // The first batch is committed and searchable.
        assert_eq!(index.counts().unwrap().files, 3);
    }
    let mut index = open(root);
    let s = update(&mut index);
    assert_eq!(s.files_indexed, 7, "only the rest is indexed: {s:?}");
    assert_eq!(s.files, 10);
    for i in 0..10 {
        assert_eq!(
            names(&index, &format!("func_number_{i}"))[0],
            format!("func_number_{i}")
        );
    }
}

#[test]
fn a_batch_interrupted_between_commits_is_redone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/a.rs", "pub fn stable_fn() {}\n");
    {
        let mut index = open(root);
        update(&mut index);
    }
    // Simulate a crash after the full-text commit of a batch containing src/a.rs but before
    // its metadata was recorded: the journal still lists it.
    {
        let (mut meta, _) =
            Meta::open(&index_dir(&root.canonicalize().unwrap()).join("meta.db")).unwrap();
        meta.mark_pending(&["src/a.rs"]).unwrap();
    }
    let mut index = open(root);
    let s = update(&mut index);
    assert_eq!((s.files_read, s.files_indexed), (1, 1), "{s:?}");
    let s = update(&mut index);
    assert_eq!(s.files_read, 0, "journal cleared: {s:?}");
    assert_eq!(names(&index, "stable_fn")[0], "stable_fn");
}

#[test]
fn an_index_of_an_older_format_is_rebuilt_and_re_embedded() {
    for old in ["1", "2"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "src/a.rs", "pub fn migrated_fn() {}\n");
        {
            let mut index = open(root);
            update(&mut index);
        }
        let db = index_dir(&root.canonicalize().unwrap()).join("meta.db");
        {
            // Pretend the old format with one cached embedding (keyed by the chunk text alone
            // in both: it does not say which text was embedded, so it cannot be kept).
            let (mut meta, _) = Meta::open(&db).unwrap();
            meta.set("schema", old).unwrap();
            meta.set("embedding_model", "test:hash:64").unwrap();
            meta.set("embedding_dim", "64").unwrap();
            meta.add_vectors(&[(42, 0)]).unwrap();
        }
        let (meta, migrated) = Meta::open(&db).unwrap();
        assert!(migrated, "{old}");
        assert_eq!(meta.counts().unwrap().files, 0, "derived tables dropped");
        assert_eq!(
            meta.vector_row(42).unwrap(),
            None,
            "embedding cache dropped"
        );
        assert_eq!(meta.get("embedding_model").unwrap(), None);
        drop(meta);
        // Reopen through the index (now the current format, nothing recorded): a full
        // re-index, searchable.
        let mut index = open(root);
        let s = update(&mut index);
        assert_eq!(s.files_indexed, 1, "{s:?}");
        assert_eq!(names(&index, "migrated_fn")[0], "migrated_fn");
        let (_, migrated) = Meta::open(&db).unwrap();
        assert!(!migrated, "migrates once");
    }
}

#[test]
fn an_index_of_format_3_is_re_extracted_and_keeps_its_embeddings() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "pkg/patterns.py",
        "NOT_STRONG_RE = r'x'\n\ndef f():\n    return 1\n",
    );
    {
        let mut index = open(root);
        update(&mut index);
    }
    let db = index_dir(&root.canonicalize().unwrap()).join("meta.db");
    {
        let (mut meta, _) = Meta::open(&db).unwrap();
        meta.set("schema", "3").unwrap();
        meta.set("embedding_model", "test:hash:64").unwrap();
        meta.add_vectors(&[(42, 0)]).unwrap();
    }
    let (meta, migrated) = Meta::open(&db).unwrap();
    assert!(migrated);
    assert_eq!(meta.counts().unwrap().files, 0, "derived tables dropped");
    assert_eq!(
        meta.vector_row(42).unwrap(),
        Some(0),
        "embedding cache kept"
    );
    assert_eq!(
        meta.get("embedding_model").unwrap().as_deref(),
        Some("test:hash:64")
    );
    drop(meta);
    let mut index = open(root);
    let s = update(&mut index);
    assert_eq!(s.files_indexed, 1, "{s:?}");
    assert_eq!(names(&index, "NOT_STRONG_RE")[0], "NOT_STRONG_RE");
}

/// A module whose vocabulary overlaps the others' in varying proportions, so that BM25 scores
/// depend on the document statistics (`v` is the version of the file).
fn module(i: usize, v: usize) -> String {
    let mut s = String::new();
    for f in 0..(2 + (i + v) % 4) {
        s.push_str(&format!(
            "/// Parses the config and retries the token ({i}, {v}).\n\
             pub fn parse_config_{i}_{f}(token: &str) -> u32 {{\n"
        ));
        for _ in 0..(1 + (i * 7 + v * 3 + f) % 9) {
            s.push_str("    let retry = backoff(token);\n");
        }
        if (i + f).is_multiple_of(3) {
            s.push_str("    cache.insert(token);\n");
        }
        s.push_str("    0\n}\n\n");
    }
    s
}

/// (chunk id, score bits) of the BM25 ranking.
fn ranking(index: &Index, q: &str) -> Vec<(i64, u32)> {
    index
        .search(&SearchRequest {
            query: q.into(),
            limit: 10_000,
            mode: SearchMode::Bm25,
            ..SearchRequest::default()
        })
        .unwrap()
        .into_iter()
        .map(|h| (h.chunk.id.0, h.score.to_bits()))
        .collect()
}

#[test]
fn an_index_updated_in_place_ranks_exactly_like_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // A large first segment, so that merges of the small update segments leave its deleted
    // documents in place (as in a real repository).
    for i in 0..60 {
        write(root, &format!("src/m{i}.rs"), &module(i, 0));
    }
    let mut index = open(root);
    update(&mut index);
    // Updates that replace, delete and add files, by walk and by path.
    for round in 1..=6 {
        write(root, &format!("src/m{round}.rs"), &module(round, round));
        let gone = format!("src/m{}.rs", round + 5);
        let _ = std::fs::remove_file(root.join(&gone));
        let added = format!("src/n{round}.rs");
        write(root, &added, &module(round + 20, round));
        if round.is_multiple_of(2) {
            update(&mut index);
        } else {
            let changed = format!("src/m{round}.rs");
            index
                .update_paths(&[changed.as_str(), gone.as_str(), added.as_str()], false)
                .unwrap();
        }
    }
    index.close_writer().unwrap();

    let fresh_dir = tempfile::tempdir().unwrap();
    let mut fresh = Index::open_at(root, fresh_dir.path(), IndexConfig::default()).unwrap();
    update(&mut fresh);
    assert_eq!(index.counts().unwrap(), fresh.counts().unwrap());
    for q in [
        "parse config",
        "retry backoff token",
        "cache insert",
        "token",
        "m3 n2",
    ] {
        let (updated, fresh) = (ranking(&index, q), ranking(&fresh, q));
        assert!(!fresh.is_empty(), "{q}");
        assert_eq!(updated, fresh, "query {q:?}: (chunk id, score bits)");
    }
}

#[test]
fn a_text_first_index_is_searchable_before_symbols_and_resumes_after_a_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..12 {
        let text = format!("// landmark zqmark{i}\n{}", module(i, 0));
        write(root, &format!("src/m{i}.rs"), &text);
    }
    write(
        root,
        "docs/guide.md",
        "# Guide\n\n## Retries\n\nThe backoff token.\n",
    );
    let cancel = AtomicBool::new(false);
    let events = std::sync::Mutex::new(Vec::new());
    // Stop after the first batch of the symbol pass.
    let on_progress = |p: Progress| {
        if matches!(p, Progress::Parsed { .. }) {
            cancel.store(true, Ordering::Relaxed);
        }
        events.lock().unwrap().push(p);
    };
    {
        let mut index = open(root);
        let err = index
            .update(&UpdateOptions {
                progress: Some(&on_progress),
                cancel: Some(&cancel),
                batch_files: Some(5),
                text_first: Some(true),
                ..UpdateOptions::default()
            })
            .unwrap_err();
        assert!(matches!(err, Error::Cancelled));
        let events = events.lock().unwrap();
        let searchable = events
            .iter()
            .position(|p| matches!(p, Progress::Searchable { unparsed: 12, .. }))
            .expect("searchable after the text pass");
        assert!(
            events[..searchable]
                .iter()
                .all(|p| !matches!(p, Progress::Parsed { .. })),
            "{events:?}"
        );
        assert!(
            events[..searchable].iter().any(|p| matches!(
                p,
                Progress::TextIndexed {
                    done: 13,
                    total: 13
                }
            )),
            "{events:?}"
        );
        // Every file is searchable: the parsed ones by symbol, the rest as text windows.
        assert_eq!(index.counts().unwrap().files, 13);
        for i in 0..12 {
            let hits = index
                .search(&SearchRequest {
                    query: format!("zqmark{i}"),
                    limit: 1,
                    mode: SearchMode::Bm25,
                    ..SearchRequest::default()
                })
                .unwrap();
            assert_eq!(hits[0].chunk.path, format!("src/m{i}.rs"));
        }
        let c = index.counts().unwrap();
        assert!(
            c.symbols > 0 && c.symbols < 40,
            "5 of 12 files parsed: {c:?}"
        );
    }
    // Reopened: the update parses only what is left and ranks like a fresh index.
    let mut index = open(root);
    let s = update(&mut index);
    assert_eq!(s.files_indexed, 7, "the unparsed rest only: {s:?}");
    assert_eq!(s.searchable_ms, 0, "no text pass for 7 files");
    let s = update(&mut index);
    assert_eq!(s.files_read, 0, "complete: {s:?}");
    index.close_writer().unwrap();
    let fresh_dir = tempfile::tempdir().unwrap();
    let mut fresh = Index::open_at(root, fresh_dir.path(), IndexConfig::default()).unwrap();
    fresh
        .update(&UpdateOptions {
            text_first: Some(false),
            ..UpdateOptions::default()
        })
        .unwrap();
    assert_eq!(index.counts().unwrap(), fresh.counts().unwrap());
    for q in ["parse config", "retry backoff token", "cache insert", "m3"] {
        let (updated, fresh) = (ranking(&index, q), ranking(&fresh, q));
        assert!(!fresh.is_empty(), "{q}");
        assert_eq!(updated, fresh, "query {q:?}: (chunk id, score bits)");
    }
}

#[test]
fn a_text_first_update_completes_like_a_direct_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..8 {
        write(root, &format!("src/m{i}.rs"), &module(i, 0));
    }
    let mut index = open(root);
    let s = index
        .update(&UpdateOptions {
            text_first: Some(true),
            ..UpdateOptions::default()
        })
        .unwrap();
    assert!(s.searchable_ms <= s.scan_ms + s.index_ms, "{s:?}");
    assert_eq!(
        s.files_indexed, 8,
        "each file once, though written by both passes"
    );
    let fresh_dir = tempfile::tempdir().unwrap();
    let mut fresh = Index::open_at(root, fresh_dir.path(), IndexConfig::default()).unwrap();
    update(&mut fresh);
    index.close_writer().unwrap();
    assert_eq!(index.counts().unwrap(), fresh.counts().unwrap());
    for q in ["parse config", "retry backoff token", "token"] {
        assert_eq!(ranking(&index, q), ranking(&fresh, q), "{q}");
    }
}
