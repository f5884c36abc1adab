#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::*;

fn err(markdown: &str) -> String {
    parse_tickets(markdown).unwrap_err().to_string()
}

const EXAMPLE: &str = "# Tickets

Overview text that is not a ticket.

## T1: Parse the configuration file
Depends on: none
Files: src/config.rs, `src/lib.rs`

Read `app.toml` into a `Config` struct.

### Acceptance criteria
- a valid file loads
- an unknown key fails
  with its line number

## T2: Use the configuration
Depends on: T1

### Notes
Keep the old flag working.

### Acceptance criteria
1. the server reads its port from `Config`
";

#[test]
fn parses_the_documented_example() {
    let t = parse_tickets(EXAMPLE).unwrap();
    assert_eq!(t.tickets.len(), 2);
    let t1 = &t.tickets[0];
    assert_eq!(t1.id, "T1");
    assert_eq!(t1.title, "Parse the configuration file");
    assert!(t1.depends_on.is_empty());
    assert_eq!(t1.files, vec!["src/config.rs", "src/lib.rs"]);
    assert_eq!(t1.description, "Read `app.toml` into a `Config` struct.");
    assert_eq!(
        t1.acceptance_criteria,
        vec![
            "a valid file loads",
            "an unknown key fails with its line number"
        ]
    );
    assert_eq!(t1.line, 5);
    let t2 = t.get("T2").unwrap();
    assert_eq!(t2.depends_on, vec!["T1"]);
    assert_eq!(t2.description, "### Notes\nKeep the old flag working.");
    assert_eq!(
        t2.acceptance_criteria,
        vec!["the server reads its port from `Config`"]
    );
}

#[test]
fn accepts_the_usual_variations() {
    /// (markdown, id, title, depends_on, criteria)
    type Case<'a> = (&'a str, &'a str, &'a str, &'a [&'a str], &'a [&'a str]);
    let table: [Case<'_>; 6] = [
        (
            "## T1 - Title\n### Acceptance Criteria:\n* one\n",
            "T1",
            "Title",
            &[],
            &["one"],
        ),
        (
            "## Ticket T-2: Title here\n- **Depends on:** T1 and T3\n### Acceptance criteria\n- [ ] a\n- [x] b\n",
            "T-2",
            "Title here",
            &["T1", "T3"],
            &["a", "b"],
        ),
        (
            "## **T3**: Bold\nDependencies: `T1`; T2, T1\n### Acceptance\n+ c\n",
            "T3",
            "Bold",
            &["T1", "T2"],
            &["c"],
        ),
        (
            "## 4: Numeric\nDepends on: -\n### acceptance criteria\n2) d\n",
            "4",
            "Numeric",
            &[],
            &["d"],
        ),
        (
            "## T5: Fenced\n```\n## not a ticket\nDepends on: T9\n```\n### Acceptance criteria\n- e\n",
            "T5",
            "Fenced",
            &[],
            &["e"],
        ),
        (
            "## T6: Criteria first\n### Acceptance criteria\n- f\n\n- g\nDepends on: T0\n",
            "T6",
            "Criteria first",
            &["T0"],
            &["f", "g"],
        ),
    ];
    for (md, id, title, deps, criteria) in table {
        // Define the dependencies so the file is valid.
        let mut text = md.to_owned();
        for d in deps {
            text.push_str(&format!("\n## {d}: dep\n### Acceptance criteria\n- ok\n"));
        }
        let tickets = parse_tickets(&text).unwrap_or_else(|e| panic!("{md}: {e}"));
        let t = &tickets.tickets[0];
        assert_eq!(t.id, id, "{md}");
        assert_eq!(t.title, title, "{md}");
        assert_eq!(t.depends_on, deps, "{md}");
        assert_eq!(t.acceptance_criteria, criteria, "{md}");
    }
}

#[test]
fn error_messages() {
    let table = [
        (
            "# Tickets\nnothing here\n",
            "tickets.md: has no tickets; start each ticket with a `## T1: <title>` heading, \
             followed by a `Depends on:` line and a `### Acceptance criteria` list",
        ),
        (
            "## T1: a\n### Acceptance criteria\n- x\n## T2: b\n### Acceptance criteria\n- y\n\
             ## T3: c\nDepends on: T1, T9\n### Acceptance criteria\n- z\n",
            "tickets.md line 8: ticket T3 depends on T9, which is not defined; defined: T1, T2, T3",
        ),
        (
            "## T1: a\n### Acceptance criteria\n- x\n## T1: b\n### Acceptance criteria\n- y\n",
            "tickets.md line 4: ticket id T1 is used twice (first at line 1); give each ticket \
             its own id",
        ),
        (
            "## T1: a\nDepends on: T1\n### Acceptance criteria\n- x\n",
            "tickets.md line 2: ticket T1 depends on itself; remove T1 from its `Depends on:`",
        ),
        (
            "## T1: a\nSome text.\n",
            "tickets.md line 1: ticket T1 has no acceptance criteria; add a `### Acceptance \
             criteria` section with `- ` bullets",
        ),
        (
            "## T1: a\n### Acceptance criteria\nMust work.\n",
            "tickets.md line 1: ticket T1 has no acceptance criteria: the section at line 2 has \
             no `- ` bullets",
        ),
        (
            "## T1\n### Acceptance criteria\n- x\n",
            "tickets.md line 1: ticket T1 has no title; write `## T1: <title>`",
        ),
        (
            "## Overview of the work\n## T1: a\n### Acceptance criteria\n- x\n",
            "tickets.md line 1: `## Overview of the work` is not a ticket heading; every `## ` \
             heading starts a ticket, written `## T1: <title>` (put other text before the first \
             ticket or inside one)",
        ),
        (
            "## T1: a\nDepends on: T3\n### Acceptance criteria\n- x\n\
             ## T2: b\nDepends on: T1\n### Acceptance criteria\n- y\n\
             ## T3: c\nDepends on: T2\n### Acceptance criteria\n- z\n",
            "tickets.md line 1: tickets T1 → T3 → T2 → T1 depend on each other in a cycle (T1 \
             depends on T3); remove one of these dependencies",
        ),
    ];
    for (md, want) in table {
        assert_eq!(err(md), want, "{md}");
    }
}

