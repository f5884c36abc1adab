// The run's change set: files and hunks with syntax-highlighted diffs, accept/reject per hunk
// (or file), line comments kept here and sent as request-changes feedback quoting file:line,
// apply, reject all, undo. Loaded lazily (it carries the highlighter).

import { useEffect, useMemo, useState } from 'preact/hooks';
import { get, post, enc, ApiError } from '../api';
import type { ChangesResponse, FileChange, FileSelection, Hunk } from '../api';
import { highlightLine, languageOf, loadLanguage } from '../highlight';
import { Confirm, InlineError, Spinner, useAction, toast, errorText, submitOnCtrlEnter } from '../ui';
import { followFromNow } from '../ws';

interface Comment {
  file: string;
  line: number;
  side: 'old' | 'new';
  quote: string;
  text: string;
}

function accepted(sel: FileSelection | undefined, idx: number): boolean {
  if (!sel) return false;
  if (sel.type === 'all') return true;
  if (sel.type === 'none') return false;
  return sel.hunks.includes(idx);
}

export function ReviewPage({ id }: { id: string }) {
  const [data, setData] = useState<ChangesResponse | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [missing, setMissing] = useState(false);
  const [tick, setTick] = useState(0);
  const [comments, setComments] = useState<Comment[]>(() => loadComments(id));
  const [confirmReject, setConfirmReject] = useState(false);
  const [outcome, setOutcome] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    get<ChangesResponse>(`/api/workflows/${enc(id)}/changes`)
      .then((d) => live && (setData(d), setError(null), setMissing(false)))
      .catch((e) => {
        if (!live) return;
        if (e instanceof ApiError && e.status === 404) setMissing(true);
        else setError(errorText(e));
      });
    return () => void (live = false);
  }, [id, tick]);
  // The change set changes when the run changes files or someone reviews it elsewhere.
  const workspace = (data as any)?.workspace as string | undefined;
  useEffect(() => {
    if (!workspace) return;
    const f = followFromNow(
      'workspace',
      (fr) => {
        const e = fr.event;
        if ((e?.type === 'reviewChanged' || e?.type === 'runStopped') && e.run === id) setTick((t) => t + 1);
      },
      workspace,
    );
    return () => f.close();
  }, [id, workspace]);
  useEffect(() => saveComments(id, comments), [id, comments]);

  const base = `/api/workflows/${enc(id)}/changes`;
  const select = useAction(async (file: string, hunks: number[] | undefined, accept: boolean) => {
    const r = await post<{ selection: ChangesResponse['selection'] }>(`${base}/select`, { file, hunks, accept });
    setData((d) => (d ? { ...d, selection: r.selection } : d));
  });
  const apply = useAction(async () => {
    const r = await post<any>(`${base}/apply`, {});
    setOutcome(r.outcome === 'applied' ? `Applied to the working tree${r.applied?.files ? ` (${r.applied.files.length ?? ''} files)` : ''}.` : `Nothing applied: ${r.reason ?? r.outcome}.`);
    toast(r.outcome === 'applied' ? 'Changes applied' : `Nothing applied: ${r.reason ?? r.outcome}`);
    setTick((t) => t + 1);
  });
  const undo = useAction(async () => {
    await post(`${base}/undo`, {});
    setOutcome('The last apply was undone: the working tree is as it was before.');
    toast('Apply undone');
    setTick((t) => t + 1);
  });
  const reject = useAction(async () => {
    await post(`${base}/reject`, {});
    setConfirmReject(false);
    setOutcome('The change set was rejected.');
    setTick((t) => t + 1);
  });

  if (missing)
    return (
      <p class="muted" data-testid="review-empty">
        This run has no change set (it changed no files, or it has not got that far).
      </p>
    );
  if (error && !data) return <InlineError text={error} testid="review-error" />;
  if (!data) return <Spinner label="Loading the changes" />;
  const files = data.changeSet.files;
  const nAccepted = files.reduce((n, f) => n + f.hunks.filter((h) => accepted(data.selection.files[f.path], h.index)).length, 0);
  const nHunks = files.reduce((n, f) => n + f.hunks.length, 0);
  return (
    <div class="review" data-testid="review" data-state={data.state}>
      <div class="review-bar row between wrap">
        <p>
          <span class="badge" data-testid="review-state">
            {data.state}
          </span>{' '}
          {files.length} files · <span data-testid="review-selected">{nAccepted}</span> of {nHunks} hunks accepted
        </p>
        <div class="row wrap">
          <button type="button" class="primary" data-testid="review-apply" disabled={apply.busy} onClick={() => void apply.run()}>
            Apply accepted
          </button>
          <button type="button" data-testid="review-undo" disabled={undo.busy} onClick={() => void undo.run()} title="Reverse the last apply byte for byte">
            Undo last apply
          </button>
          <button type="button" class="danger" data-testid="review-reject" disabled={reject.busy} onClick={() => setConfirmReject(true)}>
            Reject all
          </button>
        </div>
      </div>
      {outcome && (
        <p class="callout" role="status" data-testid="review-outcome">
          {outcome}
        </p>
      )}
      <InlineError text={apply.error ?? undo.error ?? select.error} testid="review-action-error" />
      {files.length === 0 && <p class="muted">The change set is empty.</p>}
      {files.map((f) => (
        <FileDiff
          key={f.path}
          f={f}
          sel={data.selection.files[f.path]}
          busy={select.busy}
          onSelect={(hunks, accept) => void select.run(f.path, hunks, accept)}
          comments={comments.filter((c) => c.file === f.path)}
          onComment={(c) => setComments([...comments, c])}
          onDelete={(c) => setComments(comments.filter((x) => x !== c))}
        />
      ))}
      <RequestChanges id={id} comments={comments} onSent={() => setComments([])} />
      <Confirm
        open={confirmReject}
        title="Reject the whole change set?"
        confirmLabel="Reject all"
        danger
        busy={reject.busy}
        onConfirm={() => void reject.run()}
        onCancel={() => setConfirmReject(false)}
        testid="reject-dialog"
      >
        <p>Nothing is applied and the run's worktree is removed.</p>
        <InlineError text={reject.error} />
      </Confirm>
    </div>
  );
}

