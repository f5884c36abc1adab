"""Checks Phoenix's spans (GET /v1/projects/default/spans, on stdin) for the run $RUN.

Used by scripts/phoenix-check: the trace whose id is the run id must hold the run's root, its
node activations, an agent and its model calls, each span's parent inside the trace. Exits 1
(saying what is missing) otherwise.
"""

import json
import os
import sys

run = os.environ["RUN"]
spans = [s for s in json.load(sys.stdin).get("data", []) if s["context"]["trace_id"] == run]
names = sorted(s["name"] for s in spans)
problems = []
for prefix in ("invoke_workflow ", "node ", "invoke_agent ", "chat"):
    if not any(n.startswith(prefix) for n in names):
        problems.append(f"no {prefix.strip()} span")
roots = [s for s in spans if not s.get("parent_id")]
if len(roots) != 1 or not roots[0]["name"].startswith("invoke_workflow "):
    problems.append(f"one root, the run's, expected: {[r['name'] for r in roots]}")
ids = {s["context"]["span_id"] for s in spans}
orphans = [s["name"] for s in spans if s.get("parent_id") and s["parent_id"] not in ids]
if orphans:
    problems.append(f"parents outside the trace: {orphans}")
if problems:
    print(f"trace {run} in Phoenix: {'; '.join(problems)} (spans: {names})", file=sys.stderr)
    sys.exit(1)
print(f"trace {run} in Phoenix: {len(spans)} spans ({', '.join(sorted(set(names)))})")
