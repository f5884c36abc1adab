// A session's conversation: user messages, each model turn (thinking collapsible, tool calls
// with input and output, the answer as sanitised markdown), notes, streaming as it arrives.

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { SessionModel } from '../session';
import type { Item, TurnView } from '../session';
import { useNotifier } from '../store';
import { renderMarkdown, readable } from '../markdown';
import { linkCitations } from '../citations';
import { Spinner } from '../ui';
import { progressText, turnProgressText } from '../format';

export function useSession(id: string | null, retryKey: unknown = null): SessionModel | null {
  const [model, setModel] = useState<SessionModel | null>(null);
  useEffect(() => {
    if (!id) {
      setModel(null);
      return;
    }
    const m = new SessionModel(id);
    setModel(m);
    void m.load();
    return () => m.close();
  }, [id, retryKey]);
  return model;
}

/**
 * `live`: whether the agent can still be talking (a node that is no longer RUNNING shows an
 * unfinished turn as stopped, not as streaming). Defaults to the session's own status.
 */
export function Transcript(props: { model: SessionModel | null; citations?: boolean; agentReports?: boolean; emptyText?: string; live?: boolean }) {
  const m = props.model;
  useNotifier(m);
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  useLayoutEffect(() => {
    const el = box.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });
  if (!m || !m.loaded) return <Spinner label="Loading the conversation" />;
  const live = props.live ?? m.status === 'running';
  if (m.missing) return <p class="muted" data-testid="transcript-empty">{props.emptyText ?? 'No conversation yet: the agent has not started.'}</p>;
  if (m.error) return <p class="inline-error" role="alert">{m.error}</p>;
  return (
    <div
      class="transcript"
      ref={box}
      data-testid="transcript"
      aria-live="off"
      tabIndex={0}
      aria-label="Conversation"
      onScroll={(e) => {
        const el = e.currentTarget as HTMLDivElement;
        stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
      }}
    >
      {m.items.length === 0 && <p class="muted">Nothing said yet.</p>}
      {m.items.map((it, i) => (
        <ItemView key={i} item={it} citations={!!props.citations} agentReports={!!props.agentReports} live={live} />
      ))}
      {live && !hasRunningTurn(m) && <Spinner label="Waiting for the model" />}
    </div>
  );
}

function hasRunningTurn(m: SessionModel) {
  for (const t of m.turns.values()) if (t.status === 'running') return true;
  return false;
}

function ItemView({ item, citations, agentReports, live }: { item: Item; citations: boolean; agentReports: boolean; live: boolean }) {
  switch (item.kind) {
    case 'user':
      return (
        <div class="msg msg-user" data-testid="msg-user">
          <span class="who">you</span>
          <p>{item.text}</p>
        </div>
      );
    case 'received':
      return (
        <div class="msg msg-user" data-testid="msg-received">
          <span class="who">you → agent</span>
          {item.texts.map((t, i) => (
            <p key={i}>{t}</p>
          ))}
        </div>
      );
    case 'note':
      return (
        <p class="note" data-testid="msg-note">
          note: {item.text}
        </p>
      );
    case 'status':
      return <p class={item.error ? 'inline-error' : 'note'}>{item.text}</p>;
    case 'turn':
      return <TurnBlock t={item.turn} citations={citations} agentReports={agentReports} live={live} />;
  }
}

function TurnBlock({ t, citations, agentReports, live }: { t: TurnView; citations: boolean; agentReports: boolean; live: boolean }) {
  const status = t.status === 'running' && !live ? 'stopped' : t.status;
  const text = agentReports ? readable(t.text) : t.text;
  const html = useMemo(() => {
    const h = renderMarkdown(text);
    return citations ? linkCitations(h) : h;
  }, [text, citations]);
  return (
    <div class={`msg msg-agent turn-${status}`} data-testid="turn" data-turn={t.turn} data-status={status}>
      <span class="who">
        turn {t.turn}
        {t.attempt > 1 ? ` · attempt ${t.attempt}` : ''}
        {t.usage ? ` · ${t.usage.promptTokens + t.usage.completionTokens} tokens` : ''}
        {status === 'running' ? ' · streaming' : status === 'stopped' ? ' · stopped before it finished' : ''}
      </span>
      {status === 'running' && t.progress && (
        <p class="turn-progress muted" data-testid="turn-progress">
          <progress
            max={t.progress.generated > 0 ? undefined : t.progress.promptTokens}
            value={t.progress.generated > 0 ? undefined : t.progress.promptDone}
            aria-label="model progress"
          />{' '}
          model {turnProgressText(t.progress)}
        </p>
      )}
      {t.thoughts && (
        <details class="thinking" data-testid="thinking">
          <summary>Thinking ({t.thoughts.length} chars)</summary>
          <pre>{t.thoughts}</pre>
        </details>
      )}
      {t.tools.map((c) => (
        <details key={c.callId} class={`tool tool-${c.status}`} data-testid="tool-call" data-tool={c.name}>
          <summary>
            <code>{c.name}</code> <span class="muted">{toolSummary(c.input)}</span>{' '}
            <span class={`badge tool-status-${c.status}`}>{c.status === 'running' ? 'running…' : c.status}</span>
            {c.durationMs !== undefined && <span class="muted"> {c.durationMs} ms</span>}
            {c.status === 'running' && c.progress && (
              <span class="tool-progress" data-testid="tool-progress">
                {' '}
                {/* Without a total the bar is indeterminate (no value). */}
                {c.progress.total !== undefined && c.progress.total > 0 ? (
                  <progress max={c.progress.total} value={c.progress.progress} aria-label={`${c.name} progress`} />
                ) : (
                  <progress aria-label={`${c.name} progress`} />
                )}{' '}
                <span class="muted">{progressText(c.progress)}</span>
              </span>
            )}
          </summary>
          <div class="tool-io">
            <h4>Input</h4>
            <pre>{JSON.stringify(c.input, null, 2)}</pre>
            {c.output !== undefined && (
              <>
                <h4>Output</h4>
                <pre>{c.output}</pre>
              </>
            )}
          </div>
        </details>
      ))}
      {text && <div class="md" data-testid="turn-text" dangerouslySetInnerHTML={{ __html: html }} />}
      {t.error && (
        <p class="inline-error" role="alert">
          {t.error}
        </p>
      )}
    </div>
  );
}

function toolSummary(input: any): string {
  if (!input || typeof input !== 'object') return '';
  const v = input.path ?? input.command ?? input.pattern ?? input.query ?? '';
  const s = typeof v === 'string' ? v : '';
  return s.length > 60 ? s.slice(0, 59) + '…' : s;
}
