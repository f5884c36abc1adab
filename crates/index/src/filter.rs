//! Which files a retrieval may return ([`Index::retrieve`](crate::Index::retrieve)): test
//! files, generated and vendored files, non-code text files, languages and path globs — the
//! `index.search` filter settings and `trellis search`'s flags.
//!
//! The defaults suit code questions: generated/vendored files and non-code text files
//! (stylesheets, translations, licences, certificates, data and configuration formats) are
//! left out, tests are kept. Everything is decided from the chunk's path, language and
//! category, so a filter never needs the index rebuilt.

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::chunk::{Category, Chunk};
use crate::config::SearchConfig;
pub use crate::config::TestFiles;
use crate::error::{Error, Result};
use crate::lang::Lang;

/// The language names [`SearchConfig::languages`] accepts (a chunk's `lang`).
pub const LANGUAGES: &[&str] = &[
    "rust",
    "python",
    "javascript",
    "typescript",
    "tsx",
    "go",
    "java",
    "c",
    "cpp",
    "markdown",
    "rst",
    "text",
];

/// The compiled filter of a retrieval.
#[derive(Clone, Debug)]
pub struct SearchFilter {
    tests: TestFiles,
    generated: bool,
    non_code: bool,
    languages: Vec<String>,
    paths: Option<GlobSet>,
    exclude_paths: Option<GlobSet>,
}

impl SearchFilter {
    /// Compiles the filter settings of `config`; an unknown language or an invalid glob is an
    /// error naming the setting.
    pub fn new(config: &SearchConfig) -> Result<Self> {
        for l in &config.languages {
            if !LANGUAGES.contains(&l.as_str()) {
                return Err(Error::Config(format!(
                    "search.languages: unknown language `{l}`; use one of {} (`text` is every \
                     file without a parser)",
                    LANGUAGES.join(", ")
                )));
            }
        }
        Ok(SearchFilter {
            tests: config.tests,
            generated: config.generated,
            non_code: config.non_code,
            languages: config.languages.clone(),
            paths: globs("search.paths", &config.paths)?,
            exclude_paths: globs("search.exclude_paths", &config.exclude_paths)?,
        })
    }

    /// Whether every chunk passes (nothing to check).
    pub fn accepts_all(&self) -> bool {
        self.tests == TestFiles::Include
            && self.generated
            && self.non_code
            && self.languages.is_empty()
            && self.paths.is_none()
            && self.exclude_paths.is_none()
    }

    /// Whether `chunk` may be returned.
    pub fn accepts(&self, chunk: &Chunk) -> bool {
        let path = chunk.path.as_str();
        let tests_ok = match self.tests {
            TestFiles::Include => true,
            TestFiles::Exclude => !is_test_path(path),
            TestFiles::Only => is_test_path(path),
        };
        tests_ok
            && (self.generated || !is_generated_path(path))
            && (self.non_code || !is_non_code(chunk))
            && (self.languages.is_empty() || self.languages.contains(&chunk.lang))
            && self.paths.as_ref().is_none_or(|g| g.is_match(path))
            && self
                .exclude_paths
                .as_ref()
                .is_none_or(|g| !g.is_match(path))
    }
}

fn globs(setting: &str, patterns: &[String]) -> Result<Option<GlobSet>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let glob = Glob::new(p).map_err(|e| {
            Error::Config(format!(
                "{setting}: invalid glob `{p}` ({e}); globs are relative to the workspace \
                 root, e.g. `src/**` or `**/*.rs`"
            ))
        })?;
        b.add(glob);
    }
    b.build()
        .map(Some)
        .map_err(|e| Error::Config(format!("{setting}: {e}")))
}

/// Paths that look like tests.
pub fn is_test_path(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    let file = p.rsplit('/').next().unwrap_or(&p);
    p.split('/').any(|s| {
        matches!(
            s,
            "test" | "tests" | "__tests__" | "testing" | "spec" | "testdata"
        )
    }) || file.starts_with("test_")
        || file.contains("_test.")
        || file.contains(".test.")
        || file.contains(".spec.")
        || file.ends_with("test.java")
        || file.ends_with("tests.rs")
}

