// A loopback model speaking the OpenAI chat-completions wire (SSE), for developing and testing
// the web UI against a real `trellis serve` (the answers follow crates/cli/tests/suite/mock.rs).
//
//   node tests/mock-llm.mjs [--port N] [--pace MS]
//
// prints `mock listening on http://127.0.0.1:PORT/v1`. Requests are recorded: `GET /seen`
// returns their bodies (tests check that a message reached an agent's next request).
// What the agents do depends on words in the run's request:
//   - every analysis agent reads a few files (one a turn, `--pace` ms each), then answers;
//   - "[ask]": the analysis agent first asks the user a question (`ask_questions`: the run
//     waits for an answer);
//   - "[gate]": the documentation agent first runs `curl …`, which the policy asks the user
//     about (an approval interrupt);
//   - "[slow]": every agent turn takes 3 s (time to message or prune a running agent);
//   - "[plan-slow]": the orchestrator's answer takes 6 s (the run exists and shows its
//     planning node meanwhile);
//   - the documentation agent writes docs/adr/0002-persist.md ("Status: Accepted" once the
//     feedback says so) and rewrites docs/architecture.md at its top and its end (two hunks):
//     a change set of three hunks to review;
//   - the orchestrator includes decision_documentation when the request says "document", and
//     picks staged_review when it says "[staged]", task_tree when it says "[tree]";
//   - staged_review's agents each call their stage tool (submit_scope, submit_research,
//     submit_plan, complete_pulse, complete_review) once, then report; the scope card narrows
//     to "Inventory.commit only" once the feedback says "commit only"; with "[human]" the
//     first review asks for a human (HUMAN_REVIEW_REQUESTED).
// A channel reads inventory.py, then answers "You asked: …" citing inventory.py:1 and README.md:3,
// streamed one SSE event every 40 ms.
import http from 'node:http';
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const port = Number(opt('--port', '0'));
const pace = Number(opt('--pace', '300'));
const seen = [];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const chunk = (delta, finish) => ({
  id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 0, model: 'mock-model',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const usage = {
  id: 'chatcmpl-mock', object: 'chat.completion.chunk', created: 0, model: 'mock-model', choices: [],
  usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
};
const data = (v) => `data: ${JSON.stringify(v)}\n\n`;

function toolSse(id, name, argsObj) {
  const call = { tool_calls: [{ index: 0, id, type: 'function', function: { name, arguments: JSON.stringify(argsObj) } }] };
  return data(chunk(call, null)) + data(chunk({}, 'tool_calls')) + data(usage) + 'data: [DONE]\n\n';
}

/** Text streamed in small pieces (so the UI shows deltas), with thinking first. */
function textSse(text, thought) {
  let out = data(chunk({ role: 'assistant', content: '' }, null));
  if (thought) {
    for (let i = 0; i < thought.length; i += 24) out += data(chunk({ reasoning_content: thought.slice(i, i + 24) }, null));
  }
  for (let i = 0; i < text.length; i += 16) out += data(chunk({ content: text.slice(i, i + 16) }, null));
  return out + data(chunk({}, 'stop')) + data(usage) + 'data: [DONE]\n\n';
}

/** examples/inventory's docs/architecture.md changed at its top and its end: two hunks. */
function architecture() {
  const original = readFileSync(new URL('../../examples/inventory/docs/architecture.md', import.meta.url), 'utf8');
  return original.replace(/^# Architecture$/m, '# Architecture of the inventory service').trimEnd() + '\n- Decided: SQLite, see ADR 0002.\n';
}

const messagesText = (body) => JSON.stringify(body.messages ?? []);
const toolResults = (body) => (body.messages ?? []).filter((m) => m.role === 'tool').length;
const system = (body) => String(body.messages?.[0]?.content ?? '');
const isChannel = (body) => !body.response_format && system(body).includes('Answer the latest message');
const isDocAgent = (body) => system(body).includes('technical writer');

function structured(body) {
  const props = body.response_format?.json_schema?.schema?.properties ?? {};
  if (props.workflow && messagesText(body).includes('[tree]')) {
    return { reasoning: 'Open-ended work in milestones: a task tree.', workflow: 'task_tree', stages: [] };
  }
  if (props.workflow && messagesText(body).includes('[staged]')) {
    return { reasoning: 'The user wants to approve each step: staged review.', workflow: 'staged_review', stages: [] };
  }
  if (props.workflow) {
    const document = /document/i.test(messagesText(body));
    return {
      reasoning: 'A question about a past decision: discuss it' + (document ? ' and record it.' : '; no record needed.'),
      workflow: 'architecture_discussion',
      stages: [{ stage: 'decision_documentation', include: document, reason: document ? 'the user asks for a record' : 'nothing to record' }],
    };
  }
  if (props.queries) return { queries: ['stock kept in memory', 'reservations'] };
  return analysis();
}

function analysis() {
  return {
    failure: false,
    output: 'MOCK-ANALYSIS: stock lives in memory per ADR 0001 (see inventory.py:1); persistence is the next step.\n\n## Options\n- keep it in memory\n- persist to **SQLite**',
    files_changed: [],
    findings: ['MOCK-FINDING: a restart loses every reservation'],
  };
}

/**
 * staged_review's roles (seed 003): each calls its stage tool once, then reports. The scope
 * card says "Inventory.commit only" once the feedback asks for it; the review asks for a
 * human when the request says "[human]".
 */
function stagedTurn(body, text, done) {
  const sys = system(body);
  const report = (output) => textSse(JSON.stringify({ failure: false, output, files_changed: [], findings: [] }));
  const once = (name, args, output) => (done === 0 ? toolSse(`call_${name}`, name, args) : report(output));
  if (sys.includes('scoping a change request')) {
    const narrowed = text.includes('commit only');
    return once('submit_scope', {
      summary: narrowed ? 'Fix Inventory.commit only.' : 'Fix the stock bookkeeping.',
      in_scope: [narrowed ? 'Inventory.commit only' : 'Inventory'],
      out_of_scope: ['the CLI'],
      constraints: ['keep the public API'],
    }, 'scope submitted');
  }
  if (sys.includes('researching a codebase')) {
    return once('submit_research', {
      key_files: [{ path: 'inventory.py', why: 'Inventory.commit adds shipped units' }],
      patterns: ['plain classes'],
      recommendations: ['subtract shipped units'],
    }, 'research submitted');
  }
  if (sys.includes('planning an approved')) {
    return once('submit_plan', {
      approach_summary: 'Subtract shipped units in commit.',
      pulses: [{ id: 'P1', title: 'Fix commit', description: 'Use - instead of +.', files: ['inventory.py'] }],
    }, 'plan submitted');
  }
  if (sys.includes('implementing an approved plan')) {
    return once('complete_pulse', { summary: 'commit subtracts shipped units' }, 'pulse complete');
  }
  if (sys.includes('meticulous code reviewer')) {
    const verdict = text.includes('[human]') && !text.includes('attempt 2') ? 'HUMAN_REVIEW_REQUESTED' : 'APPROVED';
    return once('complete_review', { verdict, summary: verdict === 'APPROVED' ? 'Looks right.' : 'A person should check the stock rules.' }, verdict);
  }
  return null;
}

/**
 * task_tree's roles (seed 001), answering with their JSON objects: one milestone, three tasks
 * (t1 has no gap; t3 waits for t2), each implemented by writing a note.
 */
function treeTurn(body, done) {
  const sys = system(body);
  const contents = (body.messages ?? []).map((m) => String(m.content ?? '')).join('\n');
  // The work item is canonical JSON (sorted keys): the task's `id` follows its `description`.
  const at = contents.indexOf('"task":{');
  const task = at < 0 ? '' : (/"id":"([^"]+)"/.exec(contents.slice(at))?.[1] ?? '');
  const answer = (obj) => textSse(JSON.stringify({ failure: false, output: JSON.stringify(obj), files_changed: [], findings: [] }));
  if (sys.includes("You interpret a user's request")) return answer({ remit: 'Colonies exist and are listed', explicit_needs: ['colonies'] });
  if (sys.includes('sequential milestones')) return answer({ milestones: ['Colonies exist'] });
  if (sys.includes('You expand one milestone')) {
    return answer({ tasks: [
      { id: 't1', description: 'colony model exists already' },
      { id: 't2', description: 'colony storage' },
      { id: 't3', description: 'colony list', depends_on: ['t2'] },
    ] });
  }
  if (sys.includes('You analyse the gap')) return answer({ gap_exists: task !== 't1', gap_description: 'missing' });
  if (sys.includes('You plan the change')) return textSse(JSON.stringify({ failure: false, output: '# Implementation Plan\n## Changes', files_changed: [], findings: [] }));
  if (sys.includes("implementing one task's plan")) {
    if (done === 0) return toolSse('call_note', 'write_file', { path: `notes/${task}.md`, content: `${task}\n` });
    return textSse(JSON.stringify({ failure: false, output: `wrote notes/${task}.md`, files_changed: [], findings: [] }));
  }
  if (sys.includes('implemented change satisfies')) return answer({ passed: true, feedback: 'meets the outcome' });
  if (sys.includes('You assess a milestone')) return answer({ uncovered_gaps: [] });
  return null;
}

async function respond(body) {
  const text = messagesText(body);
  const slow = text.includes('[slow]');
  if (body.response_format) {
    await sleep(pace / 3);
    if (body.response_format.json_schema?.schema?.properties?.workflow && text.includes('[plan-slow]')) await sleep(6000);
    return textSse(JSON.stringify(structured(body)));
  }
  if (isChannel(body)) {
    const msgs = body.messages ?? [];
    if (msgs[msgs.length - 1]?.role === 'user') {
      await sleep(pace);
      return toolSse('call_look', 'read_file', { path: 'inventory.py' });
    }
    const last = [...msgs].reverse().find((m) => m.role === 'user');
    const q = typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content ?? '');
    await sleep(pace);
    // Streamed in pieces 40 ms apart: the UI shows the answer grow.
    return textSse(`You asked: ${q}\n\nStock is kept in a dict in inventory.py:1; the README.md:3 says why.`, 'Looking for where stock lives.')
      .split(/(?<=\n\n)/)
      .map((piece) => ({ piece, delay: 40 }));
  }
  await sleep(slow ? 3000 : pace);
  const reads = toolResults(body);
  const staged = stagedTurn(body, text, reads);
  if (staged) return staged;
  const tree = treeTurn(body, reads);
  if (tree) return tree;
  if (isDocAgent(body)) {
    if (text.includes('[gate]') && reads === 0) {
      return toolSse('call_net', 'shell', { command: 'curl -s http://127.0.0.1:9/stock' });
    }
    const writes = (body.messages ?? []).filter((m) => JSON.stringify(m.tool_calls ?? '').includes('write_file')).length;
    if (writes === 0) {
      const status = text.includes('Status must be Accepted') ? 'Accepted' : 'Proposed';
      return toolSse('call_write', 'write_file', {
        path: 'docs/adr/0002-persist.md',
        content: `# ADR 0002: persist stock\n\nStatus: ${status}\n\nStock moves from memory to SQLite.\n`,
      });
    }
    if (writes === 1) return toolSse('call_write_arch', 'write_file', { path: 'docs/architecture.md', content: architecture() });
    return textSse(
      JSON.stringify({ failure: false, output: 'Wrote docs/adr/0002-persist.md and updated docs/architecture.md', files_changed: ['docs/adr/0002-persist.md', 'docs/architecture.md'], findings: [] }),
    );
  }
  if (text.includes('[ask]') && reads === 0) {
    return toolSse('call_ask', 'ask_questions', {
      questions: [
        { question: 'Which store should persist the stock?', options: ['SQLite', 'Postgres'] },
        { question: 'Anything else to consider?' },
      ],
    });
  }
  const limit = text.includes('[ask]') ? 2 : 3;
  if (reads < limit) {
    const path = reads % 2 === 0 ? 'inventory.py' : 'README.md';
    return toolSse(`call_${reads}`, 'read_file', { path });
  }
  return textSse(JSON.stringify(analysis()), 'The store is a dict; nothing is written to disk.');
}

const server = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', async () => {
    if (req.method === 'GET' && req.url === '/seen') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(seen));
      return;
    }
    let body;
    try { body = JSON.parse(raw); } catch { body = {}; }
    seen.push(body);
    try {
      const reply = await respond(body);
      if (Array.isArray(reply)) {
        res.writeHead(200, { 'content-type': 'text/event-stream', connection: 'close' });
        for (const { piece, delay } of reply) {
          res.write(piece);
          await sleep(delay);
        }
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'content-length': Buffer.byteLength(reply), connection: 'close' });
      res.end(reply);
    } catch (e) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: String(e) } }));
    }
  });
});
server.listen(port, '127.0.0.1', () => {
  console.log(`mock listening on http://127.0.0.1:${server.address().port}/v1`);
});
