//! What each known program does to the workspace, by its name and arguments: the tables
//! of programs by class, and the classifiers of programs whose class depends on their
//! subcommand or options.

use super::parse::{self, Parsed, Word};
use super::{CommandClass, classify, classify_argv, path_class};
use crate::workspace::Workspace;

/// The arguments of a program being classified, in the workspace it runs in.
pub(super) struct Args<'a> {
    /// The words after the program name.
    pub(super) words: &'a [Word],
    /// Where the command runs.
    pub(super) ws: &'a Workspace,
}

impl Args<'_> {
    /// Whether one of `flags` is given as a whole word.
    fn has(&self, flags: &[&str]) -> bool {
        self.words.iter().any(|a| flags.contains(&a.text.as_str()))
    }

    /// Whether the short flag `c` is given, alone or combined (`-rf`).
    fn short_flag(&self, c: char) -> bool {
        self.words
            .iter()
            .any(|a| a.text.starts_with('-') && !a.text.starts_with("--") && a.text.contains(c))
    }

    /// The class of writing to the path arguments: `inside` unless one of them leaves the
    /// workspace or is dynamic.
    pub(super) fn write_args(&self, inside: CommandClass) -> CommandClass {
        self.words
            .iter()
            .filter(|a| !a.text.starts_with('-'))
            .map(|a| path_class(a, self.ws, inside))
            .max()
            .unwrap_or(inside)
            .max(inside)
    }

    /// `rsync`: network with a remote (`host:path`) argument, else a write of its paths.
    pub(super) fn rsync(&self) -> CommandClass {
        if self.words.iter().any(|a| a.text.contains(':')) {
            CommandClass::Network
        } else {
            self.write_args(CommandClass::WritesWorkspace)
        }
    }

    /// `rm`: destructive when recursive, forced or aimed at everything, else a write of its
    /// paths.
    pub(super) fn rm(&self) -> CommandClass {
        let recursive_or_forced = self.short_flag('r')
            || self.short_flag('R')
            || self.short_flag('f')
            || self.has(&["--recursive", "--force"]);
        let glob_all = self
            .words
            .iter()
            .any(|a| matches!(a.text.as_str(), "*" | "." | "/" | "~"));
        if recursive_or_forced || glob_all {
            CommandClass::Destructive
        } else {
            self.write_args(CommandClass::WritesWorkspace)
        }
    }

    /// `sed`: a write of its paths when editing in place, else read-only.
    pub(super) fn sed(&self) -> CommandClass {
        if self.short_flag('i') || self.words.iter().any(|a| a.text.starts_with("--in-place")) {
            self.write_args(CommandClass::WritesWorkspace)
        } else {
            CommandClass::ReadOnly
        }
    }

    /// `find`: destructive with `-delete`, as strict as the command it runs with `-exec`
    /// (and the like), else read-only.
    pub(super) fn find(&self) -> CommandClass {
        if self.has(&["-delete"]) {
            CommandClass::Destructive
        } else if let Some(i) = self
            .words
            .iter()
            .position(|a| matches!(a.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
        {
            let inner: Vec<Word> = self
                .words
                .get(i + 1..)
                .unwrap_or_default()
                .iter()
                .take_while(|a| a.text != ";" && a.text != "+")
                .cloned()
                .collect();
            classify_argv(&inner, self.ws).max(CommandClass::ReadOnly)
        } else {
            CommandClass::ReadOnly
        }
    }

    /// A wrapper (`xargs`, `env`, `nice` …, named `name`): the command after its options
    /// (and, for `env`, the assignments); alone it only prints.
    pub(super) fn wrapped(&self, name: &str) -> CommandClass {
        let inner: Vec<Word> = self
            .words
            .iter()
            .skip_while(|a| a.text.starts_with('-') || (name == "env" && a.text.contains('=')))
            .cloned()
            .collect();
        if inner.is_empty() {
            CommandClass::ReadOnly
        } else {
            classify_argv(&inner, self.ws)
        }
    }

    /// `timeout`: the command after its options and the duration.
    pub(super) fn timeout(&self) -> CommandClass {
        let inner: Vec<Word> = self
            .words
            .iter()
            .skip_while(|a| a.text.starts_with('-'))
            .skip(1)
            .cloned()
            .collect();
        classify_argv(&inner, self.ws)
    }

    /// A shell: as strict as the script it runs with `-c`; unknown without one, or when
    /// the script is dynamic or cannot be analysed.
    pub(super) fn shell(&self) -> CommandClass {
        match self.words.iter().position(|a| a.text == "-c") {
            Some(i) => match self.words.get(i + 1) {
                Some(script) if !script.dynamic => {
                    let inner: Parsed = parse::parse(&script.text);
                    if inner.opaque.is_some() {
                        return CommandClass::Unknown;
                    }
                    inner
                        .commands
                        .iter()
                        .map(|c| classify(c, self.ws))
                        .max()
                        .unwrap_or(CommandClass::ReadOnly)
                }
                _ => CommandClass::Unknown,
            },
            None => CommandClass::Unknown,
        }
    }
}

/// `pip`, `pip3`, `pipx` and `gem`: read-only queries, a local uninstall, else the network.
pub(super) fn classify_package_installer(args: &[Word]) -> CommandClass {
    match first_positional(args) {
        Some("list" | "show" | "freeze" | "check" | "help") => CommandClass::ReadOnly,
        Some("uninstall") => CommandClass::WritesWorkspace,
        _ => CommandClass::Network,
    }
}

/// `docker` and `podman`: read-only queries, destructive removals, else the network.
pub(super) fn classify_container(args: &[Word]) -> CommandClass {
    match first_positional(args) {
        Some("ps" | "images" | "inspect" | "logs" | "version" | "info") => CommandClass::ReadOnly,
        Some("rm" | "rmi" | "kill" | "stop" | "system" | "volume" | "prune") => {
            CommandClass::Destructive
        }
        _ => CommandClass::Network,
    }
}

/// Programs that only read.
pub(super) const READ_ONLY: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "fd",
    "echo",
    "printf",
    "pwd",
    "stat",
    "file",
    "diff",
    "cmp",
    "sort",
    "uniq",
    "cut",
    "tr",
    "tree",
    "du",
    "df",
    "which",
    "whereis",
    "type",
    "printenv",
    "date",
    "true",
    "false",
    "test",
    "[",
    "[[",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "jq",
    "yq",
    "xxd",
    "od",
    "hexdump",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "nl",
    "column",
    "paste",
    "join",
    "comm",
    "fold",
    "rev",
    "tac",
    "seq",
    "sleep",
    "id",
    "whoami",
    "uname",
    "hostname",
    "ps",
    "free",
    "uptime",
    "nproc",
    "expr",
    "bc",
    "strings",
    "tokei",
    "cloc",
    "cd",
    "export",
    "set",
    "unset",
    "shopt",
    "exit",
    "return",
    "read",
    "local",
    "declare",
    "for",
    "break",
    "continue",
    "wait",
    "look",
    "locale",
    "getconf",
];

