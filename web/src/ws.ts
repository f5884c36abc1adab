// The event socket (`GET /api/events`, docs/api.md): one WebSocket shared by every view.
//
// Each followed stream remembers the last seq delivered. When the socket closes (network,
// server restart, 1013 for a slow client) it reconnects with backoff and re-subscribes every
// stream with `since` = that seq: the server replays what was missed, each event once. Frames
// at or below the last seq are dropped, so nothing is ever applied twice.

import { get, enc, qs, authorized } from './api';
import type { Frame } from './api';
import { signal } from './store';

export type SocketState = 'connecting' | 'open' | 'reconnecting' | 'closed';

type Handler = (f: Frame) => void;

interface Sub {
  key: string;
  stream: string;
  workspace?: string;
  lastSeq: number;
  handlers: Set<Handler>;
  /** The server confirmed the subscription on the current connection. */
  live: boolean;
}

export interface Follow {
  close(): void;
}

const keyOf = (stream: string, workspace?: string) => (stream === 'workspace' ? `workspace@${workspace ?? ''}` : stream);

export class EventSocket {
  readonly state = signal<SocketState>('closed');
  /** Reconnections so far (shown in the status bar; tests wait on it). */
  readonly reconnects = signal(0);
  /** Errors the server sent about our frames (shown as toasts). */
  onError: (message: string) => void = () => {};

  private ws: WebSocket | null = null;
  private subs = new Map<string, Sub>();
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private everOpened = false;

  /** Follows `stream` from `since` (the last seq already known); `onFrame` gets each later event once, in order. */
  follow(stream: string, since: number, onFrame: Handler, workspace?: string): Follow {
    const key = keyOf(stream, workspace);
    let sub = this.subs.get(key);
    if (!sub) {
      sub = { key, stream, workspace, lastSeq: since, handlers: new Set(), live: false };
      this.subs.set(key, sub);
      sub.handlers.add(onFrame);
      this.sendSubscribe(sub);
      this.ensure();
    } else {
      const s = sub;
      if (since < s.lastSeq) {
        // A late follower: fetch what it has not seen up to the shared position.
        const upto = s.lastSeq;
        const gate: Frame[] = [];
        let ready = false;
        const h: Handler = (f) => (ready ? onFrame(f) : gate.push(f));
        s.handlers.add(h);
        fetchStream(stream, since, upto, workspace)
          .then((frames) => frames.forEach(onFrame))
          .catch((e) => this.onError(String(e.message ?? e)))
          .finally(() => {
            ready = true;
            gate.forEach(onFrame);
          });
        return { close: () => this.unfollow(s, h) };
      }
      s.handlers.add(onFrame);
    }
    const s = sub;
    return { close: () => this.unfollow(s, onFrame) };
  }

  /** Closes the socket as a network failure would (the reconnect logic takes over). For tests. */
  drop(): void {
    this.ws?.close(4000, 'dropped by the client');
  }

  lastSeq(stream: string, workspace?: string): number | undefined {
    return this.subs.get(keyOf(stream, workspace))?.lastSeq;
  }

  private unfollow(sub: Sub, h: Handler) {
    sub.handlers.delete(h);
    if (sub.handlers.size === 0) {
      this.subs.delete(sub.key);
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'unsubscribe', stream: sub.stream }));
    }
  }

  private sendSubscribe(sub: Sub) {
    if (this.ws?.readyState !== WebSocket.OPEN) return;
    const frame: Record<string, unknown> = { type: 'subscribe', stream: sub.stream, since: sub.lastSeq };
    if (sub.workspace && sub.stream === 'workspace') frame.workspace = sub.workspace;
    this.ws.send(JSON.stringify(frame));
  }

  private ensure() {
    if (this.ws || this.timer) return;
    this.connect();
  }

  private connect() {
    this.timer = null;
    const proto = location.protocol === 'https:' ? 'wss' : 'ws';
    this.state.value = this.everOpened ? 'reconnecting' : 'connecting';
    let ws: WebSocket;
    try {
      ws = new WebSocket(`${proto}://${location.host}/api/events`);
    } catch (e) {
      this.onError(`cannot open the event socket: ${(e as Error).message}`);
      this.schedule();
      return;
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      if (this.everOpened) this.reconnects.value = this.reconnects.value + 1;
      this.everOpened = true;
      this.state.value = 'open';
      for (const sub of this.subs.values()) {
        sub.live = false;
        this.sendSubscribe(sub);
      }
    };
    ws.onmessage = (m) => this.receive(m.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (opened) this.attempt = 0;
      if (!opened) {
        // The upgrade failed: a 401 shows the login screen, anything else is retried.
        get('/api/workspaces').catch(() => {});
      }
      if (authorized.value === false) {
        this.state.value = 'closed';
        return;
      }
      this.schedule();
    };
  }

  private schedule() {
    this.state.value = 'reconnecting';
    const delay = Math.min(15000, 300 * 2 ** this.attempt) * (0.75 + Math.random() * 0.5);
    this.attempt = Math.min(this.attempt + 1, 8);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  private receive(data: unknown) {
    let f: any;
    try {
      f = JSON.parse(String(data));
    } catch {
      return;
    }
    switch (f.type) {
      case 'event': {
        const sub = this.subs.get(keyOf(f.stream, f.workspace));
        if (!sub || f.seq <= sub.lastSeq) return;
        sub.lastSeq = f.seq;
        for (const h of [...sub.handlers]) {
          try {
            h(f as Frame);
          } catch (e) {
            console.error('event handler', e);
          }
        }
        return;
      }
      case 'subscribed': {
        for (const sub of this.subs.values()) if (sub.stream === f.stream) sub.live = true;
        return;
      }
      case 'error':
        this.onError(f.error ?? 'the event socket refused a frame');
        return;
      default:
        return;
    }
  }
}

/** A stream's events with `since` < seq ≤ `upto` over REST, paged. */
export async function fetchStream(stream: string, since: number, upto = Infinity, workspace?: string): Promise<Frame[]> {
  const out: Frame[] = [];
  let from = since;
  for (;;) {
    const page = await get<Frame[]>(`/api/streams/${enc(stream)}/events${qs({ since: from, limit: 10000, workspace })}`);
    for (const f of page) if (f.seq <= upto) out.push(f);
    if (page.length < 10000 || (page.length && page[page.length - 1].seq >= upto)) break;
    from = page[page.length - 1].seq;
  }
  return out;
}

export const socket = new EventSocket();
(globalThis as any).__trellisSocket = socket;

/**
 * Follows `stream` from its current end (events from now on): the known position when the
 * stream is already followed, else the last stored seq (read over REST).
 */
export function followFromNow(stream: string, onFrame: (f: Frame) => void, workspace?: string): Follow {
  let inner: Follow | null = null;
  let closed = false;
  const known = socket.lastSeq(stream, workspace);
  const start = (since: number) => {
    if (!closed) inner = socket.follow(stream, since, onFrame, workspace);
  };
  if (known !== undefined) start(known);
  else
    fetchStream(stream, 0, Infinity, workspace)
      .then((frames) => start(frames.length ? frames[frames.length - 1].seq : 0))
      .catch((e) => socket.onError(String(e.message ?? e)));
  return {
    close() {
      closed = true;
      inner?.close();
    },
  };
}
