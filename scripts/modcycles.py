#!/usr/bin/env python3
"""Module cycles inside each crate: files that import each other in a loop.

    scripts/modcycles.py            # every crate under crates/; exit 1 when a cycle exists
    scripts/modcycles.py crates/acp # one crate

A node is a source file (a module; an inline module belongs to its file). An edge F -> T
means F names an item defined in T: through a `use` declaration or a qualified path
(`crate::a::b`, `super::x::y`, `child::item`), with re-exports followed to the file that
defines the name. Imports of a file's own ancestors (`use super::Thing` from a child of
the file that defines Thing) are not edges: a parent module is its children's context, and
splitting one type's methods over child files is the usual Rust shape. Test code
(`#[cfg(test)]` items) and `tests/` are left out.

Why not an existing tool: cargo-modules needs rust-analyzer's crates (a long build on 2
cores for one check), and cargo-cycles 0.2.0 counts every `mod child;` plus `use super::`
pair as a cycle, which flags the split-impl shape above in every crate.
"""

import re
import sys
from pathlib import Path

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_RE = re.compile(
    r"\b(?:fn|struct|enum|trait|type|const|static|union|mod)\s+(" + IDENT + r")"
    r"|\bmacro_rules!\s*(" + IDENT + r")"
)
MOD_DECL_RE = re.compile(r"\bmod\s+(" + IDENT + r")\s*;")
USE_RE = re.compile(r"\buse\s+([^;]*);")
QUALIFIED_RE = re.compile(r"(?<![A-Za-z0-9_:])(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)")


def strip(src: str) -> str:
    """Comments, strings and char literals blanked out (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if src[i] == "\n" else "")
                    i += 1
        elif (m := re.match(r'b?r(#*)"', src[i:i + 260])) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'":
            if src.startswith("\\", i + 1):
                j = src.find("'", i + 2)
                i = n if j < 0 else j + 1
                out.append("' '")
            elif i + 2 < n and src[i + 2] == "'":
                i += 3
                out.append("' '")
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip_item(text: str, i: int) -> int:
    """The end of the item starting at i: its `;` or its matching `}`."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == ";" and depth == 0:
            return i + 1
        i += 1
    return i


def drop_test_items(text: str) -> str:
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        end = skip_item(text, m.end())
        out.append("\n" * text.count("\n", m.start(), end))
        i = end
    out.append(text[i:])
    return "".join(out)


def parse_use_tree(s: str):
    """(path segments, bound name or '*') for every leaf of a use tree."""
    tokens = re.findall(IDENT + r"|::|[{},*]", s)
    pos = 0

    def tree(prefix):
        nonlocal pos
        leaves, path = [], list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    leaves += tree(path)
                    if pos < len(tokens) and tokens[pos] == ",":
                        pos += 1
                pos += 1
                return leaves
            if t == "*":
                pos += 1
                return leaves + [(path, "*")]
            if t == "::":
                pos += 1
                continue
            if t in ",}":
                break
            if t == "as":
                pos += 1
                alias = tokens[pos]
                pos += 1
                return leaves + [(path, alias)]
            path.append(t)
            pos += 1
        if path:
            name = path[-1]
            if name == "self" and len(path) > 1:
                path, name = path[:-1], path[-2]
            leaves.append((path, name))
        return leaves

    return tree([])


class Module:
    def __init__(self, name, file, parent):
        self.name, self.file, self.parent = name, file, parent
        self.children = {}
        self.items, self.uses, self.globs, self.code = set(), {}, [], ""

    def ancestors(self):
        m = self.parent
        while m:
            yield m
            m = m.parent


def load(file: Path, name: str, parent, mods: list, mod_rs: bool):
    m = Module(name, file, parent)
    mods.append(m)
    text = drop_test_items(strip(file.read_text()))
    m.code = text
    for g in ITEM_RE.finditer(text):
        m.items.add(g.group(1) or g.group(2))
    for u in USE_RE.finditer(text):
        for path, bound in parse_use_tree(u.group(1)):
            if bound == "*":
                m.globs.append(path)
            elif bound != "_":
                m.uses[bound] = path
    here = file.parent if mod_rs else file.parent / file.stem
    for d in MOD_DECL_RE.finditer(text):
        child = d.group(1)
        for cand, child_mod_rs in ((here / f"{child}.rs", False), (here / child / "mod.rs", True)):
            if cand.is_file():
                m.children[child] = load(cand, child, m, mods, child_mod_rs)
                break
    return m


