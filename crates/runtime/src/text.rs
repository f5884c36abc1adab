//! Text helpers shared across the runtime: clipping long output (agent reports, test
//! output, failures) to a byte budget for results and prompts.

/// Cuts `text` to `max` bytes on a char boundary.
pub(crate) fn clip(text: &str, max: usize) -> String {
    trellis_agents::prompt::truncate(text, max)
}
