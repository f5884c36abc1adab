"""Independent pipelines (issue 18, free-running scheduling): START -> `start` -> P chains of S
nodes `p<i>_<j>`, each node `await asyncio.sleep(fast)` or `sleep(slow)` when it is slow:

  --layout slow_pipeline   every node of pipeline 0 is slow
  --layout staggered       node i+1 of pipeline i is slow, for i < S (one slow node per step,
                           each in a different pipeline)

LangGraph runs supersteps, so a pipeline's next node waits for every node of the current step.
Per run: total wall time (ainvoke) and, per pipeline, when its last node finished (relative to
the start of the run). No checkpointer (the engine's own scheduling is what is measured; the
sleeps dominate). Same shape as Trellis's `demo::build("pipelines", …)`.

  python bench_pipelines.py --runs 20 --fast 0.01 --slow 0.1
Writes pipelines.json to $LG_BENCH_RESULTS.
"""
from __future__ import annotations

import argparse
import asyncio
import operator
import time
from typing import Annotated, TypedDict

from common import loadavg, peak_rss_mb, reps, save
from graphs import merge_dict, stats
from langgraph.graph import START, StateGraph


class PipeState(TypedDict, total=False):
    log: Annotated[list, operator.add]
    finished: Annotated[dict, merge_dict]


def is_slow(layout: str, pipeline: int, stage: int) -> bool:
    if layout == "slow_pipeline":
        return pipeline == 0
    return pipeline + 1 == stage


def build_pipelines(pipelines: int, stages: int, fast: float, slow: float, layout: str):
    b = StateGraph(PipeState)

    async def start(state: PipeState) -> dict:
        return {}

    b.add_node("start", start)
    b.add_edge(START, "start")

    def make(name: str, pipeline: int, sleep_s: float, last: bool):
        async def node(state: PipeState) -> dict:
            await asyncio.sleep(sleep_s)
            out = {"log": [name]}
            if last:
                out["finished"] = {f"p{pipeline}": time.perf_counter()}
            return out
        return node

    for p in range(pipelines):
        for s in range(1, stages + 1):
            name = f"p{p}_{s}"
            sleep_s = slow if is_slow(layout, p, s) else fast
            b.add_node(name, make(name, p, sleep_s, s == stages))
            b.add_edge("start" if s == 1 else f"p{p}_{s - 1}", name)
    return b.compile()


async def bench(graph, runs: int, warmup: int, pipelines: int, stages: int):
    totals = []
    per_pipeline: list[list[float]] = [[] for _ in range(pipelines)]
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        out = await graph.ainvoke({"log": [], "finished": {}}, {"recursion_limit": 10_000})
        total = time.perf_counter() - t0
        assert len(out["log"]) == pipelines * stages, out["log"]
        assert len(out["finished"]) == pipelines, out["finished"]
        if i < warmup:
            continue
        totals.append(total)
        done = [out["finished"][f"p{p}"] - t0 for p in range(pipelines)]
        for p, d in enumerate(done):
            per_pipeline[p].append(d)
    return totals, per_pipeline


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipelines", type=int, default=10)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--fast", type=float, default=0.01)
    ap.add_argument("--slow", type=float, default=0.1)
    ap.add_argument("--runs", type=int, default=reps(20))
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    res = {"load_start": loadavg(), "config": vars(a), "layouts": {}}
    for layout in ("slow_pipeline", "staggered"):
        graph = build_pipelines(a.pipelines, a.stages, a.fast, a.slow, layout)
        totals, per_pipeline = asyncio.run(bench(graph, a.runs, a.warmup, a.pipelines, a.stages))
        res["layouts"][layout] = {
            "total": stats(totals),
            "pipelines": [stats(xs) for xs in per_pipeline],
        }
        st = res["layouts"][layout]["total"]
        print(f"pipelines {layout}: total median {st['median_ms']:.1f} ms p90 {st['p90_ms']:.1f} ms; "
              "pipelines done (median ms): "
              + ", ".join(f"{s['median_ms']:.1f}" for s in res["layouts"][layout]["pipelines"]),
              flush=True)
    res["peak_rss_mb"] = peak_rss_mb()
    res["load_end"] = loadavg()
    save("pipelines", res)


if __name__ == "__main__":
    main()
