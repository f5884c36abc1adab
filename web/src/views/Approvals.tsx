// What waits for the user: interrupts (questions, approvals, human reviews) and artifacts
// (scope cards, plans, discovery/spec/tickets…, rendered as markdown) with approve / request
// changes + feedback. Reloads whenever the run's stream says something changed.

import { useEffect, useState } from 'preact/hooks';
import { get, post, enc } from '../api';
import type { Artifact, Interrupt } from '../api';
import type { RunModel } from '../runModel';
import { useNotifier } from '../store';
import { renderMarkdown, readable } from '../markdown';
import { InlineError, Spinner, useAction, useLoad, submitOnCtrlEnter, toast } from '../ui';
import { followFromNow } from '../ws';

export function Approvals({ m }: { m: RunModel }) {
  useNotifier(m);
  const interrupts = useLoad(() => get<{ node: string; interrupt: Interrupt }[]>(`/api/workflows/${enc(m.id)}/interrupts`), [m.id, m.interruptsVersion]);
  const [artifactsTick, setArtifactsTick] = useState(0);
  const artifacts = useLoad(() => get<Artifact[]>(`/api/workflows/${enc(m.id)}/artifacts`), [m.id, artifactsTick, m.status]);
  // Artifact status changes arrive on the workspace stream.
  useEffect(() => {
    const ws = m.record?.workspace;
    const f = followFromNow(
      'workspace',
      (fr) => {
        if (fr.event?.type === 'artifactChanged' && fr.event.run === m.id) setArtifactsTick((t) => t + 1);
      },
      ws,
    );
    return () => f.close();
  }, [m.id]);
  return (
    <div class="approvals" data-testid="approvals">
      <section aria-labelledby="interrupts-title">
        <h2 id="interrupts-title">Waiting for an answer</h2>
        {interrupts.loading && !interrupts.data ? (
          <Spinner />
        ) : (interrupts.data ?? []).length === 0 ? (
          <p class="muted" data-testid="interrupts-empty">
            Nothing waits for you{m.status === 'running' ? ' right now' : ''}.
          </p>
        ) : (
          (interrupts.data ?? []).map((it) => <InterruptCard key={`${it.node}:${it.interrupt.prompt}`} m={m} node={it.node} it={it.interrupt} onDone={interrupts.reload} />)
        )}
        <InlineError text={interrupts.error} />
      </section>
      <section aria-labelledby="artifacts-title">
        <h2 id="artifacts-title">Artifacts</h2>
        {artifacts.loading && !artifacts.data ? (
          <Spinner />
        ) : (artifacts.data ?? []).length === 0 ? (
          <p class="muted" data-testid="artifacts-empty">
            This run has no artifacts (scope cards, plans, specs…) to approve.
          </p>
        ) : (
          (artifacts.data ?? []).map((a) => <ArtifactCard key={a.id} m={m} a={a} onDone={artifacts.reload} />)
        )}
        <InlineError text={artifacts.error} />
      </section>
      <StageFeedback m={m} />
    </div>
  );
}

/** The questions of an `ask_questions` interrupt, wherever the data keeps them. */
function questionsOf(data: any): { question: string; options?: string[] }[] {
  const q = data?.questions?.questions ?? data?.questions ?? data?.Questions?.questions;
  return Array.isArray(q) ? q : [];
}

