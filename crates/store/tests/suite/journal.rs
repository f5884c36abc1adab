//! The run journal under concurrent appends, on both backends: what another store reads is
//! always whole batches; many threads' batches group into few commits; any split of a run
//! into batches loads back whole and in ranges (property).

use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use trellis_graph::{Batch, Journal};
use trellis_protocol::{Event, RunId, RunStatus};
use trellis_store::prelude::*;

use super::fixtures::{batch, block_on, realistic_run};
use super::run_support::Backdoor;

two!(another_store_reads_whole_batches_only);
fn another_store_reads_whole_batches_only<S: RunStore + Journal>(writer: &S, reader: &S) {
    const RUNS: usize = 3;
    let runs: Vec<(RunId, Vec<Batch>)> = (0..RUNS)
        .map(|_| {
            let run = RunId::new();
            let batches = realistic_run(&run);
            (run, batches)
        })
        .collect();
    // The event counts a load may see: the ends of the batches.
    let ends: Vec<Vec<usize>> = runs
        .iter()
        .map(|(_, batches)| {
            let mut end = 0;
            let mut ends = vec![0];
            for b in batches {
                end += b.events.len();
                ends.push(end);
            }
            ends
        })
        .collect();
    std::thread::scope(|scope| {
        for (_, batches) in &runs {
            scope.spawn(move || {
                let commits: Vec<_> = batches.iter().map(|b| writer.append(b.clone())).collect();
                for c in commits {
                    block_on(c).unwrap();
                }
            });
        }
        let mut done = false;
        while !done {
            done = true;
            for ((run, _), ends) in runs.iter().zip(&ends) {
                let seen = reader.load(run).map(|e| e.len()).unwrap_or(0);
                assert!(
                    ends.contains(&seen),
                    "{seen} events of {run}: not whole batches"
                );
                done &= seen == *ends.last().unwrap();
            }
        }
    });
    for (run, batches) in &runs {
        let all: Vec<Event> = batches
            .iter()
            .flat_map(|b| b.events.iter().cloned())
            .collect();
        assert_eq!(reader.load(run).unwrap(), all);
        let rec = reader.get_run(run.as_str()).unwrap();
        assert_eq!(rec.summary.status, RunStatus::Succeeded);
    }
}

/// Appends `BATCHES` batches to each of `RUNS` runs, one thread per run; `waited`: each
/// thread waits for a batch's commit before the next (the engine's `Durability::Sync`), else
/// it sends them all first (`Durability::Async`). Answers the commits it took.
pub fn append_concurrently<S: Backdoor + ?Sized>(store: &S, waited: bool) -> u64 {
    const RUNS: usize = 8;
    const BATCHES: u64 = 50;
    let before = store.journal_counters();
    let start = Instant::now();
    let runs: Vec<RunId> = (0..RUNS).map(|_| RunId::new()).collect();
    std::thread::scope(|scope| {
        for run in &runs {
            scope.spawn(move || {
                let mut commits = Vec::new();
                for b in 0..BATCHES {
                    let commit = store.append(batch(run, b * 2 + 1, 2));
                    if waited {
                        block_on(commit).unwrap();
                    } else {
                        commits.push(commit);
                    }
                }
                for c in commits {
                    block_on(c).unwrap();
                }
            });
        }
    });
    let elapsed = start.elapsed();
    for run in &runs {
        let seqs: Vec<u64> = store.load(run).unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=BATCHES * 2).collect::<Vec<_>>(), "run {run}");
    }
    let after = store.journal_counters();
    let (commits, batches) = (
        after.commits - before.commits,
        after.batches - before.batches,
    );
    assert_eq!(batches, RUNS as u64 * BATCHES);
    assert!(commits >= 1 && commits <= batches, "{after:?}");
    eprintln!(
        "{RUNS} runs x {BATCHES} batches, {}: {batches} batches in {commits} commits \
         ({:.3} commits per batch, largest group {}), {elapsed:.2?}",
        if waited {
            "each commit waited for"
        } else {
            "pipelined"
        },
        commits as f64 / batches as f64,
        after.largest_group,
    );
    commits
}

both!(concurrent_appends_share_commits);
fn concurrent_appends_share_commits<S: Backdoor + ?Sized>(store: &S) {
    append_concurrently(store, true);
    append_concurrently(store, false);
}

/// A run's batches: sizes (0 = a summary-only batch), and a range to read back.
fn split() -> impl Strategy<Value = (Vec<u64>, u64, u64)> {
    (
        prop::collection::vec(prop_oneof![1 => Just(0u64), 6 => 1u64..6], 1..12),
        0u64..30,
        0u64..30,
    )
}

both!(any_split_loads_back_whole_and_in_ranges);
fn any_split_loads_back_whole_and_in_ranges<S: RunStore + Journal + ?Sized>(store: &S) {
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(split(), split()), |(a, b)| {
            // Two runs, their batches interleaved and sent before any is waited for.
            let runs = [(RunId::new(), a), (RunId::new(), b)];
            let mut next = [1u64, 1u64];
            let mut commits = Vec::new();
            let longest = runs.iter().map(|(_, (s, _, _))| s.len()).max().unwrap_or(0);
            for i in 0..longest {
                for (r, (run, (sizes, _, _))) in runs.iter().enumerate() {
                    if let Some(&n) = sizes.get(i) {
                        let mut b = batch(run, next[r], n.max(1));
                        if n == 0 {
                            b.events = Default::default();
                            b.summary.last_seq = next[r] - 1;
                        }
                        next[r] += n;
                        commits.push(store.append(b));
                    }
                }
            }
            for c in commits {
                block_on(c).unwrap();
            }
            for (r, (run, (_, from, to))) in runs.iter().enumerate() {
                let last = next[r] - 1;
                let seqs: Vec<u64> = store.load(run).unwrap().iter().map(|e| e.seq).collect();
                prop_assert_eq!(&seqs, &(1..=last).collect::<Vec<_>>());
                let (from, to) = (*from.min(to), *from.max(to));
                let range: Vec<u64> = store
                    .events(run, from, Some(to))
                    .unwrap()
                    .iter()
                    .map(|e| e.seq)
                    .collect();
                let want: Vec<u64> = seqs
                    .iter()
                    .copied()
                    .filter(|s| (from..=to).contains(s))
                    .collect();
                prop_assert_eq!(range, want);
                prop_assert_eq!(store.get_run(run.as_str()).unwrap().summary.last_seq, last);
            }
            Ok(())
        })
        .unwrap();
}