/// Programs that write what their path arguments name.
pub(super) const WRITES: &[&str] = &[
    "mkdir",
    "touch",
    "cp",
    "mv",
    "ln",
    "install",
    "tee",
    "patch",
    "rmdir",
    "chmod",
    "make",
    "cmake",
    "ninja",
    "gcc",
    "g++",
    "cc",
    "c++",
    "clang",
    "clang++",
    "rustc",
    "rustfmt",
    "go",
    "javac",
    "java",
    "python",
    "python3",
    "node",
    "ruby",
    "perl",
    "php",
    "deno",
    "pytest",
    "jest",
    "vitest",
    "tsc",
    "eslint",
    "prettier",
    "black",
    "ruff",
    "mypy",
    "tar",
    "zip",
    "unzip",
    "gzip",
    "gunzip",
    "bzip2",
    "xz",
    "awk",
    "gawk",
    "mawk",
    "diff3",
    "cargo-nextest",
    "sh-test",
    "bats",
    "meson",
    "dotnet",
    "mvn",
    "gradle",
    "tox",
    "nox",
    "uv",
    "poetry",
];

/// Programs that talk to the network.
pub(super) const NETWORK: &[&str] = &[
    "curl", "wget", "ssh", "scp", "sftp", "nc", "ncat", "netcat", "telnet", "ftp", "ping", "dig",
    "nslookup", "host", "http", "https", "aria2c", "apt", "apt-get", "yum", "dnf", "brew",
    "pacman", "apk", "gh", "kubectl", "npx", "pnpx", "bunx", "git-lfs", "socat",
];

/// Programs that destroy data or reach outside the workspace.
pub(super) const DESTRUCTIVE: &[&str] = &[
    "sudo",
    "su",
    "doas",
    "dd",
    "shred",
    "mkfs",
    "fdisk",
    "parted",
    "mount",
    "umount",
    "kill",
    "pkill",
    "killall",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "chown",
    "chgrp",
    "crontab",
    "systemctl",
    "service",
    "truncate",
    "wipefs",
    "useradd",
    "userdel",
    "passwd",
    "iptables",
];

/// The first argument that is not an option.
fn first_positional(args: &[Word]) -> Option<&str> {
    args.iter()
        .map(|a| a.text.as_str())
        .find(|a| !a.starts_with('-'))
}