function InterruptCard({ m, node, it, onDone }: { m: RunModel; node: string; it: Interrupt; onDone: () => void }) {
  const questions = questionsOf(it.data);
  const [answers, setAnswers] = useState<string[]>(() => questions.map(() => ''));
  const [free, setFree] = useState('');
  const [comment, setComment] = useState('');
  const base = `/api/workflows/${enc(m.id)}`;
  const act = useAction(async (kind: string) => {
    switch (kind) {
      case 'answer':
        await post(`${base}/answer`, { node, answer: questions.length ? answers : free });
        break;
      case 'allow':
        await post(`${base}/answer`, { node, answer: { approved: true, comment: comment || undefined } });
        break;
      case 'deny':
        await post(`${base}/answer`, { node, answer: { approved: false, comment: comment || undefined } });
        break;
      case 'approve':
        await post(`${base}/nodes/${enc(node)}/approve`, { comment: comment || undefined });
        break;
      case 'revise':
        await post(`${base}/nodes/${enc(node)}/revise`, { feedback: comment });
        break;
    }
    toast(`Answer sent to ${node}`);
    onDone();
  });
  const request = it.data?.request ?? it.data?.Approval?.request;
  return (
    <article class="card interrupt" data-testid="interrupt" data-node={node} data-kind={it.kind}>
      <header class="row between">
        <h3>
          <code>{node}</code> <span class="badge">{it.kind}</span>
        </h3>
      </header>
      {questions.length === 0 && <div class="md" dangerouslySetInnerHTML={{ __html: renderMarkdown(it.prompt) }} />}
      {it.kind === 'question' && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void act.run('answer');
          }}
        >
          {questions.length ? (
            questions.map((q, i) => (
              <label class="block" key={i}>
                {q.question}
                {q.options && q.options.length > 0 && (
                  <span class="row wrap options">
                    {q.options.map((o) => (
                      <button
                        type="button"
                        key={o}
                        class={answers[i] === o ? 'chip active' : 'chip'}
                        aria-pressed={answers[i] === o}
                        onClick={() => setAnswers(answers.map((a, j) => (j === i ? o : a)))}
                        data-testid="answer-option"
                      >
                        {o}
                      </button>
                    ))}
                  </span>
                )}
                <input data-testid={`answer-${i}`} value={answers[i]} onInput={(e) => setAnswers(answers.map((a, j) => (j === i ? (e.target as HTMLInputElement).value : a)))} />
              </label>
            ))
          ) : (
            <label class="block">
              Your answer
              <textarea data-testid="answer-text" rows={2} value={free} onInput={(e) => setFree((e.target as HTMLTextAreaElement).value)} onKeyDown={submitOnCtrlEnter} />
            </label>
          )}
          <div class="row end">
            <button type="submit" class="primary" data-testid="answer-submit" disabled={act.busy}>
              Answer
            </button>
          </div>
        </form>
      )}
      {it.kind === 'approval' && (
        <>
          {request && (
            <details>
              <summary>What it wants to do</summary>
              <pre>{JSON.stringify(request, null, 2)}</pre>
            </details>
          )}
          <label class="block">
            Comment (optional)
            <input data-testid="approval-comment" value={comment} onInput={(e) => setComment((e.target as HTMLInputElement).value)} />
          </label>
          <div class="row end">
            <button type="button" class="danger" data-testid="approval-deny" disabled={act.busy} onClick={() => void act.run('deny')}>
              Deny
            </button>
            <button type="button" class="primary" data-testid="approval-allow" disabled={act.busy} onClick={() => void act.run('allow')}>
              Allow
            </button>
          </div>
        </>
      )}
      {it.kind === 'review' && (
        <>
          {it.data && (
            <details>
              <summary>Details</summary>
              <pre>{JSON.stringify(it.data, null, 2)}</pre>
            </details>
          )}
          <label class="block">
            Comment or feedback
            <textarea data-testid="review-feedback" rows={2} value={comment} onInput={(e) => setComment((e.target as HTMLTextAreaElement).value)} />
          </label>
          <div class="row end">
            <button type="button" data-testid="review-revise" disabled={act.busy || !comment.trim()} title={comment.trim() ? '' : 'Write the feedback first'} onClick={() => void act.run('revise')}>
              Request revision
            </button>
            <button type="button" class="primary" data-testid="review-approve" disabled={act.busy} onClick={() => void act.run('approve')}>
              Approve
            </button>
          </div>
        </>
      )}
      <InlineError text={act.error} testid="interrupt-error" />
    </article>
  );
}

