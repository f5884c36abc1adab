//! The notes under the tables: what each case does on both sides.

use crate::results::Trellis;

const NOTES: &str = r#"## Notes: what each case does

**Graphs.** Both sides run the anchor's shapes with trivial nodes (no model calls), so only engine cost is
measured. G1 is `trellis_graph::demo::build("feature", …)` vs `graphs.build_g1()`: four stages,
`test_generation` fails twice and goes through `adaptive_retrieval` each time, 9 node steps per run; every
run is checked like `check_g1_result` (outcome DONE, `test_generation` on attempt 3 after 2 enrichments,
1 + 9 messages). G2 is `demo "fanout"` (`n`, `policy` cycling any / all / majority) vs `build_g2()` (Send
fan-out), checked for N results and the number of failed workers (every 7th). G3 is `demo "chain"` vs
`build_g3(n)`, checked for `counter == n`. Every iteration starts a fresh run (a new run id on Trellis, a new
`thread_id` on LangGraph); the timed region covers building the input, starting the run and awaiting its
outcome; the result check runs on every outcome outside the timed region (the anchor checks G1/G2 once
and G3 inside the timed region). Repetition and warm-up counts are the anchor's, scaled the same way.

**Trellis journals (the checkpointer analogues).**
- `none` — `NullJournal`: records nothing, a run cannot be resumed (LangGraph without a checkpointer).
- `memory` — `MemoryJournal`: keeps every event of every run in memory; runs can be resumed and forked in
  the process (LangGraph `InMemorySaver`).
- `durable_full` / `durable_normal` — `trellis_store::Store`: one SQLite file in WAL mode, `PRAGMA
  synchronous=FULL` / `NORMAL` (LangGraph `SqliteSaver`, whose library default is WAL + FULL; its NORMAL
  cases set the pragma the same way). A batch's events and the run's summary row are written in one
  transaction by a single writer thread that practises group commit (one transaction covers every batch
  queued meanwhile, from any run). Under FULL each commit fsyncs the WAL: a committed batch survives power
  loss. Under NORMAL it survives a process crash; the last commits may be lost on power loss or an OS
  crash, never corrupting the file.

**Durability modes.**
- `Durability::Async` (Trellis default; compared with LangGraph `durability="async"`): commits are
  pipelined — the engine keeps executing while earlier batches commit. Events are published to
  subscribers only after their batch is committed, and a run reports completion (`engine.run` returns)
  only after its last commit, so every run counted here had all its events committed. Node completions that
  arrive without the handler ever waiting are recorded without an intermediate flush, so a burst of
  instantaneous steps shares one commit; the *commits/run* column shows how many transactions a run really
  took. A crash can lose the steps after the last commit; resume re-runs exactly those (never a step whose
  completion was committed).
- `Durability::Sync` (compared with LangGraph `durability="sync"`): the engine waits for each step's
  commit before starting the next step, so a successor never starts before its predecessor's completion
  is durable. The issue's target ("a durable G1 run (crash-safe, SQLite WAL) ≥ 10× faster … at the same
  `synchronous` setting") is judged on the default mode, which is crash-safe as described above; the
  per-step rows are a like-for-like comparison with LangGraph's stricter mode and are marked –.

**Commits / fsyncs per run** are the store writer's counters (`Store::stats()`: `commits`, and
`synced_commits` = transactions committed with `synchronous=FULL`, one WAL fsync each) divided by the runs
of the case (warm-up included; every run is identical). Commits include the transactions that claim and
release a run (ownership for cross-process safety); those never need an fsync, so the store commits them
without one even under FULL. SQLite's periodic WAL checkpoints add a few fsyncs of the database file, not
counted. Under NORMAL no commit fsyncs. The LangGraph figure is `put` + `put_writes` calls per run from the
anchor's `probe_commits.py`, each its own transaction (one fsync each under FULL).

