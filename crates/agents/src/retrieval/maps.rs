//! The code maps of a stage pack (`ast_context_map`, available to all code agents): for code
//! workflows, the AST context map of the files the pack's items come from (their functions with
//! parameters and return types, types with their methods, imports) and a repo map of the rest of
//! the repository ranked by how much it matters to those files and to the identifiers the task
//! names — both within a reserved share of the stage's budget.

use std::fmt::Write as _;

use trellis_index::astmap::{ClassEntry, FunctionEntry};
use trellis_index::{AstContextMap, Outlines, RepoMapRequest};

use super::types::{StageMaps, StagePack};
use trellis_index::chunk::estimate_tokens;

/// What a map request needs from a pack: its code files and the names the task mentions.
pub(crate) fn request(pack: &StagePack, mentioned: &[String], budget: usize) -> RepoMapRequest {
    let mut files: Vec<String> = Vec::new();
    for it in &pack.items {
        // Documents, web pages and advisories have no outline.
        if it.section.is_some() || it.start_line == 0 {
            continue;
        }
        if !files.contains(&it.path) {
            files.push(it.path.clone());
        }
    }
    RepoMapRequest {
        files_in_play: files,
        mentioned: mentioned.to_vec(),
        budget_tokens: budget,
    }
}

/// The maps of one request: the AST context map of its files in play gets up to
/// `ast_share` of the request's budget, the repo map of the other files the rest of it.
pub(crate) fn build(outlines: &Outlines, req: &RepoMapRequest, ast_share: f32) -> StageMaps {
    let ast_budget = (req.budget_tokens as f32 * ast_share.clamp(0.0, 1.0)) as usize;
    let (ast, ast_text, ast_tokens, ast_left_out) =
        ast_part(outlines, &req.files_in_play, ast_budget);
    let map = outlines.repo_map(&RepoMapRequest {
        budget_tokens: req.budget_tokens.saturating_sub(ast_tokens),
        ..req.clone()
    });
    let (repo_map, repo_tokens) = if map.definitions.is_empty() {
        (String::new(), 0)
    } else {
        (map.text, map.tokens)
    };
    StageMaps {
        files: req.files_in_play.clone(),
        ast_context_map: ast,
        ast_text,
        repo_map,
        tokens: ast_tokens + repo_tokens,
        ast_left_out,
        named_by_documents: false,
    }
}

/// The AST context map of `files`, its rendering cut to `budget` tokens, the rendering's
/// tokens and the entries left out.
fn ast_part(
    outlines: &Outlines,
    files: &[String],
    budget: usize,
) -> (AstContextMap, String, usize, usize) {
    let ast = outlines.ast_context_map(files);
    let (text, left_out) = render_ast(&ast, budget);
    let tokens = if text.is_empty() {
        0
    } else {
        estimate_tokens(&text)
    };
    (ast, text, tokens, left_out)
}

/// Document workflows: the outline of the code files the pack's documents name (`outlines`,
/// in order of first mention), cut to `budget` tokens; no repo map.
pub(crate) fn build_named(outlines: &Outlines, budget: usize) -> StageMaps {
    let files = outlines.paths();
    let (ast, ast_text, tokens, ast_left_out) = ast_part(outlines, &files, budget);
    StageMaps {
        files,
        ast_context_map: ast,
        ast_text,
        repo_map: String::new(),
        tokens,
        ast_left_out,
        named_by_documents: true,
    }
}

fn function_line(f: &FunctionEntry) -> String {
    let sig = f.signature.lines().next().unwrap_or("").trim();
    let sig = if sig.is_empty() {
        format!("{}({}) {}", f.name, f.params, f.returns)
    } else {
        sig.trim_end_matches('{').trim_end().to_owned()
    };
    format!("{sig}  [{}-{}]", f.lines[0], f.lines[1])
}

