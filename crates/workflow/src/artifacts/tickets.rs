//! `tickets.md` (`three_phase`): the work items of the implementation phase, with dependencies and
//! acceptance criteria, in a markdown format a model writes without thinking twice:
//!
//! ```markdown
//! # Tickets
//!
//! ## T1: Parse the configuration file
//! Depends on: none
//! Files: src/config.rs
//!
//! Read `app.toml` into a `Config` struct; unknown keys are errors.
//!
//! ### Acceptance criteria
//! - a valid file loads into `Config`
//! - an unknown key fails with its line number
//!
//! ## T2: Use the configuration in the server
//! Depends on: T1
//!
//! ### Acceptance criteria
//! - the server reads its port from `Config`
//! ```
//!
//! - Every `## ` heading starts a ticket: `## <id>: <title>` (`## T1 - <title>` and
//!   `## Ticket T1: <title>` are accepted too). An id is letters, digits, `_`, `-` and `.`.
//!   Text before the first ticket (a `# Tickets` title, an overview) is ignored.
//! - `Depends on: T1, T2` (also `Dependencies:`; `none` or nothing for no dependency) and
//!   `Files: a.rs, b.rs` lines anywhere in the ticket, optionally bulleted or in bold.
//! - `### Acceptance criteria` starts the criteria: `- `, `* ` or `1. ` bullets (a `[ ]`
//!   checkbox is dropped), indented lines continue the bullet above. The section ends at
//!   the next heading.
//! - Everything else in the ticket, other `###` sections included, is its description.
//!
//! A valid file has at least one ticket; ids are unique; every dependency names a ticket of
//! the file, not the ticket itself; dependencies have no cycle; every ticket has a title
//! and at least one acceptance criterion.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use super::docs::{heading, is_fence};
use super::{ArtifactError, ArtifactKind, ArtifactProblem};

/// One ticket of `tickets.md`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ticket {
    /// Its id (`T1`).
    pub id: String,
    /// Its title.
    pub title: String,
    /// The ids of the tickets it depends on, in the order given.
    pub depends_on: Vec<String>,
    /// Its acceptance criteria.
    pub acceptance_criteria: Vec<String>,
    /// The rest of its text (markdown), trimmed.
    pub description: String,
    /// The files it names (`Files:`).
    pub files: Vec<String>,
    /// The line of its heading (from 1).
    pub line: usize,
}

/// The tickets of a valid `tickets.md`, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tickets {
    /// The tickets.
    pub tickets: Vec<Ticket>,
}

impl Tickets {
    /// The ticket with this id.
    pub fn get(&self, id: &str) -> Option<&Ticket> {
        self.tickets.iter().find(|t| t.id == id)
    }

    /// The ids not in `done` whose dependencies are all in `done`, in file order.
    pub fn ready(&self, done: &HashSet<String>) -> Vec<String> {
        tickets_ready(&self.tickets, done)
    }

    /// The tickets in the canonical form of the format (what a collector writes back).
    pub fn to_markdown(&self) -> String {
        let mut s = String::from("# Tickets\n");
        for t in &self.tickets {
            let deps = if t.depends_on.is_empty() {
                "none".to_owned()
            } else {
                t.depends_on.join(", ")
            };
            let _ = write!(s, "\n## {}: {}\nDepends on: {deps}\n", t.id, t.title);
            if !t.files.is_empty() {
                let _ = writeln!(s, "Files: {}", t.files.join(", "));
            }
            if !t.description.is_empty() {
                let _ = writeln!(s, "\n{}", t.description);
            }
            s.push_str("\n### Acceptance criteria\n");
            for c in &t.acceptance_criteria {
                let _ = writeln!(s, "- {c}");
            }
        }
        s
    }
}

/// Which tickets can start: those not in `done` whose dependencies are all in `done`, in
/// file order (topological readiness). A caller that skips pruned tickets and wants their
/// dependents to go ahead puts the pruned ids in `done`; tickets already running are the
/// caller's to leave out.
pub fn tickets_ready(tickets: &[Ticket], done: &HashSet<String>) -> Vec<String> {
    tickets
        .iter()
        .filter(|t| !done.contains(&t.id) && t.depends_on.iter().all(|d| done.contains(d)))
        .map(|t| t.id.clone())
        .collect()
}

