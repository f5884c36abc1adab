// A throw-away workspace served by a real `trellis serve` with the loopback mock model, for
// developing the UI (`npm run dev` proxies to it) and for the browser tests.
//
//   node tests/dev-server.mjs [--port N] [--pace MS]
//
// Copies examples/inventory into a temporary git repository whose .trellis/config.toml points
// every model role at tests/mock-llm.mjs, starts the mock and `trellis serve` on loopback, and
// prints one JSON line: {"url", "login", "token", "port", "mock", "repo"}. Ctrl-C (or SIGTERM)
// stops both and removes the directory. The binary: $TRELLIS_BIN, else
// $CARGO_TARGET_DIR/debug/trellis, else ../target/debug/trellis.
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const bin =
  process.env.TRELLIS_BIN ||
  (process.env.CARGO_TARGET_DIR ? join(process.env.CARGO_TARGET_DIR, 'debug/trellis') : join(root, 'target/debug/trellis'));

const dir = mkdtempSync(join(tmpdir(), 'trellis-web-'));
const repo = join(dir, 'inventory');
const home = join(dir, 'home');
mkdirSync(home);
cpSync(join(root, 'examples/inventory'), repo, { recursive: true });
const env = {
  ...process.env,
  HOME: home,
  XDG_CONFIG_HOME: join(home, '.config'),
  XDG_DATA_HOME: join(home, '.local/share'),
  XDG_CACHE_HOME: join(home, '.cache'),
  GIT_AUTHOR_NAME: 'User', GIT_AUTHOR_EMAIL: 'user@example.com',
  GIT_COMMITTER_NAME: 'User', GIT_COMMITTER_EMAIL: 'user@example.com',
};
const git = (...a) => execFileSync('git', ['-C', repo, ...a], { env, stdio: 'ignore' });
git('init', '-q', '-b', 'main');
git('add', '-A');
git('commit', '-qm', 'initial');

const children = [];
function stop(code = 0) {
  for (const c of children) {
    try { c.kill('SIGTERM'); } catch { /* gone */ }
  }
  setTimeout(() => {
    for (const c of children) {
      try { c.kill('SIGKILL'); } catch { /* gone */ }
    }
    rmSync(dir, { recursive: true, force: true });
    process.exit(code);
  }, 1500);
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));

function firstLine(child, re, what) {
  return new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stdout });
    const timer = setTimeout(() => fail(new Error(`${what}: no "${re}" within 60 s`)), 60_000);
    lines.on('line', (l) => {
      if (process.env.DEV_SERVER_VERBOSE) process.stderr.write(`[${what}] ${l}\n`);
      const m = l.match(re);
      if (m) { clearTimeout(timer); ok(m); }
    });
    child.on('exit', (c) => fail(new Error(`${what} exited (${c})`)));
  });
}

const mock = spawn(process.execPath, [join(here, 'mock-llm.mjs'), '--pace', opt('--pace', '300')], { stdio: ['ignore', 'pipe', 'inherit'] });
children.push(mock);
const [, mockUrl] = await firstLine(mock, /^mock listening on (\S+)/, 'mock');
mkdirSync(join(repo, '.trellis/agents'), { recursive: true });
// The built-in analysis agent may not ask questions, nor the documentation agent run
// commands: workspace overrides of their roles allow it, so the mock can raise a question
// ("[ask]") and an approval gate ("[gate]").
const roles = join(root, 'crates/agents/roles');
const allow = (file, extra) => {
  const text = readFileSync(join(roles, file), 'utf8').replace(/^tools: \[(.*)\]$/m, (_, t) => `tools: [${t}, ${extra}]`);
  writeFileSync(join(repo, '.trellis/agents', file), text);
};
allow('analysis_agent.yaml', 'ask_questions');
allow('documentation_agent.yaml', 'shell');
writeFileSync(
  join(repo, '.trellis/config.toml'),
  `[models]\ndefault = "mock"\n\n[models.profiles.mock]\nprovider = "openai"\nbase_url = "${mockUrl}"\nmodel = "mock-model"\n\n[index.embedding]\nbackend = "none"\n`,
);
const tokenFile = join(home, 'serve-token');
const serve = spawn(bin, ['serve', '--repo', repo, '--bind', `127.0.0.1:${opt('--port', '0')}`, '--token-file', tokenFile], {
  env, cwd: repo, stdio: ['ignore', 'pipe', process.env.DEV_SERVER_VERBOSE ? 'inherit' : 'ignore'],
});
children.push(serve);
const [, url] = await firstLine(serve, /^listening on (\S+)/, 'serve');
const token = readFileSync(tokenFile, 'utf8').trim();
const port = Number(new URL(url).port);
console.log(JSON.stringify({ url, login: `${url}/login?token=${token}`, token, port, mock: mockUrl.replace(/\/v1$/, ''), repo }));
