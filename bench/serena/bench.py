"""`trellis mcp` vs Serena (issue 17): both MCP servers over stdio, side by side on the same
repositories, driven by one client (mcp_stdio.py) with the same queries, timed the same way and
scored against the same ground truth (truth.py). Standard library only. See README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import truth  # noqa: E402
from mcp_stdio import McpError, StdioClient, text_of  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SERENA_SYMBOL_KINDS = {"Class", "Method", "Function", "Constructor"}
TRELLIS_SYMBOL_KINDS = {"class", "method", "function"}


# ---------------------------------------------------------------------------------------------
# The two sides: how each answers find-symbol, references and search, normalised to places.


class Side:
    name = ""

    def __init__(self, args: argparse.Namespace, workdir: str):
        self.args = args
        self.workdir = workdir

    def start(self, repo: str) -> StdioClient:
        raise NotImplementedError

    def find_symbol(self, c: StdioClient, name: str) -> tuple[dict, float]:
        raise NotImplementedError

    def references(self, c: StdioClient, d: truth.Definition) -> tuple[dict, float]:
        raise NotImplementedError

    def search(self, c: StdioClient, name: str) -> tuple[dict, float]:
        raise NotImplementedError


class Trellis(Side):
    name = "trellis"

    def start(self, repo: str) -> StdioClient:
        env = dict(os.environ)
        # The same pyright as Serena's (its ls_path): trellis-lsp runs `pyright-langserver` from PATH.
        env["PATH"] = os.path.dirname(self.args.pyright) + os.pathsep + env.get("PATH", "")
        env["XDG_CONFIG_HOME"] = os.path.join(self.workdir, "trellis-config")  # no user config
        if self.args.trellis_config:  # ... but this one, when given (--trellis-config)
            os.makedirs(os.path.join(env["XDG_CONFIG_HOME"], "trellis"), exist_ok=True)
            with open(os.path.join(env["XDG_CONFIG_HOME"], "trellis", "config.toml"), "w") as f:
                f.write(self.args.trellis_config + "\n")
        env.setdefault("RUST_LOG", "warn")
        return StdioClient([self.args.trellis, "--repo", repo, "mcp"], repo, env,
                           os.path.join(self.workdir, "trellis.stderr"))

    def find_symbol(self, c, name):
        r, dt = c.call_tool("symbols", {"name": name, "exact": True, "limit": 200})
        return r, dt

    def references(self, c, d):
        return c.call_tool("references", {"path": d.path, "line": d.line, "column": d.column})

    def search(self, c, name):
        return c.call_tool("search", {"query": name})

    @staticmethod
    def symbol_ranges(r: dict) -> list[tuple[str, str, int, int]]:
        out = []
        for s in _structured(r).get("symbols", []):
            if s.get("kind") in TRELLIS_SYMBOL_KINDS:
                out.append((s["path"], s["name"].rsplit(".", 1)[-1].rsplit(":", 1)[-1],
                            s["start_line"], s["end_line"]))
        return out

    @staticmethod
    def reference_places(r: dict) -> set[tuple[str, int]]:
        return {(p["path"], p["line"]) for p in _structured(r).get("places", [])}

    @staticmethod
    def search_files(r: dict) -> set[str]:
        return {h["path"] for h in _structured(r).get("hits", []) if h["path"].endswith(".py")}


class Serena(Side):
    name = "serena"

    def start(self, repo: str) -> StdioClient:
        home = os.path.join(self.workdir, "serena-home")
        os.makedirs(home, exist_ok=True)
        template = os.path.join(_site_packages(self.args.serena_venv), "serena", "resources",
                                "serena_config.template.yml")
        with open(template) as f:
            config = f.read()
        # The verified offline setup (PROTOCOLS.md "Serena"): the language server by path (no
        # uvx download), no dashboard or GUI window.
        config = _replace_key(config, "ls_specific_settings",
                              "ls_specific_settings:\n"
                              f"  python: {{ ls_path: {self.args.pyright} }}\n")
        config = _replace_key(config, "web_dashboard", "web_dashboard: False\n")
        config = _replace_key(config, "gui_log_window", "gui_log_window: False\n")
        with open(os.path.join(home, "serena_config.yml"), "w") as f:
            f.write(config)
        env = dict(os.environ, SERENA_HOME=home, SERENA_USAGE_REPORTING="false")
        argv = [os.path.join(self.args.serena_venv, "bin", "serena"), "start-mcp-server",
                "--project", repo, "--context", "agent", "--agent-interface", "tools",
                "--enable-web-dashboard", "false", "--open-web-dashboard", "false",
                "--enable-gui-log-window", "false"]
        return StdioClient(argv, repo, env, os.path.join(self.workdir, "serena.stderr"))

    def find_symbol(self, c, name):
        return c.call_tool("find_symbol", {"name_path_pattern": name, "substring_matching": False})

    def references(self, c, d):
        return c.call_tool("find_referencing_symbols",
                           {"name_path": d.name_path, "relative_path": d.path})

    def search(self, c, name):
        return c.call_tool("search_for_pattern", {"substring_pattern": rf"\b{re.escape(name)}\b",
                                                  "paths_include_glob": "**/*.py"})

    @staticmethod
    def _json(r: dict):
        text = text_of(r)
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return None

    @classmethod
    def symbol_ranges(cls, r):
        out = []
        for s in cls._json(r) or []:
            if s.get("kind") in SERENA_SYMBOL_KINDS:
                loc = s.get("body_location", {})
                # Serena's lines are 0-based.
                out.append((s["relative_path"], s["name_path"].rsplit("/", 1)[-1],
                            loc.get("start_line", -1) + 1, loc.get("end_line", -1) + 1))
        return out

    @classmethod
    def reference_places(cls, r):
        places: set[tuple[str, int]] = set()

        def walk(node, path):
            if isinstance(node, dict):
                around = node.get("content_around_reference")
                if isinstance(around, str):
                    for line in around.splitlines():
                        m = re.match(r"\s*>\s*(\d+):", line)
                        if m:
                            places.add((path, int(m.group(1)) + 1))
                for k, v in node.items():
                    walk(v, k if path is None and k.endswith(".py") else path)
            elif isinstance(node, list):
                for v in node:
                    walk(v, path)

        walk(cls._json(r), None)
        return places

    @classmethod
    def search_files(cls, r):
        found = cls._json(r)
        return {p for p in found if p.endswith(".py")} if isinstance(found, dict) else set()


def _structured(r: dict) -> dict:
    if isinstance(r.get("structuredContent"), dict):
        return r["structuredContent"]
    try:
        return json.loads(text_of(r))
    except json.JSONDecodeError:
        return {}


def _replace_key(yaml_text: str, key: str, replacement: str) -> str:
    """Replaces the top-level `key: ...` line of Serena's template (a one-line value there)."""
    lines = yaml_text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(f"{key}:"):
            lines[i] = replacement
            return "".join(lines)
    return yaml_text + replacement


