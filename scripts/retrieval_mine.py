#!/usr/bin/env python3
"""Mines localisation queries from public repositories' history (docs/retrieval.md, "Learned
ranking"): commit message -> the non-test source files and lines the commit changed.

    python3 scripts/retrieval_mine.py --split dev --out /tmp/rank/data/dev.jsonl \
        [--mirrors /work/.mirror] [--per-repo 40] [--manifest fixtures/retrieval-dev/repos.tsv]

Each repository of the manifest's split is read from a bare mirror with full history
(`<mirrors>/<owner>+<name>/repo`), walking first-parent history from the pinned head, newest
first. A commit is kept when
- it is not a merge, and its subject is not release/chore/docs/ci/style/test/bump/revert/typo;
- it modifies 1-3 non-test source files (supported languages), adds, deletes or renames none,
  and touches at most 12 files in all (tests, docs and changelogs may change too);
- its cleaned message has at least 6 words and 30 characters.
Fix-like commits (fix, bug, crash, error, wrong, leak, ...) are taken first, newest first, up
to `--per-repo`; other commits fill up from the same window. The query is subject + body
with trailers (Signed-off-by:, Fixes: #12, Refs: URL, ...; never the subject, and a `fix:` line
that is more than references is text), PR/issue numbers and URLs removed; file
names and identifiers are kept (issue texts name them too). The gold is each changed file
with the line ranges the diff removes or edits on the parent side (an insertion counts the
lines around it); the evaluator maps them to the functions of the parent's index.

`--order history` writes each repository's picked commits newest first whatever their kind (the
evaluator then walks history in one direction, so each snapshot update is small); the default
keeps fix-like commits first (the dev set's `--max-per-repo` cut depends on it).
`--traces` keeps only commits whose message pastes a stack trace or a `path:line` location (a
loose pre-filter; the evaluator's report says what the query analysis actually read).

Output: one JSON object a line: id, repo, split, lang, commit, parent, fix_like, query,
gold [{path, lines: [[start, end], ...]}]. Deterministic for a given manifest and mirror.
Repositories listed in fixtures/retrieval-dev/excluded-repos.txt are refused.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCE_EXT = {
    ".py", ".rs", ".go", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".java",
    ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx",
}
SKIP_SUBJECT = re.compile(
    r"^(release|bump|chore|docs?|ci|build|style|test|tests|revert|merge|prepare|update changelog|version)\b"
    r"|typo|changelog|readme|copyright|license|formatting|clang-format|rustfmt|gofmt|prettier|lint",
    re.I,
)
FIX_LIKE = re.compile(
    r"\b(fix(e[sd])?|bug|crash(es|ed)?|error|wrong|incorrect|leak|regression|broken|panic|fail(s|ed|ure)?|"
    r"overflow|invalid|missing|properly|correctly)\b",
    re.I,
)
TRAILER = re.compile(
    r"^\s*(signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|suggested-by|"
    r"helped-by|pr-url|change-id|cc|backport-of)\s*:",
    re.I,
)
# A reference trailer ("Fixes: #12", "Refs: https://...", "See: abc1234"): only when all that
# follows the key is references, so that a conventional-commit line ("fix: escape pointers")
# is kept as text.
REF_TRAILER = re.compile(
    r"^\s*(refs?|fixes|fix|closes|close|resolves|see)\s*:"
    r"(\s*(https?://\S+|[\w.-]+/[\w.-]+#\d+|#\d+|GH-\d+|[0-9a-f]{7,40})[,.;]?)+\s*$",
    re.I,
)
# Loose signs of a pasted trace or location (the query analysis, crates/index/src/query/frames.rs,
# decides what is a frame; this only picks candidate commits).
TRACE_LIKE = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|panicked at|goroutine \d+ \[|"
    r"\bat [\w$.<>]+\([\w$-]+\.(?:java|kt):\d+\)|\bat .+\(\S+\.[jt]sx?:\d+:\d+\)|"
    r"[\w./-]+\.(?:py|rs|go|js|mjs|ts|tsx|java|c|h|cc|cpp|hpp|hh):\d+"
)
GENERATED = re.compile(r"(^|/)(vendor|vendored|third_party|third-party|thirdparty|3rdparty|generated|deps)/")


def is_test_path(path: str) -> bool:
    """The same rule as trellis_index::filter::is_test_path."""
    p = path.lower()
    f = p.rsplit("/", 1)[-1]
    parts = p.split("/")
    return (
        any(s in ("test", "tests", "__tests__", "testing", "spec", "testdata") for s in parts)
        or f.startswith("test_")
        or "_test." in f
        or ".test." in f
        or ".spec." in f
        or f.endswith("test.java")
        or f.endswith("tests.rs")
    )


def is_source(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in SOURCE_EXT and not GENERATED.search(path)


def git(mirror, *args):
    return subprocess.run(
        ["git", f"--git-dir={mirror}", *args], check=True, capture_output=True
    ).stdout.decode("utf-8", "replace")


def clean_message(subject: str, body: str) -> str:
    lines = []
    # The subject is never a trailer ("fix: ..." is a conventional-commit subject).
    for i, line in enumerate([subject, ""] + body.splitlines()):
        if i > 0 and (TRAILER.match(line) or REF_TRAILER.match(line)):
            continue
        line = re.sub(r"https?://\S+", "", line)
        line = re.sub(r"\(#\d+\)|(?<![\w/])#\d+\b|\bGH-\d+\b", "", line)
        lines.append(line.rstrip())
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return re.sub(r"[ \t]{2,}", " ", text)


def changed_lines(mirror, parent, commit, path):
    """Parent-side line ranges a commit changes in `path` (zero-context diff hunks)."""
    out = git(mirror, "diff", "-U0", "--no-color", "--no-ext-diff", parent, commit, "--", path)
    ranges = []
    for m in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", out, re.M):
        start, count = int(m.group(1)), int(m.group(2) or "1")
        if count == 0:
            # A pure insertion after line `start`: the lines around the insertion point.
            ranges.append([max(start, 1), start + 1])
        else:
            ranges.append([start, start + count - 1])
    return ranges


def mine(mirror, repo, head, lang, split, per_repo, window, order="fix-first", traces=False):
    log = git(
        mirror, "log", "--first-parent", "--no-merges", f"-n{window}", "--no-renames",
        "--name-status", "--format=%x1e%H%x1f%P%x1f%s%x1f%b%x1f", head,
    )
    fix, other = [], []
    age = {}  # commit -> position in first-parent history, newest 0
    for rec in log.split("\x1e")[1:]:
        head_part, _, files_part = rec.rpartition("\x1f")
        sha, parents, subject, body = head_part.split("\x1f", 3)
        age[sha] = len(age)
        parents = parents.split()
        if len(parents) != 1 or SKIP_SUBJECT.search(subject):
            continue
        status = [l.split("\t") for l in files_part.strip().splitlines() if "\t" in l]
        if not status or len(status) > 12:
            continue
        gold, bad = [], False
        for st in status:
            code, path = st[0], st[-1]
            if is_source(path) and not is_test_path(path):
                if code != "M":
                    bad = True
                gold.append(path)
        if bad or not 1 <= len(gold) <= 3:
            continue
        query = clean_message(subject, body)
        if len(query) < 30 or len(query.split()) < 6:
            continue
        if traces and not TRACE_LIKE.search(query):
            continue
        item = (sha, parents[0], query, sorted(gold), bool(FIX_LIKE.search(subject + " " + body)))
        (fix if item[4] else other).append(item)
    picked = (fix + other)[:per_repo]
    if order == "history":
        picked.sort(key=lambda item: age[item[0]])
    out = []
    for sha, parent, query, gold, fix_like in picked:
        out.append({
            "id": f"{repo}@{sha[:12]}",
            "repo": repo,
            "split": split,
            "lang": lang,
            "commit": sha,
            "parent": parent,
            "fix_like": fix_like,
            "query": query,
            "gold": [{"path": p, "lines": changed_lines(mirror, parent, sha, p)} for p in gold],
        })
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", required=True, choices=["dev", "train"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--manifest", default=os.path.join(ROOT, "fixtures/retrieval-dev/repos.tsv"))
    ap.add_argument("--excluded", default=os.path.join(ROOT, "fixtures/retrieval-dev/excluded-repos.txt"))
    ap.add_argument("--per-repo", type=int, default=40)
    ap.add_argument("--window", type=int, default=1500, help="newest first-parent commits scanned")
    ap.add_argument("--order", choices=["fix-first", "history"], default="fix-first")
    ap.add_argument("--traces", action="store_true", help="only messages with a trace or path:line")
    ap.add_argument("--repos", help="comma-separated subset of the split's repositories")
    args = ap.parse_args()
    excluded = set()
    with open(args.excluded) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                excluded.add(line.lower())
    rows = []
    with open(args.manifest) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            split, repo, head, _licence, lang = line.rstrip("\n").split("\t")[:5]
            if split != args.split or (args.repos and repo not in args.repos.split(",")):
                continue
            if repo.lower() in excluded:
                sys.exit(f"{repo} is in {args.excluded} (SWE-bench family): refusing to mine it")
            mirror = os.path.join(args.mirrors, repo.replace("/", "+"), "repo")
            got = mine(mirror, repo, head, lang, split, args.per_repo, args.window, args.order, args.traces)
            print(f"{repo}: {len(got)} queries ({sum(r['fix_like'] for r in got)} fix-like)", file=sys.stderr)
            rows.extend(got)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} queries -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
