#!/usr/bin/env python3
"""Checks an OTLP/JSON trace export (`trellis runs trace --format otlp-json`) against the
OTLP protobuf schema, with the protobuf library's own JSON parser (strict: an unknown field,
a wrong type or a bad enum is an error) and the OTLP/JSON rules the parser does not know
(opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): trace and span ids are hex, not
base64 (16 and 8 bytes), enums are integers, 64-bit integers may be strings.

    ~/.cache/trellis/otel-py-venv/bin/python crates/telemetry/tests/py/check_otlp.py trace.json

Prints a JSON summary; exits 1 on the first problem. Needs PyPI opentelemetry-proto (pinned
in scripts/setup.d/76-otel.sh).
"""
import base64
import json
import re
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

HEX = re.compile(r"^[0-9a-f]*$")
IDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}


def fail(msg):
    print(json.dumps({"ok": False, "problem": msg}))
    sys.exit(1)


def ids_to_base64(node, path="$"):
    """OTLP/JSON writes ids in hex; protobuf's JSON mapping reads bytes as base64."""
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if key in IDS and isinstance(value, str):
                if not HEX.match(value):
                    fail(f"{path}.{key}: {value!r} is not lower-case hex")
                raw = bytes.fromhex(value)
                if raw and len(raw) != IDS[key]:
                    fail(f"{path}.{key}: {len(raw)} bytes, OTLP wants {IDS[key]}")
                node[key] = base64.b64encode(raw).decode()
            elif key == "kind" or key == "code":
                if not isinstance(value, int):
                    fail(f"{path}.{key}: OTLP/JSON enums are integers, got {value!r}")
            else:
                ids_to_base64(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            ids_to_base64(item, f"{path}[{i}]")


def main():
    doc = json.load(open(sys.argv[1]))
    ids_to_base64(doc)
    try:
        req = json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=False)
    except json_format.ParseError as e:
        fail(str(e))
    spans = [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]
    known = {s.span_id for s in spans}
    for s in spans:
        if s.end_time_unix_nano < s.start_time_unix_nano:
            fail(f"{s.name}: ends before it starts")
        if s.parent_span_id and s.parent_span_id not in known:
            fail(f"{s.name}: its parent is not in the export")
    roots = [s.name for s in spans if not s.parent_span_id]
    print(json.dumps({"ok": True, "spans": len(spans), "roots": roots,
                      "bytes": len(req.SerializeToString())}))


if __name__ == "__main__":
    main()
