"""Ground truth for the `trellis mcp` vs Serena benchmark, computed from the fixture's source with
Python's own parser (`ast`) and a whole-word regular expression, independent of both servers.

- definitions: every `def`, `async def` and `class` at any depth, as (path, line of the `def` /
  `class` keyword), with its name path (`Outer/inner`, Serena's notation) and the 1-based column
  of its name.
- references of a name: every syntactic use of it (`Name`, the attribute of an `Attribute`,
  an imported name) plus its definition, as (path, line). Only asked for names that are
  *unambiguous*: defined exactly once in the repository and never bound otherwise (no
  parameter, keyword argument, assignment target, `global`, or a second import alias), so every
  use of the name is a use of that definition.
- files containing a name: every `.py` file where it occurs as a whole word (comments and strings
  included: what a text search should find).
"""

from __future__ import annotations

import ast
import os
import random
import re
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Definition:
    name: str
    name_path: str  # Serena's notation: Outer/inner
    path: str  # relative, with /
    line: int  # 1-based line of `def` / `class`
    column: int  # 1-based column of the name
    kind: str  # class | function | method


@dataclass
class Repo:
    root: str
    files: dict[str, str] = field(default_factory=dict)  # path -> text of every .py file
    defs: list[Definition] = field(default_factory=list)
    uses: dict[str, set[tuple[str, int]]] = field(default_factory=lambda: defaultdict(set))
    other_bindings: set[str] = field(default_factory=set)

    def defs_named(self, name: str) -> list[Definition]:
        return [d for d in self.defs if d.name == name]

    def definition_places(self, name: str) -> set[tuple[str, int]]:
        return {(d.path, d.line) for d in self.defs_named(name)}

    def reference_places(self, d: Definition) -> set[tuple[str, int]]:
        return self.uses[d.name] | {(d.path, d.line)}

    def files_with_word(self, name: str) -> set[str]:
        word = re.compile(rf"\b{re.escape(name)}\b")
        return {p for p, text in self.files.items() if word.search(text)}

    def unambiguous(self, d: Definition) -> bool:
        return len(self.defs_named(d.name)) == 1 and d.name not in self.other_bindings


SKIP_DIRS = {".git", ".trellis", ".serena", "__pycache__", "node_modules", ".venv", "venv"}


def load(root: str) -> Repo:
    repo = Repo(root=root)
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            full = os.path.join(base, f)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            with open(full, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            repo.files[rel] = text
            try:
                tree = ast.parse(text, filename=rel)
            except SyntaxError:
                continue
            _walk(repo, rel, text.splitlines(), tree, [], None)
    return repo


def _walk(repo: Repo, rel: str, lines: list[str], node: ast.AST, scope: list[str], parent: str | None) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(child, ast.ClassDef) else ("method" if parent == "class" else "function")
            line = child.lineno
            text = lines[line - 1] if line - 1 < len(lines) else ""
            m = re.search(rf"\b(?:def|class)\s+({re.escape(child.name)})\b", text)
            column = (m.start(1) + 1) if m else child.col_offset + 1
            repo.defs.append(Definition(child.name, "/".join(scope + [child.name]), rel, line, column, kind))
            # Its decorators, bases, parameters and annotations are among its children.
            _walk(repo, rel, lines, child, scope + [child.name],
                  "class" if isinstance(child, ast.ClassDef) else "function")
        else:
            _use(repo, rel, child)
            _walk(repo, rel, lines, child, scope, parent)


def _use(repo: Repo, rel: str, n: ast.AST) -> None:
    if isinstance(n, ast.Name):
        if isinstance(n.ctx, ast.Load):
            repo.uses[n.id].add((rel, n.lineno))
        else:
            repo.other_bindings.add(n.id)
    elif isinstance(n, ast.Attribute):
        if isinstance(n.ctx, ast.Load):
            repo.uses[n.attr].add((rel, n.end_lineno or n.lineno))
        else:
            repo.other_bindings.add(n.attr)
    elif isinstance(n, ast.alias):
        last = n.name.rsplit(".", 1)[-1]
        repo.uses[last].add((rel, n.lineno))
        if n.asname and n.asname != last:
            repo.other_bindings.add(n.asname)
    elif isinstance(n, ast.keyword) and n.arg:
        repo.other_bindings.add(n.arg)
    elif isinstance(n, (ast.Global, ast.Nonlocal)):
        repo.other_bindings.update(n.names)
    elif isinstance(n, ast.arg):
        repo.other_bindings.add(n.arg)


def pick_queries(repo: Repo, n_symbols: int, n_refs: int, n_search: int, seed: int = 17) -> dict:
    """The same seeded sample for both servers: names for find-symbol and search, unambiguous
    definitions for references. Dunder names are left out (hundreds of `__init__`)."""
    rnd = random.Random(seed)
    names = sorted({d.name for d in repo.defs if not (d.name.startswith("__") and d.name.endswith("__"))})
    unambiguous = [d for d in repo.defs if repo.unambiguous(d) and not d.name.startswith("__")]
    unambiguous.sort(key=lambda d: (d.path, d.line))
    # References: prefer names that are used somewhere else than their definition.
    used = [d for d in unambiguous if len(repo.reference_places(d)) > 1] or unambiguous
    return {
        "symbols": rnd.sample(names, min(n_symbols, len(names))),
        "references": rnd.sample(used, min(n_refs, len(used))),
        "search": rnd.sample(names, min(n_search, len(names))),
    }
