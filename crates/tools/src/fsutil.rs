//! File writing helpers: atomic replacement and all-or-nothing multi-file commits.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// A temporary sibling of `path` (same directory, so a rename is atomic).
fn temp_sibling(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.trellis-tmp-{}-{n}", std::process::id()))
}

/// Writes `bytes` to `path` atomically: a temporary sibling is written (and fsynced when
/// `durable`) and renamed over `path`. An existing file's permissions are kept; `mode`
/// overrides them (Unix permission bits).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>, durable: bool) -> Result<()> {
    replace(path, bytes, mode, durable)?;
    if durable && let Some(dir) = path.parent() {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// Like [`write_atomic`] but leaves fsyncing the directory (which makes the rename itself
/// durable) to the caller, who can then sync each directory once for many files.
pub fn replace(path: &Path, bytes: &[u8], mode: Option<u32>, durable: bool) -> Result<()> {
    let tmp = write_temp(path, bytes, mode, durable)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("cannot replace", path)(e)
    })
}

/// Removes temporary siblings of `path` left behind by a process that died between
/// writing one and renaming it.
pub fn remove_stale_temps(path: &Path) -> Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(());
    };
    let prefix = format!(".{}.trellis-tmp-", name.to_string_lossy());
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("cannot list", dir)(e)),
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            std::fs::remove_file(e.path()).map_err(Error::io("cannot remove", e.path()))?;
        }
    }
    Ok(())
}

/// Writes the temporary sibling of `path` and returns its name.
fn write_temp(path: &Path, bytes: &[u8], mode: Option<u32>, durable: bool) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io("cannot create directory", dir))?;
    }
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        let perms = match mode {
            Some(m) => Some(std::fs::Permissions::from_mode(m)),
            None => std::fs::metadata(path).ok().map(|m| m.permissions()),
        };
        if let Some(p) = perms {
            f.set_permissions(p)?;
        }
        if durable {
            f.sync_all()?;
        }
        Ok(())
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("cannot write", path)(e)
    })?;
    Ok(tmp)
}

/// Fsyncs a directory so renames in it are durable.
pub fn fsync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io("cannot sync directory", dir))
}

/// One file change of a multi-file commit: new contents, or `None` to delete.
#[derive(Clone, Debug)]
pub struct FileWrite {
    /// The file.
    pub path: PathBuf,
    /// Its new contents (`None`: delete it).
    pub content: Option<Vec<u8>>,
}

/// Writes several files all-or-nothing: every new content goes to a temporary sibling
/// first; only when all are written are they renamed into place, and if a rename fails the
/// files already replaced are restored. (A crash between renames can still leave some
/// files new; tools run in a disposable worktree, and the user-facing apply uses a
/// journal instead — see [`crate::review`].)
pub fn commit_all(writes: &[FileWrite]) -> Result<()> {
    let mut staged: Vec<(usize, PathBuf)> = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        if let Some(content) = &w.content {
            match write_temp(&w.path, content, None, false) {
                Ok(tmp) => staged.push((i, tmp)),
                Err(e) => {
                    for (_, tmp) in &staged {
                        let _ = std::fs::remove_file(tmp);
                    }
                    return Err(e);
                }
            }
        }
    }
    let originals: Vec<Option<Vec<u8>>> =
        writes.iter().map(|w| std::fs::read(&w.path).ok()).collect();
    let mut done: Vec<usize> = Vec::new();
    let mut failure = None;
    for (i, w) in writes.iter().enumerate() {
        let r = match staged.iter().find(|(j, _)| *j == i) {
            Some((_, tmp)) => std::fs::rename(tmp, &w.path),
            None => match std::fs::remove_file(&w.path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                r => r,
            },
        };
        match r {
            Ok(()) => done.push(i),
            Err(e) => {
                failure = Some(Error::io("cannot replace", w.path.clone())(e));
                break;
            }
        }
    }
    let Some(failure) = failure else {
        return Ok(());
    };
    // Roll back what was replaced; drop the rest of the staged files.
    for i in done {
        if let (Some(w), Some(orig)) = (writes.get(i), originals.get(i)) {
            let _ = match orig {
                Some(bytes) => std::fs::write(&w.path, bytes),
                None => std::fs::remove_file(&w.path),
            };
        }
    }
    for (_, tmp) in &staged {
        let _ = std::fs::remove_file(tmp);
    }
    Err(failure)
}

/// Whether `bytes` look binary: a NUL byte in the first 8 KB (git's heuristic).
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8000).any(|b| *b == 0)
}

/// Keeps the head and tail of `text` when it is longer than `max` bytes.
pub fn cap_text(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    let head_end = floor_char(text, max * 2 / 3);
    let tail_start = ceil_char(text, text.len() - (max - max * 2 / 3));
    let omitted = tail_start.saturating_sub(head_end);
    (
        format!(
            "{}\n… [{omitted} bytes omitted] …\n{}",
            text.get(..head_end).unwrap_or(""),
            text.get(tail_start..).unwrap_or("")
        ),
        true,
    )
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}
