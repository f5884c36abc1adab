// A throw-away workspace served by a real `trellis serve` with the loopback mock model: used by
// the Playwright suite (tests/fixtures.ts), by `node tests/dev-server.mjs` (developing the UI)
// and by `npm run bench`.
//
// startTrellis() copies examples/inventory into a temporary git repository whose
// .trellis/config.toml points every model role at tests/mock-llm.mjs, starts the mock and
// `trellis serve` on 127.0.0.1 (free ports), and resolves to
// {url, login, token, port, mock, repo, dir, stop, restart}. stop() ends both processes and
// removes the directory; they are also killed if this process exits without calling it.
// restart(args) kills the server with SIGKILL and starts another on the same workspace.
//
// The binary: $TRELLIS_BIN, else $CARGO_TARGET_DIR/debug/trellis, else the first of
// ../target/debug/trellis and ~/.cache/trellis/target/debug/trellis that exists.
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, '../..');

export function trellisBin() {
  if (process.env.TRELLIS_BIN) return process.env.TRELLIS_BIN;
  const candidates = [
    process.env.CARGO_TARGET_DIR && join(process.env.CARGO_TARGET_DIR, 'debug/trellis'),
    join(root, 'target/debug/trellis'),
    join(homedir(), '.cache/trellis/target/debug/trellis'),
  ].filter(Boolean);
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(`no trellis binary: set TRELLIS_BIN or run \`cargo build -p trellis\` (looked at ${candidates.join(', ')})`);
  }
  return found;
}

/** Resolves with the first match of `re` on the child's stdout (60 s at most). */
function firstLine(child, re, what, log) {
  return new Promise((ok, fail) => {
    const lines = createInterface({ input: child.stdout });
    const timer = setTimeout(() => fail(new Error(`${what}: no "${re}" within 60 s`)), 60_000);
    let done = false;
    lines.on('line', (l) => {
      if (log) log(`[${what}] ${l}`);
      const m = l.match(re);
      if (m && !done) {
        done = true;
        clearTimeout(timer);
        ok(m);
      }
    });
    child.on('exit', (c, sig) => {
      clearTimeout(timer);
      if (!done) fail(new Error(`${what} exited (${c ?? sig}) before it was ready`));
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      fail(new Error(`${what}: ${e.message}`));
    });
  });
}

/**
 * @param {{pace?: number, verbose?: boolean, bin?: string}} [opts]
 * @returns {Promise<{url: string, login: string, token: string, port: number, mock: string, repo: string, dir: string, stop: () => Promise<void>, restart: (args?: string[]) => Promise<void>}>}
 */
export async function startTrellis(opts = {}) {
  const bin = opts.bin ?? trellisBin();
  const verbose = opts.verbose ?? !!process.env.DEV_SERVER_VERBOSE;
  const log = verbose ? (l) => process.stderr.write(`${l}\n`) : null;
  const dir = mkdtempSync(join(tmpdir(), 'trellis-web-'));
  const children = [];
  let stopped = false;
  // Killed even when the caller never gets to stop() (a crashed test worker, Ctrl-C).
  const onExit = () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', onExit);
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(
      children.map(
        (c) =>
          new Promise((ok) => {
            if (c.exitCode !== null || c.signalCode !== null) return ok();
            const t = setTimeout(() => c.kill('SIGKILL'), 3000);
            c.once('exit', () => (clearTimeout(t), ok()));
            c.kill('SIGTERM');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
    process.off('exit', onExit);
  };
  try {
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
    };
    const git = (...a) => execFileSync('git', ['-C', repo, ...a], { env, stdio: 'ignore' });
    git('init', '-q', '-b', 'main');
    git('add', '-A');
    git('commit', '-qm', 'initial');

    const mock = spawn(process.execPath, [join(here, 'mock-llm.mjs'), '--pace', String(opts.pace ?? 300)], {
      stdio: ['ignore', 'pipe', verbose ? 'inherit' : 'ignore'],
    });
    children.push(mock);
    const [, mockUrl] = await firstLine(mock, /^mock listening on (\S+)/, 'mock', log);
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
    let serve;
    const launch = async (extra = []) => {
      serve = spawn(bin, ['serve', '--repo', repo, '--bind', '127.0.0.1:0', '--token-file', tokenFile, ...extra], {
        env,
        cwd: repo,
        stdio: ['ignore', 'pipe', verbose ? 'inherit' : 'ignore'],
      });
      children.push(serve);
      const [, url] = await firstLine(serve, /^listening on (\S+)/, `${bin} serve`, log);
      return url;
    };
    const url = await launch();
    const token = readFileSync(tokenFile, 'utf8').trim();
    const srv = {
      url,
      login: `${url}/login?token=${token}`,
      token,
      port: Number(new URL(url).port),
      mock: mockUrl.replace(/\/v1$/, ''),
      repo,
      dir,
      stop,
      // Kills the server (SIGKILL: no clean shutdown) and starts a new one on the same
      // workspace with `args` (e.g. --no-resume); `url`, `login` and `port` follow it.
      async restart(args = []) {
        const old = serve;
        await new Promise((ok) => {
          if (old.exitCode !== null || old.signalCode !== null) return ok();
          old.once('exit', ok);
          old.kill('SIGKILL');
        });
        srv.url = await launch(args);
        srv.login = `${srv.url}/login?token=${token}`;
        srv.port = Number(new URL(srv.url).port);
      },
    };
    return srv;
  } catch (e) {
    await stop();
    throw e;
  }
}
