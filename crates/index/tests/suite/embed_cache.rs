//! The embedding cache is keyed by exactly the text embedded (path, qualified name, doc
//! comment and chunk text), so a moved or renamed chunk gets a fresh vector.

use trellis_index::{Embedder, Index, UpdateOptions, UpdateStats};

use super::common::{HashEmbedder, open, write};

fn update_embedding(index: &mut Index) -> UpdateStats {
    index
        .update(&UpdateOptions {
            embed: true,
            ..UpdateOptions::default()
        })
        .unwrap()
}

/// Every chunk of `path` has the vector of its current embedding text.
fn assert_fresh_vectors(index: &Index, path: &str) {
    let vi = index.vector_index().unwrap().expect("vectors");
    let chunks = index.chunks_of(path).unwrap();
    assert!(!chunks.is_empty(), "{path}");
    for c in chunks {
        let want = HashEmbedder
            .embed(&[&c.embedding_text()])
            .unwrap()
            .remove(0);
        assert_eq!(
            vi.get(c.id),
            Some(want.as_slice()),
            "{}: {} has a stale vector",
            c.path,
            c.decl.qualified_name
        );
    }
}

#[test]
fn a_moved_chunk_is_re_embedded_and_an_unchanged_one_keeps_its_vector() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let moved = "/// Adds seven.\npub fn shared_helper(x: u32) -> u32 {\n    x + 7\n}\n";
    write(root, "src/old_place.rs", moved);
    write(root, "src/stays.rs", "pub fn stays_put() {}\n");
    let mut index = open(root);
    index.set_embedder(Box::new(HashEmbedder));
    let first = update_embedding(&mut index);
    assert!(first.embedded > 0, "{first:?}");

    // The same text under another path (and so another embedded text).
    std::fs::remove_file(root.join("src/old_place.rs")).unwrap();
    write(root, "src/new_home.rs", moved);
    let s = update_embedding(&mut index);
    let new_chunks = index.chunks_of("src/new_home.rs").unwrap().len() as u64;
    assert_eq!(
        s.embedded, new_chunks,
        "only the moved file's chunks: {s:?}"
    );
    assert_eq!(s.chunks_embedded, s.chunks, "{s:?}");
    assert_fresh_vectors(&index, "src/new_home.rs");
    assert_fresh_vectors(&index, "src/stays.rs");

    // Nothing changed: nothing is embedded again.
    let s = update_embedding(&mut index);
    assert_eq!(s.embedded, 0, "{s:?}");
}
