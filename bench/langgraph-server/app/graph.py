"""G1 `feature_with_iterative_testing` for the LangGraph API server anchor (issue 14).

A copy of the minimum of G1 from the LangGraph anchor harness (`../shared/bench/langgraph/graphs.py`,
kept outside this repository): the four stages of seed 000 with the adaptive_retrieval retry loop and
done/abort. test_generation fails on its first two attempts, so one run is 9 node steps:

    code_generation, test_generation(F), adaptive_retrieval, test_generation(F),
    adaptive_retrieval, test_generation(ok), security_review, lint_and_format, done

Differences from the harness's G1, all for the server benchmark:
- compiled WITHOUT a checkpointer: the API server supplies its own (in-memory, pickled to
  `.langgraph_api/` in dev mode);
- every node is `async` and emulates a paced model call: LG_BENCH_CHUNKS awaited sleeps, the k-th
  ending LG_BENCH_CHUNK_MS × k after the node started (paced from the node's start, so timer
  overshoot does not accumulate), without blocking the server's event loop;
- with LG_BENCH_CHUNK_EVENTS=1 each chunk also emits a `custom` stream event (the analogue of a
  model text delta), stamped with the server's wall clock;
- every node's update carries `started_at` and `emitted_at`: the server's `time.time()` taken as the
  node's first and last statements, so a client on the same host can measure node-return →
  client-receipt latency, queueing before the first node, and how late the server's event loop
  ran the paced sleeps.

Environment (read once, when the server imports this module):
    LG_BENCH_CHUNK_MS      pacing interval, milliseconds (default 4)
    LG_BENCH_CHUNKS        chunks per node (default 2, i.e. 8 ms of "model time" per node)
    LG_BENCH_CHUNK_EVENTS  1: emit one `custom` event per chunk (default 0)
"""
from __future__ import annotations

import asyncio
import operator
import os
import time
from typing import Annotated, Any, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph

CHUNK_S = float(os.environ.get("LG_BENCH_CHUNK_MS", "4")) / 1e3
CHUNKS = int(os.environ.get("LG_BENCH_CHUNKS", "2"))
CHUNK_EVENTS = os.environ.get("LG_BENCH_CHUNK_EVENTS", "0") == "1"


def merge_dict(a: dict | None, b: dict | None) -> dict:
    """Reducer: shallow dict merge (right wins)."""
    if not a:
        return dict(b or {})
    if not b:
        return a
    out = dict(a)
    out.update(b)
    return out


class FeatureState(TypedDict, total=False):
    current_stage: str
    stage_results: Annotated[dict, merge_dict]
    attempts: Annotated[dict, merge_dict]
    enrichment_attempts: Annotated[dict, merge_dict]
    retrieval_context: Annotated[dict, merge_dict]
    messages: Annotated[list, operator.add]
    outcome: str
    started_at: float
    emitted_at: float


G1_STAGES: dict[str, dict[str, Any]] = {
    "code_generation": {"next_on_success": "test_generation", "next_on_failure": "abort", "max_attempts": 3},
    "test_generation": {"next_on_success": "security_review", "next_on_failure": "abort", "max_attempts": 3},
    "security_review": {"next_on_success": "lint_and_format", "next_on_failure": "abort", "max_attempts": 3},
    "lint_and_format": {"next_on_success": "done", "next_on_failure": "abort", "max_attempts": 3},
}
MAX_ENRICHMENT = 2
FAIL_FIRST_N = {"test_generation": 2}
G1_NODE_STEPS = 9


async def model_pacing(node: str) -> None:
    """The emulated model call: CHUNKS intervals of CHUNK_S, paced from the call's start."""
    if CHUNKS <= 0 or CHUNK_S <= 0:
        return
    writer = get_stream_writer() if CHUNK_EVENTS else None
    loop = asyncio.get_running_loop()
    start = loop.time()
    for k in range(1, CHUNKS + 1):
        delay = start + k * CHUNK_S - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if writer is not None:
            writer({"node": node, "chunk": k, "emitted_at": time.time()})


def _make_stage(name: str):
    fail_n = FAIL_FIRST_N.get(name, 0)

    async def node(state: FeatureState) -> dict:
        started_at = time.time()
        await model_pacing(name)
        attempt = state.get("attempts", {}).get(name, 0) + 1
        failure = attempt <= fail_n
        ctx = state.get("retrieval_context", {}).get(name)
        return {
            "current_stage": name,
            "attempts": {name: attempt},
            "stage_results": {
                name: {
                    "failure": failure,
                    "attempt": attempt,
                    "summary": f"{name} attempt {attempt} {'FAILED' if failure else 'ok'}",
                    "used_context": ctx is not None,
                }
            },
            "messages": [{"role": "assistant", "stage": name, "content": f"{name} #{attempt}"}],
            "started_at": started_at,
            "emitted_at": time.time(),
        }

    node.__name__ = name
    return node


async def adaptive_retrieval(state: FeatureState) -> dict:
    started_at = time.time()
    await model_pacing("adaptive_retrieval")
    stage = state["current_stage"]
    n = state.get("enrichment_attempts", {}).get(stage, 0) + 1
    return {
        "enrichment_attempts": {stage: n},
        "retrieval_context": {stage: {"round": n, "docs": [f"doc-{stage}-{n}-{i}" for i in range(3)]}},
        "messages": [{"role": "tool", "stage": "adaptive_retrieval", "content": f"enrich {stage} #{n}"}],
        "started_at": started_at,
        "emitted_at": time.time(),
    }


def _make_terminal(name: str):
    async def node(state: FeatureState) -> dict:
        started_at = time.time()
        await model_pacing(name)
        return {"outcome": name, "messages": [{"role": "system", "content": name}],
                "started_at": started_at, "emitted_at": time.time()}

    node.__name__ = name
    return node


def _route_after_stage(stage: str):
    spec = G1_STAGES[stage]

    def route(state: FeatureState) -> str:
        res = state["stage_results"][stage]
        if not res["failure"]:
            return spec["next_on_success"]
        if state.get("enrichment_attempts", {}).get(stage, 0) < MAX_ENRICHMENT:
            return "adaptive_retrieval"
        if state.get("attempts", {}).get(stage, 0) >= spec["max_attempts"]:
            return spec["next_on_failure"]
        return stage  # plain retry without enrichment

    return route


def route_after_retrieval(state: FeatureState) -> str:
    return state["current_stage"]  # back to the stage being retried


def build_g1() -> StateGraph:
    b = StateGraph(FeatureState)
    for stage in G1_STAGES:
        b.add_node(stage, _make_stage(stage))
    b.add_node("adaptive_retrieval", adaptive_retrieval)
    b.add_node("done", _make_terminal("done"))
    b.add_node("abort", _make_terminal("abort"))
    b.add_edge(START, "code_generation")
    for stage, spec in G1_STAGES.items():
        b.add_conditional_edges(
            stage,
            _route_after_stage(stage),
            sorted({spec["next_on_success"], spec["next_on_failure"], "adaptive_retrieval", stage}),
        )
    b.add_conditional_edges("adaptive_retrieval", route_after_retrieval, list(G1_STAGES))
    b.add_edge("done", END)
    b.add_edge("abort", END)
    return b


# No checkpointer: the API server attaches its own.
graph = build_g1().compile()