#[test]
fn two_cycles_are_both_reported() {
    let md = "## A: a\nDepends on: B\n### Acceptance criteria\n- x\n\
              ## B: b\nDepends on: A\n### Acceptance criteria\n- x\n\
              ## C: c\nDepends on: D\n### Acceptance criteria\n- x\n\
              ## D: d\nDepends on: C\n### Acceptance criteria\n- x\n";
    let e = parse_tickets(md).unwrap_err();
    assert_eq!(e.problems().len(), 2, "{e}");
    assert!(e.to_string().contains("A → B → A"), "{e}");
    assert!(e.to_string().contains("C → D → C"), "{e}");
}

#[test]
fn readiness_follows_dependencies() {
    let md = "## T1: a\n### Acceptance criteria\n- x\n\
              ## T2: b\nDepends on: T1\n### Acceptance criteria\n- x\n\
              ## T3: c\n### Acceptance criteria\n- x\n\
              ## T4: d\nDepends on: T2, T3\n### Acceptance criteria\n- x\n";
    let t = parse_tickets(md).unwrap();
    let done = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<HashSet<_>>();
    assert_eq!(t.ready(&done(&[])), vec!["T1", "T3"]);
    assert_eq!(t.ready(&done(&["T1"])), vec!["T2", "T3"]);
    assert_eq!(t.ready(&done(&["T1", "T2"])), vec!["T3"]);
    assert_eq!(t.ready(&done(&["T1", "T2", "T3"])), vec!["T4"]);
    assert!(t.ready(&done(&["T1", "T2", "T3", "T4"])).is_empty());
}

/// Random valid ticket sets: unique ids, dependencies on earlier tickets only.
fn ticket_sets() -> impl Strategy<Value = Vec<Ticket>> {
    let ticket = (
        "[A-Z][A-Za-z0-9_-]{0,4}",
        "[A-Za-z][A-Za-z0-9 ]{0,20}[A-Za-z0-9]",
        prop::collection::vec("[a-z][a-z ]{0,30}[a-z]", 0..3),
        prop::collection::vec("[A-Za-z][A-Za-z0-9 .`]{0,30}[a-z]", 1..4),
        prop::collection::vec("[a-z]{1,8}/[a-z]{1,8}\\.rs", 0..3),
        prop::collection::vec(any::<prop::sample::Index>(), 0..3),
    );
    prop::collection::vec(ticket, 1..8).prop_map(|raw| {
        let mut tickets: Vec<Ticket> = Vec::new();
        for (i, (id, title, desc, criteria, files, deps)) in raw.into_iter().enumerate() {
            let id = format!("{id}{i}");
            let mut depends_on: Vec<String> = Vec::new();
            if i > 0 {
                for d in deps {
                    let dep = tickets[d.index(i)].id.clone();
                    if !depends_on.contains(&dep) {
                        depends_on.push(dep);
                    }
                }
            }
            tickets.push(Ticket {
                id,
                title,
                depends_on,
                acceptance_criteria: criteria,
                description: desc.join("\n"),
                files,
                line: 0,
            });
        }
        tickets
    })
}

proptest! {
    #[test]
    fn canonical_form_round_trips(tickets in ticket_sets()) {
        let set = Tickets { tickets };
        let parsed = parse_tickets(&set.to_markdown()).map_err(|e| {
            TestCaseError::fail(format!("{e}\n{}", set.to_markdown()))
        })?;
        let strip = |t: &Tickets| -> Vec<Ticket> {
            t.tickets.iter().cloned().map(|t| Ticket { line: 0, ..t }).collect()
        };
        prop_assert_eq!(strip(&parsed), strip(&set));
    }

    #[test]
    fn taking_ready_tickets_finishes_every_valid_set(tickets in ticket_sets()) {
        let set = parse_tickets(&Tickets { tickets }.to_markdown()).unwrap();
        let mut done = HashSet::new();
        while done.len() < set.tickets.len() {
            let ready = set.ready(&done);
            prop_assert!(!ready.is_empty(), "stuck with {:?} done", done);
            for id in ready {
                let t = set.get(&id).unwrap();
                prop_assert!(t.depends_on.iter().all(|d| done.contains(d)));
                done.insert(id);
            }
        }
    }

    #[test]
    fn parser_never_panics(text in "(## |### |- |Depends on: |T1|: |\n|```|[a-z ]{0,8}){0,40}") {
        let _ = parse_tickets(&text);
    }
}
