#!/usr/bin/env python3
"""Trains the learned ranker shipped in crates/index/src/rank/model.json (docs/retrieval.md,
"Learned ranking").

    python3 -m venv ~/.cache/trellis/rank-venv
    ~/.cache/trellis/rank-venv/bin/pip install lightgbm==4.6.0 numpy
    python3 scripts/retrieval_mine.py --split train --per-repo 60 --out /tmp/rank/data/train.jsonl
    cargo run --release -p trellis-index --example retrieval_eval -- /tmp/rank/data/train.jsonl \
        --max-per-repo 20 --modes bm25,hybrid --dump-features /tmp/rank/out/train-features.jsonl
    ~/.cache/trellis/rank-venv/bin/python scripts/retrieval_train.py \
        /tmp/rank/out/train-features.jsonl [--out crates/index/src/rank/model.json] \
        [--drop FEATURE,...] [--eval /tmp/rank/out/dev-features.jsonl]

The features file has one candidate a line (query id, repository, hybrid or BM25-only
candidate list, label 2/1/0, feature vector; see crates/index/src/rank/features.rs). The model
is LightGBM lambdarank over each candidate list (graded labels: 2 a changed function, 1 a
chunk of a changed file), with fixed parameters and a single thread, so the same features give
the same model. Before the final fit, a leave-one-repository-out run prints each held-out
repository's candidate-level file Acc@1/5 for the fused order and for the model's order.
`--drop` trains without some features (the model lists the ones it reads; the ranker loads a
model over a subset of its features by name). `--eval` scores another features file (the dev
set's) offline: file and function Acc@1/5/10 of the candidate lists in fused and in model
order (the packed items' order differs only by deduplication).
"""
import argparse
import json
import os
import re
from collections import defaultdict

import lightgbm as lgb
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PARAMS = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "ndcg_eval_at": [1, 5],
    "label_gain": [0, 1, 3],
    "lambdarank_truncation_level": 20,
    "learning_rate": 0.05,
    "num_leaves": 7,
    "min_data_in_leaf": 100,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "seed": 7,
    "verbose": -1,
}


# Evidence of relevance: the score may never fall as one of these grows (-1: never rise).
MONOTONE = {
    "fused_score_norm": 1, "fused_inv_rank": 1, "bm25_inv_rank": 1, "bm25_score_norm": 1,
    "vector_inv_rank": 1, "cosine": 1, "cosine_gap": -1, "name_in_query": 1,
    "name_terms_matched": 1, "qualified_parts_matched": 1, "path_terms_matched": 1,
    "file_stem_in_query": 1, "file_name_in_query": 1, "query_idents_in_text": 1,
    "file_best_fused": 1, "file_best_cosine": 1, "file_inv_rank": 1,
    "file_query_terms_matched": 1,
}


def feature_names():
    src = open(os.path.join(ROOT, "crates/index/src/rank/features.rs")).read()
    block = src.split("pub const NAMES")[1].split("];")[0]
    return re.findall(r'"([a-z0-9_]+)"', block)


def load(path, columns):
    """Candidate lists by (query, hybrid), in fused order: (label, features, file, function or
    None), the features restricted to `columns`."""
    groups = defaultdict(list)
    repos = {}
    for line in open(path):
        r = json.loads(line)
        key = (r["qid"], r["hybrid"])
        f = [r["f"][i] for i in columns]
        groups[key].append((r["label"], f, r.get("path"), r.get("symbol"), r["f"]))
        repos[key] = r["repo"]
    keys = sorted(groups)
    return keys, groups, repos


def matrices(keys, groups):
    X, y, sizes = [], [], []
    for k in keys:
        rows = groups[k]
        sizes.append(len(rows))
        for label, f, *_ in rows:
            y.append(label)
            X.append(f)
    return np.array(X, dtype=np.float64), np.array(y), sizes


