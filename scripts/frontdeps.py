#!/usr/bin/env python3
"""Front-ends depend only on the service: the crates a front-end may build on.

    scripts/frontdeps.py    # exit 1 when a front-end depends on a crate it may not

A front-end (`trellis-server`, `trellis-acp`, `trellis-mcp-server`) is a thin adapter over
the runtime service: its normal dependencies among the workspace's crates are core (the
service API), protocol (the wire types) and config, plus its own protocol pieces listed in
OWN. Test-only (dev) dependencies are free. Read from `cargo metadata --no-deps` (the
declared dependencies, no build and no network). (`Service::runtime()` is private to
core, so the compiler keeps their sources off the runtime.)

PENDING lists the dependencies known to break the rule, with the open work that removes
them; they are printed on every run and the check fails when one of them is gone (so the
list shrinks with the code) or a new one appears.

The CLI is one crate with every command in it, so its run commands are checked by their
sources instead: the modules in READERS (`trellis runs list | show | events | usage`, the
turns of `runs show --turns`, the steering ops, `trellis tools graph`) read through `trellis_core::Records` (the
store-only reader), act through `trellis_core::service`, and speak `trellis_protocol`. The
workspace crates their code names (comments aside) must be those, with `trellis_core` only
through READER_CORE — not the runtime pieces core re-exports — and they take no store
handle (`.store()`), so nothing reads the store or replays a graph behind the reader.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

FRONT_ENDS = ["trellis-server", "trellis-acp", "trellis-mcp-server"]
SERVICE = {"trellis-core", "trellis-protocol", "trellis-config"}
OWN = {
    # Bearer tokens and allowed hosts of a served front-end; the run counters of `/metrics`
    # (trellis-telemetry without its `otlp` feature: a mapping of wire types, on protocol).
    "trellis-server": {"trellis-access", "trellis-telemetry"},
    # `_trellis/notification`: which events notify (trellis-notify without its `channels`
    # feature: the detector over wire types, on protocol).
    "trellis-acp": {"trellis-notify"},
}
PENDING: dict[str, set[str]] = {}

ROOT = Path(__file__).resolve().parent.parent
READERS = [
    "crates/cli/src/runs.rs",
    "crates/cli/src/usage.rs",
    "crates/cli/src/steer.rs",
    "crates/cli/src/tools.rs",
    "crates/cli/src/trace.rs",
]
# trellis_telemetry maps wire types (stored events) to spans; it depends on protocol alone.
READER_CRATES = {"trellis_core", "trellis_protocol", "trellis_telemetry"}
# What the readers may name inside trellis_core: the reader and the service.
READER_CORE = {"Records", "records", "service"}


def code_of(text: str) -> str:
    """`text` without its comments (line comments; string literals are kept)."""
    out = []
    for line in text.splitlines():
        quoted = False
        for i, ch in enumerate(line):
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            if not quoted and line.startswith("//", i):
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def core_items(code: str, at: int) -> list[str]:
    """The first path segments named after `trellis_core::` at `at`: one, or a `{…}` group's."""
    if code.startswith("{", at):
        depth, end = 0, at
        for end in range(at, len(code)):
            depth += {"{": 1, "}": -1}.get(code[end], 0)
            if depth == 0:
                break
        group, items, depth, item = code[at + 1 : end], [], 0, ""
        for ch in group + ",":
            if ch == "," and depth == 0:
                items.append(item.strip())
                item = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            item += ch
        return [re.split(r"\s|::|\{", i)[0] for i in items if i]
    m = re.match(r"\w+", code[at:])
    return [m.group(0)] if m else [""]


def check_readers(workspace: set[str]) -> bool:
    """Whether the CLI's run commands read only through the reader (READERS)."""
    crates = {w.replace("-", "_") for w in workspace}
    failed = False
    for path in READERS:
        code = code_of((ROOT / path).read_text())
        for m in re.finditer(r"\b(trellis_\w+)\b(::)?", code):
            name, line = m.group(1), code.count("\n", 0, m.start()) + 1
            if name not in crates:
                continue
            if name not in READER_CRATES:
                print(f"{path}:{line}: names {name}; the run commands read through "
                      f"trellis_core::Records and the trellis_protocol types")
                failed = True
            elif name == "trellis_core":
                for item in core_items(code, m.end()) if m.group(2) else [""]:
                    if item not in READER_CORE:
                        print(f"{path}:{line}: names trellis_core::{item}; the run commands "
                              f"use trellis_core::{{{', '.join(sorted(READER_CORE))}}} only")
                        failed = True
        for m in re.finditer(r"\.store\(\)", code):
            line = code.count("\n", 0, m.start()) + 1
            print(f"{path}:{line}: takes the store; the run commands read through "
                  f"trellis_core::Records")
            failed = True
    if not failed:
        print(f"CLI run commands ({', '.join(Path(p).name for p in READERS)}): "
              f"read through trellis_core::Records")
    return failed


def main() -> int:
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            check=True,
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout
    )
    workspace = {p["name"] for p in meta["packages"]}
    failed = False
    for p in meta["packages"]:
        name = p["name"]
        if name not in FRONT_ENDS:
            continue
        deps = {
            d["name"]
            for d in p["dependencies"]
            if d["name"] in workspace and d.get("kind") is None
        }
        allowed = SERVICE | OWN.get(name, set())
        pending = PENDING.get(name, set())
        for dep in sorted(deps - allowed - pending):
            print(f"{name} depends on {dep}: a front-end builds on {', '.join(sorted(allowed))} "
                  f"only; read and act through trellis_core::service::Service")
            failed = True
        for dep in sorted(pending & deps):
            print(f"pending: {name} -> {dep}")
        for dep in sorted(pending - deps):
            print(f"{name} no longer depends on {dep}: remove it from PENDING in {sys.argv[0]}")
            failed = True
    missing = set(FRONT_ENDS) - workspace
    for name in sorted(missing):
        print(f"no workspace crate {name}: update FRONT_ENDS in {sys.argv[0]}")
        failed = True
    if not failed:
        print(f"front-ends {', '.join(FRONT_ENDS)}: dependencies as allowed")
    failed = check_readers(workspace) or failed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