def _site_packages(venv: str) -> str:
    lib = os.path.join(venv, "lib")
    for d in sorted(os.listdir(lib)):
        sp = os.path.join(lib, d, "site-packages")
        if os.path.isdir(sp):
            return sp
    raise SystemExit(f"no site-packages under {lib}")


# ---------------------------------------------------------------------------------------------
# Scoring against the ground truth.


def normalise_symbols(ranges, repo: truth.Repo) -> set[tuple[str, int]]:
    """A returned symbol (path, name, start, end) is the definition of that name in that file whose
    `def`/`class` line lies in its range (ranges may start at decorators or comments); else its
    own start line (a place the truth does not have)."""
    out = set()
    for path, name, start, end in ranges:
        lines = sorted(d.line for d in repo.defs if d.path == path and d.name == name and start <= d.line <= end)
        out.add((path, lines[0] if lines else start))
    return out


class Score:
    """Micro-averaged precision and recall against the truth over a tool's queries, and how
    often the answer was exactly the truth."""

    def __init__(self):
        self.tp = self.returned = self.expected = self.exact = self.n = self.errors = 0

    def add(self, got: set, want: set, error: bool) -> None:
        self.n += 1
        self.errors += error
        self.tp += len(got & want)
        self.returned += len(got)
        self.expected += len(want)
        self.exact += got == want

    def as_dict(self) -> dict:
        p = self.tp / self.returned if self.returned else 1.0
        r = self.tp / self.expected if self.expected else 1.0
        return {"queries": self.n, "errors": self.errors, "precision": p, "recall": r,
                "f1": 2 * p * r / (p + r) if p + r else 0.0, "exact": self.exact,
                "true_places": self.tp, "returned_places": self.returned,
                "expected_places": self.expected}


