#!/usr/bin/env python3
"""Front-ends depend only on the service: the crates a front-end may build on.

    scripts/frontdeps.py    # exit 1 when a front-end depends on a crate it may not

A front-end (`trellis-server`, `trellis-acp`, `trellis-mcp-server`) is a thin adapter over
the runtime service: its normal dependencies among the workspace's crates are core (the
service API), protocol (the wire types) and config, plus its own protocol pieces listed in
OWN. Test-only (dev) dependencies are free. Read from `cargo metadata --no-deps` (the
declared dependencies, no build and no network). Their sources also never call
`Service::runtime()`: they read through the service's queries and act through its ops.

PENDING lists the dependencies known to break the rule, with the open work that removes
them; they are printed on every run and the check fails when one of them is gone (so the
list shrinks with the code) or a new one appears.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

FRONT_ENDS = ["trellis-server", "trellis-acp", "trellis-mcp-server"]
SERVICE = {"trellis-core", "trellis-protocol", "trellis-config"}
OWN = {
    # Bearer tokens and allowed hosts of a served front-end.
    "trellis-server": {"trellis-access"},
}
PENDING = {
    # `trellis mcp` reads the index and the language servers itself (issue 35, item 3:
    # code intelligence behind one core API shared with the agents' LSP tools).
    "trellis-mcp-server": {"trellis-index", "trellis-lsp"},
}


def runtime_calls(meta) -> bool:
    """Front-end sources that reach past the service into its runtime (`.runtime()`)."""
    found = False
    for p in meta["packages"]:
        if p["name"] not in FRONT_ENDS:
            continue
        src = Path(p["manifest_path"]).parent / "src"
        for f in sorted(src.rglob("*.rs")):
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if re.search(r"\.runtime\(\)", line):
                    print(f"{f}:{n}: a front-end reads the service's runtime; use a query "
                          f"or an op of trellis_core::service::Service")
                    found = True
    return found


def main() -> int:
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            check=True,
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
    failed |= runtime_calls(meta)
    missing = set(FRONT_ENDS) - workspace
    for name in sorted(missing):
        print(f"no workspace crate {name}: update FRONT_ENDS in {sys.argv[0]}")
        failed = True
    if not failed:
        print(f"front-ends {', '.join(FRONT_ENDS)}: dependencies as allowed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
