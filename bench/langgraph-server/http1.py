"""A minimal asyncio HTTP/1.1 client for the benchmark driver: JSON requests and SSE streams on
loopback, one keep-alive connection per caller.

Why not httpx (which the venv has): with ~100 concurrent streams its connection pool cost the
driver up to 0.8 of a core (4.6 s of CPU in a 5.7 s round, stalling the requests it was meant to
time), on a machine whose 2 cores the server under test also needs. This client does only what the
driver needs — Content-Length and chunked bodies, no TLS, no redirects, no compression — and
costs a few microseconds per event.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator


class HttpError(Exception):
    pass


class Conn:
    """One HTTP/1.1 connection to 127.0.0.1:port; requests on it run one after the other."""

    def __init__(self, port: int, timeout: float):
        self.port, self.timeout = port, timeout
        self.r: asyncio.StreamReader | None = None
        self.w: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> "Conn":
        self.r, self.w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), self.timeout)
        return self

    async def __aexit__(self, *exc) -> None:
        if self.w is not None:
            self.w.close()
            try:
                await self.w.wait_closed()
            except OSError:
                pass

    async def _send(self, method: str, path: str, body: object | None, headers: dict[str, str]) -> dict[str, str]:
        payload = b"" if body is None else json.dumps(body).encode()
        head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", "Accept: */*"]
        if body is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        self.w.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await self.w.drain()
        raw = await asyncio.wait_for(self.r.readuntil(b"\r\n\r\n"), self.timeout)
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        status = int(parts[1])
        hdrs = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        hdrs[":status"] = str(status)
        return hdrs

    async def _body(self, hdrs: dict[str, str]) -> AsyncIterator[bytes]:
        """The response body as it arrives (chunked or Content-Length)."""
        if hdrs.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size_line = await asyncio.wait_for(self.r.readuntil(b"\r\n"), self.timeout)
                size = int(size_line.split(b";", 1)[0], 16)
                if size == 0:
                    await self.r.readuntil(b"\r\n")  # no trailers expected: the final CRLF
                    return
                chunk = await asyncio.wait_for(self.r.readexactly(size + 2), self.timeout)
                yield chunk[:-2]
        elif "content-length" in hdrs:
            n = int(hdrs["content-length"])
            if n:
                yield await asyncio.wait_for(self.r.readexactly(n), self.timeout)
        else:  # close-delimited
            while data := await asyncio.wait_for(self.r.read(65536), self.timeout):
                yield data

    async def json(self, method: str, path: str, body: object | None = None) -> object:
        hdrs = await self._send(method, path, body, {})
        data = b"".join([c async for c in self._body(hdrs)])
        if not hdrs[":status"].startswith("2"):
            raise HttpError(f"{method} {path}: HTTP {hdrs[':status']}: {data[:200]!r}")
        return json.loads(data)

    async def lines(self, method: str, path: str, body: object | None = None,
                    headers: dict[str, str] | None = None, on_open=None) -> AsyncIterator[str]:
        """A streamed response's lines (without their line ends), as they arrive; `on_open()` is
        called once its (successful) response headers are in."""
        hdrs = await self._send(method, path, body, headers or {})
        if not hdrs[":status"].startswith("2"):
            data = b"".join([c async for c in self._body(hdrs)])
            raise HttpError(f"{method} {path}: HTTP {hdrs[':status']}: {data[:200]!r}")
        if on_open is not None:
            on_open()
        buf = b""
        async for chunk in self._body(hdrs):
            buf += chunk
            *done, buf = buf.split(b"\n")
            for line in done:
                yield line.rstrip(b"\r").decode()
        if buf:
            yield buf.rstrip(b"\r").decode()
