//! Which language server serves which files, how to start it, and where it is installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Progress tokens rust-analyzer uses while it indexes (old and new names).
const INDEXING_TOKENS: &[&str] = &["rustAnalyzer/Indexing", "rustAnalyzer/cachePriming"];

/// What pyright logs once it has enumerated the workspace's source files.
const PYRIGHT_ENUMERATED: &str = "source file";

/// How to start a language server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// LSP language id of the files (`rust`, `python`, `typescript`, …).
    pub language: &'static str,
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// What says the server has taken in the workspace and answers completely.
    pub readiness: Readiness,
    /// `initializationOptions` of the handshake.
    pub initialization_options: Option<serde_json::Value>,
}

/// What a language server sends once it has taken in the workspace (before that, answers
/// such as references cover only the files opened so far).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready as soon as the handshake is done.
    Immediate,
    /// Ready when a `$/progress` with one of these tokens ends (rust-analyzer's
    /// `rustAnalyzer/Indexing` and `rustAnalyzer/cachePriming`).
    ProgressEnds(&'static [&'static str]),
    /// Ready when a `window/logMessage` contains this text (pyright's and basedpyright's
    /// "Found 2 source files" / "No source files found" once the workspace is enumerated).
    LogMessage(&'static str),
}

impl ServerSpec {
    /// The server for a file, by extension: rust-analyzer for `.rs`, pyright for `.py`,
    /// typescript-language-server for `.ts`/`.tsx`/`.js`/`.jsx`.
    pub fn for_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?;
        let tsserver = |language| {
            (
                language,
                "typescript-language-server",
                vec!["--stdio"],
                Readiness::Immediate,
            )
        };
        let (language, program, args, readiness) = match ext {
            "rs" => (
                "rust",
                "rust-analyzer",
                vec![],
                Readiness::ProgressEnds(INDEXING_TOKENS),
            ),
            "py" => (
                "python",
                "pyright-langserver",
                vec!["--stdio"],
                Readiness::LogMessage(PYRIGHT_ENUMERATED),
            ),
            "ts" | "mts" | "cts" => tsserver("typescript"),
            "tsx" => tsserver("typescriptreact"),
            "js" | "mjs" | "cjs" => tsserver("javascript"),
            "jsx" => tsserver("javascriptreact"),
            _ => return None,
        };
        Some(Self {
            language,
            program: program.to_owned(),
            args: args.into_iter().map(str::to_owned).collect(),
            readiness,
            // typescript-language-server answers from a syntax-only tsserver while the
            // project loads (a definition is then the import, not the declaration): ask the
            // full one always.
            initialization_options: (program == "typescript-language-server")
                .then(|| serde_json::json!({ "tsserver": { "useSyntaxServer": "never" } })),
        })
    }

    /// The configuration's key for this server: the language without `react` (`.tsx` files
    /// are served by `[lsp.servers.typescript]`).
    pub fn config_key(&self) -> &'static str {
        self.language.trim_end_matches("react")
    }
}

/// Where a default server's program is: on `PATH`, else where `scripts/setup.d/72-lsp.sh`
/// installs it (`~/.cache/trellis/lsp-node/node_modules/.bin` for typescript-language-server,
/// the venv `~/.cache/trellis/lsp-venv/bin` for pyright), else the bare name (starting it then
/// fails with a message saying how to install it).
pub fn locate(program: &str) -> String {
    find(program).map_or_else(|| program.to_owned(), |p| p.display().to_string())
}

/// A server's program as [`locate`] finds it (a path given as is, a name on `PATH`, else in
/// the setup's folders); `None` when it is nowhere.
pub fn find(program: &str) -> Option<PathBuf> {
    if program.contains(std::path::MAIN_SEPARATOR) || on_path(program) {
        return Some(PathBuf::from(program));
    }
    installed_dirs()
        .into_iter()
        .map(|d| d.join(program))
        .find(|p| executable(p))
}

/// The folders Trellis's setup installs language servers into.
pub fn installed_dirs() -> Vec<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    cache
        .map(|c| {
            let t = c.join("trellis");
            vec![t.join("lsp-node/node_modules/.bin"), t.join("lsp-venv/bin")]
        })
        .unwrap_or_default()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| executable(&d.join(program))))
}

