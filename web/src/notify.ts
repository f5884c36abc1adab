// Browser notifications (docs/conventions.md, "Notifications"): off until the user turns them
// on (the bell in the header), which asks the browser's permission once. While on, the app
// follows every workspace's `workspace` stream from now and shows a notification when a run
// needs input, fails or finishes — once per run, event and seq. A click opens the run.

import { signal } from './store';
import { workspaces } from './state';
import { fetchStream, socket } from './ws';
import type { Frame } from './api';
import { navigate } from './router';
import { shortId } from './format';
import { toast, showError } from './ui';

const KEY = 'trellis.notify';

/** Whether notifications are on (remembered in this browser). */
export const notifyOn = signal<boolean>(localStorage.getItem(KEY) === 'on' && supported() && Notification.permission === 'granted');

function supported(): boolean {
  return typeof window !== 'undefined' && 'Notification' in window;
}

/** Turns notifications on (asking the permission when it was never asked) or off. */
export async function toggleNotify(): Promise<void> {
  if (notifyOn.value) {
    notifyOn.value = false;
    return;
  }
  if (!supported()) {
    toast('This browser has no notifications.', 'error');
    return;
  }
  const permission = Notification.permission === 'default' ? await Notification.requestPermission() : Notification.permission;
  if (permission !== 'granted') {
    toast('Notifications are blocked for this site: allow them in the browser’s site settings.', 'error');
    return;
  }
  notifyOn.value = true;
}

type Kind = 'input' | 'failed' | 'finished';
const WHAT: Record<Kind, string> = { input: 'needs input', failed: 'failed', finished: 'finished' };

/** The notification a workspace event calls for: a run stopped waiting, failed or succeeded. */
export function noticeOf(f: Frame): { kind: Kind; run: string; error?: string } | null {
  const e = f.event;
  if (e?.type !== 'runStopped') return null;
  const kind: Kind | null = e.status === 'waitingInput' ? 'input' : e.status === 'failed' ? 'failed' : e.status === 'succeeded' ? 'finished' : null;
  return kind ? { kind, run: e.run, error: e.error } : null;
}

let stop: (() => void) | null = null;

function start() {
  const follows: { close(): void }[] = [];
  const seen = new Set<string>();
  const workflows = new Map<string, string>();
  let live = true;
  const onFrame = (f: Frame) => {
    if (f.event?.type === 'runCreated') workflows.set(f.event.run, f.event.workflow);
    const n = noticeOf(f);
    if (!n || !live) return;
    const tag = `${n.run}:${n.kind}:${f.seq}`;
    if (seen.has(tag)) return;
    seen.add(tag);
    const wf = workflows.get(n.run);
    const title = `Trellis: ${wf ? `${wf} run` : 'run'} ${shortId(n.run)} ${WHAT[n.kind]}`;
    const body = n.kind === 'failed' ? (n.error ?? 'the run failed') : n.kind === 'input' ? 'A question, an approval or a review is waiting.' : 'The run succeeded.';
    const shown = new Notification(title, { body, tag });
    shown.onclick = () => {
      window.focus();
      navigate(['runs', n.run]);
    };
  };
  for (const w of workspaces.value) {
    // From the stream's head: only what happens from now on notifies.
    fetchStream('workspace', 0, Infinity, w.id)
      .then((frames) => {
        if (!live) return;
        for (const f of frames) if (f.event?.type === 'runCreated') workflows.set(f.event.run, f.event.workflow);
        const last = frames.length ? frames[frames.length - 1].seq : 0;
        follows.push(socket.follow('workspace', last, onFrame, w.id));
      })
      .catch(showError);
  }
  return () => {
    live = false;
    follows.forEach((f) => f.close());
  };
}

function apply() {
  localStorage.setItem(KEY, notifyOn.value ? 'on' : 'off');
  stop?.();
  stop = notifyOn.value && workspaces.value.length ? start() : null;
}
notifyOn.subscribe(apply);
workspaces.subscribe(apply);
