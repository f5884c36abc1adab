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
"""

import json
import subprocess
import sys

FRONT_ENDS = ["trellis-server", "trellis-acp", "trellis-mcp-server"]
SERVICE = {"trellis-core", "trellis-protocol", "trellis-config"}
OWN = {
    # Bearer tokens and allowed hosts of a served front-end.
    "trellis-server": {"trellis-access"},
}
PENDING: dict[str, set[str]] = {}


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
    missing = set(FRONT_ENDS) - workspace
    for name in sorted(missing):
        print(f"no workspace crate {name}: update FRONT_ENDS in {sys.argv[0]}")
        failed = True
    if not failed:
        print(f"front-ends {', '.join(FRONT_ENDS)}: dependencies as allowed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
