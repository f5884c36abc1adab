//! The apply journal: how an apply, undo or redo survives a crash.
//!
//! An operation is first *prepared* in `<repo>/.trellis/changes/<run>/<seq>-<kind>/`:
//! the before and after contents of every file it touches go to `blobs/`, then
//! `manifest.json` is written to a temporary name, fsynced and renamed into place — the
//! commit point. Only then are the user's files replaced, each by an fsynced temporary
//! sibling renamed over it (so no file is ever half written), and finally a `done` marker
//! is written. A crash before the commit point leaves the working tree untouched (the
//! partial directory is discarded by [`recover_pending`]); a crash after it is rolled
//! forward by the next command, because executing a manifest is idempotent. The blobs stay
//! after completion: they are what `undo` restores, byte for byte.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use trellis_protocol::RunId;

use crate::error::{Error, Result};
use crate::fsutil::{fsync_dir, remove_stale_temps, replace, write_atomic};

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Applies approved changes.
    Apply,
    /// Reverses the last apply or redo.
    Undo,
    /// Reverses an undo.
    Redo,
}

impl OpKind {
    /// The name used in directories and records.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Apply => "apply",
            OpKind::Undo => "undo",
            OpKind::Redo => "redo",
        }
    }
}

/// A file's state on one side of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileState {
    /// The blob file (under `blobs/`) holding the contents; `None`: the file is absent.
    pub blob: Option<String>,
    /// Permission bits.
    pub mode: Option<u32>,
}

/// One file of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Path relative to the repository root.
    pub path: String,
    /// Before the operation.
    pub before: FileState,
    /// After it.
    pub after: FileState,
}

/// The committed description of an operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version.
    pub version: u32,
    /// The run.
    pub run: RunId,
    /// Sequence number within the run.
    pub seq: i64,
    /// Apply, undo or redo.
    pub kind: OpKind,
    /// The repository root whose working tree is changed.
    pub repo: PathBuf,
    /// The files.
    pub entries: Vec<Entry>,
    /// Directories the operation creates (undo removes them again when empty).
    pub created_dirs: Vec<String>,
    /// Directories to remove when empty afterwards (deepest first).
    pub remove_dirs: Vec<String>,
}

/// Contents and permission bits of one side of a file (`None`: absent).
pub type Side = Option<(Vec<u8>, u32)>;

/// The journal directory of `run`.
pub fn run_dir(repo: &Path, run: &RunId) -> PathBuf {
    repo.join(".trellis").join("changes").join(run.as_str())
}