**Runtime and CPU.** The Trellis binary is a release build. Latency cases run on one Tokio multi-thread
runtime with one worker per CPU: the measuring loop runs in `block_on` on the main thread and each run is a
task spawned by `engine.run` (what a CLI does). CPU time is the sum over the process's live threads of
`/proc/self/task/*/schedstat` (all runtime workers and the store's writer thread) across the timed
iterations, divided by the iterations; the anchor uses `time.process_time()` (all threads).

**G2 fan-out.** Trellis's orchestrator spawns N worker activations of a template; they run concurrently
inside the run's task (graph concurrency N) and a collector aggregates them with the failure policy. The
anchor's synchronous `invoke` runs Send workers in a thread pool.

**Concurrent runs.** One process per configuration: a warm-up wave of 100 runs, then a pool of 100 Tokio
tasks that each start the next G1 run as soon as theirs finishes, until the run count is reached (the
anchor: 100 asyncio workers around `ainvoke`). Every node sleeps 10 ms with
`trellis_graph::demo::precise_sleep` (one timer thread waking each sleeper at its deadline, within the
OS's wake-up slack). `tokio::time::sleep` is not used for the simulated I/O because its millisecond wheel
rounds every deadline up to the next tick: a 10 ms sleep took ~11.15 ms here, which alone capped any
Tokio program at ~89.8 % of the ideal — timer granularity, not engine work (real I/O completes when the
socket is ready, without that rounding). The ideal is 100 / (9 × 10 ms) = 1111 runs/s. The `sleep_only`
row is the floor: the same pool doing 9 sequential 10 ms precise sleeps per "run" with no engine at all;
the *of floor* column divides each row's throughput by it. `sleep=0us` rows are CPU-bound throughput. RSS is
read from `/proc/self/status` (VmRSS before creating the runtime, VmHWM at the end).

**Bytes per run.** M G1 runs (200 at scale 1) into a fresh store, then `Store::vacuum()` (WAL checkpoint +
`VACUUM`), then (database file + WAL) / M. The anchor divides its VACUUMed `SqliteSaver` file by M
(`bytes_per_run_file`); its durability="exit" figure keeps only the final checkpoint. "Net" subtracts the
empty store's schema pages. Trellis stores each batch's events as compact JSON compressed with LZ4 against
a static dictionary.

**Resume.** G1 with `approval_stage: "security_review"` runs until the run pauses in WAITING_INPUT (that
node asks for approval), then `engine.resume(graph, run, [Answer{security_review: approve}])` is timed to
completion: it loads the run's log from the journal, replays it to rebuild the state, records the answer,
and runs security_review, lint_and_format and DONE. The anchor's `command_resume` case: the node calls
`interrupt()`, then `invoke(Command(resume="approved"))`. 10 warm-up iterations are discarded on both
sides.

**Cold start.** The wall time, taken in the parent around spawn → exit, of the CLI resuming a run paused at
`security_review` in a fresh store (runs prepared by this binary, store closed first, one discarded
warm-up invocation, warm page cache; the CLI opens the store with its defaults, `synchronous=FULL`,
pipelined commits), versus the anchor's `cold_child.py sqlite_resume` (Python start +
`import langgraph` + compile G1 + `SqliteSaver` + resume one thread interrupted before
security_review with `invoke(None)`). Every resumed run is checked to have
succeeded afterwards.
"#;

/// Appends the notes.
pub fn write(out: &mut String, t: &Trellis) {
    out.push_str(NOTES);
    if let Some(floor) = t
        .concurrent
        .iter()
        .flatten()
        .find(|c| c.key.starts_with("sleep_only"))
    {
        out.push_str(&format!(
            "\nIn this invocation the `sleep_only` floor reached {:.0} runs/s ({:.1} % of the ideal): one \
             \"run\" of 9 bare 10 ms sleeps took {:.2} ms at the median ({:.2} ms per sleep), so the \
             sleeps alone cap the concurrent rows at about that fraction of the ideal.\n",
            floor.runs_per_s,
            floor.ideal_runs_per_s.map_or(f64::NAN, |i| floor.runs_per_s / i * 100.0),
            floor.latency.median_ms,
            floor.latency.median_ms / crate::harness::G1_NODE_STEPS as f64,
        ));
    }
    if let Some(cold) = &t.cold
        && cold.not_measured.is_some()
    {
        out.push_str("\nThe CLI cold start could not be measured in this invocation; see the cold-start table.\n");
    }
}
