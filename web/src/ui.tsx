// Shared pieces: toasts (every API error ends up visible), a confirmation dialog, async
// actions with a busy state, and small display helpers.

import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState, useCallback } from 'preact/hooks';
import { ApiError } from './api';
import { signal, useValue } from './store';

export interface Toast {
  id: number;
  kind: 'error' | 'info';
  text: string;
}

export const toasts = signal<Toast[]>([]);
let nextToast = 1;

export function toast(text: string, kind: Toast['kind'] = 'info') {
  const t = { id: nextToast++, kind, text };
  toasts.value = [...toasts.value, t].slice(-5);
  setTimeout(() => dismiss(t.id), kind === 'error' ? 12000 : 5000);
}

export function dismiss(id: number) {
  toasts.value = toasts.value.filter((t) => t.id !== id);
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return e.field ? `${e.message} (field \`${e.field}\`)` : e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}

export function showError(e: unknown) {
  if (e instanceof ApiError && e.status === 401) return; // the login screen says it
  toast(errorText(e), 'error');
}

export function Toasts() {
  const list = useValue(toasts);
  return (
    <div class="toasts" role="status" aria-live="polite" data-testid="toasts">
      {list.map((t) => (
        <div key={t.id} class={`toast toast-${t.kind}`} data-testid={t.kind === 'error' ? 'toast-error' : 'toast'} role={t.kind === 'error' ? 'alert' : undefined}>
          <span>{t.text}</span>
          <button type="button" class="icon" aria-label="Dismiss" onClick={() => dismiss(t.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}

/**
 * Runs an async action with a busy flag; its error is returned for inline display and also
 * toasted (never swallowed).
 */
export function useAction<A extends unknown[], R>(fn: (...a: A) => Promise<R>, opts: { toast?: boolean } = {}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const mounted = useRef(true);
  useEffect(() => () => void (mounted.current = false), []);
  const run = useCallback(
    async (...a: A): Promise<R | undefined> => {
      setBusy(true);
      setError(null);
      try {
        return await fn(...a);
      } catch (e) {
        if (mounted.current) setError(errorText(e));
        if (opts.toast !== false) showError(e);
        return undefined;
      } finally {
        if (mounted.current) setBusy(false);
      }
    },
    [fn],
  );
  return { run, busy, error, setError };
}

/** Loads `fn()` when `deps` change; `reload` loads again. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    fn()
      .then((d) => live && (setData(d), setError(null)))
      .catch((e) => {
        if (!live) return;
        setError(errorText(e));
        showError(e);
      })
      .finally(() => live && setLoading(false));
    return () => void (live = false);
  }, [...deps, tick]);
  return { data, error, loading, reload: () => setTick((t) => t + 1), setData };
}

export function InlineError({ text, testid = 'inline-error' }: { text: string | null | undefined; testid?: string }) {
  if (!text) return null;
  return (
    <p class="inline-error" role="alert" data-testid={testid}>
      {text}
    </p>
  );
}

export function Spinner({ label = 'Loading' }: { label?: string }) {
  return (
    <span class="spinner" role="status" aria-label={label}>
      <span aria-hidden="true" class="spin" /> {label}…
    </span>
  );
}

/** A modal confirmation (a native <dialog>: focus trapped, Escape cancels). */
export function Confirm(props: {
  open: boolean;
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
  testid?: string;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      class="dialog"
      aria-labelledby="dialog-title"
      data-testid={props.testid ?? 'confirm-dialog'}
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
    >
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          props.onConfirm();
        }}
      >
        <h2 id="dialog-title">{props.title}</h2>
        {props.children}
        <div class="row end">
          <button type="button" onClick={props.onCancel} data-testid="confirm-cancel">
            Cancel
          </button>
          <button type="submit" class={props.danger ? 'danger' : 'primary'} disabled={props.busy} data-testid="confirm-ok" autofocus>
            {props.confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

export function StateBadge({ state }: { state: string | null | undefined }) {
  const s = state ?? 'PENDING';
  return (
    <span class={`badge state-${s}`} data-testid="state-badge">
      {s.replace('_', ' ')}
    </span>
  );
}

export function StatusBadge({ status }: { status: string }) {
  const label: Record<string, string> = { waitingInput: 'waiting for input' };
  return (
    <span class={`badge status-${status}`} data-testid="status-badge">
      {label[status] ?? status}
    </span>
  );
}

/** Ctrl/Cmd+Enter submits a textarea's form. */
export function submitOnCtrlEnter(e: KeyboardEvent) {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    (e.currentTarget as HTMLTextAreaElement).form?.requestSubmit();
  }
}
