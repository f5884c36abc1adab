//! The workspace index's open handles, shared by every retrieval of a workspace.
//!
//! [`Index`] is `Send` but not `Sync`, so every concurrently running source borrows a handle
//! of its own ([`IndexPool::take`]). Opening one (the metadata database, the BM25 segments,
//! the exclusion globs) costs more than a discussion run's own retrieval, so handles are
//! kept and reused, at most [`MAX_OPEN_HANDLES`] at once: when all are busy a taker waits for
//! one (50 runs starting together opened 50 handles, a tenth of `trellis serve`'s CPU). A
//! kept handle that another handle or process has written behind is dropped, not reused.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use trellis_index::{Embedder, Index, IndexConfig};

/// Hands an [`Embedder`] shared by the agent to index handles (which own a `Box`), caching
/// query embeddings so that a query searched by several sources is embedded once.
struct SharedEmbedder {
    inner: Arc<dyn Embedder>,
    queries: Arc<Mutex<HashMap<String, Vec<f32>>>>,
}

/// Query embeddings kept per pool.
const QUERY_CACHE: usize = 512;

impl Embedder for SharedEmbedder {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> trellis_index::Result<Vec<Vec<f32>>> {
        // Single texts are queries (index updates embed in batches).
        let [text] = texts else {
            return self.inner.embed(texts);
        };
        if let Some(v) = lock(&self.queries).get(*text) {
            return Ok(vec![v.clone()]);
        }
        let out = self.inner.embed(texts)?;
        if let Some(v) = out.first() {
            let mut cache = lock(&self.queries);
            if cache.len() >= QUERY_CACHE {
                cache.clear();
            }
            cache.insert((*text).to_owned(), v.clone());
        }
        Ok(out)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Handles kept open for reuse (each caches the vector matrix once loaded).
const MAX_IDLE_HANDLES: usize = 6;

/// Handles open at once, busy or idle; more takers wait for one to come back.
pub(crate) const MAX_OPEN_HANDLES: usize = 6;

#[derive(Default)]
struct Handles {
    /// Bumped by every update that wrote: handles taken before it are not kept.
    generation: u64,
    idle: Vec<Index>,
    /// Idle plus lent out (plus being opened).
    open: usize,
}

/// Open handles on one workspace index, shared by every retrieval of the workspace: kept
/// for reuse, at most six at once (a taker waits for one), and dropped
/// rather than reused when another handle or process has written the index behind them.
pub struct IndexPool {
    repo: PathBuf,
    dir: Option<PathBuf>,
    config: IndexConfig,
    embedder: Option<Arc<dyn Embedder>>,
    query_cache: Arc<Mutex<HashMap<String, Vec<f32>>>>,
    handles: Mutex<Handles>,
    returned: Condvar,
}

/// What becomes of a handle after [`IndexPool::with`].
pub(crate) enum Back {
    /// Back to the pool as it is (kept if no update wrote meanwhile).
    Kept,
    /// It has just written the index: the only up-to-date handle, the idle ones are closed.
    Fresh,
}

/// Gives back a taken handle's place when the work panicked (the handle itself was dropped).
struct Slot<'p>(&'p IndexPool);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        lock(&self.0.handles).open -= 1;
        self.0.returned.notify_one();
    }
}

impl IndexPool {
    /// Handles on the index of `repo` (under `dir`, else `<repo>/.trellis/index`); every
    /// handle shares `embedder` (`None`: BM25 only). One pool serves every run of a
    /// workspace.
    pub fn new(
        repo: PathBuf,
        dir: Option<PathBuf>,
        config: IndexConfig,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Self {
        IndexPool {
            repo,
            dir,
            config,
            embedder,
            query_cache: Arc::default(),
            handles: Mutex::default(),
            returned: Condvar::new(),
        }
    }

    pub(crate) fn has_embedder(&self) -> bool {
        self.embedder.is_some()
    }

    /// The shared embedder, if any.
    pub(crate) fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.embedder.clone()
    }

