// The runs list (live from the `workspace` stream: new runs, stages, stops), its filters, and
// the form that starts a run.

import { useEffect, useMemo, useState } from 'preact/hooks';
import { get, post, qs, enc } from '../api';
import type { CatalogEntry, Frame, RunRecord, SessionRecord } from '../api';
import { href, navigate } from '../router';
import { useValue } from '../store';
import { workspaces } from '../state';
import { fetchStream, socket } from '../ws';
import { ago, cost, duration, shortId, tokens, stamp } from '../format';
import { InlineError, Spinner, StatusBadge, useAction, useLoad, showError, submitOnCtrlEnter } from '../ui';

interface RunExtra {
  stage?: string;
  stageAttempt?: number;
  request?: string;
}

const STATUSES = ['', 'running', 'waitingInput', 'succeeded', 'failed', 'cancelled'];

/** Follows every workspace's `workspace` stream; returns per-run extras and a change counter. */
function useWorkspaceStreams(onChange: () => void) {
  const ws = useValue(workspaces);
  const [extra, setExtra] = useState<Map<string, RunExtra>>(new Map());
  useEffect(() => {
    const map = new Map<string, RunExtra>();
    const follows: { close(): void }[] = [];
    let live = true;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const changed = (reload: boolean) => {
      if (!live) return;
      setExtra(new Map(map));
      if (reload && !timer)
        timer = setTimeout(() => {
          timer = null;
          if (live) onChange();
        }, 250);
    };
    const apply = (f: Frame): boolean => {
      const e = f.event;
      const cur = (id: string) => {
        let x = map.get(id);
        if (!x) map.set(id, (x = {}));
        return x;
      };
      switch (e.type) {
        case 'runCreated':
          cur(e.run).request = e.request;
          return true;
        case 'stageChanged': {
          const x = cur(e.run);
          // A run's first stage after planning: it now has its workflow (reload the list).
          const planned = e.stage !== 'orchestrate' && (x.stage === undefined || x.stage === 'orchestrate');
          x.stage = e.stage;
          x.stageAttempt = e.attempt;
          return planned;
        }
        case 'runStopped':
        case 'reviewChanged':
          return true;
        case 'opCompleted':
          return e.op === 'resumeRun' || e.op === 'startRun' || e.op === 'cancel';
      }
      return false;
    };
    for (const w of ws) {
      fetchStream('workspace', 0, Infinity, w.id)
        .then((frames) => {
          if (!live) return;
          for (const f of frames) apply(f);
          changed(false);
          const last = frames.length ? frames[frames.length - 1].seq : 0;
          follows.push(socket.follow('workspace', last, (f) => changed(apply(f)), w.id));
        })
        .catch(showError);
    }
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
      follows.forEach((f) => f.close());
    };
  }, [ws]);
  return extra;
}

