// The official `openai` npm package against `trellis models serve`.
//
// Run by crates/llm-server/tests/suite/clients.rs against a server playing the scripted model
// of its tests (tests/suite/common.rs, `answer`); installed (package-lock.json) by
// scripts/setup.d/74-openai-clients.sh. By hand:
//
//   node openai_client.mjs BASE_URL TOKEN MODEL
//
// Prints `ok <check>` per check passed; exits non-zero at the first failure.

import assert from 'node:assert/strict';
import OpenAI from 'openai';

const [BASE, TOKEN, MODEL] = process.argv.slice(2);
const client = new OpenAI({ baseURL: BASE, apiKey: TOKEN, maxRetries: 0, timeout: 30_000 });
const HELLO = 'Hello from the scripted model.';
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Reads a file',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
];
const READ = [{ role: 'user', content: 'read the readme' }];
const ok = (name) => console.log(`ok ${name}`);

async function expectError(Type, call) {
  try {
    await call();
  } catch (e) {
    assert.ok(e instanceof Type, `expected ${Type.name}, got ${e}`);
    return e;
  }
  assert.fail(`expected ${Type.name}`);
}

// The model list, with the context window in vLLM's field.
const models = [];
for await (const m of client.models.list()) models.push(m);
assert.equal(models[0].id, MODEL);
assert.equal(models[0].max_model_len, 4096);
assert.equal(models[0].context_length, 4096);
assert.equal((await client.models.retrieve(MODEL)).id, MODEL);
ok('models');

let r = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
assert.equal(r.choices[0].message.content, HELLO);
assert.equal(r.choices[0].finish_reason, 'stop');
assert.ok(r.usage.completion_tokens > 0);
assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
ok('whole');

let text = '';
let usage = null;
let finish = null;
const stream = await client.chat.completions.create({
  model: MODEL,
  messages: [{ role: 'user', content: 'hi' }],
  stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  if (chunk.choices.length) {
    text += chunk.choices[0].delta.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
}
assert.equal(text, HELLO);
assert.equal(finish, 'stop');
assert.ok(usage && usage.completion_tokens > 0);
ok('stream');

r = await client.chat.completions.create({ model: MODEL, messages: READ, tools: TOOLS });
assert.equal(r.choices[0].finish_reason, 'tool_calls');
const message = r.choices[0].message;
const call = message.tool_calls[0];
assert.equal(call.function.name, 'read_file');
assert.deepEqual(JSON.parse(call.function.arguments), { path: 'README.md' });
r = await client.chat.completions.create({
  model: MODEL,
  tools: TOOLS,
  messages: [...READ, message, { role: 'tool', tool_call_id: call.id, content: '3 lines' }],
});
assert.equal(r.choices[0].message.content, 'The tool said: 3 lines');
ok('tools');

// The SDK's stream helper assembles tool-call deltas itself.
const runner = client.chat.completions.stream({ model: MODEL, messages: READ, tools: TOOLS });
const final = await runner.finalChatCompletion();
const streamed = final.choices[0].message.tool_calls[0];
assert.equal(final.choices[0].finish_reason, 'tool_calls');
assert.equal(streamed.function.name, 'read_file');
assert.ok(streamed.id.startsWith('call_'));
assert.deepEqual(JSON.parse(streamed.function.arguments), { path: 'README.md' });
ok('stream tools');

r = await client.chat.completions.create({
  model: MODEL,
  messages: [{ role: 'user', content: 'capital of France?' }],
  response_format: {
    type: 'json_schema',
    json_schema: {
      name: 'capital',
      strict: true,
      schema: {
        type: 'object',
        properties: { city: { type: 'string' }, country: { type: 'string' } },
        required: ['city', 'country'],
        additionalProperties: false,
      },
    },
  },
});
assert.deepEqual(JSON.parse(r.choices[0].message.content), { city: 'Paris', country: 'France' });
ok('structured');

let e = await expectError(OpenAI.NotFoundError, () =>
  client.chat.completions.create({ model: 'gpt-4o', messages: READ }),
);
assert.equal(e.status, 404);
assert.equal(e.code, 'model_not_found');
assert.equal(e.param, 'model');
e = await expectError(OpenAI.BadRequestError, () => client.chat.completions.create({ model: MODEL, messages: [] }));
assert.equal(e.status, 400);
assert.equal(e.type, 'invalid_request_error');
assert.equal(e.param, 'messages');
const stranger = new OpenAI({ baseURL: BASE, apiKey: 'not-the-token', maxRetries: 0 });
e = await expectError(OpenAI.AuthenticationError, () => stranger.models.list());
assert.equal(e.status, 401);
assert.equal(e.code, 'invalid_api_key');
ok('errors');

e = await expectError(OpenAI.APIError, async () => {
  const s = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'please fail' }],
    stream: true,
  });
  for await (const _ of s) {
    // consume
  }
});
assert.match(e.message, /the model failed/);
ok('stream error');
