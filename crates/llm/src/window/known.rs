//! The windows of OpenAI's and Anthropic's models, whose APIs do not report them.

/// Model-name prefixes and the most a prompt may hold: the context window, or the input
/// limit where it is lower (GPT-5: a 400,000-token window of which 128,000 are reserved for
/// output, so its API refuses prompts over 272,000). From OpenAI's and Anthropic's model
/// pages, 2026-11; the longest matching prefix wins, so a newer model of a family gets its
/// family's window. Claude Sonnet 4/4.5 take 1M tokens only behind a beta header Trellis
/// does not send.
const KNOWN: &[(&str, u32)] = &[
    // OpenAI
    ("gpt-5", 272_000),
    ("gpt-5-chat", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-3.5-turbo-instruct", 4_096),
    ("o1", 200_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    // Anthropic: every Claude since Claude 3.
    ("claude-", 200_000),
    ("claude-2.0", 100_000),
    ("claude-instant", 100_000),
];

/// The window of an OpenAI or Anthropic model by name (a routing prefix such as
/// `anthropic/` is ignored), when the table has its family.
pub fn known_window(model: &str) -> Option<u32> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    KNOWN
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, tokens)| *tokens)
}

#[cfg(test)]
mod tests {
    use super::known_window;

    #[test]
    fn the_longest_prefix_wins() {
        assert_eq!(known_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(known_window("gpt-4-0613"), Some(8_192));
        assert_eq!(known_window("gpt-4.1-nano"), Some(1_047_576));
        assert_eq!(known_window("gpt-5-mini"), Some(272_000));
        assert_eq!(known_window("gpt-5-chat-latest"), Some(128_000));
        assert_eq!(known_window("o1-mini"), Some(128_000));
        assert_eq!(known_window("o3-mini"), Some(200_000));
        assert_eq!(known_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(known_window("claude-instant-1.2"), Some(100_000));
        assert_eq!(known_window("anthropic/claude-opus-4.1"), Some(200_000));
    }

    #[test]
    fn other_models_are_not_guessed() {
        assert_eq!(known_window("qwen2.5-coder:7b"), None);
        assert_eq!(known_window("mock-model"), None);
        assert_eq!(known_window(""), None);
    }
}
