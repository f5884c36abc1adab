//! Resume: G1 with an approval interrupt at `security_review` runs until it pauses
//! (WAITING_INPUT); then `engine.resume(graph, run, [Answer security_review = approve])` is
//! timed to completion — the run's log is loaded from the journal and replayed, and
//! security_review, lint_and_format and DONE execute. The anchor's `bench_resume.py`
//! "command_resume" case (`interrupt()` + `Command(resume=...)`), 300 runs after 10 warm-up.

use std::path::Path;
use std::time::Instant;

use anyhow::ensure;
use trellis_graph::{Durability, demo};
use trellis_protocol::{Answer, Command, RunStatus};
use trellis_store::Synchronous;

use crate::harness::{Backend, Setup, check_g1, g1_graph};
use crate::results::Resume;
use crate::stats::{Stats, reps};

const WARMUP: usize = 10;

/// The answer that lets the paused run finish.
pub fn approve() -> Command {
    Command::Answer {
        node: "security_review".into(),
        answer: Answer::approve(),
    }
}

/// Measures resume with the in-memory journal and the SQLite store (FULL, pipelined).
pub async fn run(scale: f64, dir: &Path) -> anyhow::Result<Vec<Resume>> {
    let n = reps(300, scale);
    let graph = g1_graph(0, Some("security_review"))?;
    let mut out = Vec::new();
    for backend in [Backend::Memory, Backend::Durable(Synchronous::Full)] {
        let setup = Setup::new(
            backend,
            Durability::Async,
            dir,
            &format!("resume_{}", backend.key()),
        )?;
        let (mut first, mut resume) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n + WARMUP {
            let t0 = Instant::now();
            let paused = setup
                .engine
                .run(graph.clone(), demo::feature_input())
                .await?;
            let t1 = Instant::now();
            ensure!(
                paused.status == RunStatus::WaitingInput,
                "run did not pause: {:?}",
                paused.status
            );
            let done = setup
                .engine
                .resume(graph.clone(), &paused.run, vec![approve()])?
                .wait()
                .await?;
            let t2 = Instant::now();
            check_g1(&done)?;
            if i >= WARMUP {
                first.push((t1 - t0).as_secs_f64());
                resume.push((t2 - t1).as_secs_f64());
            }
        }
        let r = Resume {
            key: backend.key().to_owned(),
            run_until_interrupt: Stats::of(&first, None),
            resume_to_end: Stats::of(&resume, None),
        };
        crate::progress(&format!(
            "resume {:<14} run_until_interrupt median {:.3} ms p90 {:.3} ms | resume_to_end median {:.3} ms p90 {:.3} ms (n={})",
            r.key,
            r.run_until_interrupt.median_ms,
            r.run_until_interrupt.p90_ms,
            r.resume_to_end.median_ms,
            r.resume_to_end.p90_ms,
            n
        ));
        out.push(r);
    }
    Ok(out)
}