fn executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// How to install a default server (for the error when it cannot be started).
pub(crate) fn install_hint(program: &str) -> &'static str {
    match program {
        "rust-analyzer" => "install it with `rustup component add rust-analyzer`",
        "pyright-langserver" => {
            "install it with `pip install pyright` (or scripts/setup.d/72-lsp.sh)"
        }
        "typescript-language-server" => {
            "install it with `npm install -g typescript-language-server typescript` (or scripts/setup.d/72-lsp.sh)"
        }
        _ => "check the command in [lsp.servers.LANGUAGE]",
    }
}

/// The `[lsp]` configuration section.
///
/// ```toml
/// [lsp]
/// idle_shutdown_secs = 600
/// warm_for_mcp = true
///
/// [lsp.servers.python]
/// command = "basedpyright-langserver"
/// args = ["--stdio"]
/// ```
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LspConfig {
    /// Replacement servers by language: `rust`, `python`, `typescript` (also `.tsx`),
    /// `javascript` (also `.jsx`).
    pub servers: BTreeMap<String, ServerCommand>,
    /// How long a server may index before it answers anyway (seconds).
    pub ready_timeout_secs: f64,
    /// A server unused this long is shut down, and started again on next use (seconds;
    /// 0: never).
    pub idle_shutdown_secs: f64,
    /// `trellis mcp` starts the servers of the languages present in the workspace in the
    /// background as it starts (and has them take in the workspace), instead of on the
    /// first call that needs one.
    pub warm_for_mcp: bool,
    /// With `warm_for_mcp`, also open the workspace's files in their servers as they start,
    /// so the servers analyse them in the background: the first lookups that touch a file
    /// then find it analysed, but queries made during that analysis compete with it (off by
    /// default; docs/benchmarks.md has the measurements).
    pub warm_open_files: bool,
}

impl Default for LspConfig {
    fn default() -> Self {
        Self {
            servers: BTreeMap::new(),
            ready_timeout_secs: 120.0,
            idle_shutdown_secs: 600.0,
            warm_for_mcp: true,
            warm_open_files: false,
        }
    }
}

/// A language server's command.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerCommand {
    /// The program (on `PATH`, or a path).
    pub command: String,
    /// Its arguments (pyright and typescript-language-server need `--stdio`).
    #[serde(default)]
    pub args: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_by_extension() {
        let lang = |p: &str| ServerSpec::for_path(Path::new(p)).map(|s| s.language);
        assert_eq!(lang("a/b.rs"), Some("rust"));
        assert_eq!(lang("x.py"), Some("python"));
        assert_eq!(lang("x.tsx"), Some("typescriptreact"));
        assert_eq!(lang("x.mjs"), Some("javascript"));
        assert_eq!(lang("README.md"), None);
        let tsx = ServerSpec::for_path(Path::new("x.tsx")).unwrap();
        assert_eq!(tsx.config_key(), "typescript");
        assert_eq!(tsx.program, "typescript-language-server");
    }

    #[test]
    fn locate_keeps_paths_and_unknown_names() {
        assert_eq!(locate("/opt/x/bin/srv"), "/opt/x/bin/srv");
        assert_eq!(
            locate("no-such-language-server-xyz"),
            "no-such-language-server-xyz"
        );
        // `sh` is on PATH everywhere: kept bare.
        assert_eq!(locate("sh"), "sh");
    }

    #[test]
    fn config_defaults_and_idle_shutdown() {
        let c: LspConfig = serde_json::from_str(r#"{"idle_shutdown_secs": 5}"#).unwrap();
        assert_eq!(c.idle_shutdown_secs, 5.0);
        assert_eq!(c.ready_timeout_secs, 120.0);
        assert_eq!(LspConfig::default().idle_shutdown_secs, 600.0);
        assert!(c.warm_for_mcp && !c.warm_open_files);
        let off: LspConfig = serde_json::from_str(r#"{"warm_for_mcp": false}"#).unwrap();
        assert!(!off.warm_for_mcp);
        assert!(serde_json::from_str::<LspConfig>(r#"{"idle": 5}"#).is_err());
    }
}
