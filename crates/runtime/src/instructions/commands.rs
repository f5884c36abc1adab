//! The test command a project's instructions name: "Run `make test` before committing", or
//! the first command of a code block under a heading about tests. Only commands that start
//! with a known build or test tool are taken (a prose snippet in backticks is not a
//! command).

/// The programs a test command may start with.
const RUNNERS: &[&str] = &[
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "deno",
    "npx",
    "make",
    "just",
    "pytest",
    "python",
    "python3",
    "uv",
    "poetry",
    "pdm",
    "pixi",
    "hatch",
    "tox",
    "nox",
    "go",
    "mvn",
    "gradle",
    "./gradlew",
    "bazel",
    "ctest",
    "dotnet",
    "mix",
    "bundle",
    "rake",
    "rspec",
    "phpunit",
    "composer",
    "sbt",
    "zig",
    "nix",
    "./test.sh",
    "./run_tests.sh",
    "scripts/test",
];

/// Whether `text` is about tests (`test`, `tests`, `testing`).
fn about_tests(text: &str) -> bool {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| matches!(w, "test" | "tests" | "testing"))
}

/// `candidate` as a command when it starts with a known runner.
fn command(candidate: &str) -> Option<String> {
    let c = candidate.trim().trim_start_matches("$ ").trim();
    let first = c.split_whitespace().next()?;
    (RUNNERS.contains(&first) && !c.contains('\n')).then(|| c.to_owned())
}

/// The test command `text` (an instructions file) names, if any: the first inline command
/// of a line that mentions tests itself (`make test`), else the first one right after prose
/// about tests ("test with `cargo nextest run`"), else the only one of a line under a heading
/// about tests; failing those, the first command line of a fenced block under such a
/// heading.
pub fn test_command(text: &str) -> Option<String> {
    let mut heading = String::new();
    let mut fence: Option<bool> = None; // Some(under a test heading) while in a block
    let mut from_block: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = match fence {
                Some(_) => None,
                None => Some(about_tests(&heading)),
            };
            continue;
        }
        if let Some(in_test_block) = fence {
            if in_test_block
                && from_block.is_none()
                && !t.starts_with('#')
                && let Some(c) = command(t)
            {
                from_block = Some(c);
            }
            continue;
        }
        if t.starts_with('#') {
            heading = t.to_owned();
            continue;
        }
        // Segments alternate prose and code; each command with the prose just before it.
        let segments: Vec<&str> = t.split('`').collect();
        let commands: Vec<(String, bool)> = segments
            .iter()
            .enumerate()
            .skip(1)
            .step_by(2)
            .filter_map(|(i, s)| command(s).map(|c| (c, about_tests(segments[i - 1]))))
            .collect();
        let under_test_heading = about_tests(&heading);
        if let Some((c, _)) = commands
            .iter()
            .find(|(c, _)| about_tests(c))
            .or(commands.iter().find(|(_, after_test)| *after_test))
            .or(commands
                .first()
                .filter(|_| commands.len() == 1 && under_test_heading))
        {
            return Some(c.clone());
        }
    }
    from_block
}

#[cfg(test)]
mod tests {
    use super::test_command;

    #[test]
    fn commands_are_taken_from_lines_and_blocks_about_tests_only() {
        assert_eq!(
            test_command("# Rules\nUse `rustfmt`.\nRun `make test` before committing.\n"),
            Some("make test".into())
        );
        // The build command is not the test command.
        assert_eq!(
            test_command("Build with `cargo build`, test with `cargo nextest run`.\n"),
            Some("cargo nextest run".into())
        );
        assert_eq!(
            test_command("## Testing\n\n```sh\n# all of them\n$ pytest -q tests\n```\n"),
            Some("pytest -q tests".into())
        );
        // Prose in backticks, a block under another heading, nothing about tests: none.
        assert_eq!(test_command("Tests live in `tests/`.\n"), None);
        assert_eq!(test_command("## Build\n```\nmake\n```\n"), None);
        assert_eq!(test_command("Run `npm start` to serve.\n"), None);
    }
}
