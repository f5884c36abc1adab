// The selected node: state, attempts, what it waits for, its result, usage, its agent's
// streaming conversation, a message box, prune (node / subtree) with a confirmation —
// disabled with the reason when the state forbids it — and, once the run has finished, a
// revision with feedback; the API's refusal is always shown.

import { useState } from 'preact/hooks';
import { get, post, enc } from '../api';
import type { RunUsage } from '../api';
import { cost, tokens } from '../format';
import type { RunModel, NodeInfo } from '../runModel';
import { pruneBlocked, reviseBlocked } from '../runModel';
import { GROUP_PREFIX } from './Graph';
import { Transcript, useSession } from './Transcript';
import { renderMarkdown, readable } from '../markdown';
import { Confirm, InlineError, StateBadge, useAction, useLoad, submitOnCtrlEnter, toast } from '../ui';
import { href } from '../router';

export function NodePanel({ m, id, onSelect, onClose }: { m: RunModel; id: string; onSelect: (id: string) => void; onClose: () => void }) {
  if (id.startsWith(GROUP_PREFIX)) return <GroupPanel m={m} parent={id.slice(GROUP_PREFIX.length)} onSelect={onSelect} onClose={onClose} />;
  const n = m.nodes.get(id);
  if (!n)
    return (
      <div class="panel" data-testid="node-panel">
        <p class="muted">No node {id} in this run.</p>
      </div>
    );
  return <NodeDetails key={id} m={m} n={n} onSelect={onSelect} onClose={onClose} />;
}

function PanelHead({ title, onClose, children }: { title: string; onClose: () => void; children?: any }) {
  return (
    <div class="row between">
      <h2 class="panel-title">
        <code>{title}</code> {children}
      </h2>
      <button type="button" class="icon" aria-label="Close the node panel" onClick={onClose} data-testid="node-panel-close">
        ×
      </button>
    </div>
  );
}

