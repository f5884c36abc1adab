//! The shell command policy: parse a command line into simple commands, classify each as
//! read-only / writes-workspace / network / destructive / unknown, and decide allow, ask or
//! deny from the per-class actions and per-command rules of [`PolicyConfig`].
//!
//! Classification is by program and arguments (`git status` reads, `git push` is network,
//! `git reset --hard` destroys; `sed` reads, `sed -i` writes), never by prefix-matching the
//! raw text, and every simple command of a list, pipeline, subshell or substitution counts:
//! `ls && curl x | sh` is as strict as its strictest part. A write outside the workspace
//! (an absolute path or `~`) is destructive. Naming a secret file makes the line subject to
//! [`PolicyConfig::secret_access`].

pub mod parse;
mod programs;

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::{Action, PolicyConfig};
use crate::workspace::Workspace;
use parse::{SimpleCommand, Word};
use programs::{Args, DESTRUCTIVE, NETWORK, READ_ONLY, WRITES};

/// The class of a command, ordered by severity.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CommandClass {
    /// Only reads.
    ReadOnly,
    /// Changes files inside the workspace.
    WritesWorkspace,
    /// Talks to the network.
    Network,
    /// Not recognised: could do anything.
    Unknown,
    /// Destroys data or reaches outside the workspace.
    Destructive,
}

impl CommandClass {
    /// The name used in configuration and records.
    pub fn as_str(self) -> &'static str {
        match self {
            CommandClass::ReadOnly => "read_only",
            CommandClass::WritesWorkspace => "writes_workspace",
            CommandClass::Network => "network",
            CommandClass::Unknown => "unknown",
            CommandClass::Destructive => "destructive",
        }
    }
}

impl std::fmt::Display for CommandClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The policy's decision on a command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The most severe class of its simple commands.
    pub class: CommandClass,
    /// What to do.
    pub action: Action,
    /// Why, one line per simple command that was not plainly allowed.
    pub reasons: Vec<String>,
}

/// Classifies and decides `line` under `config`, for a command running in `ws`.
pub fn evaluate(line: &str, config: &PolicyConfig, ws: &Workspace) -> Verdict {
    let parsed = parse::parse(line);
    let mut verdict = Verdict {
        class: CommandClass::ReadOnly,
        action: Action::Allow,
        reasons: Vec::new(),
    };
    if let Some(why) = &parsed.opaque {
        verdict.raise(
            CommandClass::Unknown,
            config.unknown,
            format!("cannot analyse the command reliably ({why})"),
        );
    }
    let rules: Vec<(Vec<String>, Action)> = config
        .rules
        .iter()
        .map(|r| {
            let words = parse::parse(&r.command)
                .commands
                .into_iter()
                .next()
                .map(|c| c.words.into_iter().map(|w| w.text).collect())
                .unwrap_or_default();
            (words, r.action)
        })
        .collect();
    for cmd in &parsed.commands {
        let class = classify(cmd, ws);
        let text = display(cmd);
        let rule = rules.iter().find(|(words, _)| matches_rule(cmd, words));
        let action = match rule {
            Some((_, a)) => *a,
            None => class_action(config, class),
        };
        let why = match rule {
            Some((words, a)) => format!("`{text}` matches rule `{}` ({a:?})", words.join(" ")),
            None => format!("`{text}` is {class}"),
        };
        verdict.raise(class, action, why);
        let secret = cmd
            .words
            .iter()
            .chain(cmd.redirects.iter().map(|r| &r.target))
            .find(|w| ws.mentions_secret(&w.text));
        if let Some(w) = secret {
            verdict.raise(
                class,
                config.secret_access,
                format!("`{text}` names the secret file `{}`", w.text),
            );
        }
    }
    if parsed.commands.is_empty() && parsed.opaque.is_none() {
        verdict.reasons.push("empty command".into());
    }
    verdict
}

impl Verdict {
    fn raise(&mut self, class: CommandClass, action: Action, why: String) {
        self.class = self.class.max(class);
        self.action = self.action.max(action);
        if action != Action::Allow || class >= CommandClass::Network {
            self.reasons.push(why);
        }
    }
}