def resolve(mod, path, depth=0):
    """The module a path starts in and the first segment not a module."""
    if not path or depth > 8:
        return None
    cur, rest = mod, list(path)
    head = rest[0]
    if head == "crate":
        while cur.parent:
            cur = cur.parent
        rest.pop(0)
    elif head in ("super", "self"):
        while rest and rest[0] in ("super", "self"):
            if rest.pop(0) == "super":
                cur = cur.parent
                if cur is None:
                    return None
    elif head in cur.children:
        pass
    elif head in cur.uses and cur.uses[head] != path:
        target = resolve(cur, cur.uses[head], depth + 1)
        if not isinstance(target, Module):
            return target
        cur = target
        rest.pop(0)
    else:
        return None
    while rest:
        seg = rest.pop(0)
        if seg in cur.children:
            cur = cur.children[seg]
        else:
            return owner(cur, seg, depth + 1)
    return cur


def owner(mod, name, depth):
    """The file that defines `name` as seen from `mod` (re-exports followed)."""
    if depth > 8:
        return mod.file
    if name in mod.items:
        return mod.file
    if name in mod.uses:
        r = resolve(mod, mod.uses[name], depth + 1)
        if isinstance(r, Module):
            return r.file
        if r is not None:
            return r
    for g in mod.globs:
        target = resolve(mod, g, depth + 1)
        if isinstance(target, Module) and name in target.items:
            return target.file
    return mod.file


def edges_of(mod, by_file):
    out = {}
    paths = [p for p in mod.uses.values()] + mod.globs
    paths += [re.split(r"\s*::\s*", q) for q in QUALIFIED_RE.findall(mod.code)]
    for path in paths:
        r = resolve(mod, path)
        target = r.file if isinstance(r, Module) else r
        if target is None or target == mod.file:
            continue
        tmod = by_file.get(target)
        if tmod is None or tmod in mod.ancestors():
            continue
        out.setdefault(target, set()).add(path[-1])
    return out


def sccs(nodes, edges):
    index, low, stack, on, result, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                result.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return result


def roots(crate: Path):
    src = crate / "src"
    for name in ("lib.rs", "main.rs"):
        if (src / name).is_file():
            yield src / name
    for base in (src / "bin", crate / "examples"):
        if base.is_dir():
            for p in sorted(base.iterdir()):
                if p.suffix == ".rs":
                    yield p
                elif (p / "main.rs").is_file():
                    yield p / "main.rs"


def check(crate: Path, repo: Path):
    found = []
    for root in roots(crate):
        mods = []
        load(root, "crate", None, mods, True)
        by_file = {m.file: m for m in mods}
        edges = {m.file: edges_of(m, by_file) for m in mods}
        for comp in sccs([m.file for m in mods], edges):
            lines = []
            for a in comp:
                for b in comp:
                    if b in edges[a]:
                        names = ", ".join(sorted(edges[a][b]))
                        lines.append(f"  {a.relative_to(repo)} -> {b.relative_to(repo)}: {names}")
            found.append((comp, lines))
    return found


def main():
    repo = Path(__file__).resolve().parent.parent
    crates = [Path(a).resolve() for a in sys.argv[1:]] or sorted(
        p for p in (repo / "crates").iterdir() if (p / "Cargo.toml").is_file()
    )
    total = 0
    for crate in crates:
        for comp, lines in check(crate, repo):
            total += 1
            print(f"cycle {total}: " + ", ".join(str(f.relative_to(repo)) for f in comp))
            print("\n".join(lines))
    if total:
        print(f"{total} module cycle(s) inside crates: move the shared names into a module both "
              "can import (or into the parent), so the imports run one way.")
        return 1
    print(f"no module cycles in {len(crates)} crate(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