function NodeDetails({ m, n, onSelect, onClose }: { m: RunModel; n: NodeInfo; onSelect: (id: string) => void; onClose: () => void }) {
  // The agent's session appears when the node first runs: retry loading then.
  const started = n.state !== null && n.state !== 'READY' && n.state !== 'SKIPPED';
  const session = useSession(`${m.id}:${n.id}`, started ? `${n.attempt}` : 'not-started');
  const [prune, setPrune] = useState<null | 'node' | 'subtree'>(null);
  const [reason, setReason] = useState('');
  const [text, setText] = useState('');
  const blocked = pruneBlocked(m, n);
  const children = m.descendants(n.id);
  const doPrune = useAction(async () => {
    await post(`/api/workflows/${enc(m.id)}/nodes/${enc(n.id)}/prune`, { subtree: prune === 'subtree', reason: reason.trim() || undefined });
    setPrune(null);
    setReason('');
    toast(`Prune of ${n.id} sent`);
  });
  const [feedback, setFeedback] = useState('');
  const revise = useAction(async () => {
    await post(`/api/workflows/${enc(m.id)}/nodes/${enc(n.id)}/revise`, { feedback });
    setFeedback('');
    toast(`Revision of ${n.id} requested`);
  });
  const noRevise = reviseBlocked(m, n);
  const send = useAction(async () => {
    await post(`/api/workflows/${enc(m.id)}/nodes/${enc(n.id)}/message`, { text });
    setText('');
    toast(`Message sent to ${n.id}`);
  });
  // Usage is kept per stage (and per agent role): a fan-out child shows its stage's.
  const usage = useLoad(() => get<RunUsage>(`/api/workflows/${enc(m.id)}/usage`), [m.id, n.id, n.state, n.attempt]);
  const stage = /^(upfront|adaptive)_retrieval$/.test(n.id) ? 'retrieval' : n.id.split('/')[0].replace(/:collect$/, '');
  const u = (usage.data?.nodes ?? usage.data?.stages ?? []).find(([k]) => k === n.id || k === stage)?.[1];
  const result = n.result;
  const output = typeof result?.output === 'string' ? readable(result.output) : null;
  const findings: string[] = Array.isArray(result?.findings) ? result.findings : [];
  const msgBlocked = m.isFinished() ? `the run has ${m.status}; messages are refused` : n.state === 'COMPLETED' || n.state === 'FAILED' || n.state === 'PRUNED' || n.state === 'SKIPPED' ? `the node is ${n.state}: its agent will not read it` : null;
  return (
    <div class="panel" data-testid="node-panel" data-node={n.id} data-state={n.state ?? 'PENDING'}>
      <PanelHead title={n.id} onClose={onClose}>
        <StateBadge state={n.state} />
      </PanelHead>
      <dl class="facts small">
        <div>
          <dt>Attempt</dt>
          <dd data-testid="node-attempt">{n.attempt || '—'}</dd>
        </div>
        {n.branches > 0 && (
          <div>
            <dt>Re-runs</dt>
            <dd>{n.branches} (retries, loops or revisions)</dd>
          </div>
        )}
        {n.parent && (
          <div>
            <dt>Part of</dt>
            <dd>
              <button type="button" class="link" onClick={() => onSelect(n.parent!)}>
                {n.parent}
              </button>
            </dd>
          </div>
        )}
        {children.length > 0 && (
          <div>
            <dt>Fan-out</dt>
            <dd>
              <button type="button" class="link" onClick={() => onSelect(GROUP_PREFIX + n.id)}>
                {children.length} children
              </button>
            </dd>
          </div>
        )}
        {u && (
          <div>
            <dt>Usage{stage !== n.id ? ` (stage ${stage})` : ''}</dt>
            <dd data-testid="node-usage">
              {tokens(u)} tokens · {u.calls} calls · {cost(u)}
            </dd>
          </div>
        )}
        {n.messages.length > 0 && (
          <div>
            <dt>Messages</dt>
            <dd data-testid="node-messages">
              {n.messages.filter((x) => x.delivered).length} delivered, {n.messages.filter((x) => !x.delivered).length} buffered
            </dd>
          </div>
        )}
      </dl>
      {n.error && (
        <p class="inline-error" role="alert" data-testid="node-error">
          {n.error}
        </p>
      )}
      {n.interrupt && (
        <div class="callout" data-testid="node-interrupt">
          <strong>Waiting for you ({n.interrupt.kind}):</strong> {n.interrupt.prompt}{' '}
          <a href={href(['runs', m.id, 'approvals'])}>Answer in Approvals</a>
        </div>
      )}
      <div class="row wrap actions">
        <button type="button" class="danger" data-testid="prune-node" disabled={!!blocked} aria-describedby={blocked ? 'prune-why' : undefined} onClick={() => setPrune('node')}>
          Prune node
        </button>
        <button type="button" class="danger" data-testid="prune-subtree" disabled={!!blocked} aria-describedby={blocked ? 'prune-why' : undefined} onClick={() => setPrune('subtree')}>
          Prune subtree
        </button>
        {blocked && (
          <span id="prune-why" class="muted small" data-testid="prune-disabled-reason">
            Cannot prune: {blocked}.
          </span>
        )}
      </div>
      <InlineError text={doPrune.error} testid="prune-error" />
      <Confirm
        open={prune !== null}
        title={prune === 'subtree' ? `Prune ${n.id} and its unfinished children?` : `Prune ${n.id}?`}
        confirmLabel={prune === 'subtree' ? 'Prune subtree' : 'Prune node'}
        danger
        busy={doPrune.busy}
        onConfirm={() => void doPrune.run()}
        onCancel={() => {
          setPrune(null);
          doPrune.setError(null);
        }}
        testid="prune-dialog"
      >
        <p>
          The node {n.state === 'RUNNING' ? 'stops and its edits are rolled back' : 'will not run'}; its output never reaches the next stage.
          {prune === 'subtree' && children.length > 0 && ` ${children.length} children are pruned with it.`}
        </p>
        <label class="block">
          Reason (optional)
          <input data-testid="prune-reason" value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
        </label>
        <InlineError text={doPrune.error} testid="prune-dialog-error" />
      </Confirm>
      <form
        class="message-box"
        data-testid="node-message-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (text.trim()) void send.run();
        }}
      >
        <label class="block">
          Message to the agent{' '}
          <span class="muted small">{msgBlocked ? `(${msgBlocked})` : '(a running agent reads it before its next model call; a waiting one when it resumes)'}</span>
          <textarea data-testid="node-message" rows={2} value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} onKeyDown={submitOnCtrlEnter} placeholder="Focus on reserve()." />
        </label>
        <div class="row end">
          <button type="submit" class="primary" data-testid="node-message-send" disabled={send.busy || !text.trim()}>
            Send (Ctrl+Enter)
          </button>
        </div>
        <InlineError text={send.error} testid="message-error" />
      </form>
      {!noRevise && (
        <details class="revise" data-testid="node-revise">
          <summary>Ask for a revision</summary>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              if (feedback.trim()) void revise.run();
            }}
          >
            <label class="block">
              What should change <span class="muted small">(the agent runs this stage again with it; later stages follow, and the change set is rebuilt)</span>
              <textarea data-testid="revise-feedback" rows={2} value={feedback} onInput={(e) => setFeedback((e.target as HTMLTextAreaElement).value)} onKeyDown={submitOnCtrlEnter} placeholder="Cover the reservation expiry too." />
            </label>
            <div class="row end">
              <button type="submit" class="primary" data-testid="revise-send" disabled={revise.busy || !feedback.trim()}>
                Send back (Ctrl+Enter)
              </button>
            </div>
            <InlineError text={revise.error} testid="revise-error" />
          </form>
        </details>
      )}
      {(output || findings.length > 0) && (
        <section class="result" aria-label="Result">
          <h3>Result</h3>
          {output && <div class="md" data-testid="node-result" dangerouslySetInnerHTML={{ __html: renderMarkdown(output) }} />}
          {findings.length > 0 && (
            <ul>
              {findings.map((f, i) => (
                <li key={i}>{typeof f === 'string' ? f : JSON.stringify(f)}</li>
              ))}
            </ul>
          )}
        </section>
      )}
      <section aria-label="Conversation">
        <h3>Conversation</h3>
        <Transcript model={session} agentReports live={n.state === 'RUNNING'} emptyText={n.state === null || n.state === 'READY' ? 'The agent has not started yet.' : 'This node has no agent conversation.'} />
      </section>
    </div>
  );
}