/// Directories of vendored (copied-in third-party) code.
const VENDORED_DIRS: &[&str] = &[
    "vendor",
    "vendored",
    "third_party",
    "third-party",
    "thirdparty",
    "3rdparty",
    "bower_components",
    "site-packages",
];

/// Directories of generated code.
const GENERATED_DIRS: &[&str] = &["generated", "__generated__", "_generated", "autogen"];

/// File-name endings of generated code (protobuf, gRPC, Dart builders, designers).
const GENERATED_SUFFIXES: &[&str] = &[
    ".pb.go",
    ".pb.cc",
    ".pb.h",
    ".pb.rs",
    "_pb2.py",
    "_pb2.pyi",
    "_pb2_grpc.py",
    "_grpc.pb.go",
    ".pb.gw.go",
    ".g.dart",
    ".freezed.dart",
    ".designer.cs",
    ".g.cs",
];

/// Paths of generated or vendored files (by directory and file name; see docs/retrieval.md).
pub fn is_generated_path(path: &str) -> bool {
    let p = path.to_ascii_lowercase();
    let mut parts = p.split('/').collect::<Vec<_>>();
    let file = parts.pop().unwrap_or_default();
    parts
        .iter()
        .any(|d| VENDORED_DIRS.contains(d) || GENERATED_DIRS.contains(d))
        || GENERATED_SUFFIXES.iter().any(|s| file.ends_with(s))
        || file.contains(".generated.")
        || file.contains("_generated.")
        || file.starts_with("zz_generated")
}

/// Extensions of source files in languages the index has no parser for (indexed as text,
/// category `other`): scripts, build files and templates, which code searches keep.
const CODE_EXTENSIONS: &[&str] = &[
    "sh", "bash", "zsh", "fish", "ksh", "ps1", "psm1", "bat", "cmd", "rb", "rake", "php", "pl",
    "pm", "lua", "kt", "kts", "swift", "scala", "sc", "cs", "fs", "fsx", "vb", "dart", "zig",
    "nim", "ex", "exs", "erl", "hrl", "hs", "ml", "mli", "clj", "cljs", "cljc", "el", "lisp",
    "scm", "rkt", "jl", "r", "m", "mm", "groovy", "gradle", "sql", "proto", "graphql", "gql", "tf",
    "hcl", "nix", "vue", "svelte", "astro", "html", "htm", "cmake", "mk", "asm", "s", "v", "sv",
    "vhd", "vhdl", "sol", "cu", "cuh", "f90", "pas", "cr", "elm", "gleam", "odin", "bzl", "star",
    "wgsl", "glsl", "hlsl", "vim", "awk", "tcl", "coffee", "pyx", "pxd",
];

/// File names (lower case) of build and container files without a code extension.
const CODE_FILE_NAMES: &[&str] = &[
    "makefile",
    "gnumakefile",
    "dockerfile",
    "containerfile",
    "justfile",
    "rakefile",
    "gemfile",
    "vagrantfile",
    "jenkinsfile",
    "podfile",
    "build",
    "workspace",
    "build.bazel",
    "workspace.bazel",
    "cmakelists.txt",
];

