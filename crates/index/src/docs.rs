//! Documents: Markdown and reStructuredText split into heading-scoped sections with their path
//! (`doc > section > subsection`), plain text split into paragraph windows, and the
//! recognition of decision records and specifications.

use crate::chunk::Category;
use crate::lang::Lang;

/// Longest section kept in one piece; longer ones are split into windows.
pub const MAX_SECTION_LINES: usize = 120;

/// A heading-scoped piece of a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// The heading (or the document title for text before the first heading).
    pub heading: String,
    /// Headings from the document title down to this one, joined by ` > `.
    pub path: String,
    /// The parent section's path, empty for the document itself.
    pub parent: String,
    /// First line, 1-based.
    pub start_line: u32,
    /// Last line, 1-based, inclusive.
    pub end_line: u32,
}

/// A heading found in a document: its level (1 = top), text and 0-based line span (two lines
/// for setext/RST underlined headings).
#[derive(Debug)]
struct Heading {
    level: usize,
    text: String,
    line: usize,
}

/// Splits a document into sections. `title` names the document when it has no top heading.
pub fn sections(lang: Lang, path: &str, source: &str) -> Vec<Section> {
    let lines: Vec<&str> = source.lines().collect();
    let body_start = if lang == Lang::Markdown {
        front_matter_end(&lines)
    } else {
        0
    };
    let headings = match lang {
        Lang::Markdown => markdown_headings(&lines, body_start),
        Lang::Rst => rst_headings(&lines),
        _ => Vec::new(),
    };
    if headings.is_empty() {
        return paragraph_windows(path, &lines);
    }
    let file_title = file_stem(path);
    // A single top-level heading at the start is the document title.
    let min_level = headings.iter().map(|h| h.level).min().unwrap_or(1);
    let title_is_heading = headings.iter().filter(|h| h.level == min_level).count() == 1
        && headings[0].level == min_level;
    let doc = if title_is_heading {
        headings[0].text.clone()
    } else {
        file_title
    };
    let mut out = Vec::new();
    let first = headings[0].line;
    if first > body_start
        && lines[body_start..first]
            .iter()
            .any(|l| !l.trim().is_empty())
    {
        push_windows(&mut out, &doc, &doc, "", body_start, first - 1);
    }
    // Stack of (level, heading path).
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (i, h) in headings.iter().enumerate() {
        let end = headings.get(i + 1).map_or(lines.len(), |n| n.line) - 1;
        while stack.last().is_some_and(|(l, _)| *l >= h.level) {
            stack.pop();
        }
        let parent = stack.last().map_or_else(|| doc.clone(), |(_, p)| p.clone());
        let path = if title_is_heading && i == 0 {
            doc.clone()
        } else {
            format!("{parent} > {}", h.text)
        };
        let parent_for_section = if title_is_heading && i == 0 {
            String::new()
        } else {
            parent
        };
        push_windows(&mut out, &h.text, &path, &parent_for_section, h.line, end);
        stack.push((h.level, path));
    }
    out
}

fn push_windows(
    out: &mut Vec<Section>,
    heading: &str,
    path: &str,
    parent: &str,
    start: usize,
    end: usize,
) {
    let mut s = start;
    let mut part = 1;
    while s <= end {
        let e = (s + MAX_SECTION_LINES - 1).min(end);
        let (h, p) = if s == start {
            (heading.to_string(), path.to_string())
        } else {
            part += 1;
            (
                format!("{heading} (part {part})"),
                format!("{path} (part {part})"),
            )
        };
        out.push(Section {
            heading: h,
            path: p,
            parent: parent.to_string(),
            start_line: s as u32 + 1,
            end_line: e as u32 + 1,
        });
        s = e + 1;
    }
}

fn file_stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.rsplit_once('.')
        .map_or(name, |(stem, _)| stem)
        .to_string()
}

/// The first line after YAML front matter (0 when there is none).
fn front_matter_end(lines: &[&str]) -> usize {
    if lines.first().is_some_and(|l| l.trim_end() == "---")
        && let Some(end) = lines.iter().skip(1).position(|l| l.trim_end() == "---")
    {
        return end + 2;
    }
    0
}