const LIMIT = 300;

function GroupPanel({ m, parent, onSelect, onClose }: { m: RunModel; parent: string; onSelect: (id: string) => void; onClose: () => void }) {
  const [filter, setFilter] = useState('');
  const [all, setAll] = useState(false);
  const ids = m.children.get(parent) ?? [];
  const counts = m.groupCounts(parent);
  const shown = ids.filter((id) => !filter || (m.nodes.get(id)?.state ?? 'PENDING') === filter);
  return (
    <div class="panel" data-testid="group-panel" data-parent={parent}>
      <PanelHead title={`${parent}: ${ids.length} fan-out children`} onClose={onClose} />
      <div class="row wrap">
        <button type="button" class={filter === '' ? 'chip active' : 'chip'} aria-pressed={filter === ''} onClick={() => setFilter('')}>
          all {ids.length}
        </button>
        {Object.entries(counts).map(([s, c]) => (
          <button key={s} type="button" class={`chip state-${s}${filter === s ? ' active' : ''}`} aria-pressed={filter === s} onClick={() => setFilter(s)} data-testid={`group-count-${s}`}>
            {s.replace('_', ' ')} {c}
          </button>
        ))}
      </div>
      <ul class="children" aria-label="Children">
        {(all ? shown : shown.slice(0, LIMIT)).map((id) => {
          const s = m.nodes.get(id)?.state ?? 'PENDING';
          return (
            <li key={id}>
              <button type="button" class={`child state-${s}`} onClick={() => onSelect(id)} data-testid={`group-child-${id}`} aria-label={`${id}: ${s}`}>
                <span class="swatch" aria-hidden="true" />
                {id.startsWith(parent + '/') ? id.slice(parent.length + 1) : id}
              </button>
            </li>
          );
        })}
      </ul>
      {!all && shown.length > LIMIT && (
        <button type="button" onClick={() => setAll(true)}>
          Show all {shown.length}
        </button>
      )}
    </div>
  );
}
