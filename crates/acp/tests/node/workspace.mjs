// Shared by the black-box tests: a temporary workspace (examples/inventory in git, every model
// role on the web tests' loopback mock model) and the processes to stop at exit.
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const root = join(here, '../../../..');
export const verbose = !!process.env.VERBOSE;

/** The trellis binary: the first argument, $TRELLIS_BIN, or the debug build. */
export function trellisBin() {
  return (
    process.argv[2] ??
    process.env.TRELLIS_BIN ??
    join(process.env.CARGO_TARGET_DIR ?? join(process.env.HOME, '.cache/trellis/target'), 'debug/trellis')
  );
}

export const children = [];
export const dir = mkdtempSync(join(tmpdir(), 'trellis-acp-node-'));
function cleanup() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
}
process.on('exit', cleanup);

/** The first line of `child`'s stdout matching `re`. */
export function firstLine(child, re, what) {
  return new Promise((ok, fail) => {
    let buf = '';
    const t = setTimeout(() => fail(new Error(`${what}: no line matching ${re} in 30 s`)), 30_000);
    child.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(re);
      if (m) {
        clearTimeout(t);
        ok(m);
      }
    });
    child.once('exit', (code) => fail(new Error(`${what} exited (${code}) before ${re}`)));
  });
}

/** A workspace: examples/inventory in git, every model role on the mock. */
export async function workspace() {
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
    GIT_AUTHOR_NAME: 'User',
    GIT_AUTHOR_EMAIL: 'user@example.com',
    GIT_COMMITTER_NAME: 'User',
    GIT_COMMITTER_EMAIL: 'user@example.com',
    RUST_LOG: process.env.RUST_LOG ?? 'warn',
  };
  const git = (...a) => execFileSync('git', ['-C', repo, ...a], { env, stdio: 'ignore' });
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('commit', '-qm', 'initial');
  const mock = spawn(process.execPath, [join(root, 'web/tests/mock-llm.mjs'), '--pace', '50'], {
    stdio: ['ignore', 'pipe', verbose ? 'inherit' : 'ignore'],
  });
  children.push(mock);
  const [, mockUrl] = await firstLine(mock, /mock listening on (\S+)/, 'mock model');
  // The documentation agent may run commands (the mock's "[gate]": `curl`, which the policy
  // asks the user about).
  mkdirSync(join(repo, '.trellis/agents'), { recursive: true });
  const roles = join(root, 'crates/agents/roles');
  const docs = readFileSync(join(roles, 'documentation_agent.yaml'), 'utf8').replace(
    /^tools: \[(.*)\]$/m,
    (_, t) => `tools: [${t}, shell]`,
  );
  writeFileSync(join(repo, '.trellis/agents/documentation_agent.yaml'), docs);
  writeFileSync(
    join(repo, '.trellis/config.toml'),
    `[models]\ndefault = "mock"\n\n[models.profiles.mock]\nprovider = "openai"\nbase_url = "${mockUrl}"\nmodel = "mock-model"\ncontext = 8192\n\n[index.embedding]\nbackend = "none"\n`,
  );
  return { repo, env };
}