/// Writes an operation's blobs and commits its manifest; returns the operation directory.
pub fn prepare(
    repo: &Path,
    run: &RunId,
    seq: i64,
    kind: OpKind,
    files: Vec<(String, Side, Side)>,
    created_dirs: Vec<String>,
    remove_dirs: Vec<String>,
) -> Result<PathBuf> {
    let dir = run_dir(repo, run).join(format!("{seq:04}-{}", kind.as_str()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(Error::io("cannot clear", &dir))?;
    }
    let blobs = dir.join("blobs");
    std::fs::create_dir_all(&blobs).map_err(Error::io("cannot create", &blobs))?;
    let mut entries = Vec::new();
    for (i, (path, before, after)) in files.into_iter().enumerate() {
        let side = |name: &str, s: Side| -> Result<FileState> {
            Ok(match s {
                Some((bytes, mode)) => {
                    // A fresh directory that only the manifest makes meaningful: plain
                    // writes, fsynced, are enough.
                    let file = format!("{i}.{name}");
                    let path = blobs.join(&file);
                    std::fs::File::create(&path)
                        .and_then(|mut f| {
                            std::io::Write::write_all(&mut f, &bytes)?;
                            f.sync_all()
                        })
                        .map_err(Error::io("cannot write", &path))?;
                    FileState {
                        blob: Some(file),
                        mode: Some(mode),
                    }
                }
                None => FileState {
                    blob: None,
                    mode: None,
                },
            })
        };
        entries.push(Entry {
            before: side("before", before)?,
            after: side("after", after)?,
            path,
        });
    }
    fsync_dir(&blobs)?;
    fsync_dir(&dir)?;
    let manifest = Manifest {
        version: 1,
        run: run.clone(),
        seq,
        kind,
        repo: repo.to_owned(),
        entries,
        created_dirs,
        remove_dirs,
    };
    let json = serde_json::to_vec_pretty(&manifest).map_err(|source| Error::Json {
        what: "encode the apply manifest".into(),
        source,
    })?;
    // The commit point: the rename of a fully written, fsynced manifest.
    write_atomic(&dir.join("manifest.json"), &json, Some(0o600), true)?;
    Ok(dir)
}

/// Reads an operation's manifest.
pub fn read_manifest(op: &Path) -> Result<Manifest> {
    let path = op.join("manifest.json");
    let bytes = std::fs::read(&path).map_err(Error::io("cannot read", &path))?;
    serde_json::from_slice(&bytes).map_err(|source| Error::Json {
        what: format!("read {}", path.display()),
        source,
    })
}

/// Reads one side's contents (`None`: absent).
pub fn read_side(op: &Path, state: &FileState) -> Result<Option<Vec<u8>>> {
    match &state.blob {
        None => Ok(None),
        Some(b) => {
            let p = op.join("blobs").join(b);
            std::fs::read(&p)
                .map(Some)
                .map_err(Error::io("cannot read", &p))
        }
    }
}

/// Whether the operation completed.
pub fn is_done(op: &Path) -> bool {
    op.join("done").exists()
}

/// Executes a committed operation (idempotently) and marks it done.
pub fn execute(op: &Path) -> Result<Manifest> {
    let m = read_manifest(op)?;
    let mut touched_dirs = Vec::new();
    for e in &m.entries {
        let target = m.repo.join(&e.path);
        // A crash between writing a temporary sibling and renaming it leaves the sibling.
        remove_stale_temps(&target)?;
        match read_side(op, &e.after)? {
            // Directories are fsynced once each below, before `done` is written.
            Some(bytes) => replace(&target, &bytes, e.after.mode, true)?,
            None => match std::fs::remove_file(&target) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(Error::io("cannot remove", &target)(err)),
            },
        }
        if let Some(parent) = target.parent() {
            touched_dirs.push(parent.to_owned());
        }
    }
    for d in &m.remove_dirs {
        // Only empty directories go; anything else the user put there stays.
        let _ = std::fs::remove_dir(m.repo.join(d));
    }
    touched_dirs.sort();
    touched_dirs.dedup();
    for d in touched_dirs.iter().filter(|d| d.exists()) {
        fsync_dir(d)?;
    }
    write_atomic(&op.join("done"), b"", Some(0o600), true)?;
    Ok(m)
}

/// The run's operation directories in order, with whether each has a committed manifest.
pub fn list_ops(repo: &Path, run: &RunId) -> Result<Vec<PathBuf>> {
    let dir = run_dir(repo, run);
    let mut ops: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io("cannot list", &dir)(e)),
    };
    ops.sort();
    Ok(ops)
}

/// Finishes every committed but unfinished operation of any run in `repo` and discards
/// operations that never reached their commit point. Returns the manifests completed.
pub fn recover_pending(repo: &Path) -> Result<Vec<(PathBuf, Manifest)>> {
    let root = repo.join(".trellis").join("changes");
    let runs = match std::fs::read_dir(&root) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect::<Vec<_>>(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("cannot list", &root)(e)),
    };
    let mut done = Vec::new();
    for run in runs {
        let Some(name) = run.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        for op in list_ops(repo, &RunId::from_string(name))? {
            if is_done(&op) {
                continue;
            }
            if op.join("manifest.json").exists() {
                let m = execute(&op)?;
                done.push((op, m));
            } else {
                std::fs::remove_dir_all(&op).map_err(Error::io("cannot discard", &op))?;
            }
        }
    }
    Ok(done)
}
