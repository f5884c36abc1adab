//! Code files that documents name. A design document or decision record that says
//! `inventory.py` or `src/auth/jwt.rs` is about that code; a discussion workflow indexes
//! documents only (no AST work), so the retrieval agent asks here for the outlines of the
//! code files its sections name — definitions and imports, no bodies — to show beside them.

use std::path::Path;

use crate::astmap::Outlines;
use crate::index::Index;
use crate::lang::Lang;
use crate::meta::FileOutline;
use crate::scan::{Excludes, stat};
use crate::symbols;

/// The existing, indexable code files named in `texts` (each paired with the path of the
/// document it comes from), in order of first mention, at most `max`. A name is a path from
/// the repository root or from the document's directory (`../src/a.py`); names that leave
/// the repository, absolute paths and URLs are ignored.
pub fn named_code_files(
    root: &Path,
    excludes: &Excludes,
    texts: &[(&str, &str)],
    max: usize,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (doc, text) in texts {
        let doc_dir = doc.rsplit_once('/').map_or("", |(d, _)| d);
        for token in text.split(|c: char| !(c.is_alphanumeric() || "_./-".contains(c))) {
            if out.len() >= max {
                return out;
            }
            let token = token.trim_end_matches('.');
            if token.starts_with('/') || !token.contains('.') || !Lang::detect(token).is_code() {
                continue;
            }
            let candidates = [normalize("", token), normalize(doc_dir, token)];
            let found = candidates
                .into_iter()
                .flatten()
                .find(|rel| stat(root, rel, excludes).is_some());
            if let Some(rel) = found
                && !out.contains(&rel)
            {
                out.push(rel);
            }
        }
    }
    out
}

/// `base/name` with `.` and `..` resolved; `None` when it leaves the root.
fn normalize(base: &str, name: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for p in name.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The outline of one code file read from disk; `None` when it cannot be read or parsed.
fn outline(root: &Path, rel: &str) -> Option<FileOutline> {
    let lang = Lang::detect(rel);
    let source = std::fs::read_to_string(root.join(rel)).ok()?;
    let fs = symbols::extract(lang, &source)?;
    Some(FileOutline {
        path: rel.to_string(),
        lang: lang.as_str().to_string(),
        symbols: fs.symbols,
        imports: fs.imports,
        refs: fs.refs,
    })
}

impl Index {
    /// The outlines of the code files `texts` name ([`named_code_files`]), parsed from the
    /// files on disk (a document index holds no symbols), in order of first mention.
    pub fn named_code_outlines(&self, texts: &[(&str, &str)], max: usize) -> Outlines {
        let files = named_code_files(self.root(), self.excludes(), texts, max);
        Outlines::from(
            files
                .iter()
                .filter_map(|rel| outline(self.root(), rel))
                .collect::<Vec<_>>(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IndexConfig;

    #[test]
    fn documents_name_files_from_the_root_or_their_own_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("inventory.py"), "def f():\n    pass\n").unwrap();
        std::fs::write(root.join("src/jwt.rs"), "fn check() {}\n").unwrap();
        std::fs::write(root.join("docs/notes.md"), "# notes\n").unwrap();
        let excludes = Excludes::new(&IndexConfig::default()).unwrap();
        let texts = [
            (
                "docs/adr/0001.md",
                "`Inventory` (inventory.py) and ../../src/jwt.rs. Also inventory.py again, \
                 docs/notes.md (not code), missing.py, /etc/passwd.py, \
                 https://example.com/a.py and ../../../outside.py.",
            ),
            ("README.md", "See `src/jwt.rs`."),
        ];
        let named = named_code_files(root, &excludes, &texts, 10);
        assert_eq!(named, vec!["inventory.py", "src/jwt.rs"]);
        assert_eq!(
            named_code_files(root, &excludes, &texts, 1),
            vec!["inventory.py"]
        );
    }

    #[test]
    fn paths_are_normalized_inside_the_root() {
        assert_eq!(normalize("docs/adr", "../../a.py").as_deref(), Some("a.py"));
        assert_eq!(normalize("", "./src/./a.py").as_deref(), Some("src/a.py"));
        assert_eq!(normalize("docs", "../../a.py"), None);
    }
}
