//! Answers kept for a while: in memory, and as one JSON file per answer under a directory
//! (`<workspace>/.trellis/cache/web/`), so they survive restarts. Entries older than the
//! TTL are ignored (and replaced when the query is asked again).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::clock::{Clock, unix_secs};

/// A TTL cache of `T` by key.
#[derive(Debug)]
pub(crate) struct Cache<T> {
    dir: Option<PathBuf>,
    ttl: Duration,
    clock: Arc<dyn Clock>,
    memory: Mutex<HashMap<String, (u64, T)>>,
}

#[derive(Serialize, Deserialize)]
struct Entry<T> {
    key: String,
    stored: u64,
    value: T,
}

/// Entries kept in memory at most (the files are not bounded; they are small).
const MEMORY_ENTRIES: usize = 1024;

impl<T: Clone + Serialize + DeserializeOwned> Cache<T> {
    /// A cache with files under `dir` (memory only without), entries fresh for `ttl`
    /// (zero: nothing is cached).
    pub(crate) fn new(dir: Option<PathBuf>, ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        Cache {
            dir,
            ttl,
            clock,
            memory: Mutex::new(HashMap::new()),
        }
    }

    fn file(&self, key: &str) -> Option<PathBuf> {
        let hash = xxhash_rust::xxh3::xxh3_128(key.as_bytes());
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{hash:032x}.json")))
    }

    fn fresh(&self, stored: u64) -> bool {
        let now = unix_secs(self.clock.now());
        now.saturating_sub(stored) < self.ttl.as_secs()
    }

    /// The fresh value for `key`, if any.
    pub(crate) fn get(&self, key: &str) -> Option<T> {
        if self.ttl.is_zero() {
            return None;
        }
        {
            let memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((stored, v)) = memory.get(key)
                && self.fresh(*stored)
            {
                return Some(v.clone());
            }
        }
        let bytes = std::fs::read(self.file(key)?).ok()?;
        let entry: Entry<T> = serde_json::from_slice(&bytes).ok()?;
        if entry.key != key || !self.fresh(entry.stored) {
            return None;
        }
        self.remember(key, entry.stored, entry.value.clone());
        Some(entry.value)
    }

    fn remember(&self, key: &str, stored: u64, value: T) {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        if memory.len() >= MEMORY_ENTRIES {
            memory.clear();
        }
        memory.insert(key.to_owned(), (stored, value));
    }

    /// Stores `value` for `key` (a file that cannot be written leaves the memory copy).
    pub(crate) fn put(&self, key: &str, value: &T) {
        if self.ttl.is_zero() {
            return;
        }
        let stored = unix_secs(self.clock.now());
        self.remember(key, stored, value.clone());
        let Some(path) = self.file(key) else {
            return;
        };
        let entry = Entry {
            key: key.to_owned(),
            stored,
            value,
        };
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            std::fs::write(
                &tmp,
                serde_json::to_vec(&entry).map_err(std::io::Error::other)?,
            )?;
            std::fs::rename(&tmp, &path)
        };
        if let Err(e) = write() {
            tracing::debug!("cache {}: {e}", path.display());
        }
    }
}
