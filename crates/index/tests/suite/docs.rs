//! Document sections and their classification.

use trellis_index::Category;
use trellis_index::docs::{classify, sections};
use trellis_index::lang::Lang;

#[test]
fn markdown_sections_have_paths_and_skip_fences() {
    let src = "# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n\n```sh\n# not a heading\n```\n\n### From source\n\nBuild.\n\n## Usage\n\nUse it.\n";
    let s = sections(Lang::Markdown, "docs/guide.md", src);
    let paths: Vec<&str> = s.iter().map(|x| x.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "Guide",
            "Guide > Install",
            "Guide > Install > From source",
            "Guide > Usage"
        ]
    );
    assert_eq!((s[1].start_line, s[1].end_line), (5, 12));
    assert_eq!(s[2].parent, "Guide > Install");
    assert_eq!(s[3].end_line, 19);
}

#[test]
fn setext_and_front_matter() {
    let src = "---\ntitle: x\n---\nTitle\n=====\n\ntext\n\nPart\n----\n\nmore\n";
    let s = sections(Lang::Markdown, "README.md", src);
    let paths: Vec<&str> = s.iter().map(|x| x.path.as_str()).collect();
    assert_eq!(paths, ["Title", "Title > Part"]);
}

#[test]
fn rst_sections_follow_adornment_order() {
    let src = "=====\nTitle\n=====\n\nIntro.\n\nSection A\n---------\n\nA.\n\nSub\n~~~\n\nS.\n\nSection B\n---------\n\nB.\n";
    let s = sections(Lang::Rst, "docs/index.rst", src);
    let paths: Vec<&str> = s.iter().map(|x| x.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "Title",
            "Title > Section A",
            "Title > Section A > Sub",
            "Title > Section B"
        ]
    );
}

#[test]
fn long_sections_are_windowed_and_text_is_paragraph_split() {
    let body: String = (0..300).map(|i| format!("line {i}\n")).collect();
    let src = format!("# Big\n{body}");
    let s = sections(Lang::Markdown, "big.md", &src);
    assert_eq!(s.len(), 3);
    assert_eq!(s[1].path, "Big (part 2)");
    let text: String = (0..100)
        .map(|i| {
            if i % 10 == 9 {
                "\n".to_string()
            } else {
                format!("w{i}\n")
            }
        })
        .collect();
    let t = sections(Lang::Text, "notes.txt", &text);
    assert!(t.len() >= 2);
    assert!(t.iter().all(|x| x.end_line - x.start_line < 60));
}

#[test]
fn decisions_and_specs_are_recognised() {
    assert_eq!(
        classify("docs/adr/0001-use-sqlite.md", &[]),
        Category::Decision
    );
    assert_eq!(classify("docs/decisions/x.md", &[]), Category::Decision);
    assert_eq!(
        classify(
            "notes/storage.md",
            &[
                "Use SQLite",
                "Status",
                "Context",
                "Decision",
                "Consequences"
            ]
        ),
        Category::Decision
    );
    assert_eq!(classify("specs/protocol.md", &[]), Category::Spec);
    assert_eq!(classify("docs/rfcs/0002-x.md", &[]), Category::Spec);
    assert_eq!(
        classify("docs/api.md", &["API Specification"]),
        Category::Spec
    );
    assert_eq!(classify("docs/guide.md", &["Guide"]), Category::Doc);
}