    /// Runs `f` on a handle: an idle one that is up to date, else a newly opened one; when
    /// [`MAX_OPEN_HANDLES`] are open and none is idle, waits for one to come back. Blocks:
    /// call it off the async threads.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Index) -> (T, Back),
    ) -> trellis_index::Result<T> {
        let (mut ix, generation) = self.take()?;
        let slot = Slot(self);
        let (out, back) = f(&mut ix);
        // The handle's place is accounted for by what follows.
        std::mem::forget(slot);
        match back {
            Back::Kept => self.give(ix, generation),
            Back::Fresh => self.reset(ix),
        }
        Ok(out)
    }

    fn take(&self) -> trellis_index::Result<(Index, u64)> {
        let generation = {
            let mut h = lock(&self.handles);
            loop {
                while let Some(ix) = h.idle.pop() {
                    if !ix.is_stale() {
                        return Ok((ix, h.generation));
                    }
                    h.open -= 1;
                }
                if h.open < MAX_OPEN_HANDLES {
                    h.open += 1;
                    break h.generation;
                }
                h = self
                    .returned
                    .wait(h)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        match self.open() {
            Ok(ix) => Ok((ix, generation)),
            Err(e) => {
                drop(Slot(self));
                Err(e)
            }
        }
    }

    fn open(&self) -> trellis_index::Result<Index> {
        let mut ix = match &self.dir {
            Some(dir) => Index::open_at(&self.repo, dir, self.config.clone())?,
            None => Index::open(&self.repo, self.config.clone())?,
        };
        if let Some(e) = &self.embedder {
            ix.set_embedder(Box::new(SharedEmbedder {
                inner: e.clone(),
                queries: self.query_cache.clone(),
            }));
        }
        Ok(ix)
    }

    /// Takes back a handle lent at `generation`: kept if no update wrote since and there is
    /// room, else closed.
    fn give(&self, ix: Index, generation: u64) {
        let mut h = lock(&self.handles);
        if h.generation == generation && h.idle.len() < MAX_IDLE_HANDLES {
            h.idle.push(ix);
        } else {
            h.open -= 1;
            drop(h);
            drop(ix);
        }
        self.returned.notify_one();
    }

    /// After an update that wrote: closes every idle handle (their readers and vector caches
    /// are stale) and keeps `fresh`, the handle that did the update.
    fn reset(&self, fresh: Index) {
        let mut h = lock(&self.handles);
        h.generation += 1;
        let stale = std::mem::take(&mut h.idle);
        h.open -= stale.len();
        h.idle.push(fresh);
        drop(h);
        drop(stale);
        self.returned.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use trellis_index::{SearchMode, SearchRequest, UpdateOptions};

    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "def alpha():\n    return 1\n").unwrap();
        dir
    }

    fn hits(ix: &Index, word: &str) -> usize {
        ix.search(&SearchRequest {
            query: word.to_owned(),
            categories: Vec::new(),
            limit: 5,
            mode: SearchMode::Bm25,
        })
        .unwrap()
        .len()
    }

    fn open_now(pool: &IndexPool) -> usize {
        lock(&pool.handles).open
    }

    #[test]
    fn a_kept_handle_another_process_wrote_behind_is_not_reused() {
        let dir = repo();
        let pool = IndexPool::new(dir.path().to_path_buf(), None, IndexConfig::default(), None);
        let update = |ix: &mut Index| {
            let s = ix.update(&UpdateOptions::default()).unwrap();
            ix.close_writer().unwrap();
            s
        };
        pool.with(|ix| (update(ix), Back::Fresh)).unwrap();
        assert!(pool.with(|ix| (hits(ix, "alpha"), Back::Kept)).unwrap() > 0);
        // Another process (here: a handle of its own) indexes a new file.
        std::fs::write(dir.path().join("b.py"), "def bravo():\n    return 2\n").unwrap();
        let mut other = Index::open(dir.path(), IndexConfig::default()).unwrap();
        assert!(update(&mut other).files_indexed > 0);
        // The pool's kept handle would not see it (its full-text reader reloads on its own
        // commits only): it is dropped and a fresh one opened.
        assert!(pool.with(|ix| (hits(ix, "bravo"), Back::Kept)).unwrap() > 0);
        assert_eq!(open_now(&pool), 1);
        // An update that wrote nothing keeps the handle.
        let idle_before = lock(&pool.handles).generation;
        let s = pool.with(|ix| (update(ix), Back::Kept)).unwrap();
        assert_eq!(s.files_indexed, 0);
        assert_eq!(lock(&pool.handles).generation, idle_before);
    }

    #[test]
    fn takers_wait_for_a_handle_when_all_are_open() {
        let dir = repo();
        let pool = IndexPool::new(dir.path().to_path_buf(), None, IndexConfig::default(), None);
        pool.with(|ix| (ix.update(&UpdateOptions::default()).map(drop), Back::Fresh))
            .unwrap()
            .unwrap();
        let (busy, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..MAX_OPEN_HANDLES * 2 {
                s.spawn(|| {
                    pool.with(|ix| {
                        let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        let n = hits(ix, "alpha");
                        busy.fetch_sub(1, Ordering::SeqCst);
                        (n, Back::Kept)
                    })
                    .unwrap()
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), MAX_OPEN_HANDLES);
        assert_eq!(open_now(&pool), MAX_OPEN_HANDLES);
        assert_eq!(lock(&pool.handles).idle.len(), MAX_OPEN_HANDLES);
    }

    #[test]
    fn a_panicking_taker_gives_its_place_back() {
        let dir = repo();
        let pool = IndexPool::new(dir.path().to_path_buf(), None, IndexConfig::default(), None);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.with(|_| -> ((), Back) { panic!("work failed") })
        }));
        assert!(panicked.is_err());
        assert_eq!(open_now(&pool), 0);
    }
}
