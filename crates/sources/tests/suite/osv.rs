//! OSV advisories against a fixture workspace (Cargo.lock ×2, package-lock.json,
//! requirements.txt, poetry.lock, go.sum): each lockfile kind affected, at the fixed
//! boundary and unaffected; directory, zip and tar.gz dumps; the OSV API fake.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_agents::retrieval::Source;
use trellis_sources::osv::Finding;
use trellis_sources::{AdvisoriesConfig, AdvisorySource};
use trellis_tools::config::Action;

use super::fake;
use super::web::request;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The fixture workspace in a temporary directory.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("workspace"), dir.path());
    dir
}

/// The OSV fixtures' directory.
pub fn osv_dir() -> PathBuf {
    fixtures().join("osv")
}

fn summary(findings: &[Finding]) -> Vec<(String, String, String, String, Option<String>)> {
    let mut v: Vec<_> = findings
        .iter()
        .map(|f| {
            (
                f.advisory.id.clone(),
                f.dependency.name.clone(),
                f.dependency.version.clone(),
                f.dependency.file.clone(),
                f.fixed.clone(),
            )
        })
        .collect();
    v.sort();
    v
}

fn expected() -> Vec<(String, String, String, String, Option<String>)> {
    let s = |id: &str, n: &str, v: &str, f: &str, fixed: Option<&str>| {
        (
            id.to_owned(),
            n.to_owned(),
            v.to_owned(),
            f.to_owned(),
            fixed.map(str::to_owned),
        )
    };
    vec![
        s(
            "GHSA-35jh-r3h4-6jhm",
            "lodash",
            "4.17.20",
            "package-lock.json",
            Some("4.17.21"),
        ),
        s(
            "GO-2023-2102",
            "golang.org/x/net",
            "v0.16.0",
            "go.sum",
            Some("0.17.0"),
        ),
        s(
            "PYSEC-2023-100",
            "Django",
            "4.2.1",
            "requirements.txt",
            Some("4.2.2"),
        ),
        s(
            "PYSEC-2023-74",
            "requests",
            "2.31.0",
            "requirements.txt",
            None,
        ),
        s(
            "RUSTSEC-2020-0071",
            "time",
            "0.2.22",
            "Cargo.lock",
            Some("0.2.23"),
        ),
    ]
}

async fn findings(ws: &Path, config: &AdvisoriesConfig, network: Action) -> Vec<Finding> {
    let source = AdvisorySource::new(ws, config, network).unwrap();
    source
        .findings(&CancellationToken::new())
        .await
        .unwrap()
        .to_vec()
}

fn with_paths(paths: Vec<PathBuf>) -> AdvisoriesConfig {
    AdvisoriesConfig {
        paths,
        ..AdvisoriesConfig::default()
    }
}

#[tokio::test]
async fn every_lockfile_kind_is_matched_at_the_fixed_boundary() {
    let ws = workspace();
    let got = findings(ws.path(), &with_paths(vec![osv_dir()]), Action::Allow).await;
    // Affected just below the fix; not at the fix (sub/Cargo.lock's time 0.2.23, the nested
    // lodash 4.17.21, poetry's django 4.2.2), nor past `last_affected` (gin 1.9.1), nor by a
    // withdrawn or unrelated advisory.
    assert_eq!(summary(&got), expected());
}