fn markdown_headings(lines: &[&str], start: usize) -> Vec<Heading> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut i = start;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if indent < 4
            && let Some(c) = ['`', '~'].into_iter().find(|c| t.starts_with(*c))
        {
            let n = t.chars().take_while(|x| *x == c).count();
            if n >= 3 {
                match fence {
                    None => fence = Some((c, n)),
                    Some((fc, fnum)) if fc == c && n >= fnum && t[n..].trim().is_empty() => {
                        fence = None
                    }
                    Some(_) => {}
                }
                i += 1;
                continue;
            }
        }
        if fence.is_some() {
            i += 1;
            continue;
        }
        if indent < 4 && t.starts_with('#') {
            let level = t.chars().take_while(|c| *c == '#').count();
            let rest = &t[level..];
            if level <= 6 && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
                let text = rest.trim().trim_end_matches('#').trim().to_string();
                if !text.is_empty() {
                    out.push(Heading {
                        level,
                        text,
                        line: i,
                    });
                }
                i += 1;
                continue;
            }
        }
        // Setext: a paragraph line underlined with === or ---.
        if let Some(next) = lines.get(i + 1) {
            let n = next.trim();
            let prev_blank = i == start || lines[i - 1].trim().is_empty();
            if !t.is_empty()
                && indent < 4
                && prev_blank
                && n.len() >= 2
                && (n.chars().all(|c| c == '=') || n.chars().all(|c| c == '-'))
                && !t.starts_with(['-', '*', '>', '|'])
            {
                let level = if n.starts_with('=') { 1 } else { 2 };
                out.push(Heading {
                    level,
                    text: t.trim().to_string(),
                    line: i,
                });
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    out
}

fn rst_headings(lines: &[&str]) -> Vec<Heading> {
    const ADORN: &str = "=-~^\"'`#*+<>:._";
    let is_adorn = |l: &str| {
        let t = l.trim_end();
        t.len() >= 3
            && t.chars()
                .next()
                .is_some_and(|c| ADORN.contains(c) && t.chars().all(|x| x == c))
    };
    let mut styles: Vec<(char, bool)> = Vec::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let overline = is_adorn(lines[i]);
        let (text_idx, under_idx) = if overline { (i + 1, i + 2) } else { (i, i + 1) };
        let (Some(text), Some(under)) = (lines.get(text_idx), lines.get(under_idx)) else {
            break;
        };
        let tt = text.trim();
        if !tt.is_empty()
            && !is_adorn(text)
            && is_adorn(under)
            && under.trim_end().len() >= tt.len()
        {
            let c = under.trim().chars().next().unwrap_or('=');
            let style = (c, overline);
            let level = match styles.iter().position(|s| *s == style) {
                Some(p) => p + 1,
                None => {
                    styles.push(style);
                    styles.len()
                }
            };
            out.push(Heading {
                level,
                text: tt.to_string(),
                line: i,
            });
            i = under_idx + 1;
            continue;
        }
        i += 1;
    }
    out
}

/// Splits text without headings into windows of up to 60 lines, cut at blank lines.
fn paragraph_windows(path: &str, lines: &[&str]) -> Vec<Section> {
    const TARGET: usize = 60;
    let title = file_stem(path);
    let mut out = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        // Skip leading blank lines.
        while start < lines.len() && lines[start].trim().is_empty() {
            start += 1;
        }
        if start >= lines.len() {
            break;
        }
        let hard_end = (start + TARGET).min(lines.len());
        let mut end = hard_end;
        if hard_end < lines.len() {
            // Prefer the last blank line in the second half of the window.
            if let Some(b) = (start + TARGET / 2..hard_end)
                .rev()
                .find(|&j| lines[j].trim().is_empty())
            {
                end = b;
            }
        }
        let n = out.len() + 1;
        let name = if n == 1 && end >= lines.len() {
            title.clone()
        } else {
            format!("{title} (part {n})")
        };
        out.push(Section {
            heading: name.clone(),
            path: name,
            parent: String::new(),
            start_line: start as u32 + 1,
            end_line: end as u32,
        });
        start = end;
    }
    out
}

/// Decides whether a document is a decision record, a specification or plain documentation,
/// from its location and its headings.
pub fn classify(path: &str, headings: &[&str]) -> Category {
    let lower = path.to_ascii_lowercase();
    let segments: Vec<&str> = lower.split('/').collect();
    let file = segments.last().copied().unwrap_or("");
    let dirs = &segments[..segments.len().saturating_sub(1)];
    const DECISION_DIRS: &[&str] = &[
        "adr",
        "adrs",
        "decisions",
        "decision-log",
        "decision_log",
        "decision-records",
        "architecture-decisions",
    ];
    const SPEC_DIRS: &[&str] = &[
        "spec",
        "specs",
        "specification",
        "specifications",
        "rfc",
        "rfcs",
        "design",
        "designs",
        "proposals",
        "requirements",
    ];
    let dir_match = |set: &[&str]| dirs.iter().any(|d| set.contains(d));
    if dir_match(DECISION_DIRS)
        || file.starts_with("adr-")
        || file.starts_with("adr_")
        || file.contains("decision")
    {
        return Category::Decision;
    }
    let heads: Vec<String> = headings.iter().map(|h| h.to_ascii_lowercase()).collect();
    let has = |name: &str| {
        heads.iter().any(|h| {
            h.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ' ') == name
        })
    };
    if has("status") && has("decision") && (has("context") || has("consequences")) {
        return Category::Decision;
    }
    if dir_match(SPEC_DIRS)
        || file.contains("spec")
        || file.starts_with("rfc")
        || file.contains("requirements")
        || file.starts_with("prd")
    {
        return Category::Spec;
    }
    if heads.first().is_some_and(|h| {
        h.contains("specification") || h.starts_with("rfc") || h.contains("requirements")
    }) {
        return Category::Spec;
    }
    Category::Doc
}
