//! The sinks: [`StoreSink`] (the runtime's) and [`MemorySink`] (tests').

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::json;
use trellis_protocol::{Artifact, ArtifactStatus, NodeId, RunId};
use trellis_store::{NewArtifact, Store};
use trellis_tools::review::{self, AuthoredComment, ReviewComment};
use trellis_tools::tool::BoxFuture;
use trellis_tools::worktree::trellis_dir;
use trellis_tools::{Answer, Interaction, Question};
use trellis_workflow::artifacts::{ArtifactKind, Validated};

use super::{Caller, ReviewVerdict, StageError, StageSignal, StageSink, Submitted};

/// The artifact kind of a completed review (`complete_review`): JSON with the verdict, the
/// summary and the review's comments.
pub const REVIEW_KIND: &str = "review";

/// The artifact kind of `complete_pulse`'s summary (markdown; stored as approved, since the
/// execution → review transition needs no approval).
pub const PULSE_KIND: &str = "pulse_summary";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `<repo>/.trellis/runs/<run>/artifacts`, created if missing: where a run's artifacts are
/// written as files (`<kind>.v<N>.<ext>` for each version, `<kind>.<ext>` for the latest).
pub fn artifacts_dir(repo: &Path, run: &RunId) -> Result<PathBuf, StageError> {
    let dir = trellis_dir(repo)?
        .join("runs")
        .join(run.as_str())
        .join("artifacts");
    std::fs::create_dir_all(&dir).map_err(|source| StageError::Io {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

fn write_atomic(path: &Path, content: &str) -> Result<(), StageError> {
    let io = |source| StageError::Io {
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// A hook told of every artifact the sink stores (the runtime announces it on the
/// workspace stream).
pub type Announce = Arc<dyn Fn(&Artifact) + Send + Sync>;

/// The runtime's sink for one run: artifacts in the store (versioned per run and kind,
/// awaiting approval) and as files under [`artifacts_dir`]; review comments in the change
/// set's review (what `trellis review` shows); the verdict as a [`REVIEW_KIND`] artifact.
pub struct StoreSink {
    store: Arc<Store>,
    repo: PathBuf,
    run: RunId,
    author: String,
    extension_turns: Option<u32>,
    announce: Option<Announce>,
    signals: Mutex<Vec<StageSignal>>,
}

impl StoreSink {
    /// A sink for `run`, whose repository (the user's, where `.trellis/` is) is `repo`.
    pub fn new(store: Arc<Store>, repo: &Path, run: RunId) -> Self {
        Self {
            store,
            repo: repo.to_owned(),
            run,
            author: "review".into(),
            extension_turns: None,
            announce: None,
            signals: Mutex::default(),
        }
    }

    /// Names comments' author (default `review`).
    pub fn with_author(mut self, author: impl Into<String>) -> Self {
        self.author = author.into();
        self
    }

    /// Grants `turns` more turns to every `request_extension` (default: none granted, the
    /// request is only recorded for the handler to decide).
    pub fn with_extension_turns(mut self, turns: Option<u32>) -> Self {
        self.extension_turns = turns;
        self
    }

    /// Calls `announce` with every artifact stored.
    pub fn with_announce(mut self, announce: Announce) -> Self {
        self.announce = Some(announce);
        self
    }

    /// Stores `content` as the next version of `kind` and writes its files.
    fn put(
        &self,
        node: Option<&NodeId>,
        kind: &str,
        (stem, ext): (&str, &str),
        content: String,
        status: ArtifactStatus,
    ) -> Result<Submitted, StageError> {
        let a = self.store.put_artifact(NewArtifact {
            run: self.run.clone(),
            node: node.cloned(),
            kind: kind.to_owned(),
            content,
            status,
        })?;
        let dir = artifacts_dir(&self.repo, &self.run)?;
        write_atomic(
            &dir.join(format!("{stem}.v{}.{ext}", a.version)),
            &a.content,
        )?;
        let latest = dir.join(format!("{stem}.{ext}"));
        write_atomic(&latest, &a.content)?;
        if let Some(announce) = &self.announce {
            announce(&a);
        }
        let file = latest
            .strip_prefix(&self.repo)
            .unwrap_or(&latest)
            .to_string_lossy()
            .into_owned();
        Ok(Submitted {
            id: a.id,
            kind: a.kind,
            version: a.version,
            file: Some(file),
        })
    }

    /// The comments of the review in progress: those added after the last completed
    /// review's (whose ids its content lists).
    pub fn current_comments(&self) -> Result<Vec<AuthoredComment>, StageError> {
        let after = self
            .store
            .artifacts(&self.run)?
            .into_iter()
            .filter(|a| a.kind == REVIEW_KIND)
            .filter_map(|a| serde_json::from_str::<serde_json::Value>(&a.content).ok())
            .flat_map(|v| {
                v["comments"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .filter_map(|c| c["id"].as_i64())
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            })
            .max()
            .unwrap_or(0);
        Ok(review::comments(&*self.store, &self.run)?
            .into_iter()
            .filter(|c| c.id > after)
            .collect())
    }
}

impl StageSink for StoreSink {
    fn submit(&self, from: &Caller, artifact: &Validated) -> Result<Submitted, StageError> {
        let kind = artifact.kind();
        let done = self.put(
            from.node.as_ref(),
            kind.as_str(),
            (kind.file_stem(), kind.extension()),
            artifact.content(),
            ArtifactStatus::AwaitingApproval,
        )?;
        self.record(StageSignal::Submitted(done.clone()));
        Ok(done)
    }

    fn approved(&self, kind: ArtifactKind) -> Result<Option<String>, StageError> {
        Ok(self
            .store
            .artifacts(&self.run)?
            .into_iter()
            .filter(|a| a.kind == kind.as_str() && a.status == ArtifactStatus::Approved)
            .max_by_key(|a| a.version)
            .map(|a| a.content))
    }

    fn comment(&self, from: &Caller, comment: &ReviewComment) -> Result<usize, StageError> {
        review::add_comment(
            &*self.store,
            &self.run,
            from.node.as_ref(),
            &self.author,
            comment,
        )?;
        self.record(StageSignal::Comment(comment.clone()));
        Ok(self.current_comments()?.len())
    }

    fn verdict(&self, from: &Caller, verdict: &ReviewVerdict) -> Result<Submitted, StageError> {
        let comments: Vec<serde_json::Value> = self
            .current_comments()?
            .into_iter()
            .map(|c| json!({ "id": c.id, "author": c.author, "comment": c.comment }))
            .collect();
        let content = json!({
            "verdict": verdict.verdict,
            "summary": verdict.summary,
            "comments": comments,
        });
        let done = self.put(
            from.node.as_ref(),
            REVIEW_KIND,
            (REVIEW_KIND, "json"),
            serde_json::to_string_pretty(&content).unwrap_or_default(),
            ArtifactStatus::AwaitingApproval,
        )?;
        self.record(StageSignal::Verdict {
            verdict: verdict.clone(),
            review: done.clone(),
        });
        Ok(done)
    }

    fn pulse_complete(&self, from: &Caller, summary: &str) -> Result<(), StageError> {
        self.put(
            from.node.as_ref(),
            PULSE_KIND,
            (PULSE_KIND, "md"),
            summary.to_owned(),
            ArtifactStatus::Approved,
        )?;
        self.record(StageSignal::PulseComplete {
            summary: summary.to_owned(),
        });
        Ok(())
    }

    fn record(&self, signal: StageSignal) {
        lock(&self.signals).push(signal);
    }

    fn extension_turns(&self) -> Option<u32> {
        self.extension_turns
    }

    fn questions<'a>(
        &'a self,
        _from: &'a Caller,
        questions: Vec<Question>,
        interaction: &'a dyn Interaction,
    ) -> BoxFuture<'a, Result<Option<Vec<Answer>>, StageError>> {
        Box::pin(async move {
            // The run's interaction pauses the run until the user answers (or answers for a
            // non-interactive run); its error is passed back as it is.
            let answers = interaction.ask(questions.clone()).await?;
            self.record(StageSignal::Questions {
                questions,
                answered: true,
            });
            Ok(Some(answers))
        })
    }

    fn signals(&self) -> Vec<StageSignal> {
        lock(&self.signals).clone()
    }
}

/// An artifact kept by [`MemorySink`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryArtifact {
    /// Its id (1, 2, … in submission order).
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its version per kind.
    pub version: u32,
    /// Its content.
    pub content: String,
    /// Whether it was approved ([`MemorySink::approve_latest`]).
    pub approved: bool,
}

#[derive(Default)]
struct MemoryState {
    artifacts: Vec<MemoryArtifact>,
    comments: Vec<ReviewComment>,
    signals: Vec<StageSignal>,
}

/// A sink that keeps everything in memory (tests): answers questions from a script or
/// records them, grants a fixed number of extension turns if told to.
#[derive(Default)]
pub struct MemorySink {
    state: Mutex<MemoryState>,
    answers: Option<Vec<String>>,
    extension_turns: Option<u32>,
}

impl MemorySink {
    /// Answers questions with `answers`, in order (the interaction is not asked).
    pub fn with_answers(mut self, answers: Vec<String>) -> Self {
        self.answers = Some(answers);
        self
    }

    /// Grants `turns` more turns to every extension request.
    pub fn with_extension_turns(mut self, turns: u32) -> Self {
        self.extension_turns = Some(turns);
        self
    }

    /// Approves the latest version of `kind`; false when there is none.
    pub fn approve_latest(&self, kind: &str) -> bool {
        let mut s = lock(&self.state);
        match s.artifacts.iter_mut().rev().find(|a| a.kind == kind) {
            Some(a) => {
                a.approved = true;
                true
            }
            None => false,
        }
    }

    /// The artifacts, in submission order.
    pub fn artifacts(&self) -> Vec<MemoryArtifact> {
        lock(&self.state).artifacts.clone()
    }

    /// The comments, in order.
    pub fn comments(&self) -> Vec<ReviewComment> {
        lock(&self.state).comments.clone()
    }

    fn put(&self, kind: &str, content: String, approved: bool) -> Submitted {
        let mut s = lock(&self.state);
        let version = 1 + s.artifacts.iter().filter(|a| a.kind == kind).count();
        let a = MemoryArtifact {
            id: i64::try_from(s.artifacts.len()).unwrap_or(i64::MAX) + 1,
            kind: kind.to_owned(),
            version: u32::try_from(version).unwrap_or(u32::MAX),
            content,
            approved,
        };
        s.artifacts.push(a.clone());
        Submitted {
            id: a.id,
            kind: a.kind,
            version: a.version,
            file: None,
        }
    }
}

impl StageSink for MemorySink {
    fn submit(&self, _from: &Caller, artifact: &Validated) -> Result<Submitted, StageError> {
        let done = self.put(artifact.kind().as_str(), artifact.content(), false);
        self.record(StageSignal::Submitted(done.clone()));
        Ok(done)
    }

    fn approved(&self, kind: ArtifactKind) -> Result<Option<String>, StageError> {
        Ok(lock(&self.state)
            .artifacts
            .iter()
            .rev()
            .find(|a| a.kind == kind.as_str() && a.approved)
            .map(|a| a.content.clone()))
    }

    fn comment(&self, _from: &Caller, comment: &ReviewComment) -> Result<usize, StageError> {
        let n = {
            let mut s = lock(&self.state);
            s.comments.push(comment.clone());
            s.comments.len()
        };
        self.record(StageSignal::Comment(comment.clone()));
        Ok(n)
    }

    fn verdict(&self, _from: &Caller, verdict: &ReviewVerdict) -> Result<Submitted, StageError> {
        let content = json!({ "verdict": verdict.verdict, "summary": verdict.summary });
        let done = self.put(REVIEW_KIND, content.to_string(), false);
        self.record(StageSignal::Verdict {
            verdict: verdict.clone(),
            review: done.clone(),
        });
        Ok(done)
    }

    fn pulse_complete(&self, _from: &Caller, summary: &str) -> Result<(), StageError> {
        self.put(PULSE_KIND, summary.to_owned(), true);
        self.record(StageSignal::PulseComplete {
            summary: summary.to_owned(),
        });
        Ok(())
    }

    fn record(&self, signal: StageSignal) {
        lock(&self.state).signals.push(signal);
    }

    fn extension_turns(&self) -> Option<u32> {
        self.extension_turns
    }

    fn questions<'a>(
        &'a self,
        _from: &'a Caller,
        questions: Vec<Question>,
        _interaction: &'a dyn Interaction,
    ) -> BoxFuture<'a, Result<Option<Vec<Answer>>, StageError>> {
        Box::pin(async move {
            let answers = self.answers.as_ref().map(|a| {
                questions
                    .iter()
                    .zip(a.iter().chain(std::iter::repeat(&String::new())))
                    .map(|(q, a)| Answer {
                        question: q.question.clone(),
                        answer: a.clone(),
                    })
                    .collect::<Vec<_>>()
            });
            self.record(StageSignal::Questions {
                questions,
                answered: answers.is_some(),
            });
            Ok(answers)
        })
    }

    fn signals(&self) -> Vec<StageSignal> {
        lock(&self.state).signals.clone()
    }
}
