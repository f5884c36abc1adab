//! The diagnostics a server pushes (`textDocument/publishDiagnostics`), kept per file, and
//! waiting for them to settle.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use lsp_types::{PublishDiagnosticsParams, Url};
use tokio::sync::watch;
use tokio::time::Instant;

/// A server may publish a file's diagnostics in parts (typescript-language-server: syntax,
/// then semantic, then suggestions, each 50 ms debounced); they count as settled once the
/// file has had no new publication for this long.
const QUIET: Duration = Duration::from_millis(750);

/// The latest diagnostics published per file.
#[derive(Debug)]
pub(crate) struct Published {
    files: Mutex<HashMap<Url, Entry>>,
    /// Counts publications (wakes waiters).
    count: watch::Sender<u64>,
}

#[derive(Debug)]
struct Entry {
    /// The publication count when it came.
    seq: u64,
    at: Instant,
    diagnostics: Vec<lsp_types::Diagnostic>,
}

impl Default for Published {
    fn default() -> Self {
        Self {
            files: Mutex::default(),
            count: watch::channel(0).0,
        }
    }
}

impl Published {
    /// Keeps a publication.
    pub(crate) fn record(&self, p: PublishDiagnosticsParams) {
        // Stored before waiters are woken, so that they find it.
        let Ok(mut files) = self.files.lock() else {
            return;
        };
        let seq = *self.count.borrow() + 1;
        files.insert(
            p.uri,
            Entry {
                seq,
                at: Instant::now(),
                diagnostics: p.diagnostics,
            },
        );
        drop(files);
        self.count.send_replace(seq);
    }

    /// The publication count so far.
    pub(crate) fn seq(&self) -> u64 {
        *self.count.borrow()
    }

    /// `uri`'s diagnostics once settled: published after publication `after` (when the file
    /// was just opened or changed; `None`: any publication will do) and quiet since, waiting
    /// until `deadline` at most. The flag says whether they settled in time; if not, the
    /// latest known ones (possibly none) come back.
    pub(crate) async fn settled(
        &self,
        uri: &Url,
        after: Option<u64>,
        deadline: Instant,
    ) -> (Vec<lsp_types::Diagnostic>, bool) {
        let mut rx = self.count.subscribe();
        loop {
            rx.borrow_and_update();
            let (fresh_since, latest) = match self.files.lock() {
                Ok(files) => match files.get(uri) {
                    Some(e) if after.is_none_or(|a| e.seq > a) => {
                        (Some(e.at), e.diagnostics.clone())
                    }
                    Some(e) => (None, e.diagnostics.clone()),
                    None => (None, Vec::new()),
                },
                Err(_) => return (Vec::new(), false),
            };
            let wake = match fresh_since {
                Some(at) if at + QUIET <= Instant::now() => return (latest, true),
                Some(at) => (at + QUIET).min(deadline),
                None => deadline,
            };
            if Instant::now() >= deadline {
                return (latest, false);
            }
            // A new publication (of any file) or the quiet time's end: look again.
            let _ = tokio::time::timeout_at(wake, rx.changed()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(p: &Published, uri: &Url, message: &str) {
        p.record(PublishDiagnosticsParams {
            uri: uri.clone(),
            diagnostics: vec![lsp_types::Diagnostic {
                message: message.into(),
                ..lsp_types::Diagnostic::default()
            }],
            version: None,
        });
    }

    #[tokio::test(start_paused = true)]
    async fn waits_for_a_fresh_publication_and_its_followers() {
        let p = std::sync::Arc::new(Published::default());
        let uri = Url::parse("file:///w/a.ts").unwrap();
        publish(&p, &uri, "old");
        let before = p.seq();
        let start = Instant::now();
        let later = p.clone();
        let u = uri.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            publish(&later, &u, "syntax");
            tokio::time::sleep(Duration::from_millis(300)).await;
            publish(&later, &u, "semantic");
        });
        let (ds, ok) = p
            .settled(&uri, Some(before), start + Duration::from_secs(10))
            .await;
        assert!(ok);
        assert_eq!(ds[0].message, "semantic");
        assert_eq!(start.elapsed(), Duration::from_millis(500) + QUIET);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_at_the_deadline_with_what_it_has() {
        let p = Published::default();
        let uri = Url::parse("file:///w/a.py").unwrap();
        publish(&p, &uri, "old");
        let start = Instant::now();
        let (ds, ok) = p
            .settled(&uri, Some(p.seq()), start + Duration::from_secs(3))
            .await;
        assert!(!ok);
        assert_eq!(ds[0].message, "old");
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        // Unchanged file: what was published (long enough ago) is the answer at once.
        let (ds, ok) = p.settled(&uri, None, Instant::now()).await;
        assert!(ok && ds.len() == 1);
    }
}
