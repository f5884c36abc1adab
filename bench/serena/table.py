"""Renders bench.py's JSON as the markdown table of docs/benchmarks.md: both servers side by side
per repository, the ratio Serena ÷ Trellis (higher is better for Trellis), and the issue's goal
(≥ 5× faster at equal or better agreement) per row.

    python3 table.py results.json
"""

from __future__ import annotations

import json
import sys

GOAL = 5.0


def fmt_s(x):
    return "–" if x is None else (f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s")


def fmt_ms(x):
    return "–" if x is None else (f"{x:.1f} ms" if x < 100 else f"{x:.0f} ms")


def ratio(serena, trellis):
    if serena is None or trellis is None or trellis <= 0:
        return None
    return serena / trellis


def fmt_ratio(r):
    return "–" if r is None else f"{r:.1f}×"


def verdict(r):
    if r is None:
        return "not measured"
    return "met" if r >= GOAL else "missed"


def agreement_cell(a):
    if a is None:
        return "–"
    err = f", {a['errors']} errors" if a["errors"] else ""
    return (f"P {a['precision']:.2f} / R {a['recall']:.2f} (F1 {a['f1']:.2f}; "
            f"{a['exact']}/{a['queries']} exact{err})")


def render(res: dict) -> str:
    out = []
    m = res["machine"]
    v = res["versions"]
    out.append(f"Run {res['date_utc']} UTC, {res['wall_s']:.0f} s; {m['nproc']} CPUs ({m['cpu']}), "
               f"Linux {m['kernel']}; load average {' / '.join(m['load_avg'])} → "
               f"{' / '.join(m.get('load_avg_end', []))}.")
    out.append(f"Versions: {v.get('trellis', '?')} (release build); serena-agent {v.get('serena-agent', '?')} "
               f"(mcp {v.get('mcp', '?')}, Python {v.get('python', '?')}); pyright "
               f"{v.get('pyright (both sides)', '?')} behind both. Settings: "
               + ", ".join(f"{k} {val}" for k, val in res["settings"].items() if val != "") + ".")
    out.append("")
    for repo in res["repos"]:
        t, s = repo["sides"]["trellis"], repo["sides"]["serena"]
        out.append(f"**{repo['name']}** ({repo['py_files']} Python files, {repo['py_lines']} lines, "
                   f"{repo['definitions']} definitions)")
        out.append("")
        out.append("| measure | `trellis mcp` | Serena | Serena ÷ Trellis | goal ≥ 5× |")
        out.append("|---|---|---|---|---|")
        tc, sc = t.get("cold_median_s", {}), s.get("cold_median_s", {})
        for key, label in (("initialize_s", "cold start → `initialize` answered (median)"),
                           ("first_find_symbol_s", "cold start → first find-symbol answer (median)"),
                           ("first_references_s", "cold start → first references answer (median)"),
                           ("first_search_s", "cold start → first search answer (median)")):
            r = ratio(sc.get(key), tc.get(key))
            goal = verdict(r) if key == "first_find_symbol_s" else "–"
            out.append(f"| {label} | {fmt_s(tc.get(key))} | {fmt_s(sc.get(key))} | {fmt_ratio(r)} | {goal} |")
        tl, sl = t.get("latency_ms", {}), s.get("latency_ms", {})
        for tool, label in (("find_symbol", "find-symbol"), ("references", "references"), ("search", "search")):
            for p in ("p50", "p95"):
                a, b = tl.get(tool, {}).get(p), sl.get(tool, {}).get(p)
                r = ratio(b, a)
                n = tl.get(tool, {}).get("n", "?")
                out.append(f"| {label} {p} (warm, {n} calls) | {fmt_ms(a)} | {fmt_ms(b)} | {fmt_ratio(r)} | {verdict(r)} |")
        ta, sa = t.get("agreement", {}), s.get("agreement", {})
        for tool, label in (("find_symbol", "find-symbol vs AST definitions (file:line)"),
                            ("references", "references vs AST uses (file:line, declaration excluded)"),
                            ("search", "search vs files containing the word (.py)")):
            a, b = ta.get(tool), sa.get(tool)
            ok = "–"
            if a and b:
                ok = "equal or better" if a["f1"] >= b["f1"] - 1e-9 else "worse"
            out.append(f"| agreement: {label} | {agreement_cell(a)} | {agreement_cell(b)} | – | {ok} |")
        pw = repo.get("trellis_vs_serena", {})
        if pw:
            cells = "; ".join(f"{k} {v['identical_answers']}/{v['queries']} identical, Jaccard {v['jaccard']:.2f}"
                              for k, v in pw.items())
            out.append(f"| Trellis vs Serena directly | {cells} | | | |")
        rt, rs = t.get("rss_mib"), s.get("rss_mib")
        out.append(f"| RSS of the server's process tree after the rounds (incl. pyright) | "
                   f"{'–' if rt is None else f'{rt:.0f} MiB'} | {'–' if rs is None else f'{rs:.0f} MiB'} | | |")
        errs = [f"{side}: {e}" for side, x in repo["sides"].items() for e in x.get("errors", [])]
        out.append("")
        if errs:
            out.append("Errors: " + "; ".join(errs[:10]) + (" …" if len(errs) > 10 else ""))
            out.append("")
    return "\n".join(out)


def main() -> int:
    with open(sys.argv[1]) as f:
        print(render(json.load(f)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
