"""The official `openai` Python package against `trellis models serve`.

Run by crates/llm-server/tests/suite/clients.rs against a server playing the scripted model
of its tests (tests/suite/common.rs, `answer`); installed by
scripts/setup.d/74-openai-clients.sh. By hand:

    python openai_client.py BASE_URL TOKEN MODEL

Prints `ok <check>` per check passed; exits non-zero at the first failure.
"""

import json
import sys

import openai
import pydantic
from openai import OpenAI

BASE, TOKEN, MODEL = sys.argv[1:4]
client = OpenAI(base_url=BASE, api_key=TOKEN, max_retries=0, timeout=30)

HELLO = "Hello from the scripted model."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Reads a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
READ = [{"role": "user", "content": "read the readme"}]


def ok(name):
    print(f"ok {name}", flush=True)


def expect(error_type, call):
    try:
        call()
    except error_type as e:
        return e
    raise AssertionError(f"expected {error_type.__name__}")


# The model list, with the context window in vLLM's field.
model = client.models.list().data[0]
assert model.id == MODEL, model
assert model.model_extra["max_model_len"] == 4096, model.model_extra
assert model.model_extra["context_length"] == 4096, model.model_extra
assert client.models.retrieve(MODEL).id == MODEL
ok("models")

r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
assert r.choices[0].message.content == HELLO, r
assert r.choices[0].finish_reason == "stop", r
assert r.usage.completion_tokens > 0, r.usage
assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
ok("whole")

text, usage, finish = "", None, None
for chunk in client.chat.completions.create(
    model=MODEL,
    messages=[{"role": "user", "content": "hi"}],
    stream=True,
    stream_options={"include_usage": True},
):
    if chunk.usage:
        usage = chunk.usage
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
assert text == HELLO, text
assert finish == "stop", finish
assert usage is not None and usage.completion_tokens > 0, usage
ok("stream")

r = client.chat.completions.create(model=MODEL, messages=READ, tools=TOOLS)
message = r.choices[0].message
assert r.choices[0].finish_reason == "tool_calls", r
call = message.tool_calls[0]
assert call.type == "function" and call.function.name == "read_file", call
assert json.loads(call.function.arguments) == {"path": "README.md"}, call
follow = READ + [
    message.model_dump(exclude_none=True),
    {"role": "tool", "tool_call_id": call.id, "content": "3 lines"},
]
r = client.chat.completions.create(model=MODEL, messages=follow, tools=TOOLS)
assert r.choices[0].message.content == "The tool said: 3 lines", r
ok("tools")

# A streamed tool call, assembled the way SDK users do it.
calls = {}
finish = None
for chunk in client.chat.completions.create(model=MODEL, messages=READ, tools=TOOLS, stream=True):
    if not chunk.choices:
        continue
    finish = chunk.choices[0].finish_reason or finish
    for d in chunk.choices[0].delta.tool_calls or []:
        c = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
        c["id"] = d.id or c["id"]
        if d.function.name:
            c["name"] += d.function.name
        c["arguments"] += d.function.arguments or ""
assert finish == "tool_calls", finish
assert calls[0]["id"] and calls[0]["name"] == "read_file", calls
assert json.loads(calls[0]["arguments"]) == {"path": "README.md"}, calls
ok("stream tools")

# The SDK's helper for structured output: a pydantic model becomes a strict json_schema.
class Capital(pydantic.BaseModel):
    city: str
    country: str


r = client.chat.completions.parse(
    model=MODEL, messages=[{"role": "user", "content": "capital of France?"}], response_format=Capital
)
assert r.choices[0].message.parsed == Capital(city="Paris", country="France"), r
r = client.chat.completions.create(
    model=MODEL,
    messages=[{"role": "user", "content": "capital of France?"}],
    response_format={"type": "json_object"},
)
assert json.loads(r.choices[0].message.content)["city"] == "Paris", r
ok("structured")

e = expect(openai.NotFoundError, lambda: client.chat.completions.create(model="gpt-4o", messages=READ))
assert e.status_code == 404 and e.code == "model_not_found" and e.param == "model", e.body
e = expect(openai.BadRequestError, lambda: client.chat.completions.create(model=MODEL, messages=[]))
assert e.status_code == 400 and e.type == "invalid_request_error" and e.param == "messages", e.body
e = expect(
    openai.BadRequestError,
    lambda: client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]),
)
assert e.param == "messages[0].content[0].type", e.body
stranger = OpenAI(base_url=BASE, api_key="not-the-token", max_retries=0)
e = expect(openai.AuthenticationError, lambda: stranger.models.list())
assert e.status_code == 401 and e.code == "invalid_api_key", e.body
ok("errors")


def failing_stream():
    for _ in client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "please fail"}], stream=True
    ):
        pass


e = expect(openai.APIError, failing_stream)
assert "the model failed" in e.message, e.message
ok("stream error")