/// A ticket being read, with where its parts were.
struct Draft {
    ticket: Ticket,
    deps_line: Option<usize>,
    acceptance_line: Option<usize>,
    body: Vec<String>,
}

impl Draft {
    /// A ticket whose heading, at line `n`, gave its id and title.
    fn new(id: String, title: String, n: usize) -> Self {
        Self {
            ticket: Ticket {
                id,
                title,
                line: n,
                ..Ticket::default()
            },
            deps_line: None,
            acceptance_line: None,
            body: Vec::new(),
        }
    }

    /// Takes a line of the acceptance criteria section: a bullet, an indented continuation
    /// of the bullet above, or a blank line. False when the line is none of these (it is a
    /// field or description).
    fn criteria_line(&mut self, line: &str) -> bool {
        if let Some(text) = bullet(line) {
            if !text.is_empty() {
                self.ticket.acceptance_criteria.push(text.to_owned());
            }
            return true;
        }
        let continued = line.starts_with([' ', '\t']) && !line.trim().is_empty();
        if let (true, Some(last)) = (continued, self.ticket.acceptance_criteria.last_mut()) {
            last.push(' ');
            last.push_str(line.trim());
            return true;
        }
        line.trim().is_empty()
    }

    /// Takes line `n` as a `Files:` or `Depends on:` field (not inside a code block) or, else,
    /// as part of the description.
    fn field_or_body(&mut self, n: usize, line: &str, in_code: bool) {
        match field(line).filter(|_| !in_code) {
            Some((key, value)) if key == "files" => self.ticket.files.extend(list(&value, false)),
            Some((_, value)) => {
                self.deps_line.get_or_insert(n);
                for dep in list(&value, true) {
                    if !self.ticket.depends_on.contains(&dep) {
                        self.ticket.depends_on.push(dep);
                    }
                }
            }
            None => self.body.push(line.to_owned()),
        }
    }

    /// The ticket, with its description.
    fn finish(self) -> Ticket {
        let mut t = self.ticket;
        t.description = self.body.join("\n").trim().to_owned();
        t
    }
}

/// Reads `tickets.md` line by line into drafts, with the problems of its headings.
#[derive(Default)]
struct Reader {
    drafts: Vec<Draft>,
    problems: Vec<ArtifactProblem>,
    /// Inside a ticket (false before the first one and after a bad `##` heading).
    in_ticket: bool,
    in_acceptance: bool,
    fenced: bool,
}

impl Reader {
    /// Reads line `n`: a heading, or a line of the current ticket.
    fn line(&mut self, n: usize, line: &str) {
        let fence = is_fence(line);
        let head = if self.fenced || fence {
            None
        } else {
            heading(line)
        };
        if fence {
            self.fenced = !self.fenced;
        }
        match head {
            Some((2, text)) => return self.start_ticket(n, line, text),
            Some((3, text)) if self.in_ticket && is_acceptance(text) => {
                return self.start_acceptance(n);
            }
            Some(_) => self.in_acceptance = false,
            None => {}
        }
        let (in_acceptance, in_code) = (self.in_acceptance, self.fenced || fence);
        let Some(d) = self.drafts.last_mut().filter(|_| self.in_ticket) else {
            return;
        };
        if in_acceptance && !in_code && d.criteria_line(line) {
            return;
        }
        d.field_or_body(n, line, in_code);
    }

    /// A `## ` heading at line `n`: a new ticket, or a problem when it is not a ticket
    /// heading (its lines up to the next one then belong to no ticket).
    fn start_ticket(&mut self, n: usize, line: &str, text: &str) {
        self.in_acceptance = false;
        match ticket_heading(text) {
            Some((id, title)) => {
                if title.is_empty() {
                    self.problems.push(ArtifactProblem::at(
                        n,
                        format!("ticket {id} has no title; write `## {id}: <title>`"),
                    ));
                }
                self.drafts.push(Draft::new(id, title, n));
                self.in_ticket = true;
            }
            None => {
                self.problems.push(ArtifactProblem::at(
                    n,
                    format!(
                        "`{}` is not a ticket heading; every `## ` heading starts a \
                         ticket, written `## T1: <title>` (put other text before the \
                         first ticket or inside one)",
                        line.trim()
                    ),
                ));
                self.in_ticket = false;
            }
        }
    }

