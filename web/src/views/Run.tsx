// The run view: header (status, usage, cancel/resume), tabs (graph + node panel, approvals,
// review, event log). Everything updates from the run's event stream without a reload.

import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { get, post, enc } from '../api';
import type { RunUsage } from '../api';
import { RunModel } from '../runModel';
import { useNotifier } from '../store';
import { href, navigate } from '../router';
import { cost, duration, shortId, stamp, tokens } from '../format';
import { Confirm, InlineError, Spinner, StatusBadge, useAction, useLoad } from '../ui';
import { GraphView } from './Graph';
import { NodePanel } from './NodePanel';
import { Approvals } from './Approvals';
import { Tasks } from './Tasks';

const TABS: [string, string][] = [
  ['graph', 'Graph'],
  ['approvals', 'Approvals'],
  ['tasks', 'Tasks'],
  ['review', 'Review'],
  ['events', 'Events'],
];

export function useRunModel(id: string): RunModel | null {
  const [m, setM] = useState<RunModel | null>(null);
  useEffect(() => {
    const model = new RunModel(id);
    setM(model);
    model.load().catch(() => {});
    return () => model.close();
  }, [id]);
  return m && m.id === id ? m : null;
}

export function RunPage({ id, tab, query, children }: { id: string; tab: string; query: Record<string, string>; children?: ComponentChildren }) {
  const m = useRunModel(id);
  useNotifier(m);
  if (!m || !m.loaded) return <Spinner label="Loading the run" />;
  if (m.loadError)
    return (
      <main class="page">
        <h1>Run {shortId(id)}</h1>
        <InlineError text={m.loadError} testid="run-load-error" />
        <a href={href(['runs'])}>Back to the runs</a>
      </main>
    );
  const waiting = [...m.nodes.values()].filter((n) => n.interrupt).length;
  return (
    <main class="page run-page" aria-labelledby="run-title" data-testid="run-page" data-run={m.id} data-status={m.status}>
      <RunHeader m={m} />
      <nav class="tabs" aria-label="Run views">
        {TABS.filter(([k]) => k !== 'tasks' || m.workflow === 'task_tree').map(([k, label]) => (
          <a key={k} href={href(['runs', id, k])} aria-current={tab === k ? 'page' : undefined} data-testid={`tab-${k}`}>
            {label}
            {k === 'approvals' && waiting > 0 && (
              <span class="count" data-testid="approvals-count" aria-label={`${waiting} waiting`}>
                {waiting}
              </span>
            )}
          </a>
        ))}
      </nav>
      {tab === 'graph' && <GraphTab m={m} selected={query.node ?? null} />}
      {tab === 'approvals' && <Approvals m={m} />}
      {tab === 'tasks' && <Tasks m={m} />}
      {tab === 'review' && children}
      {tab === 'events' && <EventLog m={m} />}
    </main>
  );
}

