// Channels (discussion sessions about the codebase) and one channel chat: the answer streams
// on `session:<id>`; file:line citations become links.

import { useState } from 'preact/hooks';
import { get, post, enc, qs } from '../api';
import type { SessionRecord } from '../api';
import { href, navigate } from '../router';
import { useNotifier, useValue } from '../store';
import { workspaces } from '../state';
import { workspaceRoot } from '../citations';
import { ago, stamp } from '../format';
import { InlineError, Spinner, useAction, useLoad, submitOnCtrlEnter } from '../ui';
import { Transcript, useSession } from './Transcript';
import type { SessionModel } from '../session';

export function ChannelsPage() {
  const ws = useValue(workspaces);
  const [workspace, setWorkspace] = useState(ws[0]?.id ?? '');
  const list = useLoad(() => get<SessionRecord[]>(`/api/channels${qs({ workspace })}`), [workspace]);
  const [channel, setChannel] = useState('general');
  const start = useAction(async () => {
    const r = await post<{ session: string }>(`/api/channels/${enc(channel.trim())}/session`, ws.length > 1 ? { workspace } : {});
    navigate(['chat', r.session]);
  });
  const byChannel = new Map<string, SessionRecord[]>();
  for (const s of list.data ?? []) {
    const c = s.owner.channel ?? '?';
    byChannel.set(c, [...(byChannel.get(c) ?? []), s]);
  }
  return (
    <main class="page" aria-labelledby="channels-title">
      <h1 id="channels-title">Channels</h1>
      <p class="muted">Discuss the codebase with an agent that can read it. Answers cite files as file:line.</p>
      <form
        class="card row wrap"
        data-testid="new-chat-form"
        onSubmit={(e) => {
          e.preventDefault();
          void start.run();
        }}
      >
        {ws.length > 1 && (
          <label>
            Workspace{' '}
            <select value={workspace} onChange={(e) => setWorkspace((e.target as HTMLSelectElement).value)}>
              {ws.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.id}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          Channel{' '}
          <input data-testid="new-chat-channel" required pattern="[A-Za-z0-9_.\-]+" title="letters, digits, _ . -" value={channel} onInput={(e) => setChannel((e.target as HTMLInputElement).value)} />
        </label>
        <button type="submit" class="primary" data-testid="new-chat-submit" disabled={start.busy || !channel.trim()}>
          New conversation
        </button>
        <InlineError text={start.error} />
      </form>
      {list.loading && !list.data ? (
        <Spinner label="Loading channels" />
      ) : byChannel.size === 0 ? (
        <p class="muted" data-testid="channels-empty">
          No conversations yet.
        </p>
      ) : (
        [...byChannel.entries()].map(([c, sessions]) => (
          <section key={c} class="card" data-testid="channel" data-channel={c} aria-label={`Channel ${c}`}>
            <h2>#{c}</h2>
            <ul class="plain">
              {sessions.map((s) => (
                <li key={s.id}>
                  <a href={href(['chat', s.id])} data-testid="channel-session">
                    <code>{s.id.slice(0, 16)}</code>
                  </a>{' '}
                  <span class="muted" title={stamp(s.updatedMs)}>
                    {s.status} · {ago(s.updatedMs)}
                  </span>
                </li>
              ))}
            </ul>
          </section>
        ))
      )}
      <InlineError text={list.error} />
    </main>
  );
}

/** A channel session stays `running` between questions: it is answering only after a question. */
function answering(m: SessionModel): boolean {
  const last = m.items[m.items.length - 1];
  return last?.kind === 'user' || (last?.kind === 'turn' && last.turn.status === 'running');
}

export function ChatPage({ session }: { session: string }) {
  const model = useSession(session);
  useNotifier(model); // the title comes with the record
  const ws = useValue(workspaces);
  const [text, setText] = useState('');
  const send = useAction(async () => {
    const t = text;
    setText('');
    try {
      await post(`/api/sessions/${enc(session)}/message`, { text: t });
    } catch (e) {
      setText(t);
      throw e;
    }
  });
  const stop = useAction(() => post(`/api/sessions/${enc(session)}/cancel`, {}));
  const rec = model?.record;
  if (rec?.workspace) {
    const root = ws.find((w) => w.id === rec.workspace)?.root;
    if (root && workspaceRoot.value !== root) workspaceRoot.value = root;
  }
  return (
    <main class="page chat-page" aria-labelledby="chat-title" data-testid="chat-page">
      <div class="row between wrap">
        <h1 id="chat-title">
          {rec?.owner.channel ? `#${rec.owner.channel}` : 'Conversation'} <span class="muted small">{session}</span>
        </h1>
        <a href={href(['channels'])}>All channels</a>
      </div>
      <Transcript model={model} citations emptyText="No such conversation." live={model?.status === 'running' && (send.busy || answering(model))} />
      <form
        class="chat-box"
        data-testid="chat-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (text.trim()) void send.run();
        }}
      >
        <label class="block">
          Message
          <textarea data-testid="chat-input" rows={3} value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} onKeyDown={submitOnCtrlEnter} placeholder="Where is stock kept?" autofocus />
        </label>
        <div class="row end">
          {send.busy && (
            <button type="button" data-testid="chat-stop" onClick={() => void stop.run()}>
              Stop
            </button>
          )}
          <button type="submit" class="primary" data-testid="chat-send" disabled={send.busy || !text.trim()}>
            {send.busy ? 'Answering…' : 'Send (Ctrl+Enter)'}
          </button>
        </div>
        <InlineError text={send.error ?? stop.error} testid="chat-error" />
      </form>
    </main>
  );
}