function ArtifactCard({ m, a, onDone }: { m: RunModel; a: Artifact; onDone: () => void }) {
  const [feedback, setFeedback] = useState('');
  const base = `/api/workflows/${enc(m.id)}`;
  const act = useAction(async (kind: 'approve' | 'changes') => {
    if (kind === 'approve') await post(`${base}/approve`, { artifact: a.id, comment: feedback || undefined });
    else await post(`${base}/request-changes`, { artifact: a.id, feedback });
    setFeedback('');
    toast(kind === 'approve' ? `${a.kind} approved` : `Changes requested on ${a.kind}`);
    onDone();
  });
  const content = a.rendered ?? (looksJson(a.content) ? '```json\n' + pretty(a.content) + '\n```' : readable(a.content));
  const open = a.status === 'awaiting_approval' || a.status === 'draft';
  return (
    <article class="card artifact" data-testid="artifact" data-kind={a.kind} data-status={a.status}>
      <header class="row between wrap">
        <h3>
          {a.kind.replace(/_/g, ' ')} <span class="muted">v{a.version}</span>
          {a.node && (
            <>
              {' '}
              <span class="muted">from</span> <code>{a.node}</code>
            </>
          )}
        </h3>
        <span class={`badge artifact-${a.status}`}>{a.status.replace('_', ' ')}</span>
      </header>
      <div class="md artifact-body" dangerouslySetInnerHTML={{ __html: renderMarkdown(content) }} />
      {a.feedback && (
        <p class="muted">
          Feedback given: <q>{a.feedback}</q>
        </p>
      )}
      {open && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void act.run('changes');
          }}
        >
          <label class="block">
            Feedback
            <textarea data-testid="artifact-feedback" rows={2} value={feedback} onInput={(e) => setFeedback((e.target as HTMLTextAreaElement).value)} />
          </label>
          <div class="row end">
            <button type="submit" data-testid="artifact-request-changes" disabled={act.busy || !feedback.trim()} title={feedback.trim() ? '' : 'Write the feedback first'}>
              Request changes
            </button>
            <button type="button" class="primary" data-testid="artifact-approve" disabled={act.busy} onClick={() => void act.run('approve')}>
              Approve
            </button>
          </div>
        </form>
      )}
      <InlineError text={act.error} testid="artifact-error" />
    </article>
  );
}

/** Send a finished stage back with feedback (`POST …/request-changes {node, feedback}`). */
function StageFeedback({ m }: { m: RunModel }) {
  const stages = m.routing.map((r) => r.stage).filter((s) => m.nodes.get(s)?.state === 'COMPLETED');
  const [stage, setStage] = useState('');
  const [feedback, setFeedback] = useState('');
  const act = useAction(async () => {
    await post(`/api/workflows/${enc(m.id)}/request-changes`, { feedback, node: stage || undefined });
    setFeedback('');
    toast(`Changes requested${stage ? ` on ${stage}` : ''}: the stage runs again`);
  });
  if (!m.isFinished() || stages.length === 0) return null;
  return (
    <section aria-labelledby="stage-feedback-title">
      <h2 id="stage-feedback-title">Send a stage back</h2>
      <form
        class="card"
        data-testid="stage-feedback-form"
        onSubmit={(e) => {
          e.preventDefault();
          void act.run();
        }}
      >
        <label>
          Stage{' '}
          <select data-testid="stage-feedback-stage" value={stage} onChange={(e) => setStage((e.target as HTMLSelectElement).value)}>
            <option value="">the last that changed files</option>
            {stages.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label class="block">
          Feedback
          <textarea data-testid="stage-feedback-text" rows={2} value={feedback} onInput={(e) => setFeedback((e.target as HTMLTextAreaElement).value)} onKeyDown={submitOnCtrlEnter} />
        </label>
        <div class="row end">
          <button type="submit" class="primary" data-testid="stage-feedback-submit" disabled={act.busy || !feedback.trim()}>
            Request changes
          </button>
        </div>
        <InlineError text={act.error} />
      </form>
    </section>
  );
}

function looksJson(s: string) {
  const t = s.trim();
  if (!t.startsWith('{') && !t.startsWith('[')) return false;
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
}

function pretty(s: string) {
  return JSON.stringify(JSON.parse(s), null, 2);
}
