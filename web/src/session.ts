// One session's conversation, live: the stored turns (`GET /api/sessions/{id}`, which says up
// to which seq they go) and then the `session:<id>` stream's events from that seq on.

import { get, enc, ApiError } from './api';
import type { Frame, SessionRecord, ToolCall, Turn, TurnProgress } from './api';
import { Notifier } from './store';
import { socket } from './ws';
import type { Follow } from './ws';

export interface TurnView {
  turn: number;
  attempt: number;
  status: 'running' | 'completed' | 'failed' | string;
  text: string;
  thoughts: string;
  tools: ToolCall[];
  usage?: { promptTokens: number; completionTokens: number };
  error?: string;
  /** The latest `turnProgress` report while the call runs (not stored with the turn). */
  progress?: TurnProgress;
}

export type Item =
  | { kind: 'turn'; turn: TurnView }
  | { kind: 'user'; text: string }
  | { kind: 'received'; texts: string[] }
  | { kind: 'note'; text: string }
  | { kind: 'status'; text: string; error?: boolean };

/**
 * `GET /api/sessions/{id}`. A session that `POST /api/channels/{c}/session` has just created
 * can answer 404 for a few tens of milliseconds (the record is written after the 201), so a
 * 404 is retried for about 2 s before the session counts as missing.
 */
async function getSession(id: string): Promise<SessionRecord> {
  for (let wait = 100; ; wait *= 2) {
    try {
      return await get<SessionRecord>(`/api/sessions/${enc(id)}`);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404) || wait > 800) throw e;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

export class SessionModel extends Notifier {
  record: SessionRecord | null = null;
  items: Item[] = [];
  turns = new Map<number, TurnView>();
  missing = false;
  loaded = false;
  error: string | null = null;
  status = '';
  private follow: Follow | null = null;

  constructor(public readonly id: string) {
    super();
  }

  async load(): Promise<void> {
    try {
      const s = await getSession(this.id);
      this.record = s;
      this.status = s.status;
      for (const t of s.turns ?? []) this.addStored(t);
      this.loaded = true;
      this.notify();
      this.follow = socket.follow(`session:${this.id}`, s.lastSeq ?? 0, (f) => this.apply(f));
    } catch (e) {
      this.loaded = true;
      if (e instanceof ApiError && e.status === 404) this.missing = true;
      else this.error = (e as Error).message;
      this.notify();
    }
  }

  close() {
    this.follow?.close();
    this.follow = null;
  }

  private addStored(t: Turn) {
    for (const u of t.userTexts ?? []) this.items.push({ kind: 'user', text: u });
    const v: TurnView = {
      turn: t.turn,
      attempt: t.attempt,
      status: t.status,
      text: t.text ?? '',
      thoughts: t.thoughts ?? '',
      tools: t.tools ?? [],
      usage: t.usage,
      error: t.error,
    };
    this.turns.set(t.turn, v);
    this.items.push({ kind: 'turn', turn: v });
  }

  private turn(n: number, attempt = 0): TurnView {
    let t = this.turns.get(n);
    if (!t) {
      t = { turn: n, attempt, status: 'running', text: '', thoughts: '', tools: [] };
      this.turns.set(n, t);
      this.items.push({ kind: 'turn', turn: t });
    }
    return t;
  }

  apply(f: Frame) {
    const e = f.event;
    switch (e.type) {
      case 'sessionStarted':
        this.status = 'running';
        break;
      case 'userMessage':
        this.items.push({ kind: 'user', text: e.text });
        this.status = 'running';
        break;
      case 'messagesReceived':
        this.items.push({ kind: 'received', texts: e.texts ?? [] });
        break;
      case 'turnStarted': {
        const t = this.turn(e.turn, e.attempt);
        t.status = 'running';
        this.status = 'running';
        break;
      }
      case 'messageDelta': {
        const t = this.turn(e.turn);
        t.text += e.text;
        t.progress = undefined;
        break;
      }
      case 'thoughtDelta':
        this.turn(e.turn).thoughts += e.text;
        break;
      case 'turnProgress': {
        const t = this.turn(e.turn);
        if (t.status === 'running') t.progress = { promptTokens: e.promptTokens, promptDone: e.promptDone, generated: e.generated ?? 0 };
        break;
      }
      case 'toolStarted': {
        const t = this.turn(e.turn);
        if (!t.tools.some((c) => c.callId === e.callId)) t.tools.push({ callId: e.callId, name: e.name, input: e.input, status: 'running' });
        break;
      }
      case 'toolProgress': {
        // Only the latest report is shown, and only while the call runs.
        const c = this.turn(e.turn).tools.find((x) => x.callId === e.callId);
        if (c && c.status === 'running') c.progress = { progress: e.progress, total: e.total, message: e.message };
        break;
      }
      case 'toolCompleted': {
        const t = this.turn(e.turn);
        let c = t.tools.find((x) => x.callId === e.callId);
        if (!c) {
          c = { callId: e.callId, name: e.name, input: undefined };
          t.tools.push(c);
        }
        Object.assign(c, { output: e.output, status: e.status, durationMs: e.durationMs, progress: undefined });
        break;
      }
      case 'turnCompleted': {
        const t = this.turn(e.turn);
        t.status = 'completed';
        t.progress = undefined;
        t.usage = e.usage;
        const content = e.message?.content;
        if (typeof content === 'string' && content.length >= t.text.length) t.text = content;
        const thinking = e.message?.thinking?.text;
        if (typeof thinking === 'string' && thinking.length >= t.thoughts.length) t.thoughts = thinking;
        break;
      }
      case 'turnFailed': {
        const t = this.turn(e.turn);
        t.status = 'failed';
        t.progress = undefined;
        t.error = e.error;
        break;
      }
      case 'note':
        this.items.push({ kind: 'note', text: e.text });
        break;
      case 'contextCompacted': {
        let text = `context compacted (${e.method}): ${e.beforeTokens} → ${e.afterTokens} tokens (limit ${e.limit})`;
        if (e.summarized > 0) text += `; ${e.summarized} messages summarised`;
        if (e.fallback) text += ` — ${e.fallback}`;
        this.items.push({ kind: 'note', text });
        break;
      }
      case 'sessionCompleted':
        this.status = 'completed';
        break;
      case 'sessionError':
        this.status = 'error';
        this.items.push({ kind: 'status', text: `session error: ${e.error}`, error: true });
        break;
    }
    this.notify();
  }
}