fn class_lines(c: &ClassEntry) -> Vec<String> {
    let head = c.signature.lines().next().unwrap_or("").trim();
    let head = if head.is_empty() {
        c.name.as_str()
    } else {
        head
    };
    let mut v = vec![format!(
        "{}  [{}-{}]",
        head.trim_end_matches('{').trim_end(),
        c.lines[0],
        c.lines[1]
    )];
    v.extend(c.methods.iter().map(|m| format!("  {}", function_line(m))));
    v
}

/// The map as an outline per file (imports, types with their methods, functions), cut at
/// whole lines to `budget` tokens; returns the text and how many entries were left out.
pub(crate) fn render_ast(map: &AstContextMap, budget: usize) -> (String, usize) {
    let mut s = String::new();
    let mut left_out = 0;
    for f in &map.files {
        let mut lines = Vec::new();
        if !f.imports.is_empty() {
            let imports: Vec<&str> = f
                .imports
                .iter()
                .map(|i| i.lines().next().unwrap_or("").trim())
                .collect();
            lines.push(format!("imports: {}", imports.join("; ")));
        }
        for c in &f.classes {
            lines.extend(class_lines(c));
        }
        lines.extend(f.functions.iter().map(function_line));
        let head = format!("{} ({})\n", f.path, f.lang);
        if estimate_tokens(&format!("{s}{head}")) > budget {
            left_out += lines.len();
            continue;
        }
        let mut block = head;
        let mut kept = 0;
        for l in &lines {
            let candidate = format!("{s}{block}  {l}\n");
            if estimate_tokens(&candidate) > budget {
                break;
            }
            let _ = writeln!(block, "  {l}");
            kept += 1;
        }
        left_out += lines.len() - kept;
        // A file none of whose entries fit is left out whole, not shown as a bare name.
        if kept > 0 || lines.is_empty() {
            s.push_str(&block);
        }
    }
    (s, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trellis_index::astmap::FileEntry;
    use trellis_index::chunk::ChunkKind;

    fn f(name: &str, line: u32) -> FunctionEntry {
        FunctionEntry {
            name: name.into(),
            qualified_name: name.into(),
            params: "(a: u32)".into(),
            returns: "bool".into(),
            signature: format!("pub fn {name}(a: u32) -> bool {{"),
            doc: String::new(),
            lines: [line, line + 3],
        }
    }

    #[test]
    fn the_ast_outline_keeps_whole_lines_within_the_budget() {
        let map = AstContextMap {
            files: vec![FileEntry {
                path: "src/auth.rs".into(),
                lang: "rust".into(),
                imports: vec!["use jsonwebtoken::decode;".into()],
                functions: (0..40)
                    .map(|i| f(&format!("check_{i}"), i * 5 + 1))
                    .collect(),
                classes: vec![ClassEntry {
                    name: "Claims".into(),
                    qualified_name: "Claims".into(),
                    kind: ChunkKind::Class,
                    signature: "pub struct Claims {".into(),
                    doc: String::new(),
                    lines: [300, 310],
                    methods: vec![f("expired", 305)],
                }],
            }],
        };
        let mut map = map;
        map.files.push(FileEntry {
            path: "src/other.rs".into(),
            lang: "rust".into(),
            imports: Vec::new(),
            functions: vec![f("helper", 1)],
            classes: Vec::new(),
        });
        let (full, none_left) = render_ast(&map, 100_000);
        assert_eq!(none_left, 0);
        assert!(full.starts_with("src/auth.rs (rust)\n  imports: use jsonwebtoken::decode;\n"));
        assert!(full.contains(
            "  pub struct Claims  [300-310]\n    pub fn expired(a: u32) -> bool  [305-308]\n"
        ));
        assert!(full.contains("  pub fn check_39(a: u32) -> bool  [196-199]\n"));
        let (cut, left) = render_ast(&map, 120);
        assert!(estimate_tokens(&cut) <= 120, "{cut}");
        assert!(left > 1 && left < 44, "{left}");
        // The second file's entries did not fit: no bare header for it.
        assert!(!cut.contains("src/other.rs"), "{cut}");
        // Whole lines only, in order: the cut text is a prefix of the full one.
        assert!(full.starts_with(&cut));
        assert!(cut.ends_with('\n'));
    }
}
