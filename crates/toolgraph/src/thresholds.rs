//! The execution modes and the adaptive speculation threshold (docs/tools.md, "Speculative
//! execution").
//!
//! A suggestion below [`EXPLICIT_BELOW`] (0.70) needs an explicit workflow; from there to
//! the speculation threshold it is offered as a suggestion; at or above it, it is executed
//! speculatively. The speculation threshold starts conservative at 0.92 and learns from the
//! last [`WINDOW`] speculations' outcomes once there are [`MIN_SAMPLES`]: each new outcome
//! lowers it by [`STEP`] while more than 95% of them were used and under 10% wasted, and
//! raises it by a step while 10% or more were wasted; it stays within `[0.85, 0.99]`.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use trellis_protocol::records::SpeculationReport;
use trellis_store::{NewSpeculation, SpeculationOutcome, ToolGraphStore};

use crate::error::Result;

/// Below this confidence a workflow must be given explicitly.
pub const EXPLICIT_BELOW: f64 = 0.70;
/// The speculation threshold before anything was learned.
pub const START: f64 = 0.92;
/// The lowest the speculation threshold goes.
pub const FLOOR: f64 = 0.85;
/// The highest the speculation threshold goes.
pub const CEILING: f64 = 0.99;
/// How far one adaptation moves the threshold.
pub const STEP: f64 = 0.01;
/// Outcomes remembered.
pub const WINDOW: usize = 100;
/// Outcomes needed before the threshold adapts.
pub const MIN_SAMPLES: usize = 50;
/// Outcomes replayed from the store by [`Thresholds::load`].
const REPLAYED: usize = 1_000;

/// What to do with a suggestion of a given confidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// No trustworthy pattern: the model must give the workflow.
    #[serde(rename = "explicit_required")]
    Explicit,
    /// A good pattern: suggest the DAG, let the model decide.
    #[serde(rename = "suggestion")]
    Suggestion,
    /// A strong pattern: execute it now, have the results ready.
    #[serde(rename = "speculative_execution")]
    Speculative,
}

/// The mode thresholds, with the speculation one adapting to outcomes.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    speculate: f64,
    window: VecDeque<bool>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            speculate: START,
            window: VecDeque::with_capacity(WINDOW),
        }
    }
}

impl Thresholds {
    /// Fresh thresholds (speculation at 0.92, nothing learned).
    pub fn new() -> Self {
        Self::default()
    }

    /// The thresholds the stored speculation outcomes lead to: the last 1,000 are replayed
    /// from the start value, in order (older ones no longer matter much: ten windows later
    /// the threshold has had ample room to move).
    pub fn load(store: &dyn ToolGraphStore) -> Result<Self> {
        let mut t = Self::default();
        for s in store.speculations(REPLAYED)? {
            t.record(s.outcome == SpeculationOutcome::Used);
        }
        Ok(t)
    }

    /// The current speculation threshold.
    pub fn speculate(&self) -> f64 {
        self.speculate
    }

    /// The mode for a suggestion of `confidence`.
    pub fn mode(&self, confidence: f64) -> Mode {
        if confidence >= self.speculate {
            Mode::Speculative
        } else if confidence >= EXPLICIT_BELOW {
            Mode::Suggestion
        } else {
            Mode::Explicit
        }
    }

    /// Learns one speculation's outcome: whether its results were used.
    pub fn record(&mut self, used: bool) {
        if self.window.len() == WINDOW {
            self.window.pop_front();
        }
        self.window.push_back(used);
        if self.window.len() < MIN_SAMPLES {
            return;
        }
        let r = self.report();
        if r.acceptance > 0.95 && r.waste < 0.10 {
            self.speculate = (self.speculate - STEP).max(FLOOR);
        } else if r.waste >= 0.10 {
            self.speculate = (self.speculate + STEP).min(CEILING);
        }
        // Keep the value on the step grid so repeated steps do not drift.
        self.speculate = (self.speculate * 1e6).round() / 1e6;
    }

    /// Stores a speculation's outcome and learns it.
    pub fn record_speculation(
        &mut self,
        store: &dyn ToolGraphStore,
        speculation: NewSpeculation,
    ) -> Result<()> {
        let used = speculation.outcome == SpeculationOutcome::Used;
        store.record_speculation(speculation)?;
        self.record(used);
        Ok(())
    }

    /// Acceptance, waste, threshold and sample count.
    pub fn report(&self) -> SpeculationReport {
        let samples = self.window.len();
        let used = self.window.iter().filter(|u| **u).count();
        let acceptance = if samples == 0 {
            0.0
        } else {
            used as f64 / samples as f64
        };
        SpeculationReport {
            acceptance,
            waste: if samples == 0 { 0.0 } else { 1.0 - acceptance },
            threshold: self.speculate,
            samples,
        }
    }
}