/// Whether a chunk is of a non-code text file: a file without a parser (category `other`)
/// that is neither a script nor a source or build file of another language (by extension,
/// file name or a `#!` line) — stylesheets, translations, licences, certificates, data and
/// configuration formats.
pub fn is_non_code(chunk: &Chunk) -> bool {
    if chunk.category != Category::Other || Lang::detect(&chunk.path).is_code() {
        return false;
    }
    let file = chunk
        .path
        .rsplit('/')
        .next()
        .unwrap_or(&chunk.path)
        .to_ascii_lowercase();
    if CODE_FILE_NAMES.contains(&file.as_str())
        || CODE_FILE_NAMES
            .iter()
            .any(|n| file.starts_with(&format!("{n}.")))
    {
        return false;
    }
    let is_code_ext = file
        .rsplit_once('.')
        .is_some_and(|(_, ext)| CODE_EXTENSIONS.contains(&ext));
    !is_code_ext && !chunk.text.starts_with("#!")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{ChunkId, ChunkKind, Declaration};

    fn chunk(path: &str, category: Category, text: &str) -> Chunk {
        Chunk {
            id: ChunkId(1),
            path: path.into(),
            category,
            lang: Lang::detect(path).as_str().into(),
            decl: Declaration::new(ChunkKind::Text, 1, 1),
            text: text.into(),
        }
    }

    #[test]
    fn non_code_files_are_told_from_scripts_and_build_files() {
        for p in [
            "web/site.css",
            "LICENSE",
            "locale/de.po",
            ".github/workflows/ci.yml",
            "certs/ca-bundle.pem",
            "Cargo.toml",
            "data/x.json",
        ] {
            assert!(is_non_code(&chunk(p, Category::Other, "x")), "{p}");
        }
        for p in [
            "scripts/release.sh",
            "Makefile",
            "Dockerfile.dev",
            "app/models/user.rb",
            "db/schema.sql",
            "CMakeLists.txt",
        ] {
            assert!(!is_non_code(&chunk(p, Category::Other, "x")), "{p}");
        }
        assert!(!is_non_code(&chunk(
            "bin/tool",
            Category::Other,
            "#!/bin/sh\necho"
        )));
        assert!(!is_non_code(&chunk("README.md", Category::Doc, "x")));
    }

    #[test]
    fn generated_and_vendored_paths() {
        for p in [
            "vendor/github.com/x/y.go",
            "third_party/zlib/inflate.c",
            "api/v1/service.pb.go",
            "proto/msg_pb2.py",
            "src/__generated__/schema.ts",
            "pkg/apis/zz_generated.deepcopy.go",
            "lib/model.g.dart",
        ] {
            assert!(is_generated_path(p), "{p}");
        }
        for p in ["src/vendors.rs", "src/generate.rs", "cmd/gen/main.go"] {
            assert!(!is_generated_path(p), "{p}");
        }
    }

    #[test]
    fn settings_compile_and_bad_ones_name_the_setting() {
        let f = SearchFilter::new(&SearchConfig::default()).unwrap();
        assert!(
            !f.accepts_all(),
            "generated and non-code files are left out by default"
        );
        assert!(f.accepts(&chunk("src/lib.rs", Category::Code, "x")));
        assert!(f.accepts(&chunk("tests/it.rs", Category::Code, "x")));
        assert!(!f.accepts(&chunk("site.css", Category::Other, "x")));
        let err = SearchFilter::new(&SearchConfig {
            paths: vec!["src/[".into()],
            ..SearchConfig::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("search.paths: invalid glob `src/[`"), "{err}");
        let err = SearchFilter::new(&SearchConfig {
            languages: vec!["cobol".into()],
            ..SearchConfig::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("search.languages: unknown language `cobol`"),
            "{err}"
        );
        let only = SearchFilter::new(&SearchConfig {
            tests: TestFiles::Only,
            languages: vec!["rust".into()],
            paths: vec!["crates/**".into()],
            exclude_paths: vec!["crates/old/**".into()],
            ..SearchConfig::default()
        })
        .unwrap();
        assert!(only.accepts(&chunk("crates/a/tests/it.rs", Category::Code, "x")));
        assert!(!only.accepts(&chunk("crates/a/src/lib.rs", Category::Code, "x")));
        assert!(!only.accepts(&chunk("crates/old/tests/it.rs", Category::Code, "x")));
        assert!(!only.accepts(&chunk("tests/it.rs", Category::Code, "x")));
        assert!(!only.accepts(&chunk("crates/a/tests/it.py", Category::Code, "x")));
    }
}