function RunHeader({ m }: { m: RunModel }) {
  const r = m.record;
  // Usage changes with every model call: reloaded when a step completes or the status
  // changes, at most every 2 s (at once when the run has finished).
  const [usageTick, setUsageTick] = useState(0);
  const step = m.record?.step;
  const done = m.isFinished();
  useEffect(() => {
    // A finished run's totals at once: nothing will change them for a while.
    const t = setTimeout(() => setUsageTick((n) => n + 1), done ? 100 : 2000);
    return () => clearTimeout(t);
  }, [step, m.status, done]);
  const usage = useLoad(() => get<RunUsage>(`/api/workflows/${enc(m.id)}/usage`), [m.id, usageTick]);
  const [confirmCancel, setConfirmCancel] = useState(false);
  const cancel = useAction(async () => {
    await post(`/api/workflows/${enc(m.id)}/cancel`, { reason: 'cancelled from the web UI' });
    setConfirmCancel(false);
  });
  const resume = useAction(() => post(`/api/workflows/${enc(m.id)}/resume`, {}));
  const finished = m.isFinished();
  const u = usage.data?.run ?? r?.usage?.run;
  const end = finished ? r?.updatedTs ?? Date.now() : Date.now();
  return (
    <header class="run-header">
      <div class="row between wrap">
        <h1 id="run-title">
          Run <code>{shortId(m.id)}</code> <span class="muted">{m.workflow ?? r?.graph}</span>
        </h1>
        <div class="row">
          <StatusBadge status={m.status} />
          {m.status === 'running' && r && !r.live && (
            <button type="button" data-testid="run-resume" disabled={resume.busy} onClick={() => void resume.run()} title="Continue this run in this server">
              Resume
            </button>
          )}
          <button type="button" class="danger" data-testid="run-cancel" disabled={finished || cancel.busy} title={finished ? 'The run has finished' : 'Cancel the run'} onClick={() => setConfirmCancel(true)}>
            Cancel run
          </button>
        </div>
      </div>
      {r?.request && <p class="request">{r.request}</p>}
      <dl class="facts">
        <div>
          <dt>Stage</dt>
          <dd data-testid="run-stage">{m.stage ?? '—'}</dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>{stamp(r?.createdTs)}</dd>
        </div>
        <div>
          <dt>Duration</dt>
          <dd>{r ? duration(end - r.createdTs) : '—'}</dd>
        </div>
        <div>
          <dt>Steps</dt>
          <dd>{r?.step ?? '—'}</dd>
        </div>
        <div>
          <dt>Tokens</dt>
          <dd data-testid="run-tokens">{tokens(u)}</dd>
        </div>
        <div>
          <dt>Cost</dt>
          <dd>{cost(u)}</dd>
        </div>
        <div>
          <dt>Model calls</dt>
          <dd>{u?.calls ?? '—'}</dd>
        </div>
      </dl>
      {m.error && (
        <p class="inline-error" role="alert">
          {m.error}
        </p>
      )}
      <InlineError text={resume.error} />
      <Confirm
        open={confirmCancel}
        title="Cancel this run?"
        confirmLabel="Cancel the run"
        danger
        busy={cancel.busy}
        onConfirm={() => void cancel.run()}
        onCancel={() => setConfirmCancel(false)}
        testid="cancel-dialog"
      >
        <p>Running agents stop; their unfinished work is discarded. The run cannot continue after this.</p>
        <InlineError text={cancel.error} />
      </Confirm>
    </header>
  );
}

function GraphTab({ m, selected }: { m: RunModel; selected: string | null }) {
  const select = (id: string) => navigate(['runs', m.id, 'graph'], { node: id === selected ? undefined : id }, true);
  return (
    <div class="graph-layout">
      <section class="graph-pane" aria-label="Graph">
        <GraphView model={m} selected={selected} onSelect={select} />
      </section>
      <aside class="node-pane" aria-label="Selected node">
        {selected ? (
          <NodePanel m={m} id={selected} onSelect={select} onClose={() => navigate(['runs', m.id, 'graph'], {}, true)} />
        ) : (
          <p class="muted" data-testid="node-panel-empty">
            Select a node (click, or Tab to it and press Enter) to see its conversation, send it a message or prune it.
          </p>
        )}
      </aside>
    </div>
  );
}

function EventLog({ m }: { m: RunModel }) {
  const rows = m.log.slice(-500).reverse();
  return (
    <section aria-label="Event log" class="event-log" data-testid="event-log">
      <p class="muted">
        The run's stream, newest first (last seq {m.lastSeq}
        {m.log.length > 500 ? '; the last 500 shown' : ''}).
      </p>
      <table>
        <thead>
          <tr>
            <th scope="col">seq</th>
            <th scope="col">time</th>
            <th scope="col">topic</th>
            <th scope="col">what</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((l) => (
            <tr key={l.seq} data-seq={l.seq}>
              <td>{l.seq}</td>
              <td>{new Date(l.ts).toLocaleTimeString()}</td>
              <td>
                <code>{l.name}</code>
              </td>
              <td>{l.text}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