#[tokio::test]
async fn zip_and_tar_gz_dumps_load_like_the_directory() {
    let ws = workspace();
    let dumps = tempfile::tempdir().unwrap();
    let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(osv_dir())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    let zip_path = dumps.path().join("all.zip");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in &files {
        zip.start_file(name.as_str(), opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
    let tgz_path = dumps.path().join("osv.tar.gz");
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&tgz_path).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    for (name, bytes) in &files {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, format!("osv/{name}"), bytes.as_slice())
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();

    for path in [zip_path, tgz_path] {
        let got = findings(ws.path(), &with_paths(vec![path.clone()]), Action::Allow).await;
        assert_eq!(summary(&got), expected(), "{}", path.display());
    }
    // A missing dump is an error naming it.
    let source = AdvisorySource::new(
        ws.path(),
        &with_paths(vec!["nowhere.zip".into()]),
        Action::Allow,
    )
    .unwrap();
    let err = source
        .findings(&CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nowhere.zip"), "{err}");
}

#[tokio::test]
async fn queries_rank_advisories_and_items_carry_their_attribution() {
    let ws = workspace();
    let source =
        AdvisorySource::new(ws.path(), &with_paths(vec![osv_dir()]), Action::Allow).unwrap();
    let lists = source
        .search(
            request(
                "cve_database",
                &[
                    "lodash command injection",
                    "CVE-2020-26235",
                    "security review",
                ],
            ),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let top = &lists[0][0];
    assert_eq!(
        top.path,
        "https://osv.dev/vulnerability/GHSA-35jh-r3h4-6jhm"
    );
    assert_eq!(
        top.section.as_deref(),
        Some("GHSA-35jh-r3h4-6jhm lodash@4.17.20")
    );
    assert_eq!(top.kind, "advisory");
    assert!(top.text.contains("CVE-2021-23337"), "{}", top.text);
    assert!(
        top.text.contains("npm lodash@4.17.20 (package-lock.json)"),
        "{}",
        top.text
    );
    assert!(top.text.contains("Fixed in: 4.17.21"), "{}", top.text);
    assert!(
        top.text.contains("Command Injection in lodash"),
        "{}",
        top.text
    );
    assert_eq!(
        lists[1][0].section.as_deref(),
        Some("RUSTSEC-2020-0071 time@0.2.22")
    );
    // Every advisory affecting the workspace is there, even for a query naming none.
    assert_eq!(lists[2].len(), 5);
}

#[tokio::test]
async fn the_osv_api_is_asked_about_the_locked_packages() {
    let ws = workspace();
    let advisory: Value =
        serde_json::from_slice(&std::fs::read(osv_dir().join("GO-2023-2102.json")).unwrap())
            .unwrap();
    let fake = fake::start(
        vec![vec!["golang.org/x/net".into(), "GO-2023-2102".into()]],
        HashMap::from([("GO-2023-2102".to_owned(), advisory)]),
    )
    .await;
    let config = AdvisoriesConfig {
        api: true,
        api_url: Some(fake.url.clone()),
        ..AdvisoriesConfig::default()
    };
    let got = findings(ws.path(), &config, Action::Allow).await;
    assert_eq!(
        summary(&got),
        vec![(
            "GO-2023-2102".to_owned(),
            "golang.org/x/net".to_owned(),
            "v0.16.0".to_owned(),
            "go.sum".to_owned(),
            Some("0.17.0".to_owned())
        )]
    );
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/v1/querybatch");
    let queries = seen[0].body.as_ref().unwrap()["queries"]
        .as_array()
        .unwrap()
        .clone();
    let has = |eco: &str, name: &str, version: &str| {
        queries.iter().any(|q| {
            q["package"]["ecosystem"] == eco
                && q["package"]["name"] == name
                && q["version"] == version
        })
    };
    assert!(has("crates.io", "time", "0.2.22"));
    assert!(has("npm", "lodash", "4.17.20"));
    assert!(has("PyPI", "Django", "4.2.1"));
    assert!(has("Go", "golang.org/x/net", "v0.16.0"));
    assert!(
        !queries.iter().any(|q| q["package"]["name"] == "app"),
        "path crates are not asked about"
    );
    assert_eq!(fake.count("/v1/vulns/GO-2023-2102"), 1);

    // Network denied: the API-only source is unavailable and the fake hears nothing more.
    let denied = AdvisorySource::new(ws.path(), &config, Action::Deny).unwrap();
    assert!(
        denied
            .unavailable()
            .unwrap()
            .contains("network denied by tools.policy.network")
    );
    let none = denied.findings(&CancellationToken::new()).await.unwrap();
    assert!(none.is_empty());
    assert_eq!(fake.seen().len(), 2);
}
