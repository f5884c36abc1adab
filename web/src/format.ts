import type { ToolProgress, TurnProgress, Usage } from './api';

export function ago(ms: number | null | undefined): string {
  if (!ms) return '—';
  const d = Date.now() - ms;
  if (d < 0) return 'just now';
  if (d < 60_000) return `${Math.round(d / 1000)} s ago`;
  if (d < 3_600_000) return `${Math.round(d / 60_000)} min ago`;
  if (d < 86_400_000) return `${Math.round(d / 3_600_000)} h ago`;
  return new Date(ms).toLocaleDateString();
}

export function stamp(ms: number | null | undefined): string {
  return ms ? new Date(ms).toLocaleString() : '—';
}

export function duration(ms: number): string {
  if (!(ms >= 0)) return '—';
  if (ms < 1000) return `${ms} ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function tokens(u: Usage | undefined | null): string {
  if (!u) return '—';
  const t = (u.promptTokens ?? 0) + (u.completionTokens ?? 0);
  return t >= 10_000 ? `${(t / 1000).toFixed(1)}k` : String(t);
}

export function cost(u: Usage | undefined | null): string {
  if (!u || u.costUsd === null || u.costUsd === undefined) return '—';
  return `$${u.costUsd.toFixed(u.costUsd < 1 ? 4 : 2)}`;
}

export const shortId = (id: string) => id.slice(0, 8);

export const STATUS_LABEL: Record<string, string> = {
  running: 'running',
  waitingInput: 'waiting for input',
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
};

/** A tool call's progress as one line: `3/5 (60%) · copying`, `12 · scanning` (the CLI's and ACP's wording). */
export function progressText(p: ToolProgress): string {
  const num = (x: number) => (Number.isInteger(x) ? String(x) : x.toFixed(2));
  let text =
    p.total !== undefined && p.total > 0
      ? `${num(p.progress)}/${num(p.total)} (${Math.round(Math.min(100, Math.max(0, (p.progress / p.total) * 100)))}%)`
      : num(p.progress);
  const m = p.message?.trim();
  if (m) text += ` · ${m}`;
  return text;
}

/** A model call's progress as one line: `reading the prompt: 1536/4100 tokens (37%)`, `writing: 48 tokens` (the CLI's wording). */
export function turnProgressText(p: TurnProgress): string {
  if (p.generated > 0) return `writing: ${p.generated} tokens`;
  if (p.promptDone >= p.promptTokens) return `read the prompt (${p.promptTokens} tokens); writing`;
  const pct = Math.round((p.promptDone / Math.max(1, p.promptTokens)) * 100);
  return `reading the prompt: ${p.promptDone}/${p.promptTokens} tokens (${pct}%)`;
}