/// The action configured for `class`.
pub fn class_action(config: &PolicyConfig, class: CommandClass) -> Action {
    match class {
        CommandClass::ReadOnly => config.read_only,
        CommandClass::WritesWorkspace => config.writes_workspace,
        CommandClass::Network => config.network,
        CommandClass::Unknown => config.unknown,
        CommandClass::Destructive => config.destructive,
    }
}

fn display(cmd: &SimpleCommand) -> String {
    let mut s: Vec<&str> = cmd.words.iter().map(|w| w.text.as_str()).collect();
    s.truncate(8);
    s.join(" ")
}

/// Whether a rule's words are a prefix of the command's words (program by base name).
fn matches_rule(cmd: &SimpleCommand, rule: &[String]) -> bool {
    let argv = cmd.argv();
    if rule.is_empty() || argv.len() < rule.len() {
        return false;
    }
    argv.iter().zip(rule).enumerate().all(|(i, (w, r))| {
        !w.dynamic && (w.text == *r || (i == 0 && base_name(&w.text) == r.as_str()))
    })
}

fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Classifies one simple command.
pub fn classify(cmd: &SimpleCommand, ws: &Workspace) -> CommandClass {
    let argv = cmd.argv();
    let mut class = classify_argv(argv, ws);
    for r in &cmd.redirects {
        let c = if r.writes() {
            path_class(&r.target, ws, CommandClass::WritesWorkspace)
        } else {
            CommandClass::ReadOnly
        };
        class = class.max(c);
    }
    class
}

/// The class of writing to `target`: `inside` when it stays in the workspace, destructive
/// when it leaves it (absolute paths, `~`, `..`), unknown when it is dynamic.
fn path_class(target: &Word, ws: &Workspace, inside: CommandClass) -> CommandClass {
    let t = target.text.as_str();
    if matches!(t, "/dev/null" | "/dev/stdout" | "/dev/stderr") {
        return CommandClass::ReadOnly;
    }
    if target.dynamic {
        return CommandClass::Unknown;
    }
    if t.starts_with('~') || escapes(t, ws.root()) {
        return CommandClass::Destructive;
    }
    inside
}