export function RunsPage({ query }: { query: Record<string, string> }) {
  const ws = useValue(workspaces);
  const status = query.status ?? '';
  const workspace = query.workspace ?? '';
  const [runs, setRuns] = useState<RunRecord[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const [, setNow] = useState(0);
  const [showNew, setShowNew] = useState(query.new === '1');
  useEffect(() => {
    if (query.new === '1') setShowNew(true);
  }, [query.new]);
  useEffect(() => {
    let live = true;
    get<RunRecord[]>(`/api/workflows${qs({ status, workspace, limit: 200 })}`)
      .then((r) => live && (setRuns(r), setError(null)))
      .catch((e) => {
        if (!live) return;
        setError(e.message);
        showError(e);
      });
    return () => void (live = false);
  }, [status, workspace, tick]);
  useEffect(() => {
    const t = setInterval(() => setNow((n) => n + 1), 5000);
    return () => clearInterval(t);
  }, []);
  const extra = useWorkspaceStreams(() => setTick((t) => t + 1));
  const setFilter = (k: string, v: string) => navigate(['runs'], { ...query, [k]: v || undefined }, true);

  return (
    <main class="page" aria-labelledby="runs-title">
      <div class="row between">
        <h1 id="runs-title">Runs</h1>
        <button type="button" class="primary" data-testid="new-run-toggle" aria-expanded={showNew} aria-controls="new-run" onClick={() => setShowNew(!showNew)}>
          {showNew ? 'Close' : 'New run'}
        </button>
      </div>
      {showNew && <NewRunForm onClose={() => setShowNew(false)} />}
      <div class="filters row" role="search" aria-label="Filter runs">
        <label>
          Status{' '}
          <select data-testid="filter-status" value={status} onChange={(e) => setFilter('status', (e.target as HTMLSelectElement).value)}>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s === '' ? 'any' : s === 'waitingInput' ? 'waiting for input' : s}
              </option>
            ))}
          </select>
        </label>
        {ws.length > 1 && (
          <label>
            Workspace{' '}
            <select data-testid="filter-workspace" value={workspace} onChange={(e) => setFilter('workspace', (e.target as HTMLSelectElement).value)}>
              <option value="">all</option>
              {ws.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.id}
                </option>
              ))}
            </select>
          </label>
        )}
        <button type="button" class="ghost" onClick={() => setTick((t) => t + 1)} data-testid="runs-refresh">
          Refresh
        </button>
      </div>
      <InlineError text={error} />
      {!runs ? (
        <Spinner label="Loading runs" />
      ) : runs.length === 0 ? (
        <p class="muted" data-testid="runs-empty">
          No runs{status ? ` with status ${status}` : ''} yet. Start one with <strong>New run</strong>.
        </p>
      ) : (
        <div class="table-wrap">
          <table class="runs" data-testid="runs-table">
            <caption class="sr-only">Workflow runs, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Workflow</th>
                <th scope="col">Status</th>
                <th scope="col">Stage</th>
                <th scope="col">Started</th>
                <th scope="col">Duration</th>
                <th scope="col">Tokens</th>
                <th scope="col">Cost</th>
                {ws.length > 1 && <th scope="col">Workspace</th>}
              </tr>
            </thead>
            <tbody>
              {runs.map((r) => {
                const x = extra.get(r.id) ?? {};
                const end = r.status === 'running' || r.status === 'waitingInput' ? Date.now() : r.updatedTs;
                return (
                  <tr key={r.id} data-testid="run-row" data-run={r.id} data-status={r.status}>
                    <td>
                      <a href={href(['runs', r.id])} data-testid="run-link">
                        <code>{shortId(r.id)}</code>
                      </a>
                      {x.request && <div class="muted clip" title={x.request}>{x.request}</div>}
                    </td>
                    <td>{r.graph}</td>
                    <td>
                      <StatusBadge status={r.status} />
                    </td>
                    <td data-testid="run-stage">{x.stage ? `${x.stage}${x.stageAttempt && x.stageAttempt > 1 ? ` (attempt ${x.stageAttempt})` : ''}` : '—'}</td>
                    <td title={stamp(r.createdTs)}>{ago(r.createdTs)}</td>
                    <td>{duration(end - r.createdTs)}</td>
                    <td>{tokens(r.usage?.run)}</td>
                    <td>{cost(r.usage?.run)}</td>
                    {ws.length > 1 && <td>{r.workspace}</td>}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <RecentChannels />
    </main>
  );
}

/** The channels with recent conversations (all of them are on the Channels page). */
function RecentChannels() {
  const ws = useValue(workspaces);
  const list = useLoad(async () => {
    const all = await Promise.all(ws.map((w) => get<SessionRecord[]>(`/api/channels${qs({ workspace: w.id, limit: 50 })}`)));
    return all.flat().sort((a, b) => b.updatedMs - a.updatedMs);
  }, [ws]);
  const latest = new Map<string, SessionRecord>();
  for (const s of list.data ?? []) {
    const c = s.owner.channel ?? '?';
    if (!latest.has(c)) latest.set(c, s);
  }
  return (
    <section class="card" aria-labelledby="recent-channels" data-testid="runs-channels">
      <div class="row between">
        <h2 id="recent-channels">Channels</h2>
        <a href={href(['channels'])}>All channels and new conversations</a>
      </div>
      {list.loading && !list.data ? (
        <Spinner label="Loading channels" />
      ) : latest.size === 0 ? (
        <p class="muted">No channel conversations yet.</p>
      ) : (
        <ul class="plain row wrap">
          {[...latest.entries()].map(([c, s]) => (
            <li key={c}>
              <a href={href(['chat', s.id])} data-testid="runs-channel-link">
                #{c}
              </a>{' '}
              <span class="muted small">{ago(s.updatedMs)}</span>
            </li>
          ))}
        </ul>
      )}
      <InlineError text={list.error} />
    </section>
  );
}

type StageChoice = 'auto' | 'include' | 'skip';

function NewRunForm({ onClose }: { onClose: () => void }) {
  const ws = useValue(workspaces);
  const [request, setRequest] = useState('');
  const [workspace, setWorkspace] = useState(ws[0]?.id ?? '');
  const [workflow, setWorkflow] = useState('');
  const [catalog, setCatalog] = useState<CatalogEntry[] | null>(null);
  const [catalogErrors, setCatalogErrors] = useState<string[]>([]);
  const [stages, setStages] = useState<Record<string, StageChoice>>({});
  const [include, setInclude] = useState('');
  const [skip, setSkip] = useState('');
  const [input, setInput] = useState('interrupts');
  useEffect(() => {
    get<{ workflows: CatalogEntry[]; errors: string[] }>(`/api/catalog/workflows${qs({ workspace })}`)
      .then((c) => {
        setCatalog(c.workflows);
        setCatalogErrors(c.errors ?? []);
      })
      .catch(showError);
  }, [workspace]);
  const chosen = useMemo(() => catalog?.find((c) => c.workflow.metadata.name === workflow), [catalog, workflow]);
  const optional = chosen?.workflow.stages.filter((s) => !s.required) ?? [];
  const split = (s: string) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
  const start = useAction(async () => {
    const body: Record<string, unknown> = { request, input };
    if (ws.length > 1) body.workspace = workspace;
    if (workflow) {
      body.workflow = workflow;
      body.include = Object.entries(stages)
        .filter(([, v]) => v === 'include')
        .map(([k]) => k);
      body.skip = Object.entries(stages)
        .filter(([, v]) => v === 'skip')
        .map(([k]) => k);
    } else {
      body.include = split(include);
      body.skip = split(skip);
    }
    const res = await post<{ run: string }>('/api/workflows', body);
    onClose();
    navigate(['runs', res.run]);
  });
  return (
    <form
      id="new-run"
      class="card new-run"
      data-testid="new-run-form"
      aria-label="Start a new run"
      onSubmit={(e) => {
        e.preventDefault();
        void start.run();
      }}
      onKeyDown={(e) => e.key === 'Escape' && onClose()}
    >
      <h2>New run</h2>
      <label class="block">
        What should the run do?
        <textarea
          data-testid="new-run-request"
          required
          rows={3}
          value={request}
          onInput={(e) => setRequest((e.target as HTMLTextAreaElement).value)}
          onKeyDown={submitOnCtrlEnter}
          placeholder="add a --verbose flag with tests"
          autofocus
        />
      </label>
      <div class="row wrap">
        {ws.length > 1 && (
          <label>
            Workspace{' '}
            <select data-testid="new-run-workspace" value={workspace} onChange={(e) => setWorkspace((e.target as HTMLSelectElement).value)}>
              {ws.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.id}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          Workflow{' '}
          <select
            data-testid="new-run-workflow"
            value={workflow}
            onChange={(e) => {
              setWorkflow((e.target as HTMLSelectElement).value);
              setStages({});
            }}
          >
            <option value="">auto (the orchestrator picks)</option>
            {(catalog ?? []).map((c) => (
              <option key={c.workflow.metadata.name} value={c.workflow.metadata.name}>
                {c.workflow.metadata.name}
                {c.source.kind !== 'builtin' ? ` (${c.source.kind})` : ''}
              </option>
            ))}
          </select>
        </label>
        <label>
          Questions{' '}
          <select data-testid="new-run-input" value={input} onChange={(e) => setInput((e.target as HTMLSelectElement).value)}>
            <option value="interrupts">pause and ask me</option>
            <option value="approve">approve everything</option>
            <option value="deny">deny everything</option>
          </select>
        </label>
      </div>
      {chosen?.workflow.metadata.description && <p class="muted">{chosen.workflow.metadata.description}</p>}
      {workflow ? (
        optional.length > 0 && (
          <fieldset data-testid="new-run-stages">
            <legend>Optional stages</legend>
            {optional.map((s) => (
              <label key={s.name} class="stage-choice">
                <code>{s.name}</code>{' '}
                <select
                  data-testid={`stage-${s.name}`}
                  value={stages[s.name] ?? 'auto'}
                  onChange={(e) => setStages({ ...stages, [s.name]: (e.target as HTMLSelectElement).value as StageChoice })}
                >
                  <option value="auto">orchestrator decides</option>
                  <option value="include">include</option>
                  <option value="skip">skip</option>
                </select>
              </label>
            ))}
          </fieldset>
        )
      ) : (
        <div class="row wrap">
          <label>
            Include stages{' '}
            <input data-testid="new-run-include" value={include} onInput={(e) => setInclude((e.target as HTMLInputElement).value)} placeholder="comma-separated" />
          </label>
          <label>
            Skip stages{' '}
            <input data-testid="new-run-skip" value={skip} onInput={(e) => setSkip((e.target as HTMLInputElement).value)} placeholder="comma-separated" />
          </label>
        </div>
      )}
      {catalogErrors.length > 0 && (
        <details class="warn">
          <summary>{catalogErrors.length} workflow file(s) failed to load</summary>
          <ul>
            {catalogErrors.map((e, i) => (
              <li key={i}>
                <pre>{e}</pre>
              </li>
            ))}
          </ul>
        </details>
      )}
      <InlineError text={start.error} testid="new-run-error" />
      <div class="row end">
        <button type="button" onClick={onClose}>
          Cancel
        </button>
        <button type="submit" class="primary" data-testid="new-run-submit" disabled={start.busy || !request.trim()}>
          {start.busy ? 'Starting…' : 'Start run'}
        </button>
      </div>
    </form>
  );
}

export const runUrl = (id: string) => `/api/workflows/${enc(id)}`;
