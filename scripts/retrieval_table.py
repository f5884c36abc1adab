#!/usr/bin/env python3
"""Aggregates `retrieval_eval --report` files (one or more runs, e.g. one per repository) into
the Acc@k table of docs/retrieval.md: file and function Acc@1/5/10 per mode, overall and per
language. A query in several reports counts once (the last report wins).

    python3 scripts/retrieval_table.py /tmp/rank/out/dev-*.json

Reports that record the query analysis (retrieval_eval writes it) also get tables for the
queries whose paths or stack frames name some indexed file and for those naming a gold file.
"""
import json
import sys
from collections import defaultdict

KS = (1, 5, 10)


def main():
    rows = {}
    for path in sys.argv[1:]:
        for r in json.load(open(path)):
            rows[r["id"]] = {**rows.get(r["id"], {}), **r}
    modes = []
    for r in rows.values():
        for k, v in r.items():
            if isinstance(v, dict) and "file_rank" in v and k not in modes:
                modes.append(k)

    def table(subset, label):
        print(f"\n{label} ({len(subset)} queries; function numbers over those that changed a function)")
        print("| mode | file Acc@1 | @5 | @10 | function Acc@1 | @5 | @10 |")
        print("|---|---|---|---|---|---|---|")
        for m in modes:
            have = [r for r in subset if m in r]
            if not have:
                continue
            acc = lambda ranks, k: 100.0 * sum(1 for x in ranks if x is not None and x < k) / max(len(ranks), 1)
            files = [r[m]["file_rank"] for r in have]
            gold_fn = [r[m]["function_rank"] for r in have if r["functions_gold"] > 0]
            fcells = " | ".join(f"{acc(files, k):.1f}" for k in KS)
            gcells = " | ".join(f"{acc(gold_fn, k):.1f}" for k in KS)
            print(f"| {m} ({len(have)}, {len(gold_fn)} with functions) | {fcells} | {gcells} |")

    allrows = list(rows.values())
    table(allrows, "all")
    if any("named_files" in r for r in allrows):
        table([r for r in allrows if r.get("named_files", 0) > 0], "queries naming an indexed file")
        table([r for r in allrows if r.get("named_gold")], "queries naming a gold file")
        table([r for r in allrows if r.get("frames", 0) > 0], "queries with a stack frame or path:line")
    by_lang = defaultdict(list)
    for r in allrows:
        by_lang[r["lang"]].append(r)
    for lang in sorted(by_lang):
        table(by_lang[lang], lang)


if __name__ == "__main__":
    main()