def acc_by_file(keys, groups, scores_of):
    """Acc@1/5 of the first candidate of a changed file, candidates ordered by `scores_of`
    (Acc@1 equals file Acc@1; Acc@5 is a lower bound of file Acc@5, since several of the
    first five candidates may share a file)."""
    hits1 = hits5 = 0
    for k in keys:
        rows = groups[k]
        s = scores_of(k, rows)
        order = sorted(range(len(rows)), key=lambda i: (-s[i], i))
        first = next((p for p, i in enumerate(order) if rows[i][0] >= 1), None)
        hits1 += first is not None and first < 1
        hits5 += first is not None and first < 5
    n = max(len(keys), 1)
    return 100.0 * hits1 / n, 100.0 * hits5 / n


def acc_at(keys, groups, scores_of, function_feature):
    """File and function Acc@1/5/10 (distinct files; distinct function and method
    candidates), candidates ordered by `scores_of`; function numbers over the lists that
    contain a changed function."""
    ks = (1, 5, 10)
    files, fns, n_fn = [0] * 3, [0] * 3, 0
    for k in keys:
        rows = groups[k]
        s = scores_of(k, rows)
        order = sorted(range(len(rows)), key=lambda i: (-s[i], i))
        seen, rank = [], None
        for i in order:
            if rows[i][2] not in seen:
                seen.append(rows[i][2])
                if rows[i][0] >= 1 and rank is None:
                    rank = len(seen) - 1
        for j, kk in enumerate(ks):
            files[j] += rank is not None and rank < kk
        if any(r[0] == 2 for r in rows):
            n_fn += 1
            fseen, frank = [], None
            for i in order:
                if rows[i][4][function_feature] < 0.5:
                    continue
                key = (rows[i][2], rows[i][3])
                if key not in fseen:
                    fseen.append(key)
                    if rows[i][0] == 2 and frank is None:
                        frank = len(fseen) - 1
            for j, kk in enumerate(ks):
                fns[j] += frank is not None and frank < kk
    pct = lambda a, n: " ".join(f"{100.0 * x / max(n, 1):5.1f}" for x in a)
    return f"file {pct(files, len(keys))} | function {pct(fns, n_fn)} ({len(keys)} lists, {n_fn} with a function)"


def train(X, y, sizes, rounds, names):
    ds = lgb.Dataset(X, y, group=sizes, free_raw_data=False)
    params = dict(PARAMS, monotone_constraints=[MONOTONE.get(n, 0) for n in names],
                  monotone_constraints_method="advanced")
    return lgb.train(params, ds, num_boost_round=rounds)


