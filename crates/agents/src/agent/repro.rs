//! Scripts that show the problem, to tell the drawn answers apart (role setting `reproduce`).
//!
//! The drawn answers of a small model rarely agree, and the project's tests tell few of them
//! apart (a fix's tests are the ones the project does not have yet), so the answer kept is
//! mostly the earliest that applies (docs/eval.md). Agentless ranks its candidate patches by
//! reproduction tests it generates first; a `reproduce` role does the same: at its first
//! drawing it asks the model, in the same conversation, for a few short scripts that show the
//! problem the task describes and check the result the task asks for. A script is kept when
//! one of its assertions fails on the files as they are (a script that fails on anything else —
//! it does not parse, imports what does not exist, calls the project's code wrongly — shows
//! nothing about the problem). Each different change whose blocks all
//! apply is then run against the kept scripts in a scratch copy ([`TestProbe::run_script`]),
//! and a change more scripts pass with ranks first. When scripts were kept and no answer of a
//! drawing passes any, the turn draws once more.

use trellis_llm::{ChatRequest, Message, Usage};

use super::defs::fenced;
use super::probe::ScriptLanguage;
use super::sample::{Candidate, normal};
use super::{AgentRun, Saved};
use crate::error::{Error, Result};

/// How many scripts the role asks for (the first greedy, the others sampled).
const SCRIPTS: u32 = 3;

/// A script answer's length cap, in tokens.
const SCRIPT_TOKENS: u32 = 512;

/// How much of a kept script's output on the files as they are its note shows.
const OUTPUT_CHARS: usize = 600;

/// The request for the scripts, after the conversation.
fn request_text(lang: ScriptLanguage) -> String {
    format!(
        "Do not fix anything yet. First write a short {} script that shows the problem the \
         task describes: it uses the project's code the way the task and the code above do \
         (import it as the code above is imported), and checks the result the task asks for \
         with assertions, so that it fails now and passes once the problem is fixed. Only the \
         standard library and the project's own code; no test framework. Answer with the \
         script alone, in one ```{} fence.",
        lang.name(),
        lang.tag()
    )
}

/// The script an answer holds: its first closed fence with one of `lang`'s tags, not empty.
pub(crate) fn script_of(text: &str, lang: ScriptLanguage) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    fenced(&lines)
        .into_iter()
        .find(|f| {
            let tag = lines[f.open]
                .trim_start()
                .trim_start_matches(['`', '~'])
                .trim()
                .to_ascii_lowercase();
            lang.tags().contains(&tag.as_str())
        })
        .map(|f| f.body.join("\n") + "\n")
        .filter(|s| !s.trim().is_empty())
}

impl AgentRun {
    /// The kept scripts of this activation: drawn and checked at its first drawing (a role
    /// with `reproduce` and a probe that knows the project's script language), then reused.
    /// The calls' usage is added to `usage`.
    pub(super) async fn reproductions(
        &self,
        st: &mut Saved,
        request: &ChatRequest,
        turn: u32,
        usage: &mut Usage,
    ) -> Result<Vec<String>> {
        if let Some(kept) = &st.repros {
            return Ok(kept.clone());
        }
        let Some(probe) = self.probe.as_ref().filter(|_| self.role.reproduce) else {
            return Ok(Vec::new());
        };
        st.repros = Some(Vec::new());
        let Some(lang) = probe.script_language() else {
            self.note(
                st,
                "no script language is known for this project: its answers are not checked \
                 against scripts that show the problem",
            );
            return Ok(Vec::new());
        };
        let mut messages = request.messages.clone();
        messages.push(Message::user(request_text(lang)));
        // Each script with the number of the answer that wrote it.
        let mut scripts: Vec<(u32, String)> = Vec::new();
        let mut said: Vec<String> = Vec::new();
        for k in 0..SCRIPTS {
            let ask = ChatRequest {
                max_tokens: Some(SCRIPT_TOKENS),
                temperature: (k > 0).then_some(self.role.sample_temperature),
                seed: Some(turn.wrapping_mul(1_000).wrapping_add(500 + k)),
                ..ChatRequest::new(messages.clone())
            };
            let answer = match self.turn(ask, turn, false).await {
                Ok(c) => c,
                Err(trellis_llm::Error::Cancelled) => return Err(Error::Cancelled),
                Err(e) => {
                    said.push(format!("script {}: {e}", k + 1));
                    break;
                }
            };
            usage.add(&answer.usage);
            match script_of(&answer.text, lang) {
                Some(s) if !scripts.iter().any(|(_, o)| normal(o) == normal(&s)) => {
                    scripts.push((k + 1, s))
                }
                Some(_) => said.push(format!("script {}: the same as another", k + 1)),
                None => said.push(format!("script {}: no {} fence", k + 1, lang.tag())),
            }
        }
        let mut kept = Vec::new();
        for (n, script) in &scripts {
            if self.cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let head = format!("script {n} ({} lines)", script.lines().count());
            match probe
                .run_script(Vec::new(), script.clone(), self.cancel.clone())
                .await
            {
                None => said.push(format!("{head}: did not finish")),
                Some(run) if run.passed => said.push(format!("{head}: passes as the files are")),
                Some(run) if !lang.failed_on_assertion(&run.output) => said.push(format!(
                    "{head}: fails, not on an assertion ({})",
                    died_of(&run.output)
                )),
                Some(run) => {
                    let out: String = tail_chars(&run.output, OUTPUT_CHARS);
                    self.note(
                        st,
                        format!(
                            "kept a script that shows the problem (an assertion fails as the \
                             files are):\n{script}\nits output:\n{out}"
                        ),
                    );
                    said.push(format!(
                        "{head}: an assertion fails as the files are (kept)"
                    ));
                    kept.push(script.clone());
                }
            }
        }
        self.note(
            st,
            format!(
                "asked for {SCRIPTS} scripts that show the problem (`{}`): kept {}. {}",
                lang.command(),
                kept.len(),
                said.join("; ")
            ),
        );
        st.repros = Some(kept.clone());
        Ok(kept)
    }