    /// The current ticket's `### Acceptance criteria` heading, at line `n`.
    fn start_acceptance(&mut self, n: usize) {
        self.in_acceptance = true;
        if let Some(d) = self.drafts.last_mut() {
            d.acceptance_line.get_or_insert(n);
        }
    }
}

fn valid_id(id: &str) -> bool {
    id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `T1: title` (or `T1 - title`, `Ticket T1: title`) → (id, title).
fn ticket_heading(text: &str) -> Option<(String, String)> {
    let text = text.replace("**", "");
    let mut text = text.trim();
    if let Some(rest) = text
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case("ticket "))
        .and_then(|_| text.get(7..))
    {
        text = rest.trim_start();
    }
    let (id, title) = match text.split_once(':') {
        Some((id, title)) if !id.trim().contains(' ') => (id, title),
        _ => match text.split_once(" - ").or_else(|| text.split_once(" — ")) {
            Some(pair) => pair,
            None => (text, ""),
        },
    };
    let id = id.trim().trim_matches('`');
    valid_id(id).then(|| (id.to_owned(), title.trim().to_owned()))
}

/// A `Key: value` line, bulleted or bold or not → (lowercased key, value).
fn field(line: &str) -> Option<(String, String)> {
    let l = line.trim();
    let l = l
        .strip_prefix("- ")
        .or_else(|| l.strip_prefix("* "))
        .unwrap_or(l);
    let l = l.replace("**", "");
    let (key, value) = l.split_once(':')?;
    let key = key.trim().to_ascii_lowercase();
    let known = matches!(
        key.as_str(),
        "depends on" | "depends_on" | "dependencies" | "dependency" | "depends" | "files"
    );
    known.then(|| (key, value.trim().to_owned()))
}

/// `T1, T2`, `T1 and T2`, `none` → the names.
fn list(value: &str, split_spaces: bool) -> Vec<String> {
    let seps: &[char] = if split_spaces {
        &[',', ';', ' ', '\t']
    } else {
        &[',', ';']
    };
    value
        .split(seps)
        .map(|s| s.trim().trim_matches('`').trim())
        .filter(|s| {
            !s.is_empty()
                && !["none", "-", "—", "n/a", "and"].contains(&s.to_ascii_lowercase().as_str())
        })
        .map(str::to_owned)
        .collect()
}

/// A criterion bullet → its text.
fn bullet(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.strip_prefix("+ "))
        .or_else(|| {
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            (digits > 0)
                .then(|| &t[digits..])
                .and_then(|r| r.strip_prefix(". ").or_else(|| r.strip_prefix(") ")))
        })?;
    let rest = rest.trim_start();
    let rest = ["[ ] ", "[x] ", "[X] "]
        .iter()
        .find_map(|b| rest.strip_prefix(b))
        .unwrap_or(rest);
    Some(rest.trim())
}

fn is_acceptance(title: &str) -> bool {
    let t = title.trim_end_matches(':').trim().to_ascii_lowercase();
    matches!(
        t.as_str(),
        "acceptance criteria" | "acceptance criterion" | "acceptance"
    )
}

/// Parses and validates `tickets.md`; every problem is reported with its line.
pub fn parse_tickets(markdown: &str) -> Result<Tickets, ArtifactError> {
    let mut reader = Reader::default();
    for (i, line) in markdown.lines().enumerate() {
        reader.line(i + 1, line);
    }
    let Reader {
        drafts,
        mut problems,
        ..
    } = reader;
    if drafts.is_empty() && problems.is_empty() {
        problems.push(ArtifactProblem::new(
            "has no tickets; start each ticket with a `## T1: <title>` heading, followed by a \
             `Depends on:` line and a `### Acceptance criteria` list",
        ));
    }
    let seen = unique_ids(&drafts, &mut problems);
    let defined: Vec<&str> = drafts.iter().map(|d| d.ticket.id.as_str()).collect();
    for d in &drafts {
        check_dependencies(d, &seen, &defined, &mut problems);
        problems.extend(missing_criteria(d));
    }
    let tickets: Vec<Ticket> = drafts.into_iter().map(Draft::finish).collect();
    problems.extend(cycles(&tickets));
    problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    if problems.is_empty() {
        Ok(Tickets { tickets })
    } else {
        Err(ArtifactError::invalid(ArtifactKind::Tickets, problems))
    }
}