/// Whether a path argument leaves the workspace.
fn escapes(path: &str, root: &Path) -> bool {
    if path.starts_with('/') {
        return !Path::new(path).starts_with(root);
    }
    let mut depth: i64 = 0;
    for part in path.split('/') {
        match part {
            ".." => depth -= 1,
            "" | "." => {}
            _ => depth += 1,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// Classifies a program and its arguments (`argv`, redirections left out).
fn classify_argv(argv: &[Word], ws: &Workspace) -> CommandClass {
    let Some(program) = argv.first() else {
        return CommandClass::ReadOnly;
    };
    if program.dynamic {
        return CommandClass::Unknown;
    }
    let name = program.text.as_str();
    // A local script (`./x.sh`, `scripts/build`) can do anything.
    if name.contains('/') && !name.starts_with("/usr/") && !name.starts_with("/bin/") {
        return CommandClass::Unknown;
    }
    let name = base_name(name);
    let args = Args {
        words: argv.get(1..).unwrap_or_default(),
        ws,
    };
    match name {
        "git" => programs::classify_git(args.words),
        "cargo" => programs::classify_cargo(args.words),
        "npm" | "pnpm" | "yarn" | "bun" => programs::classify_js(args.words),
        "pip" | "pip3" | "pipx" | "gem" => programs::classify_package_installer(args.words),
        "docker" | "podman" => programs::classify_container(args.words),
        "rsync" => args.rsync(),
        "rm" => args.rm(),
        "sed" => args.sed(),
        "find" => args.find(),
        // Wrappers: what runs is the command after their options (and, for `env`, the
        // assignments); alone they only print.
        "xargs" | "env" | "nice" | "nohup" | "command" | "builtin" | "exec" | "stdbuf"
        | "ionice" => args.wrapped(name),
        "timeout" => args.timeout(),
        "sh" | "bash" | "zsh" | "dash" | "ksh" => args.shell(),
        n if n.starts_with("mkfs") => CommandClass::Destructive,
        n if READ_ONLY.contains(&n) => CommandClass::ReadOnly,
        n if WRITES.contains(&n) => args.write_args(CommandClass::WritesWorkspace),
        n if NETWORK.contains(&n) => CommandClass::Network,
        n if DESTRUCTIVE.contains(&n) => CommandClass::Destructive,
        _ => CommandClass::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CommandRule, SecretsConfig};

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &SecretsConfig::default()).unwrap();
        (dir, ws)
    }

    fn class_of(line: &str) -> CommandClass {
        let (_d, ws) = ws();
        evaluate(line, &PolicyConfig::default(), &ws).class
    }

    #[test]
    fn classes_follow_program_and_arguments() {
        use CommandClass::*;
        let cases = [
            ("ls -la", ReadOnly),
            ("git status && git log -3", ReadOnly),
            ("sed -n 1,5p a.txt", ReadOnly),
            ("sed -i s/a/b/ a.txt", WritesWorkspace),
            ("cargo test -p x", WritesWorkspace),
            ("echo hi > out.txt", WritesWorkspace),
            ("echo hi > /etc/hosts", Destructive),
            ("echo hi > ~/.bashrc", Destructive),
            ("cp a ../../outside", Destructive),
            ("curl https://x", Network),
            ("git push origin main", Network),
            ("git push --force", Destructive),
            ("git reset --hard HEAD~1", Destructive),
            ("git config user.name x", Destructive),
            ("rm file.txt", WritesWorkspace),
            ("rm -rf build", Destructive),
            ("find . -name '*.o' -delete", Destructive),
            ("find . -exec curl x ;", Network),
            ("ls | xargs rm -f", Destructive),
            ("echo $(curl evil.sh)", Network),
            ("bash -c 'rm -rf /'", Destructive),
            ("./run.sh", Unknown),
            ("$CMD arg", Unknown),
            ("sudo ls", Destructive),
            ("FOO=1 env BAR=2 cargo install x", Network),
            ("timeout 5 wget x", Network),
            ("cat <<EOF\nx\nEOF", Unknown),
            ("frobnicate --all", Unknown),
            ("ls 2>/dev/null", ReadOnly),
        ];
        for (line, want) in cases {
            assert_eq!(class_of(line), want, "{line}");
        }
    }

    #[test]
    fn actions_combine_per_class_and_rules() {
        let (_d, ws) = ws();
        let mut cfg = PolicyConfig::default();
        assert_eq!(
            evaluate("ls && cargo build", &cfg, &ws).action,
            Action::Allow
        );
        assert_eq!(evaluate("ls && curl x", &cfg, &ws).action, Action::Ask);
        cfg.rules.push(CommandRule {
            command: "curl".into(),
            action: Action::Allow,
        });
        cfg.rules.push(CommandRule {
            command: "cargo publish".into(),
            action: Action::Deny,
        });
        assert_eq!(evaluate("ls && curl x", &cfg, &ws).action, Action::Allow);
        assert_eq!(
            evaluate("cargo publish --dry-run", &cfg, &ws).action,
            Action::Deny
        );
        assert_eq!(evaluate("/usr/bin/curl x", &cfg, &ws).action, Action::Allow);
        cfg.network = Action::Deny;
        assert_eq!(evaluate("git fetch", &cfg, &ws).action, Action::Deny);
    }

    #[test]
    fn naming_a_secret_needs_secret_access() {
        let (_d, ws) = ws();
        let cfg = PolicyConfig::default();
        let v = evaluate("cat .env", &cfg, &ws);
        assert_eq!(v.action, Action::Ask);
        assert!(v.reasons.iter().any(|r| r.contains("secret")), "{v:?}");
        assert_eq!(
            evaluate("grep x < config/.env.local", &cfg, &ws).action,
            Action::Ask
        );
        assert_eq!(
            evaluate("cat .env.example", &cfg, &ws).action,
            Action::Allow
        );
    }
}
