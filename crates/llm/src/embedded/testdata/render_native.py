"""Writes native_rendered.txt: the GGUF chat template of Qwen2.5-Coder-1.5B-Instruct rendered by
Jinja (tojson as transformers defines it) for the conversation of the test
`rendering_matches_the_gguf_template`. Needs the `gguf` and `jinja2` packages.

    python3 render_native.py ~/.cache/trellis/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
"""
import json
import pathlib
import sys

import gguf
import jinja2

reader = gguf.GGUFReader(sys.argv[1])
field = reader.fields["tokenizer.chat_template"]
template = bytes(field.parts[field.data[0]]).decode()
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
    x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys
)
tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
          "parameters": {"properties": {"path": {"type": "string"}}, "required": ["path"],
                         "type": "object"}}}]
call = {"type": "function", "function": {"name": "read_file", "arguments": {"path": "inventory.py"}}}
messages = [
    {"role": "system", "content": "You are a coder."},
    {"role": "user", "content": "Fix the bug."},
    {"role": "assistant", "content": "", "tool_calls": [call]},
    {"role": "tool", "content": "1\tclass Inventory:"},
    {"role": "tool", "content": "2\t    pass"},
    {"role": "assistant", "content": "Again.", "tool_calls": [call]},
    {"role": "tool", "content": "same"},
]
out = env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=True)
(pathlib.Path(__file__).parent / "native_rendered.txt").write_text(out)