def percentile(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


# ---------------------------------------------------------------------------------------------
# One server session: cold start, then the warm rounds.


def tree_rss_mib(pgid: int) -> float:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def call(fn, *a) -> tuple[dict, float, bool]:
    try:
        r, dt = fn(*a)
        return r, dt, bool(r.get("isError"))
    except McpError as e:
        return {"content": [{"type": "text", "text": str(e)}], "isError": True}, float("nan"), True


def session(side: Side, repo_src: str, t: truth.Repo, queries: dict, rounds: int, warm: bool) -> dict:
    copy = os.path.join(side.workdir, "repo")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(repo_src, copy, ignore=shutil.ignore_patterns(".trellis", ".serena", "__pycache__"))
    out: dict = {"cold": {}, "errors": []}
    t0 = time.perf_counter()
    c = side.start(copy)
    try:
        c.initialize()
        out["cold"]["initialize_s"] = time.perf_counter() - t0
        out["server_info"] = c.server_info
        c.list_tools()
        first = [("find_symbol", side.find_symbol, queries["symbols"][0]),
                 ("references", side.references, queries["references"][0]),
                 ("search", side.search, queries["search"][0])]
        for tool, fn, q in first:
            r, _, err = call(fn, c, q)
            out["cold"][f"first_{tool}_s"] = time.perf_counter() - t0
            if err:
                out["errors"].append(f"cold {tool} {getattr(q, 'name_path', q)}: {text_of(r)[:300]}")
        if not warm:
            return out
        lat: dict[str, list[float]] = {"find_symbol": [], "references": [], "search": []}
        answers: dict[str, dict] = {"find_symbol": {}, "references": {}, "search": {}}
        for rnd in range(rounds):
            for name in queries["symbols"]:
                r, dt, err = call(side.find_symbol, c, name)
                lat["find_symbol"].append(dt)
                if rnd == 0:
                    places = normalise_symbols(side.symbol_ranges(r), t) if not err else set()
                    answers["find_symbol"][name] = (sorted(places), err, text_of(r)[:200] if err else "")
            for d in queries["references"]:
                r, dt, err = call(side.references, c, d)
                lat["references"].append(dt)
                if rnd == 0:
                    places = side.reference_places(r) if not err else set()
                    answers["references"][d.name_path + "@" + d.path] = (
                        sorted(places), err, text_of(r)[:200] if err else "")
            for name in queries["search"]:
                r, dt, err = call(side.search, c, name)
                lat["search"].append(dt)
                if rnd == 0:
                    files = side.search_files(r) if not err else set()
                    answers["search"][name] = (sorted(files), err, text_of(r)[:200] if err else "")
        out["rss_mib"] = tree_rss_mib(c.proc.pid)
        out["latency_ms"] = {
            k: {"n": len(v), "p50": _ms(percentile([x for x in v if x == x], 50)),
                "p95": _ms(percentile([x for x in v if x == x], 95)),
                "mean": _ms(sum(x for x in v if x == x) / max(1, len([x for x in v if x == x])))}
            for k, v in lat.items()}
        out["answers"] = answers
        return out
    finally:
        c.close()


def _ms(s: float | None) -> float | None:
    return None if s is None else s * 1000


def score(t: truth.Repo, queries: dict, answers: dict) -> dict:
    s = {"find_symbol": Score(), "references": Score(), "search": Score()}
    for name in queries["symbols"]:
        places, err, _ = answers["find_symbol"][name]
        s["find_symbol"].add({tuple(p) for p in places}, t.definition_places(name), err)
    for d in queries["references"]:
        places, err, _ = answers["references"][d.name_path + "@" + d.path]
        decl = (d.path, d.line)
        # Serena leaves the declaration out, trellis keeps it: compared without it on every side.
        got = {tuple(p) for p in places} - {decl}
        s["references"].add(got, t.reference_places(d) - {decl}, err)
    for name in queries["search"]:
        files, err, _ = answers["search"][name]
        s["search"].add(set(files), t.files_with_word(name), err)
    return {k: v.as_dict() for k, v in s.items()}


def pairwise(a: dict, b: dict, queries: dict) -> dict:
    """Trellis against Serena directly: queries answered identically, and the Jaccard index of
    all their places together."""
    out = {}
    for tool, keys in (("find_symbol", queries["symbols"]),
                       ("references", [d.name_path + "@" + d.path for d in queries["references"]]),
                       ("search", queries["search"])):
        inter = union = same = 0
        for k in keys:
            x = {tuple(p) if isinstance(p, list) else p for p in a[tool][k][0]}
            y = {tuple(p) if isinstance(p, list) else p for p in b[tool][k][0]}
            if tool == "references":
                x = {p for p in x if not _is_decl(p, k, queries)}
                y = {p for p in y if not _is_decl(p, k, queries)}
            inter += len(x & y)
            union += len(x | y)
            same += x == y
        out[tool] = {"identical_answers": same, "queries": len(keys),
                     "jaccard": inter / union if union else 1.0}
    return out


def _is_decl(place, key: str, queries: dict) -> bool:
    for d in queries["references"]:
        if d.name_path + "@" + d.path == key:
            return tuple(place) == (d.path, d.line)
    return False


# ---------------------------------------------------------------------------------------------


def versions(args) -> dict:
    v = {"python": platform.python_version()}
    try:
        v["trellis"] = subprocess.run([args.trellis, "--version"], capture_output=True, text=True,
                                      timeout=30).stdout.strip()
    except OSError as e:
        v["trellis"] = f"unavailable: {e}"
    sp = _site_packages(args.serena_venv)
    for d in os.listdir(sp):
        m = re.match(r"(serena_agent|mcp|pyright|basedpyright)-([\w.]+)\.dist-info$", d)
        if m:
            v[m.group(1).replace("_", "-")] = m.group(2)
    pyr_sp = _site_packages(os.path.dirname(os.path.dirname(args.pyright)))
    for d in os.listdir(pyr_sp):
        m = re.match(r"pyright-([\w.]+)\.dist-info$", d)
        if m:
            v["pyright (both sides)"] = m.group(1)
    return v


def machine() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
            "load_avg": open("/proc/loadavg").read().split()[:3]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trellis", required=True, help="the trellis binary (release build)")
    ap.add_argument("--serena-venv", required=True)
    ap.add_argument("--pyright", required=True, help="pyright-langserver, for both sides")
    ap.add_argument("--repo", action="append", required=True, metavar="NAME=DIR",
                    help="a repository to measure on (repeatable)")
    ap.add_argument("--symbols", type=int, default=20, help="find-symbol queries per repository")
    ap.add_argument("--refs", type=int, default=10, help="references queries per repository")
    ap.add_argument("--search", type=int, default=10, help="search queries per repository")
    ap.add_argument("--rounds", type=int, default=3, help="warm rounds of every query")
    ap.add_argument("--cold-runs", type=int, default=3, help="fresh starts per server and repository")
    ap.add_argument("--trellis-config", default="",
                    help="TOML for trellis's user configuration file (default: none), e.g. "
                         "'[lsp]\\nwarm_open_files = true'")
    ap.add_argument("--json", help="write the results here (default: stdout)")
    ap.add_argument("--keep", action="store_true", help="keep the working directories")
    args = ap.parse_args()

    started = datetime.datetime.now(datetime.timezone.utc)
    result = {"benchmark": "trellis mcp vs serena", "date_utc": started.strftime("%Y-%m-%d %H:%M:%S"),
              "command": " ".join(sys.argv), "machine": machine(), "versions": versions(args),
              "settings": {k: getattr(args, k) for k in ("symbols", "refs", "search", "rounds", "cold_runs", "trellis_config")},
              "repos": []}
    status = 0
    for spec in args.repo:
        name, _, src = spec.partition("=")
        t = truth.load(src)
        q = truth.pick_queries(t, args.symbols, args.refs, args.search)
        entry = {"name": name, "source": src, "py_files": len(t.files),
                 "py_lines": sum(x.count("\n") for x in t.files.values()), "definitions": len(t.defs),
                 "queries": {"symbols": q["symbols"],
                             "references": [f"{d.name_path} ({d.path}:{d.line})" for d in q["references"]],
                             "search": q["search"]},
                 "sides": {"trellis": {"cold_runs": []}, "serena": {"cold_runs": []}}}
        for i in range(args.cold_runs):
            order = (Trellis, Serena) if i % 2 == 0 else (Serena, Trellis)
            for cls in order:
                work = tempfile.mkdtemp(prefix=f"bench-serena-{cls.name}-")
                side = cls(args, work)
                last = i == args.cold_runs - 1
                print(f"bench-serena: {name}: {cls.name} cold start {i + 1}/{args.cold_runs}"
                      f"{' + warm rounds' if last else ''} …", file=sys.stderr, flush=True)
                try:
                    s = session(side, src, t, q, args.rounds, warm=last)
                except Exception as e:  # a failed side is reported, the other still runs
                    s = {"cold": {}, "errors": [f"session failed: {e!r}"]}
                    status = 1
                finally:
                    if args.keep:
                        print(f"bench-serena: kept {work}", file=sys.stderr)
                    else:
                        shutil.rmtree(work, ignore_errors=True)
                side_out = entry["sides"][cls.name]
                side_out["cold_runs"].append(s["cold"])
                side_out.setdefault("errors", []).extend(s.get("errors", []))
                for k in ("server_info", "rss_mib", "latency_ms", "answers"):
                    if k in s:
                        side_out[k] = s[k]
                c = s["cold"]
                print(f"bench-serena: {name}: {cls.name}: " + ", ".join(f"{k} {v:.2f}" for k, v in c.items()),
                      file=sys.stderr, flush=True)
        for side_name, side_out in entry["sides"].items():
            runs = side_out["cold_runs"]
            side_out["cold_median_s"] = {
                k: percentile([r[k] for r in runs if k in r], 50)
                for k in ("initialize_s", "first_find_symbol_s", "first_references_s", "first_search_s")}
            if "answers" in side_out:
                side_out["agreement"] = score(t, q, side_out["answers"])
            else:
                status = 1
        if all("answers" in s for s in entry["sides"].values()):
            entry["trellis_vs_serena"] = pairwise(entry["sides"]["trellis"]["answers"],
                                                  entry["sides"]["serena"]["answers"], q)
        result["repos"].append(entry)
    result["machine"]["load_avg_end"] = open("/proc/loadavg").read().split()[:3]
    result["wall_s"] = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
    text = json.dumps(result, indent=1, default=str)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    else:
        print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