/// Each ticket id once: a reused id is a problem at its second use. Returns the line of each
/// id's first ticket.
fn unique_ids<'d>(
    drafts: &'d [Draft],
    problems: &mut Vec<ArtifactProblem>,
) -> BTreeMap<&'d str, usize> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for d in drafts {
        let t = &d.ticket;
        if let Some(first) = seen.get(t.id.as_str()) {
            problems.push(ArtifactProblem::at(
                t.line,
                format!(
                    "ticket id {} is used twice (first at line {first}); give each ticket its \
                     own id",
                    t.id
                ),
            ));
        } else {
            seen.insert(&t.id, t.line);
        }
    }
    seen
}

/// A ticket's dependencies name other tickets of the file (`seen`; `defined` lists them all).
fn check_dependencies(
    d: &Draft,
    seen: &BTreeMap<&str, usize>,
    defined: &[&str],
    problems: &mut Vec<ArtifactProblem>,
) {
    let t = &d.ticket;
    let at = d.deps_line.unwrap_or(t.line);
    for dep in &t.depends_on {
        if *dep == t.id {
            problems.push(ArtifactProblem::at(
                at,
                format!(
                    "ticket {} depends on itself; remove {dep} from its `Depends on:`",
                    t.id
                ),
            ));
        } else if !seen.contains_key(dep.as_str()) {
            problems.push(ArtifactProblem::at(
                at,
                format!(
                    "ticket {} depends on {dep}, which is not defined; defined: {}",
                    t.id,
                    defined.join(", ")
                ),
            ));
        }
    }
}

/// The problem of a ticket without acceptance criteria, if it has none.
fn missing_criteria(d: &Draft) -> Option<ArtifactProblem> {
    let t = &d.ticket;
    if !t.acceptance_criteria.is_empty() {
        return None;
    }
    let message = match d.acceptance_line {
        Some(l) => format!(
            "ticket {} has no acceptance criteria: the section at line {l} has no `- ` \
             bullets",
            t.id
        ),
        None => format!(
            "ticket {} has no acceptance criteria; add a `### Acceptance criteria` \
             section with `- ` bullets",
            t.id
        ),
    };
    Some(ArtifactProblem::at(t.line, message))
}

/// Every dependency cycle (among distinct, defined tickets), each once, starting at its
/// ticket that comes first in the file.
fn cycles(tickets: &[Ticket]) -> Vec<ArtifactProblem> {
    let index: BTreeMap<&str, usize> = tickets
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let edges: Vec<Vec<usize>> = tickets
        .iter()
        .map(|t| {
            t.depends_on
                .iter()
                .filter(|d| **d != t.id)
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut state = vec![0u8; tickets.len()];
    let mut found = Vec::new();
    let mut seen_cycles = HashSet::new();
    for start in 0..tickets.len() {
        if state[start] != 0 {
            continue;
        }
        // Iterative DFS: (node, next edge to follow).
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        state[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let Some(&to) = edges[node].get(*next) else {
                state[node] = 2;
                stack.pop();
                continue;
            };
            *next += 1;
            match state[to] {
                0 => {
                    state[to] = 1;
                    stack.push((to, 0));
                }
                1 => {
                    let from = stack.iter().position(|(n, _)| *n == to).unwrap_or(0);
                    let mut cycle: Vec<usize> = stack[from..].iter().map(|(n, _)| *n).collect();
                    let first = cycle
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, n)| **n)
                        .map_or(0, |(i, _)| i);
                    cycle.rotate_left(first);
                    let mut key = cycle.clone();
                    key.sort_unstable();
                    if seen_cycles.insert(key) {
                        found.push(cycle);
                    }
                }
                _ => {}
            }
        }
    }
    found
        .into_iter()
        .map(|cycle| {
            let names: Vec<&str> = cycle
                .iter()
                .chain(cycle.first())
                .map(|i| tickets[*i].id.as_str())
                .collect();
            ArtifactProblem::at(
                tickets[cycle[0]].line,
                format!(
                    "tickets {} depend on each other in a cycle ({} depends on {}); remove one \
                     of these dependencies",
                    names.join(" → "),
                    names[0],
                    names[1]
                ),
            )
        })
        .collect()
}

#[cfg(test)]
#[path = "tickets_tests.rs"]
mod tests;
