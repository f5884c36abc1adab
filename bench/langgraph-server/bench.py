#!/usr/bin/env python3
"""Drives the LangGraph API server anchor of the `trellis serve` benchmark (issue 14).

Run it through `bench/langgraph-server/run` (which creates the venv first), or with the venv's
python directly. For each configuration (readers per run × the server's job slots) it:

1. copies the project (langgraph.json, app/) into a fresh temporary directory, so the server's
   `.langgraph_api/` state and its log never land in the repository and no state carries over;
2. starts `langgraph dev --no-browser --no-reload --host 127.0.0.1 --port P --n-jobs-per-worker J`
   in its own process group (P: a free loopback port; the port the server really took is read
   from its log, since it silently falls back when P is taken), waits for `GET /ok`, and checks
   that every listening socket of the server's process tree is bound to 127.0.0.1;
3. runs an untimed warm-up, then N concurrent G1 runs over HTTP with SSE streaming (each run:
   `POST /threads`, then either `POST /threads/{id}/runs/stream` read by one client, or
   `POST /threads/{id}/runs` joined by K clients with `GET /threads/{id}/runs/{run_id}/stream`),
   checking every reader got the 9 node steps in G1's order;
4. measures wall time, runs/s, events/s delivered, latencies, the server tree's CPU (utime+stime
   from /proc, children included) and peak RSS (VmHWM reset before the measured phase, and the
   sampled sum of VmRSS over the tree);
5. stops the server by killing its process group (SIGTERM, then SIGKILL), also on error, and
   checks the port no longer accepts connections.

Output: one JSON object (stdout, or --json PATH) and one human line per configuration (stderr).
See README.md beside this file for what every number means.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from urllib import request as urlrequest

from http1 import Conn

HERE = Path(__file__).resolve().parent
# G1's node order (test_generation fails twice; see app/graph.py).
G1_STEPS = [
    "code_generation", "test_generation", "adaptive_retrieval", "test_generation",
    "adaptive_retrieval", "test_generation", "security_review", "lint_and_format", "done",
]
CLK_TCK = os.sysconf("SC_CLK_TCK")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def g1_input() -> dict:
    return {
        "current_stage": "",
        "stage_results": {},
        "attempts": {},
        "enrichment_attempts": {},
        "retrieval_context": {},
        "messages": [{"role": "user", "content": "Implement feature X with tests"}],
        "outcome": "",
    }


# ------------------------------------------------------------------------------------------------
# statistics
# ------------------------------------------------------------------------------------------------
def pct(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of an unsorted list, or None when empty."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(1, -(-len(s) * q // 100))  # ceil(n q / 100), at least rank 1
    return s[int(min(k, len(s))) - 1]


def summary_ms(xs_s: list[float]) -> dict:
    """n, p50/p90/p99/max/mean/min in milliseconds of samples given in seconds."""
    if not xs_s:
        return {"n": 0}
    f = lambda v: round(v * 1e3, 3)  # noqa: E731
    return {
        "n": len(xs_s),
        "p50_ms": f(pct(xs_s, 50)),
        "p90_ms": f(pct(xs_s, 90)),
        "p99_ms": f(pct(xs_s, 99)),
        "max_ms": f(max(xs_s)),
        "mean_ms": f(sum(xs_s) / len(xs_s)),
        "min_ms": f(min(xs_s)),
    }


# ------------------------------------------------------------------------------------------------
# /proc: the server's process tree, its CPU, RSS and listening sockets
# ------------------------------------------------------------------------------------------------
def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def process_tree(root: int) -> list[int]:
    kids = _children_map()
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def tree_cpu_s(pids: list[int]) -> float:
    """utime+stime+cutime+cstime of the processes, seconds (reaped children included)."""
    ticks = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        ticks += sum(int(x) for x in fields[11:15])  # fields 14..17 of proc(5)
    return ticks / CLK_TCK


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_kib(pids: list[int], key: str) -> int:
    return sum(_status_kib(p, key) for p in pids)


def reset_hwm(pids: list[int]) -> bool:
    """Resets VmHWM to the current RSS (proc(5) clear_refs "5"); False if not permitted."""
    ok = True
    for p in pids:
        try:
            with open(f"/proc/{p}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            ok = False
    return ok


def listening_sockets(pids: list[int]) -> list[str]:
    """host:port of every TCP socket in LISTEN state owned by the processes."""
    inodes = set()
    for p in pids:
        try:
            for fd in os.listdir(f"/proc/{p}/fd"):
                try:
                    link = os.readlink(f"/proc/{p}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A = LISTEN
                continue
            addr, port = cols[1].split(":")
            if v6:
                raw = bytes.fromhex(addr)
                host = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
            else:
                host = socket.inet_ntoa(bytes.fromhex(addr)[::-1])
            out.append(f"{host}:{int(port, 16)}")
    return sorted(out)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    return (sum(vals[:8]) - vals[3] - vals[4]) / CLK_TCK  # user..steal, minus idle, iowait


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# ------------------------------------------------------------------------------------------------
# the server
# ------------------------------------------------------------------------------------------------
class Server:
    """`langgraph dev` in its own process group, in a fresh copy of the project."""

    def __init__(self, venv: Path, n_jobs: int, env: dict[str, str], keep: bool):
        self.venv, self.n_jobs, self.env, self.keep = venv, n_jobs, env, keep
        self.dir = Path(tempfile.mkdtemp(prefix="trellis-lg-anchor-"))
        self.log_path = self.dir / "server.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self, timeout_s: float) -> float:
        """Starts the server; returns the seconds until `GET /ok` answered."""
        shutil.copy(HERE / "langgraph.json", self.dir / "langgraph.json")
        shutil.copytree(HERE / "app", self.dir / "app", ignore=shutil.ignore_patterns("__pycache__"))
        requested = free_port()
        cmd = [
            str(self.venv / "bin" / "langgraph"), "dev", "--no-browser", "--no-reload",
            "--host", "127.0.0.1", "--port", str(requested),
            "--n-jobs-per-worker", str(self.n_jobs), "--config", str(self.dir / "langgraph.json"),
        ]
        t0 = time.perf_counter()
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd, cwd=self.dir, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        deadline = t0 + timeout_s
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"langgraph dev exited with {self.proc.returncode}; log: {self.log_path}\n"
                                   + self.log_tail())
            text = ANSI.sub("", self.log_path.read_text(errors="replace"))
            m = re.search(r"API: http://127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
                try:
                    # no proxy: an http_proxy in the environment must not see (or break) loopback
                    opener = urlrequest.build_opener(urlrequest.ProxyHandler({}))
                    with opener.open(f"http://127.0.0.1:{self.port}/ok", timeout=1) as resp:
                        if resp.status == 200:
                            return time.perf_counter() - t0
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"langgraph dev not ready after {timeout_s} s; log: {self.log_path}\n" + self.log_tail())

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(ANSI.sub("", self.log_path.read_text(errors="replace")).splitlines()[-n:])
        except OSError:
            return ""

    def port_fallback(self) -> str | None:
        m = re.search(r"Port \d+ is already in use, using port \d+ instead", ANSI.sub("", self.log_path.read_text()))
        return m.group(0) if m else None

    def pids(self) -> list[int]:
        return process_tree(self.proc.pid) if self.proc else []

    def stop(self) -> dict:
        """Kills the process group; returns how it ended and whether the port still answers."""
        out: dict = {}
        if self.proc is not None:
            pgid = self.proc.pid  # start_new_session: the group id is the leader's pid
            for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait_s)
                except subprocess.TimeoutExpired:
                    continue
                # the leader is gone; make sure nothing of its group is left
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                break
            out["exit_code"] = self.proc.poll()
        if self.port:
            out["port_still_accepts"] = port_accepts(self.port)
        if self.keep:
            out["kept_dir"] = str(self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        return out


# ------------------------------------------------------------------------------------------------
# the client side of one run
# ------------------------------------------------------------------------------------------------
@dataclass
class Reader:
    events: dict[str, int] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)
    step_recv: list[float] = field(default_factory=list)  # perf_counter at receipt of each step
    step_lat: list[float] = field(default_factory=list)   # receipt wall − node's emitted_at, s
    step_lat_live: list[float] = field(default_factory=list)  # the same, events emitted after `opened`
    step_index: list[int] = field(default_factory=list)  # the step (0..8) of each step_lat sample
    opened: float = 0.0  # time.time() when the stream's response headers arrived
    replayed: int = 0    # step events emitted before `opened` (a join's replay of the run's store)
    chunk_lat: list[float] = field(default_factory=list)
    first_started_at: float | None = None
    node_overrun: list[float] = field(default_factory=list)  # emitted_at − started_at − model time, s
    end: float = 0.0
    error: str | None = None
    dupes: int = 0

    def open(self) -> None:
        self.opened = time.time()


@dataclass
class RunResult:
    t_submit: float = 0.0          # perf_counter before POST /threads
    t_submit_wall: float = 0.0     # time.time() at the same moment
    thread_s: float = 0.0          # POST /threads round trip
    readers: list[Reader] = field(default_factory=list)
    error: str | None = None


async def read_sse(lines, r: Reader, model_s: float) -> None:
    """Consumes one SSE response (its lines), recording per event what the reader saw."""
    # SSE ids here are not unique: the in-memory stream ids are "<unix ms>-0" (the sequence is always
    # 0), so two events of a run in the same millisecond share one. A replayed duplicate is
    # byte-identical to the original, and distinct events differ in their data.
    seen: set[tuple[str, str, str | None]] = set()
    event = data = ev_id = None
    async for line in lines:
        if line:
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip() if data is None else data + "\n" + line[5:].strip()
            elif line.startswith("id:"):
                ev_id = line[3:].strip()
            continue
        if event is None:  # a comment / keep-alive block
            data = ev_id = None
            continue
        now_wall, now = time.time(), time.perf_counter()
        if ev_id:
            key = (event, ev_id, data)
            if key in seen:  # a resumed join can replay what its queue also delivers
                r.dupes += 1
                event = data = ev_id = None
                continue
            seen.add(key)
        r.events[event] = r.events.get(event, 0) + 1
        if event == "updates" and data:
            upd = json.loads(data)
            for node, val in upd.items():
                r.steps.append(node)
                r.step_recv.append(now)
                if isinstance(val, dict) and "emitted_at" in val:
                    r.step_lat.append(now_wall - val["emitted_at"])
                    r.step_index.append(len(r.steps) - 1)
                    if val["emitted_at"] >= r.opened:
                        r.step_lat_live.append(now_wall - val["emitted_at"])
                    else:
                        r.replayed += 1
                    if "started_at" in val:
                        r.node_overrun.append(val["emitted_at"] - val["started_at"] - model_s)
                        if r.first_started_at is None:
                            r.first_started_at = val["started_at"]
        elif event == "custom" and data:
            val = json.loads(data)
            if isinstance(val, dict) and "emitted_at" in val:
                r.chunk_lat.append(now_wall - val["emitted_at"])
        elif event == "error":
            r.error = (data or "")[:300]
        event = data = ev_id = None
    r.end = time.perf_counter()


async def one_run(port: int, timeout: float, readers: int, stream_mode: list[str], model_s: float) -> RunResult:
    """One G1 run through the API: a new thread, the run, and `readers` SSE readers of it."""
    res = RunResult()
    try:
        res.t_submit, res.t_submit_wall = time.perf_counter(), time.time()
        async with Conn(port, timeout) as conn:  # one keep-alive connection per run
            tid = (await conn.json("POST", "/threads", {}))["thread_id"]
            res.thread_s = time.perf_counter() - res.t_submit
            body = {"assistant_id": "agent", "input": g1_input(), "stream_mode": stream_mode}
            if readers == 1:
                r = Reader()
                res.readers.append(r)
                await read_sse(conn.lines("POST", f"/threads/{tid}/runs/stream", body, on_open=r.open), r, model_s)
            else:
                # Background run, resumable so that a reader who subscribes after the run started
                # still gets every event (replayed from the run's store; duplicates dropped in read_sse).
                body["stream_resumable"] = True
                rid = (await conn.json("POST", f"/threads/{tid}/runs", body))["run_id"]

                async def join(r: Reader, c: Conn) -> None:
                    await read_sse(c.lines("GET", f"/threads/{tid}/runs/{rid}/stream",
                                           headers={"Last-Event-ID": "0"}, on_open=r.open), r, model_s)

                async def join_new(r: Reader) -> None:
                    async with Conn(port, timeout) as c:
                        await join(r, c)

                res.readers = [Reader() for _ in range(readers)]
                await asyncio.gather(join(res.readers[0], conn), *(join_new(r) for r in res.readers[1:]))
    except Exception as e:  # recorded, reported, and counted as a failed run
        res.error = f"{type(e).__name__}: {e}"[:300]
    return res


def node_s(args) -> float:
    """The emulated model time of one node, seconds."""
    return args.chunks * args.chunk_ms / 1e3


def run_ok(res: RunResult) -> bool:
    return res.error is None and all(r.error is None and r.steps == G1_STEPS for r in res.readers)


async def sampler(pids: list[int], stop: asyncio.Event, out: dict) -> None:
    """Peak of the summed VmRSS of the server's processes, sampled every 20 ms (the list is taken
    once per round: a /proc scan costs ~2 ms, reading a status file ~20 µs)."""
    while not stop.is_set():
        out["peak_kib"] = max(out.get("peak_kib", 0), tree_kib(pids, "VmRSS"))
        try:
            await asyncio.wait_for(stop.wait(), 0.02)
        except TimeoutError:
            pass


async def workload(server: Server, args, readers: int, stream_mode: list[str]) -> dict:
    """Warm-up, then `args.rounds` measured rounds of `args.runs` concurrent runs on one server."""
    if args.warmup:
        warm = await asyncio.gather(*(one_run(server.port, args.run_timeout, readers, stream_mode, node_s(args))
                                      for _ in range(args.warmup)))
        bad = [w for w in warm if not run_ok(w)]
        if bad:
            raise RuntimeError(f"warm-up run failed: {bad[0].error or [r.error or r.steps for r in bad[0].readers]}")
    rounds = []
    for _ in range(args.rounds):
        await asyncio.sleep(0.5)  # let the previous runs' tail (persistence flush, stream cleanup) settle
        rounds.append(await measure_round(server, args, readers, stream_mode))
    return {"rounds": [{k: v for k, v in r.items() if k != "samples"} for r in rounds],
            "summary": summarize(rounds)}


async def measure_round(server: Server, args, readers: int, stream_mode: list[str]) -> dict:
    pids = server.pids()
    hwm_reset = reset_hwm(pids)
    rss_before_kib = tree_kib(pids, "VmRSS")
    cpu0 = tree_cpu_s(pids)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    load0 = loadavg()
    busy0 = machine_busy_s()
    stop, rss = asyncio.Event(), {}
    samp = asyncio.create_task(sampler(pids, stop, rss))
    t0 = time.perf_counter()
    results = await asyncio.gather(*(one_run(server.port, args.run_timeout, readers, stream_mode, node_s(args))
                                     for _ in range(args.runs)))
    wall = time.perf_counter() - t0
    stop.set()
    await samp
    pids = server.pids()
    cpu = tree_cpu_s(pids) - cpu0
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    hwm_kib = tree_kib(pids, "VmHWM")
    load1 = loadavg()
    busy = machine_busy_s() - busy0

    model_s = node_s(args)
    ok = [r for r in results if run_ok(r)]
    failed = [r for r in results if not run_ok(r)]
    events: dict[str, int] = {}
    samples: dict[str, list[float]] = {k: [] for k in LATENCIES}
    by_step: list[list[float]] = [[] for _ in G1_STEPS]
    dupes = replayed = 0
    for res in results:
        samples["post_threads"].append(res.thread_s)
        for ri, r in enumerate(res.readers):
            dupes += r.dupes
            for k, v in r.events.items():
                events[k] = events.get(k, 0) + v
            samples["node_return_to_client"] += r.step_lat
            samples["node_return_to_client_live"] += r.step_lat_live
            for i, lat in zip(r.step_index, r.step_lat):
                by_step[i].append(lat)
            replayed += r.replayed
            samples["chunk_emit_to_client"] += r.chunk_lat
            if readers == 1:  # a join may replay its first events in a burst: gaps meaningless there
                samples["step_gap_minus_node_time"] += [b - a - model_s for a, b in zip(r.step_recv, r.step_recv[1:])]
            if r.step_recv:
                samples["submit_to_first_step"].append(r.step_recv[0] - res.t_submit)
            if ri == 0:  # the node timings are the run's, the same for every reader
                samples["node_pacing_overrun"] += r.node_overrun
                if r.first_started_at is not None:
                    samples["submit_to_first_node_start"].append(r.first_started_at - res.t_submit_wall)
        if res.readers and res.error is None:
            samples["run_wall"].append(max(r.end for r in res.readers) - res.t_submit)
    total_events = sum(events.values())
    u0, u1 = self0.ru_utime + self0.ru_stime, self1.ru_utime + self1.ru_stime
    return {
        "runs": args.runs,
        "runs_ok": len(ok),
        "runs_failed": len(failed),
        "failures": sorted({f.error or next((r.error or f"steps {r.steps}" for r in f.readers
                                             if r.error or r.steps != G1_STEPS), "?") for f in failed})[:5],
        "wall_s": round(wall, 4),
        "runs_per_s": round(len(ok) / wall, 3),
        "events_delivered": total_events,
        "events_delivered_by_type": events,
        "events_per_s": round(total_events / wall, 1),
        "step_events_per_s": round(events.get("updates", 0) / wall, 1),
        "duplicate_events_dropped": dupes,
        "step_events_replayed": replayed,
        "latency": {k: summary_ms(v) for k, v in samples.items()},
        # p50 / p99 / max of node_return_to_client per step of G1 (0 = code_generation … 8 = done)
        "node_return_to_client_by_step_ms": [
            [summary_ms(xs).get(k) for k in ("p50_ms", "p99_ms", "max_ms")] for xs in by_step],
        "server": {
            "pids": len(pids),
            "cpu_s": round(cpu, 3),
            "cpu_cores_busy": round(cpu / wall, 3),
            "cpu_ms_per_run": round(cpu * 1e3 / args.runs, 2),
            "rss_before_mib": round(rss_before_kib / 1024, 1),
            "rss_peak_sampled_mib": round(rss.get("peak_kib", 0) / 1024, 1),
            "vm_hwm_mib": round(hwm_kib / 1024, 1),
            "vm_hwm_reset_before": hwm_reset,
        },
        "client": {"cpu_s": round(u1 - u0, 3), "cpu_cores_busy": round((u1 - u0) / wall, 3)},
        # everything else on the machine during the round (other builds): busy − server − client
        "other_cpu_cores_busy": round(max(0.0, busy - cpu - (u1 - u0)) / wall, 3),
        "load_avg_before": load0,
        "load_avg_after": load1,
        "samples": samples,
    }


LATENCIES = ("node_return_to_client", "node_return_to_client_live", "chunk_emit_to_client",
             "step_gap_minus_node_time", "node_pacing_overrun", "submit_to_first_step",
             "submit_to_first_node_start", "run_wall", "post_threads")


def summarize(rounds: list[dict]) -> dict:
    """Across rounds: median/min/max of the rates, latency percentiles of the pooled samples, totals."""
    def mid(key: str, sub: str | None = None) -> dict:
        xs = sorted(r[sub][key] if sub else r[key] for r in rounds)
        return {"median": xs[(len(xs) - 1) // 2], "min": xs[0], "max": xs[-1]}

    runs = sum(r["runs"] for r in rounds)
    cpu = sum(r["server"]["cpu_s"] for r in rounds)
    return {
        "rounds": len(rounds),
        "runs": runs,
        "runs_ok": sum(r["runs_ok"] for r in rounds),
        "runs_per_s": mid("runs_per_s"),
        "events_per_s": mid("events_per_s"),
        "events_delivered": sum(r["events_delivered"] for r in rounds),
        "latency_pooled": {k: summary_ms([x for r in rounds for x in r["samples"][k]]) for k in LATENCIES},
        "server_cpu_s": round(cpu, 3),
        "server_cpu_ms_per_run": round(cpu * 1e3 / runs, 2),
        "server_cpu_cores_busy": mid("cpu_cores_busy", "server"),
        "server_rss_peak_mib": max(r["server"]["rss_peak_sampled_mib"] for r in rounds),
        "server_vm_hwm_mib": max(r["server"]["vm_hwm_mib"] for r in rounds),
        "client_cpu_cores_busy": mid("cpu_cores_busy", "client"),
        "other_cpu_cores_busy": mid("other_cpu_cores_busy"),
    }


# ------------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------------
def versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("langgraph-cli", "langgraph-api", "langgraph-runtime-inmem", "langgraph", "langgraph-sdk",
                "langgraph-checkpoint", "langchain-core", "uvicorn", "starlette", "sse-starlette"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def int_list(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50, help="concurrent runs in the measured phase (default 50)")
    ap.add_argument("--readers", type=int_list, default=[1, 2],
                    help="SSE readers per run, a comma list, one configuration each (default 1,2: "
                         "50 and 100 concurrent streams)")
    ap.add_argument("--n-jobs-per-worker", type=int_list, default=None,
                    help="the server's concurrent run slots, a comma list (default: --runs; "
                         "`langgraph dev` itself defaults to 1)")
    ap.add_argument("--chunk-ms", type=float, default=4.0, help="model pacing interval per chunk (default 4)")
    ap.add_argument("--chunks", type=int, default=2, help="paced chunks per node (default 2 → 8 ms per node)")
    ap.add_argument("--chunk-events", action="store_true",
                    help="one `custom` SSE event per chunk (the analogue of model text deltas)")
    ap.add_argument("--warmup", type=int, default=5, help="concurrent untimed runs first (default 5)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="measured rounds of --runs concurrent runs on each server (default 3)")
    ap.add_argument("--run-timeout", type=float, default=300.0, help="HTTP timeout per request, s")
    ap.add_argument("--startup-timeout", type=float, default=90.0)
    ap.add_argument("--venv", type=Path, default=Path(os.environ.get(
        "LANGGRAPH_VENV", Path.home() / ".cache/trellis/langgraph-venv")))
    ap.add_argument("--json", type=Path, help="write the JSON result here instead of stdout")
    ap.add_argument("--keep", action="store_true", help="keep each server's directory (log, .langgraph_api)")
    args = ap.parse_args()
    jobs_list = args.n_jobs_per_worker or [args.runs]

    stream_mode = ["updates"] + (["custom"] if args.chunk_events else [])
    env = dict(os.environ)
    env.update({
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # no analytics POST from the CLI
        "LANGGRAPH_NO_VERSION_CHECK": "1",  # no PyPI version check
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "LG_BENCH_CHUNK_MS": repr(args.chunk_ms),
        "LG_BENCH_CHUNKS": str(args.chunks),
        "LG_BENCH_CHUNK_EVENTS": "1" if args.chunk_events else "0",
    })
    out = {
        "anchor": "langgraph-api-inmem",
        "date_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "kernel": platform.release(),
                    "load_avg_start": loadavg()},
        "versions": versions(),
        "workload": {
            "graph": "G1 feature_with_iterative_testing (9 node steps per run)",
            "node_model_time_ms": args.chunks * args.chunk_ms,
            "chunks_per_node": args.chunks, "chunk_ms": args.chunk_ms, "chunk_events": args.chunk_events,
            "stream_mode": stream_mode, "warmup_runs": args.warmup, "rounds": args.rounds, "runs": args.runs,
            "ideal_runs_per_s": (round(args.runs / (len(G1_STEPS) * args.chunks * args.chunk_ms / 1e3), 1)
                                 if args.chunks * args.chunk_ms else None),
        },
        "configs": [],
    }
    # SIGTERM/SIGHUP end the driver through SystemExit, so the `finally` below still stops the
    # server (it runs in its own session and would not get the driver's signals).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    rc = 0
    for jobs in jobs_list:
        for readers in args.readers:
            cfg = {"readers_per_run": readers, "concurrent_streams": readers * args.runs, "n_jobs_per_worker": jobs,
                   "client_path": ("POST /threads/{id}/runs/stream" if readers == 1 else
                                   f"POST /threads/{{id}}/runs (stream_resumable) + {readers}× GET "
                                   "/threads/{id}/runs/{run_id}/stream")}
            server = Server(args.venv, jobs, env, args.keep)
            try:
                cfg["server_start_s"] = round(server.start(args.startup_timeout), 3)
                cfg["port_fallback"] = server.port_fallback()
                cfg["listening"] = listening_sockets(server.pids())
                if any(not s.startswith("127.0.0.1:") for s in cfg["listening"]):
                    raise RuntimeError(f"server listens beyond loopback: {cfg['listening']}")
                cfg.update(asyncio.run(workload(server, args, readers, stream_mode)))
            except Exception as e:
                cfg["error"] = f"{type(e).__name__}: {e}"
                rc = 1
            finally:
                cfg["shutdown"] = server.stop()
            out["configs"].append(cfg)
            print(human(cfg), file=sys.stderr, flush=True)
            if (cfg.get("summary", {}).get("runs_ok") != cfg.get("summary", {}).get("runs")
                    or cfg["shutdown"].get("port_still_accepts")):
                rc = 1
    out["machine"]["load_avg_end"] = loadavg()
    text = json.dumps(out, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    else:
        print(text)
    return rc


def human(c: dict) -> str:
    head = f"langgraph dev, {c['readers_per_run']} reader(s)/run, n-jobs {c['n_jobs_per_worker']}"
    if "error" in c:
        return f"{head}: ERROR {c['error']}"
    s = c["summary"]
    lat = s["latency_pooled"]
    nr, st = lat["node_return_to_client_live"], lat["submit_to_first_node_start"]
    return (f"{head}: {s['runs_ok']}/{s['runs']} runs ok over {s['rounds']} rounds; runs/s median "
            f"{s['runs_per_s']['median']:.1f} (min {s['runs_per_s']['min']:.1f}, max {s['runs_per_s']['max']:.1f}); "
            f"events/s median {s['events_per_s']['median']:.0f}; node return -> client (live) p50 {nr.get('p50_ms')} / "
            f"p99 {nr.get('p99_ms')} ms; submit -> first node start p50 {st.get('p50_ms')} ms; server CPU "
            f"{s['server_cpu_ms_per_run']} ms/run, RSS peak {s['server_rss_peak_mib']} MiB; other processes "
            f"{s['other_cpu_cores_busy']['median']} cores busy")


if __name__ == "__main__":
    sys.exit(main())
