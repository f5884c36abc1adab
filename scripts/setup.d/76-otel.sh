#!/usr/bin/env bash
# The checkers of `trellis runs trace` output (crates/cli/tests/suite/trace.rs): PyPI
# opentelemetry-proto (with protobuf: the OTLP schema and protobuf's strict JSON parser) in the
# venv ~/.cache/trellis/otel-py-venv, for crates/telemetry/tests/py/check_otlp.py; npm
# @paulirish/trace_engine (Chrome DevTools' trace parser) from crates/telemetry/tests/node's
# package-lock.json, for chrome-trace.mjs. A missing checker fails its test.
set -euo pipefail
cd "$(dirname "$0")/../.."

. scripts/setup.d/lib/venv.sh
py_venv "${XDG_CACHE_HOME:-$HOME/.cache}/trellis/otel-py-venv" "opentelemetry-proto (PyPI)" \
  "opentelemetry-proto==1.45.2 protobuf==7.36.2"

. scripts/setup.d/lib/npm.sh
npm_peers crates/telemetry/tests/node "trace_engine (npm, Chrome DevTools' trace parser)"