/// `git`, by subcommand and its options.
pub(super) fn classify_git(args: &[Word]) -> CommandClass {
    // Skip global options (`-C dir`, `-c k=v`, `--no-pager` …).
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.text.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" => i += 2,
            s if s.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let Some(sub) = args.get(i) else {
        return CommandClass::ReadOnly;
    };
    let rest = args.get(i + 1..).unwrap_or_default();
    let has = |flags: &[&str]| rest.iter().any(|a| flags.contains(&a.text.as_str()));
    match sub.text.as_str() {
        "status" | "log" | "diff" | "show" | "rev-parse" | "ls-files" | "ls-tree" | "blame"
        | "grep" | "describe" | "shortlog" | "cat-file" | "rev-list" | "merge-base" | "help"
        | "version" | "whatchanged" | "show-ref" | "for-each-ref" | "count-objects"
        | "check-ignore" | "name-rev" => CommandClass::ReadOnly,
        "branch" => {
            if has(&[
                "-d", "-D", "--delete", "-m", "-M", "--move", "-f", "--force",
            ]) {
                CommandClass::Destructive
            } else if rest.iter().any(|a| !a.text.starts_with('-')) {
                CommandClass::WritesWorkspace
            } else {
                CommandClass::ReadOnly
            }
        }
        "stash" => match rest.first().map(|a| a.text.as_str()) {
            Some("list" | "show") => CommandClass::ReadOnly,
            Some("drop" | "clear") => CommandClass::Destructive,
            _ => CommandClass::WritesWorkspace,
        },
        "tag" => {
            if rest.is_empty() || has(&["-l", "--list"]) {
                CommandClass::ReadOnly
            } else {
                CommandClass::Destructive
            }
        }
        "remote" => match rest
            .iter()
            .find(|a| !a.text.starts_with('-'))
            .map(|a| a.text.as_str())
        {
            None | Some("show" | "get-url") => CommandClass::ReadOnly,
            Some("update" | "prune") => CommandClass::Network,
            _ => CommandClass::Destructive,
        },
        "config" => {
            if has(&["--get", "--list", "-l", "--get-all", "--get-regexp"])
                || rest.iter().filter(|a| !a.text.starts_with('-')).count() <= 1
            {
                CommandClass::ReadOnly
            } else {
                // Repository config is shared with the user's checkout.
                CommandClass::Destructive
            }
        }
        "reset" => {
            if has(&["--hard", "--merge", "--keep"]) {
                CommandClass::Destructive
            } else {
                CommandClass::WritesWorkspace
            }
        }
        "clean" | "filter-branch" | "filter-repo" | "update-ref" | "symbolic-ref" | "worktree"
        | "replace" | "prune" | "reflog" | "gc" => CommandClass::Destructive,
        "push" => {
            if has(&[
                "-f",
                "--force",
                "--force-with-lease",
                "--mirror",
                "--delete",
                "-d",
            ]) {
                CommandClass::Destructive
            } else {
                CommandClass::Network
            }
        }
        "fetch" | "pull" | "clone" | "ls-remote" | "submodule" | "send-email" | "request-pull"
        | "archive" => CommandClass::Network,
        "add" | "commit" | "checkout" | "switch" | "restore" | "apply" | "am" | "merge"
        | "rebase" | "cherry-pick" | "revert" | "mv" | "rm" | "init" | "notes" | "format-patch"
        | "bisect" | "sparse-checkout" | "mergetool" | "difftool" => CommandClass::WritesWorkspace,
        _ => CommandClass::Unknown,
    }
}

/// `cargo`, by subcommand.
pub(super) fn classify_cargo(args: &[Word]) -> CommandClass {
    match first_positional(args) {
        None
        | Some("tree" | "metadata" | "locate-project" | "pkgid" | "verify-project" | "help")
        | Some("version" | "read-manifest") => CommandClass::ReadOnly,
        Some(
            "install" | "uninstall" | "publish" | "login" | "logout" | "owner" | "yank" | "search"
            | "update" | "fetch" | "add" | "info" | "vendor",
        ) => CommandClass::Network,
        Some(_) => CommandClass::WritesWorkspace,
    }
}

/// `npm`, `pnpm`, `yarn` and `bun`, by subcommand.
pub(super) fn classify_js(args: &[Word]) -> CommandClass {
    match first_positional(args) {
        Some("ls" | "list" | "view" | "why" | "outdated" | "help" | "config") => {
            CommandClass::ReadOnly
        }
        Some("run" | "test" | "t" | "start" | "build" | "exec" | "lint" | "format" | "tsc") => {
            CommandClass::WritesWorkspace
        }
        None if args.is_empty() => CommandClass::Network,
        _ => CommandClass::Network,
    }
}
