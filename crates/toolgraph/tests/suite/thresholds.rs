//! The execution modes and the adaptive speculation threshold.

use trellis_toolgraph::{Mode, NewSpeculation, SpeculationOutcome, Thresholds};

use super::fixtures::store;

#[test]
fn modes_follow_the_thresholds_and_serialise_as_in_the_seed() {
    let t = Thresholds::new();
    assert_eq!(t.mode(0.69), Mode::Explicit);
    assert_eq!(t.mode(0.70), Mode::Suggestion);
    assert_eq!(t.mode(0.91), Mode::Suggestion);
    assert_eq!(t.mode(0.92), Mode::Speculative);
    let names: Vec<String> = [Mode::Explicit, Mode::Suggestion, Mode::Speculative]
        .iter()
        .map(|m| serde_json::to_string(m).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "\"explicit_required\"",
            "\"suggestion\"",
            "\"speculative_execution\""
        ]
    );
}

#[test]
fn all_used_outcomes_lower_the_threshold_after_fifty_down_to_the_floor() {
    let mut t = Thresholds::new();
    for _ in 0..49 {
        t.record(true);
    }
    assert_eq!(t.speculate(), 0.92, "no adaptation before 50 samples");
    t.record(true);
    assert!((t.speculate() - 0.91).abs() < 1e-9);
    for _ in 0..50 {
        t.record(true);
    }
    assert_eq!(t.speculate(), 0.85);
    let r = t.report();
    assert_eq!((r.acceptance, r.waste, r.samples), (1.0, 0.0, 100));
    assert_eq!(t.mode(0.86), Mode::Speculative);
}

#[test]
fn waste_raises_the_threshold_up_to_the_ceiling() {
    let mut t = Thresholds::new();
    // 80% used, 20% wasted.
    for i in 0..60 {
        t.record(i % 5 != 0);
    }
    let r = t.report();
    assert!((r.waste - 0.2).abs() < 1e-9, "{r:?}");
    // Adapted on each of the last 11 outcomes: 0.92 + 0.07 hits the ceiling.
    assert_eq!(t.speculate(), 0.99);
    assert_eq!(t.mode(0.95), Mode::Suggestion);

    // 96% used (4% wasted) is acceptance enough to lower it.
    let mut t = Thresholds::new();
    for i in 0..100 {
        t.record(i % 25 != 0);
    }
    let r = t.report();
    assert_eq!((r.acceptance, r.samples), (0.96, 100));
    assert!(
        t.speculate() < 0.92,
        "lowered while acceptance > 95%: {r:?}"
    );
}

#[test]
fn persisted_outcomes_rebuild_the_same_thresholds() {
    let (_dir, store) = store();
    let mut live = Thresholds::new();
    for i in 0..70 {
        let outcome = if i % 3 == 0 {
            SpeculationOutcome::Wasted
        } else {
            SpeculationOutcome::Used
        };
        live.record_speculation(
            &store,
            NewSpeculation {
                context: format!("intent {i}"),
                tools: vec!["read_file".into()],
                confidence: 0.93,
                outcome,
            },
        )
        .unwrap();
    }
    assert!(live.speculate() > 0.92);
    let loaded = Thresholds::load(&store).unwrap();
    assert_eq!(loaded, live);
    assert_eq!(loaded.report().samples, 70);
}
