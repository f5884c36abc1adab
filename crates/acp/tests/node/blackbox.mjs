// Black-box test of `trellis acp`: a Node ACP client built on @agentclientprotocol/sdk drives
// the real binary over stdio, with the loopback OpenAI-wire mock model of the web tests
// (web/tests/mock-llm.mjs) behind it. Run by scripts/check; by hand:
//
//   node crates/acp/tests/node/blackbox.mjs [path/to/trellis]   (default: $TRELLIS_BIN, then
//                                                                $CARGO_TARGET_DIR/debug/trellis)
//
// initialize → session/new → a prompt whose run plans stages, streams messages, reads files
// (tool calls), writes files (diffs) and asks a permission (allowed), then offers its change
// set (accepted: the user's files change) → `/undo` → the same prompt with both rejected → a
// slow prompt cancelled mid-turn → the agent process is stopped and started again →
// session/list finds the session → session/load replays its three turns → a new prompt.
// Everything binds loopback; every process and the temporary workspace are removed at the end.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import assert from 'node:assert/strict';
import * as acp from '@agentclientprotocol/sdk';
import { children, trellisBin, verbose, workspace } from './workspace.mjs';

const bin = trellisBin();
const log = (...a) => console.log('acp-node:', ...a);

/** Starts `trellis acp` and runs `op(ctx, client)` over its stdio; stops the process after. */
async function withAgent(ws, op) {
  const agent = spawn(bin, ['acp'], {
    cwd: ws.repo,
    env: ws.env,
    stdio: ['pipe', 'pipe', verbose ? 'inherit' : 'ignore'],
  });
  children.push(agent);
  const updates = [];
  const permissions = [];
  const answers = [];
  const app = acp
    .client({ name: 'trellis-blackbox' })
    .onNotification('session/update', ({ params }) => {
      updates.push(params);
    })
    .onRequest('session/request_permission', ({ params: req }) => {
      permissions.push(req);
      const optionId = answers.shift();
      assert.ok(optionId, `an unexpected permission request: ${JSON.stringify(req)}`);
      return { outcome: { outcome: 'selected', optionId } };
    });
  const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
  try {
    return await app.connectWith(stream, (ctx) => op(ctx, { updates, permissions, answers }));
  } finally {
    agent.stdin.end();
    await new Promise((ok) => {
      if (agent.exitCode !== null || agent.signalCode !== null) return ok();
      const t = setTimeout(() => agent.kill('SIGKILL'), 5000);
      agent.once('exit', () => (clearTimeout(t), ok()));
    });
  }
}

const kind = (u) => u.update.sessionUpdate;
const textOf = (us, k) =>
  us
    .filter((u) => kind(u) === k)
    .map((u) => u.update.content?.text ?? '')
    .join('');