def export(booster, names, trained_on):
    trees = []
    for t in booster.dump_model()["tree_info"]:
        root = t["tree_structure"]
        if "leaf_value" in root and "split_index" not in root:
            trees.append({"split_feature": [], "threshold": [], "left_child": [],
                          "right_child": [], "leaf_value": [root["leaf_value"]]})
            continue
        n_int = t["num_leaves"] - 1
        sf, th, lc, rc = [0] * n_int, [0.0] * n_int, [0] * n_int, [0] * n_int
        lv = [0.0] * t["num_leaves"]

        def child(node):
            if "leaf_index" in node:
                lv[node["leaf_index"]] = node["leaf_value"]
                return ~node["leaf_index"]
            i = node["split_index"]
            assert node["decision_type"] == "<=", node["decision_type"]
            sf[i] = node["split_feature"]
            th[i] = node["threshold"]
            lc[i] = child(node["left_child"])
            rc[i] = child(node["right_child"])
            return i

        assert child(root) == 0
        trees.append({"split_feature": sf, "threshold": th, "left_child": lc,
                      "right_child": rc, "leaf_value": lv})
    return {"format": 1, "trained_on": trained_on, "features": names,
            "monotone": [MONOTONE.get(n, 0) for n in names], "trees": trees}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("features")
    ap.add_argument("--out", default=os.path.join(ROOT, "crates/index/src/rank/model.json"))
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--no-cv", action="store_true")
    ap.add_argument("--leaves", type=int, default=PARAMS["num_leaves"])
    ap.add_argument("--min-leaf", type=int, default=PARAMS["min_data_in_leaf"])
    ap.add_argument("--function-gain", type=float, default=3.0,
                    help="gain of label 2 (a changed function) against 1 (its file)")
    ap.add_argument("--seed", type=int, default=PARAMS["seed"], help="bagging and feature sampling seed")
    ap.add_argument("--drop", default="", help="comma-separated features to leave out")
    ap.add_argument("--eval", help="a features file to score offline (the dev set's)")
    args = ap.parse_args()
    PARAMS.update(num_leaves=args.leaves, min_data_in_leaf=args.min_leaf, seed=args.seed,
                  label_gain=[0, 1, args.function_gain])
    all_names = feature_names()
    drop = {d for d in args.drop.split(",") if d}
    assert drop <= set(all_names), f"unknown features: {drop - set(all_names)}"
    columns = [i for i, n in enumerate(all_names) if n not in drop]
    names = [all_names[i] for i in columns]
    keys, groups, repos = load(args.features, columns)
    width = len(groups[keys[0]][0][4])
    assert width == len(all_names), f"features file has {width} features, features.rs {len(all_names)}"
    repo_list = sorted(set(repos.values()))
    print(f"{len(keys)} candidate lists, {sum(len(groups[k]) for k in keys)} candidates, "
          f"repos: {', '.join(repo_list)}")
    fused = all_names.index("fused_inv_rank")
    if not args.no_cv:
        tot = defaultdict(float)
        for held in repo_list:
            tr = [k for k in keys if repos[k] != held]
            te = [k for k in keys if repos[k] == held]
            b = train(*matrices(tr, groups), args.rounds, names)
            base = acc_by_file(te, groups, lambda k, rows: [r[4][fused] for r in rows])
            model = acc_by_file(te, groups, lambda k, rows: list(b.predict(np.array([r[1] for r in rows]))))
            print(f"held out {held:22} ({len(te):3} lists): first relevant candidate "
                  f"@1/@5 fused {base[0]:5.1f}/{base[1]:5.1f} -> model {model[0]:5.1f}/{model[1]:5.1f}")
            for i, v in enumerate(base + model):
                tot[i] += v / len(repo_list)
        print(f"mean over held-out repos: fused {tot[0]:.1f}/{tot[1]:.1f} -> model {tot[2]:.1f}/{tot[3]:.1f}")
    booster = train(*matrices(keys, groups), args.rounds, names)
    if args.eval:
        ekeys, egroups, _ = load(args.eval, columns)
        fn = all_names.index("kind_function")
        for hybrid in (True, False):
            ks = [k for k in ekeys if k[1] == hybrid]
            base = acc_at(ks, egroups, lambda k, rows: [r[4][all_names.index("fused_inv_rank")] for r in rows], fn)
            model = acc_at(ks, egroups, lambda k, rows: list(booster.predict(np.array([r[1] for r in rows]))), fn)
            label = "hybrid" if hybrid else "bm25  "
            print(f"eval {label} fused: {base}")
            print(f"eval {label} model: {model}")
    gain = booster.feature_importance("gain")
    for n, g in sorted(zip(names, gain), key=lambda x: -x[1])[:12]:
        print(f"  gain {g:10.1f}  {n}")
    n_queries = len({k[0] for k in keys})
    trained_on = (f"LightGBM {lgb.__version__} lambdarank, {args.rounds} trees of <= {PARAMS['num_leaves']} leaves, "
                  f"{n_queries} queries mined from {', '.join(repo_list)} (scripts/retrieval_train.py)")
    model = export(booster, names, trained_on)
    # Check the export against LightGBM's own predictions.
    X, _, _ = matrices(keys[:50], groups)
    ref = booster.predict(X)
    mine = [sum(eval_tree(t, x) for t in model["trees"]) for x in X]
    assert max(abs(a - b) for a, b in zip(ref, mine)) < 1e-6, "exported trees disagree with LightGBM"
    with open(args.out, "w") as f:
        json.dump(model, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


def eval_tree(t, x):
    if not t["split_feature"]:
        return t["leaf_value"][0]
    node = 0
    while True:
        node = t["left_child"][node] if x[t["split_feature"][node]] <= t["threshold"][node] else t["right_child"][node]
        if node < 0:
            return t["leaf_value"][~node]


if __name__ == "__main__":
    main()