    /// Runs each different clean change of `candidates` not yet checked against the kept
    /// `scripts`, its count of scripts passed in `reproduced`.
    pub(super) async fn reproduce(
        &self,
        st: &mut Saved,
        scripts: &[String],
        candidates: &mut [Candidate],
    ) -> Result<()> {
        let Some(probe) = self.probe.as_ref() else {
            return Ok(());
        };
        let mut said = Vec::new();
        for i in 0..candidates.len() {
            if !candidates[i].clean() || candidates[i].reproduced.is_some() {
                continue;
            }
            let files = self.changed_files(&candidates[i].edits);
            let mut passed = 0;
            for script in scripts {
                if self.cancel.is_cancelled() {
                    return Err(Error::Cancelled);
                }
                let run = probe
                    .run_script(files.clone(), script.clone(), self.cancel.clone())
                    .await;
                passed += usize::from(run.is_some_and(|r| r.passed));
            }
            let change = candidates[i].change.clone();
            for c in candidates.iter_mut().filter(|c| c.change == change) {
                c.reproduced = Some(passed);
            }
            said.push(format!("answer {}: {passed}", i + 1));
        }
        if !said.is_empty() {
            self.note(
                st,
                format!(
                    "the scripts that show the problem, passed of {}: {}",
                    scripts.len(),
                    said.join("; ")
                ),
            );
        }
        Ok(())
    }
}

/// What a failed script died of: the last line of `text` naming an error (`NameError: …`,
/// Node's `TypeError: …` above its stack), else its last non-empty line; at most 160
/// characters.
fn died_of(text: &str) -> String {
    let names_error = |l: &&str| {
        let word = l.trim_start().split([':', ' ', '[']).next().unwrap_or("");
        word.ends_with("Error") || word.ends_with("Exception")
    };
    let lines = || text.lines().rev().filter(|l| !l.trim().is_empty());
    let line = lines()
        .find(names_error)
        .or_else(|| lines().next())
        .unwrap_or("");
    line.trim().chars().take(160).collect()
}

/// The last `max` characters of `text`.
fn tail_chars(text: &str, max: usize) -> String {
    let n = text.chars().count();
    text.chars().skip(n.saturating_sub(max)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_is_the_first_fence_of_the_language() {
        let text =
            "Here:\n```python\nfrom a import f\nassert f() == 2\n```\nand\n```python\nx\n```";
        assert_eq!(
            script_of(text, ScriptLanguage::Python).as_deref(),
            Some("from a import f\nassert f() == 2\n")
        );
        assert_eq!(
            script_of("```\nprint(1)\n```", ScriptLanguage::Python).as_deref(),
            Some("print(1)\n")
        );
        assert_eq!(script_of("```js\nx()\n```", ScriptLanguage::Python), None);
        assert_eq!(script_of("no fence at all", ScriptLanguage::Python), None);
        // Unclosed: cut by the token cap, not whole.
        assert_eq!(
            script_of("```python\nassert f(", ScriptLanguage::Python),
            None
        );
        assert_eq!(
            script_of(
                "```javascript\nconst y = require('./');\n```",
                ScriptLanguage::JavaScript
            )
            .as_deref(),
            Some("const y = require('./');\n")
        );
    }

    #[test]
    fn a_failed_script_is_told_by_its_died_of() {
        assert_eq!(
            died_of(
                "x.cjs:3\nTypeError: yaml.load is not a function\n    at x.cjs:3\n\nNode.js v20.20.2\n"
            ),
            "TypeError: yaml.load is not a function"
        );
        assert_eq!(died_of("Killed\n"), "Killed");
        assert_eq!(
            died_of("Traceback\nNameError: name 'f' is not defined\n\n"),
            "NameError: name 'f' is not defined"
        );
    }

    #[test]
    fn only_a_failed_assertion_shows_the_problem() {
        let py = ScriptLanguage::Python;
        let tb = |last: &str| {
            format!("Traceback (most recent call last):\n  File \"x\", line 1\n{last}\n")
        };
        assert!(py.failed_on_assertion(&tb("AssertionError")));
        assert!(py.failed_on_assertion(&tb("AssertionError: 4 fits in 2 bits")));
        assert!(!py.failed_on_assertion(&tb("ModuleNotFoundError: No module named 'foo'")));
        assert!(!py.failed_on_assertion(&tb("SyntaxError: invalid syntax")));
        assert!(!py.failed_on_assertion(&tb(
            "TypeError: Context.__init__() missing 1 required positional argument: 'command'"
        )));
        let js = ScriptLanguage::JavaScript;
        assert!(js.failed_on_assertion("AssertionError [ERR_ASSERTION]: false == true"));
        assert!(js.failed_on_assertion("  code: 'ERR_ASSERTION',"));
        assert!(!js.failed_on_assertion(
            "Error: Cannot find module 'js-yaml'\n  code: 'MODULE_NOT_FOUND'"
        ));
    }
}
