"""A minimal MCP client over stdio (newline-delimited JSON-RPC 2.0), standard library only.

Why not the `mcp` SDK: the benchmark times the servers, so the client should add as little as
possible and the same to both; this one writes a request, reads lines until the response with
its id arrives (answering nothing, ignoring notifications and logging), and nothing else runs
in between. It speaks the 2025-11-25 initialize handshake, which both servers accept.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import deque

PROTOCOL = "2025-11-25"


class McpError(Exception):
    """A JSON-RPC error answer, or the server went away."""


class StdioClient:
    """One server process; `call_tool` returns (result, seconds)."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str], stderr_path: str):
        self._stderr = open(stderr_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,  # its own process group: killed whole in close()
        )
        self._next_id = 0
        self.server_info: dict = {}

    def _send(self, msg: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None, timeout: float = 600.0) -> dict:
        self._next_id += 1
        rid = self._next_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._send(msg)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            line = self._readline(deadline)
            if not line:
                raise McpError(f"{method}: the server closed its output (exit {self.proc.poll()})")
            try:
                got = json.loads(line)
            except json.JSONDecodeError:
                continue  # not ours to judge; a well-behaved server writes only JSON-RPC
            if got.get("id") == rid and ("result" in got or "error" in got):
                if "error" in got:
                    raise McpError(f"{method}: {got['error']}")
                return got["result"]
            if "method" in got and "id" in got:
                # A request from the server (roots, sampling, ping): we offer no capabilities.
                self._send({"jsonrpc": "2.0", "id": got["id"],
                            "error": {"code": -32601, "message": "not supported"}})

    def _readline(self, deadline: float) -> bytes:
        # A blocking read in a helper thread, so a hung server fails the run instead of hanging it.
        box: deque[bytes] = deque()
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        t.start()
        t.join(max(0.0, deadline - time.monotonic()))
        if not box:
            self.close()
            raise McpError("timed out waiting for the server")
        return box[0]

    def initialize(self) -> dict:
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "trellis-bench-serena", "version": "1"},
        })
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.server_info = result.get("serverInfo", {})
        return result

    def list_tools(self) -> list[dict]:
        tools, cursor = [], None
        while True:
            r = self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools += r.get("tools", [])
            cursor = r.get("nextCursor")
            if not cursor:
                return tools

    def call_tool(self, name: str, arguments: dict, timeout: float = 600.0) -> tuple[dict, float]:
        t0 = time.perf_counter()
        r = self.request("tools/call", {"name": name, "arguments": arguments}, timeout)
        return r, time.perf_counter() - t0

    def close(self) -> None:
        """Closes stdin (a polite server exits), then SIGTERM and SIGKILL to its process group,
        and SIGKILL to what is left of the group (language servers it started)."""
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        for sig, wait in ((None, 5), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            if self.proc.poll() is not None:
                break
            try:
                if sig is not None:
                    os.killpg(self.proc.pid, sig)
                self.proc.wait(wait)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self._stderr.close()


def text_of(result: dict) -> str:
    """The text content of a tool result."""
    return "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