function FileDiff(props: {
  f: FileChange;
  sel: FileSelection | undefined;
  busy: boolean;
  onSelect: (hunks: number[] | undefined, accept: boolean) => void;
  comments: Comment[];
  onComment: (c: Comment) => void;
  onDelete: (c: Comment) => void;
}) {
  const { f, sel } = props;
  const lang = languageOf(f.path);
  const [ready, setReady] = useState(false);
  const [open, setOpen] = useState(true);
  useEffect(() => {
    void loadLanguage(lang).then(setReady);
  }, [lang]);
  const all = sel?.type === 'all' || (f.hunks.length > 0 && f.hunks.every((h) => accepted(sel, h.index)));
  return (
    <section class="file card" data-testid="review-file" data-path={f.path} aria-label={`File ${f.path}`}>
      <header class="file-head row between wrap">
        <button type="button" class="link" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? '▾' : '▸'} <code>{f.path}</code>
        </button>
        <span class="muted">
          {f.status}
          {f.oldPath && f.oldPath !== f.path ? ` from ${f.oldPath}` : ''} · <span class="add">+{f.additions}</span> <span class="del">−{f.deletions}</span>
        </span>
        <label class="toggle">
          <input type="checkbox" checked={all} disabled={props.busy} data-testid="file-accept" onChange={() => props.onSelect(undefined, !all)} /> accept whole file
        </label>
      </header>
      {open && f.binary && <p class="muted">Binary file.</p>}
      {open &&
        f.hunks.map((h) => (
          <HunkView key={h.index} f={f} h={h} lang={ready ? lang : null} accepted={accepted(sel, h.index)} busy={props.busy} onToggle={(a) => props.onSelect([h.index], a)} comments={props.comments} onComment={props.onComment} onDelete={props.onDelete} />
        ))}
    </section>
  );
}

interface Row {
  kind: string;
  text: string;
  old?: number;
  new?: number;
}

function rows(h: Hunk): Row[] {
  let o = h.oldStart;
  let n = h.newStart;
  return h.lines.map((l) => {
    if (l.kind === 'added') return { kind: 'added', text: l.text, new: n++ };
    if (l.kind === 'removed' || l.kind === 'deleted') return { kind: 'removed', text: l.text, old: o++ };
    return { kind: 'context', text: l.text, old: o++, new: n++ };
  });
}

