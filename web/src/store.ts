// A minimal reactive store: signals that components subscribe to with `useValue`, and
// `Notifier`s whose listeners run at most once per animation frame (many WebSocket events
// in one frame cause one render).

import { useEffect, useState } from 'preact/hooks';

type Listener = () => void;

export class Signal<T> {
  private listeners = new Set<Listener>();
  constructor(private v: T) {}
  get value(): T {
    return this.v;
  }
  set value(next: T) {
    if (Object.is(next, this.v)) return;
    this.v = next;
    for (const l of [...this.listeners]) l();
  }
  subscribe(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}

export const signal = <T>(v: T) => new Signal(v);

/** The signal's current value; the component re-renders when it changes. */
export function useValue<T>(s: Signal<T>): T {
  const [, set] = useState(0);
  const seen = s.value;
  useEffect(() => {
    const off = s.subscribe(() => set((n) => n + 1));
    // A change between the render and this subscription would otherwise be missed.
    if (!Object.is(s.value, seen)) set((n) => n + 1);
    return off;
  }, [s]);
  return seen;
}

/** Something that changes in place and tells its listeners, batched per frame. */
export class Notifier {
  private listeners = new Set<Listener>();
  private scheduled = false;
  version = 0;
  notify(): void {
    this.version++;
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      for (const l of [...this.listeners]) l();
    };
    if (typeof requestAnimationFrame === 'function' && document.visibilityState === 'visible') requestAnimationFrame(run);
    else setTimeout(run, 0);
  }
  subscribe(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }
}

/** Re-renders the component when `n` notifies; returns its version. */
export function useNotifier(n: Notifier | null | undefined): number {
  const [, set] = useState(0);
  const seen = n?.version ?? 0;
  useEffect(() => {
    if (!n) return;
    const off = n.subscribe(() => set((k) => k + 1));
    // A notification between the render and this subscription would otherwise be missed.
    if (n.version !== seen) set((k) => k + 1);
    return off;
  }, [n]);
  return seen;
}
