//! A workflow's own `hooks:` (docs/workflows.md, "Format"): the keys of a `[[hooks]]`
//! entry, checked where they are written, carried into the plan with where each was
//! declared.

use trellis_protocol::{HookEvent, Preset};
use trellis_workflow::{Decisions, Error, Plan, Problem, assemble, load_str};

const STAGES: &str = "\
stages:
  - stage_id: 1
    name: build
    parallel_agents:
      - agent: code_agent
";

fn with_hooks(hooks: &str) -> String {
    format!("metadata:\n  name: guarded\nhooks:\n{hooks}{STAGES}")
}

fn problems(text: &str) -> Vec<Problem> {
    match load_str("my_flow.yaml", text, None) {
        Err(Error::Invalid { problems, .. }) => problems.0,
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn hooks_load_with_their_source_and_reach_the_plan() {
    let text = with_hooks(
        "  - event: before_tool
    name: no-migrations
    tools: [write_file, \"github__*\"]
    command: scripts/guard.sh
    timeout_secs: 5
  - event: run_end
    preset: workspace-write-network
    command: |
      curl -fsS --data @- \"$CHAT_WEBHOOK_URL\"
",
    );
    let w = load_str("my_flow.yaml", &text, None).unwrap();
    assert_eq!(w.hooks.len(), 2);
    let guard = &w.hooks[0];
    assert_eq!(guard.source, "workflow my_flow.yaml, hooks[0]");
    assert_eq!(guard.hook.event, HookEvent::BeforeTool);
    assert_eq!(guard.hook.label(), "no-migrations");
    assert_eq!(guard.hook.tools, ["write_file", "github__*"]);
    assert_eq!(guard.hook.timeout_secs, 5);
    assert!(guard.hook.workflows.is_empty());
    let end = &w.hooks[1];
    assert_eq!(end.source, "workflow my_flow.yaml, hooks[1]");
    assert_eq!(end.hook.event, HookEvent::RunEnd);
    assert_eq!(end.hook.timeout_secs, 30);
    assert_eq!(end.hook.preset, Some(Preset::WorkspaceWriteNetwork));
    assert!(end.hook.command.starts_with("curl -fsS"));

    // The plan carries them, and a stored plan keeps them.
    let plan = assemble(&w, &Decisions::default(), "guard the migrations").unwrap();
    assert_eq!(plan.hooks, w.hooks);
    let stored: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(stored, plan);

    // A workflow without hooks: a plan stored before the key existed still reads.
    let bare = load_str(
        "bare.yaml",
        &format!("metadata:\n  name: bare\n{STAGES}"),
        None,
    )
    .unwrap();
    let plan = assemble(&bare, &Decisions::default(), "x").unwrap();
    let json = serde_json::to_value(&plan).unwrap();
    assert!(json.get("hooks").is_none(), "{json}");
}

#[test]
fn bad_hooks_are_named_with_file_line_and_fix() {
    let text = with_hooks(
        "  - event: befor_tool
    command: scripts/guard.sh
  - event: after_tool
    comand: ruff format .
  - event: run_end
    command: \"  \"
  - event: needs_input
    command: notify-send asked
    workflows: [feature_with_iterative_testing]
  - event: stage_failed
    command: true
    preset: read_only
    timeout_secs: soon
",
    );
    let p = problems(&text);
    let at = |line: usize| {
        p.iter()
            .find(|p| p.line == line)
            .cloned()
            .unwrap_or_else(|| panic!("no problem at line {line}: {p:#?}"))
    };
    assert!(p.iter().all(|p| p.file == "my_flow.yaml"), "{p:#?}");

    let event = at(4);
    assert!(
        event
            .message
            .contains("unknown hook event `befor_tool` in hooks[0].event"),
        "{event:?}"
    );
    assert!(
        event
            .fix
            .as_deref()
            .unwrap()
            .starts_with("did you mean `before_tool`?"),
        "{event:?}"
    );

    let key = at(7);
    assert!(
        key.message.contains("unknown key `comand` in hooks[1]"),
        "{key:?}"
    );
    assert_eq!(key.fix.as_deref(), Some("did you mean `command`?"));
    // The entry lacks its command, said at the entry.
    let missing = p
        .iter()
        .find(|p| p.message.contains("hooks[1] has no `command`"))
        .unwrap_or_else(|| panic!("{p:#?}"));
    assert_eq!(missing.line, 6);

    let empty = at(9);
    assert!(
        empty.message.contains("hooks[2].command is empty"),
        "{empty:?}"
    );
    assert!(
        empty.fix.as_deref().unwrap().contains("command:"),
        "{empty:?}"
    );

    let filter = at(12);
    assert!(
        filter.message.contains("hooks[3].workflows")
            && filter.message.contains("run only in its own runs"),
        "{filter:?}"
    );
    assert!(
        filter
            .fix
            .as_deref()
            .unwrap()
            .contains("remove `workflows:`"),
        "{filter:?}"
    );

    let preset = at(15);
    assert!(
        preset
            .message
            .contains("unknown sandbox preset `read_only` in hooks[4].preset"),
        "{preset:?}"
    );
    assert!(
        preset
            .fix
            .as_deref()
            .unwrap()
            .starts_with("did you mean `read-only`?"),
        "{preset:?}"
    );
    let timeout = at(16);
    assert!(
        timeout
            .message
            .contains("hooks[4].timeout_secs must be a whole number"),
        "{timeout:?}"
    );

    // The error names the file and line of each, with its fix.
    let shown = load_str("my_flow.yaml", &text, None)
        .unwrap_err()
        .to_string();
    assert!(
        shown.contains("my_flow.yaml:4:12: unknown hook event `befor_tool`"),
        "{shown}"
    );
    assert!(shown.contains("fix: did you mean `command`?"), "{shown}");

    // Not a list.
    let p = problems(&format!(
        "metadata:\n  name: guarded\nhooks: scripts/guard.sh\n{STAGES}"
    ));
    assert_eq!((p[0].line, p[0].column), (3, 8), "{p:#?}");
    assert!(p[0].message.contains("`hooks` must be a list"), "{p:#?}");
}