function HunkView(props: {
  f: FileChange;
  h: Hunk;
  lang: string | null;
  accepted: boolean;
  busy: boolean;
  onToggle: (accept: boolean) => void;
  comments: Comment[];
  onComment: (c: Comment) => void;
  onDelete: (c: Comment) => void;
}) {
  const { f, h } = props;
  const rs = useMemo(() => rows(h), [h]);
  const html = useMemo(() => rs.map((r) => highlightLine(r.text, props.lang)), [rs, props.lang]);
  const [editing, setEditing] = useState<number | null>(null);
  const [draft, setDraft] = useState('');
  const lineOf = (r: Row) => (r.new ?? r.old)!;
  const sideOf = (r: Row): 'old' | 'new' => (r.new !== undefined ? 'new' : 'old');
  return (
    <div class={`hunk${props.accepted ? ' accepted' : ' rejected'}`} data-testid="hunk" data-hunk={h.index} data-accepted={props.accepted}>
      <div class="hunk-head row between">
        <code>
          @@ −{h.oldStart},{h.oldLines} +{h.newStart},{h.newLines} @@
        </code>
        <button
          type="button"
          class={props.accepted ? 'chip active' : 'chip'}
          aria-pressed={props.accepted}
          disabled={props.busy}
          data-testid={`hunk-toggle`}
          aria-label={`${props.accepted ? 'Accepted' : 'Rejected'}: hunk ${h.index + 1} of ${f.path}. Toggle`}
          onClick={() => props.onToggle(!props.accepted)}
        >
          {props.accepted ? '✓ accepted' : '✗ rejected'}
        </button>
      </div>
      <table class="diff" role="presentation">
        <tbody>
          {rs.map((r, i) => {
            const line = lineOf(r);
            const side = sideOf(r);
            const here = props.comments.filter((c) => c.line === line && c.side === side);
            return (
              <>
                <tr key={i} class={`ln-${r.kind}`}>
                  <td class="num">{r.old ?? ''}</td>
                  <td class="num">
                    <button type="button" class="num-btn" aria-label={`Comment on ${f.path}:${line}`} title="Comment on this line" data-testid="line-comment-button" onClick={() => (setEditing(i), setDraft(''))}>
                      {r.new ?? ''}
                    </button>
                  </td>
                  <td class="sign" aria-hidden="true">
                    {r.kind === 'added' ? '+' : r.kind === 'removed' ? '−' : ' '}
                  </td>
                  <td class="code">
                    <span class="sr-only">{r.kind === 'added' ? 'added: ' : r.kind === 'removed' ? 'removed: ' : ''}</span>
                    <code class="hljs" dangerouslySetInnerHTML={{ __html: html[i] || ' ' }} />
                  </td>
                </tr>
                {here.map((c, k) => (
                  <tr key={`c${i}-${k}`} class="comment-row" data-testid="line-comment">
                    <td colSpan={3} />
                    <td>
                      <div class="line-comment">
                        <strong>
                          {f.path}:{line}
                        </strong>{' '}
                        {c.text}{' '}
                        <button type="button" class="link" onClick={() => props.onDelete(c)} aria-label={`Delete the comment on ${f.path}:${line}`}>
                          delete
                        </button>
                      </div>
                    </td>
                  </tr>
                ))}
                {editing === i && (
                  <tr key={`e${i}`} class="comment-row">
                    <td colSpan={3} />
                    <td>
                      <form
                        class="line-comment-form"
                        onSubmit={(e) => {
                          e.preventDefault();
                          if (!draft.trim()) return;
                          props.onComment({ file: f.path, line, side, quote: r.text, text: draft.trim() });
                          setEditing(null);
                        }}
                        onKeyDown={(e) => e.key === 'Escape' && setEditing(null)}
                      >
                        <label class="block">
                          Comment on {f.path}:{line}
                          <textarea rows={2} data-testid="line-comment-text" value={draft} onInput={(e) => setDraft((e.target as HTMLTextAreaElement).value)} onKeyDown={submitOnCtrlEnter} autofocus />
                        </label>
                        <div class="row end">
                          <button type="button" onClick={() => setEditing(null)}>
                            Cancel
                          </button>
                          <button type="submit" class="primary" data-testid="line-comment-save">
                            Add comment
                          </button>
                        </div>
                      </form>
                    </td>
                  </tr>
                )}
              </>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

export function feedbackText(general: string, comments: Comment[]): string {
  const parts: string[] = [];
  if (general.trim()) parts.push(general.trim());
  if (comments.length) {
    parts.push(
      'Line comments:\n' +
        comments
          .map((c) => `- ${c.file}:${c.line}${c.side === 'old' ? ' (removed line)' : ''}: ${c.text}\n  > ${c.quote}`)
          .join('\n'),
    );
  }
  return parts.join('\n\n');
}

function RequestChanges({ id, comments, onSent }: { id: string; comments: Comment[]; onSent: () => void }) {
  const [general, setGeneral] = useState('');
  const feedback = feedbackText(general, comments);
  const send = useAction(async () => {
    await post(`/api/workflows/${enc(id)}/request-changes`, { feedback });
    // Sent: the comments are gone even if the user has already left the view (no re-render
    // would then save the empty list).
    saveComments(id, []);
    setGeneral('');
    onSent();
    toast('Changes requested: the stage runs again with your feedback');
  });
  return (
    <section class="card" aria-labelledby="rc-title" data-testid="request-changes">
      <h2 id="rc-title">Request changes</h2>
      <p class="muted">
        Sends the stage that changed these files back with your feedback{comments.length ? ` and ${comments.length} line comment(s), each quoting file:line` : ''}.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void send.run();
        }}
      >
        <label class="block">
          Feedback
          <textarea rows={3} data-testid="request-changes-text" value={general} onInput={(e) => setGeneral((e.target as HTMLTextAreaElement).value)} onKeyDown={submitOnCtrlEnter} />
        </label>
        {comments.length > 0 && (
          <details>
            <summary>What will be sent</summary>
            <pre data-testid="request-changes-preview">{feedback}</pre>
          </details>
        )}
        <div class="row end">
          <button type="submit" class="primary" data-testid="request-changes-submit" disabled={send.busy || !feedback.trim()}>
            Request changes
          </button>
        </div>
        <InlineError text={send.error} testid="request-changes-error" />
      </form>
    </section>
  );
}

function loadComments(id: string): Comment[] {
  try {
    return JSON.parse(sessionStorage.getItem(`trellis.comments.${id}`) ?? '[]');
  } catch {
    return [];
  }
}

function saveComments(id: string, c: Comment[]) {
  sessionStorage.setItem(`trellis.comments.${id}`, JSON.stringify(c));
}