async function main() {
  const t0 = Date.now();
  assert.ok(existsSync(bin), `no trellis binary at ${bin} (build it: cargo build -p trellis)`);
  const ws = await workspace();
  const request = "Let's discuss the decision to keep stock in memory and document it [gate]";
  const firstRun = {};
  const sessionId = await withAgent(ws, async (ctx, c) => {
    const init = await ctx.request('initialize', {
      protocolVersion: 1,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: 'trellis-blackbox', version: '1' },
    });
    assert.equal(init.protocolVersion, 1);
    assert.equal(init.agentInfo.name, 'trellis');
    assert.equal(init.agentCapabilities.loadSession, true);
    assert.deepEqual(Object.keys(init.agentCapabilities.sessionCapabilities).sort(), ['close', 'list', 'resume']);

    const { sessionId } = await ctx.request('session/new', { cwd: ws.repo, mcpServers: [] });
    assert.match(sessionId, /\S/);

    // 1. A full turn: plan, messages, tool calls (reads), diffs (writes), a permission allowed,
    //    then the change set applied to the user's files when accepted.
    c.answers.push('allow_once', 'allow_once');
    let r = await ctx.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: request }] });
    const turn1 = c.updates.splice(0);
    assert.equal(r.stopReason, 'end_turn');
    assert.ok(turn1.every((u) => u.sessionId === sessionId));
    assert.equal(init.agentCapabilities.sessionCapabilities.list !== undefined, true);
    const plans = turn1.filter((u) => kind(u) === 'plan');
    assert.ok(plans.length >= 2, 'the plan is streamed as stages progress');
    assert.ok(plans[0].update.entries.every((e) => e.status === 'pending'));
    assert.ok(plans.at(-1).update.entries.every((e) => e.status === 'completed'), JSON.stringify(plans.at(-1)));
    assert.ok(plans.some((p) => p.update.entries.some((e) => e.status === 'in_progress')));
    assert.match(textOf(turn1, 'agent_message_chunk'), /MOCK-ANALYSIS/);
    const calls = turn1.filter((u) => kind(u) === 'tool_call');
    const read = calls.find((u) => u.update.kind === 'read');
    assert.ok(read, 'a read tool call');
    assert.ok(read.update.locations?.[0]?.path?.startsWith('/'), 'absolute locations');
    const write = calls.find((u) => u.update.content?.some((x) => x.type === 'diff'));
    assert.ok(write, 'a tool call with a diff');
    const diff = write.update.content.find((x) => x.type === 'diff');
    assert.ok(diff.path.endsWith('docs/adr/0002-persist.md') || diff.path.endsWith('docs/architecture.md'), diff.path);
    assert.match(diff.newText, /\S/);
    const done = turn1.filter((u) => kind(u) === 'tool_call_update' && u.update.status === 'completed');
    assert.ok(done.length >= 2, 'tool calls complete');
    assert.ok(turn1.some((u) => kind(u) === 'usage_update' && u.update.size === 8192), 'usage_update');
    assert.equal(c.permissions.length, 2);
    const ask = c.permissions[0];
    assert.match(ask.toolCall.title, /curl/);
    assert.deepEqual(
      ask.options.map((o) => o.kind),
      ['allow_once', 'allow_always', 'reject_once', 'reject_always'],
    );
    const apply = c.permissions[1];
    assert.match(apply.toolCall.title, /Apply the changes/);
    assert.equal(apply.toolCall.kind, 'edit');
    assert.ok(apply.toolCall.content.some((x) => x.type === 'diff' && x.path === join(ws.repo, 'docs/adr/0002-persist.md')));
    assert.ok(existsSync(join(ws.repo, 'docs/adr/0002-persist.md')), 'accepted: applied to the user\'s files');
    // `/undo` (advertised as a command) reverses it.
    assert.ok(
      turn1.some((u) => kind(u) === 'available_commands_update' && u.update.availableCommands.some((x) => x.name === 'undo')),
      'the session offers /undo',
    );
    r = await ctx.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: '/undo' }] });
    assert.equal(r.stopReason, 'end_turn');
    assert.ok(!existsSync(join(ws.repo, 'docs/adr/0002-persist.md')), 'undone');
    assert.match(textOf(c.updates.splice(0), 'agent_message_chunk'), /Undid/);
    firstRun.plan = plans.at(-1).update.entries.map((e) => e.content);
    firstRun.messages = textOf(turn1, 'agent_message_chunk');

    // 2. The same with the permission rejected: the approval's tool call fails; the change set
    //    is not accepted either: the user's files stay as they were.
    c.answers.push('reject_once', 'reject_once');
    r = await ctx.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: request }] });
    assert.equal(r.stopReason, 'end_turn');
    const turn2 = c.updates.splice(0);
    assert.equal(c.permissions.length, 4);
    assert.ok(!existsSync(join(ws.repo, 'docs/adr/0002-persist.md')), 'rejected: not applied');
    const approvalId = turn2.find((u) => kind(u) === 'tool_call' && /curl/.test(u.update.title))?.update.toolCallId;
    assert.ok(approvalId, 'the approval is shown as a tool call');
    assert.ok(
      turn2.some((u) => kind(u) === 'tool_call_update' && u.update.toolCallId === approvalId && u.update.status === 'failed'),
      'a rejected approval fails its tool call',
    );

    // 3. Cancel mid-turn: every agent turn of "[slow]" takes 3 s.
    const slow = ctx.request('session/prompt', {
      sessionId,
      prompt: [{ type: 'text', text: '[slow] Why is stock kept in memory?' }],
    });
    const started = Date.now();
    while (!c.updates.some((u) => kind(u) === 'plan' && u.update.entries.some((e) => e.status === 'in_progress'))) {
      assert.ok(Date.now() - started < 60_000, 'the slow turn starts a stage');
      await new Promise((ok) => setTimeout(ok, 50));
    }
    await ctx.notify('session/cancel', { sessionId });
    r = await slow;
    assert.equal(r.stopReason, 'cancelled');
    assert.ok(Date.now() - started < 30_000);
    c.updates.splice(0);
    return sessionId;
  });

  // 4. A new agent process: the session is listed and loads with its three turns.
  await withAgent(ws, async (ctx, c) => {
    await ctx.request('initialize', { protocolVersion: 1, clientCapabilities: {} });
    const list = await ctx.request('session/list', { cwd: ws.repo });
    const found = list.sessions.find((s) => s.sessionId === sessionId);
    assert.ok(found, JSON.stringify(list));
    assert.equal(found.title, request);
    assert.match(found.updatedAt, /^\d{4}-\d\d-\d\dT/);
    await ctx.request('session/load', { sessionId, cwd: ws.repo, mcpServers: [] });
    const replay = c.updates.splice(0);
    assert.ok(replay.every((u) => u.sessionId === sessionId));
    const prompts = replay.filter((u) => kind(u) === 'user_message_chunk').map((u) => u.update.content.text);
    assert.deepEqual(prompts, [request, request, '[slow] Why is stock kept in memory?']);
    assert.ok(replay.some((u) => kind(u) === 'tool_call' && u.update.content?.some((x) => x.type === 'diff')));
    const plan = replay.find((u) => kind(u) === 'plan');
    assert.deepEqual(
      plan.update.entries.map((e) => e.content),
      firstRun.plan,
    );
    assert.ok(textOf(replay, 'agent_message_chunk').includes('MOCK-ANALYSIS'));
    // The loaded session takes a prompt (its run writes docs too: the change set is offered;
    // kept in the worktree here).
    c.answers.push('reject_once');
    const r = await ctx.request('session/prompt', {
      sessionId,
      prompt: [{ type: 'text', text: 'Why is stock kept in memory?' }],
    });
    assert.equal(r.stopReason, 'end_turn');
    assert.equal(c.permissions.length, 1);
    assert.ok(!existsSync(join(ws.repo, 'docs/adr/0002-persist.md')));
  });
  log(`ok: initialize, new, prompt (plan, messages, tool calls, diffs, permission allowed and rejected, change set applied and rejected, /undo), cancel, restart, list, load — ${Date.now() - t0} ms`);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error('acp-node: FAILED:', e?.stack ?? e);
    process.exit(1);
  },
);
