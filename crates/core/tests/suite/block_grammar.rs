//! A `blocks` role's grammar (`block_grammar`) held by the embedded model: whatever the
//! random-weights fixture writes, its answer is a sentence or three, then edit blocks naming
//! the file shown whose SEARCH parts are runs of the shown lines in their order (at most 16),
//! each REPLACE part at most 8 lines longer than its SEARCH part.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use trellis_agents::agent::{block_grammar, shown_lines};
use trellis_config::Config;
use trellis_llm::{ChatRequest, FinishReason, Message, ModelProvider, ModelRegistry};

const FILE: &str = "def area(w, h):\n    return w + h\n\n\ndef perimeter(w, h):\n    \
                    return 2 * (w + h)\n\n\ndef square(s):\n    return area(s, s)\n";

/// Where an answer stopped being well formed, if it did: `text` is read line by line (a
/// last line without its newline is an answer cut by the token limit and is not read);
/// returns the number of SEARCH parts it completed.
fn check(text: &str, lines: &[&str], finished: bool) -> Result<usize, String> {
    let mut read: Vec<&str> = text.split('\n').collect();
    let cut = read.pop().unwrap_or_default();
    if finished && !cut.is_empty() {
        return Err(format!("a finished answer ends in a partial line: {cut:?}"));
    }
    let mut i = 0;
    let mut say = 0;
    while i < read.len() && read[i] != "shapes.py" {
        let l = read[i];
        let first = l.chars().next();
        let ok = matches!(first, Some(c) if !"<>=`".contains(c)) || (l.is_empty() && say > 0);
        // Random weights split characters across tokens: a broken one shows as U+FFFD.
        if !ok || l.chars().filter(|c| *c != '\u{FFFD}').count() > 200 {
            return Err(format!("line {i} is not a sentence line: {l:?}"));
        }
        if !l.is_empty() {
            say += 1;
        }
        i += 1;
    }
    if !(1..=3).contains(&say) {
        return Err(format!("{say} sentence lines before the first block"));
    }
    let mut searches = 0;
    let mut in_replace = false;
    let mut copied = 0;
    let mut written = 0;
    while i < read.len() {
        if in_replace {
            if read[i] == ">>>>>>> REPLACE" {
                in_replace = false;
                i += 1;
                // A blank line may separate the blocks.
                if read.get(i) == Some(&"") {
                    i += 1;
                }
                continue;
            }
            if read[i].starts_with(">>>>>") {
                return Err(format!("line {i} starts with five `>`: {:?}", read[i]));
            }
            written += 1;
            if written > copied + 8 {
                return Err(format!(
                    "a REPLACE part of {written} lines for {copied} copied"
                ));
            }
            i += 1;
            continue;
        }
        if read[i] != "shapes.py" || read.get(i + 1).is_some_and(|l| *l != "<<<<<<< SEARCH") {
            return Err(format!("line {i} does not open a block: {:?}", read[i]));
        }
        i += 2;
        let start = i;
        while i < read.len() && read[i] != "=======" {
            i += 1;
        }
        let part = &read[start.min(read.len())..i];
        let found = part.is_empty() || (0..lines.len()).any(|at| lines[at..].starts_with(part));
        if part.len() > 16 {
            return Err(format!("a SEARCH part of {} lines", part.len()));
        }
        if !found {
            return Err(format!(
                "the SEARCH part {part:?} is no run of the shown lines"
            ));
        }
        if i < read.len() {
            if part.is_empty() {
                return Err(format!("an empty SEARCH part at line {i}"));
            }
            searches += 1;
            in_replace = true;
            copied = part.len();
            written = 0;
            i += 1;
        }
    }
    if finished && in_replace {
        return Err("a finished answer leaves its last block open".into());
    }
    Ok(searches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_weights_write_only_blocks_of_the_lines_shown() {
    let pack = "## Retrieved context\n### shapes.py:1-10 (area) — index\n```python\n…\n```\n";
    let shown = shown_lines(&[Message::user(pack)]);
    assert_eq!(shown["shapes.py"], vec![(1, 10)]);
    let lines: Vec<&str> = FILE.lines().collect();
    let run: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    let grammar = block_grammar(&[("shapes.py".to_owned(), vec![run])]).unwrap();
    let p: Arc<dyn ModelProvider> = ModelRegistry::from_config(&Config::default())
        .unwrap()
        .provider("tiny")
        .unwrap();
    let mut searches = 0;
    for seed in 0..2 {
        let req = ChatRequest {
            max_tokens: Some(600),
            temperature: Some(1.0),
            seed: Some(seed),
            grammar: Some(grammar.clone()),
            ..ChatRequest::new(vec![Message::user("Fix `area`: it adds.")])
        };
        let c = p.complete(req, CancellationToken::new()).await.unwrap();
        let finished = c.finish == Some(FinishReason::Stop);
        searches += check(&c.text, &lines, finished)
            .unwrap_or_else(|e| panic!("answer {seed}: {e}\n---\n{}", c.text));
    }
    // Each answer costs a grammar pass over the whole vocabulary for most tokens (random
    // weights rarely pick an allowed one): a few short answers. The check above read real
    // SEARCH parts, not only sentences cut by the limit.
    assert!(searches > 0, "no answer reached a SEARCH part's end");
}

#[test]
fn the_checker_refuses_what_the_grammar_forbids() {
    let lines: Vec<&str> = FILE.lines().collect();
    let ok = "Fix it.\n\nshapes.py\n<<<<<<< SEARCH\n    return w + h\n=======\n    return w * h\n>>>>>>> REPLACE\n";
    assert_eq!(check(ok, &lines, true), Ok(1));
    for bad in [
        "```python\nx\n```\n",
        "Fix it.\nother.py\n<<<<<<< SEARCH\n    return w + h\n=======\n>>>>>>> REPLACE\n",
        "Fix it.\nshapes.py\n<<<<<<< SEARCH\n    return w - h\n=======\n>>>>>>> REPLACE\n",
        "Fix it.\nshapes.py\n<<<<<<< SEARCH\ndef area(w, h):\n\n=======\n>>>>>>> REPLACE\n",
        "Fix it.\nshapes.py\n<<<<<<< SEARCH\n    return w + h\n=======\n    return w * h\n",
        "Fix it.\nshapes.py\n<<<<<<< SEARCH\n    return w + h\n=======\n\n\n\n\n\n\n\n\n\n\n>>>>>>> REPLACE\n",
    ] {
        assert!(check(bad, &lines, true).is_err(), "{bad}");
    }
}
