import { render } from 'preact';
import { lazy, Suspense } from 'preact/compat';
import { useEffect, useState } from 'preact/hooks';
import './style.css';
import { authorized, get } from './api';
import { route, href } from './router';
import { signal, useValue } from './store';
import { socket } from './ws';
import { Toasts, toast, showError, Spinner } from './ui';
import { workspaceRoot } from './citations';
import { workspaces } from './state';
import { notifyOn, toggleNotify } from './notify';
import type { Workspace } from './state';
import { RunsPage } from './views/Runs';
import { RunPage } from './views/Run';
import { ChannelsPage, ChatPage } from './views/Chat';
import { ToolsPage } from './views/Tools';


socket.onError = (m) => toast(m, 'error');

// ---- theme: the system's (prefers-color-scheme) unless the user picked one ----
type Theme = 'system' | 'light' | 'dark';
const theme = signal<Theme>((localStorage.getItem('trellis.theme') as Theme) || 'system');
function applyTheme(t: Theme) {
  if (t === 'system') document.documentElement.removeAttribute('data-theme');
  else document.documentElement.setAttribute('data-theme', t);
}
applyTheme(theme.value);
theme.subscribe(() => {
  localStorage.setItem('trellis.theme', theme.value);
  applyTheme(theme.value);
});

function ThemeToggle() {
  const t = useValue(theme);
  const next: Record<Theme, Theme> = { system: 'light', light: 'dark', dark: 'system' };
  return (
    <button type="button" class="ghost" data-testid="theme-toggle" aria-label={`Theme: ${t}. Switch to ${next[t]}`} title={`Theme: ${t}`} onClick={() => (theme.value = next[t])}>
      {t === 'dark' ? '☾' : t === 'light' ? '☀' : '◐'} <span class="hide-sm">{t}</span>
    </button>
  );
}

function NotifyToggle() {
  const on = useValue(notifyOn);
  const label = on ? 'Notifications on: runs that need input, fail or finish. Turn off' : 'Notify me when a run needs input, fails or finishes';
  return (
    <button type="button" class="ghost" data-testid="notify-toggle" aria-pressed={on} aria-label={label} title={label} onClick={() => toggleNotify().catch(showError)}>
      {on ? '🔔' : '🔕'} <span class="hide-sm">{on ? 'notifying' : 'notify'}</span>
    </button>
  );
}

function Connection() {
  const s = useValue(socket.state);
  const n = useValue(socket.reconnects);
  const label: Record<string, string> = { open: 'live', connecting: 'connecting', reconnecting: 'reconnecting', closed: 'offline' };
  return (
    <span class={`conn conn-${s}`} data-testid="connection" data-state={s} data-reconnects={n} role="status" aria-label={`Event stream: ${label[s]}`}>
      <span class="dot" aria-hidden="true" /> {label[s]}
    </span>
  );
}

function Login() {
  return (
    <main class="login" data-testid="login-screen">
      <h1>Sign in to Trellis</h1>
      <p>This browser has no valid access token for this server.</p>
      <p>
        Open the <strong>login URL</strong> that <code>trellis serve</code> printed when it started
        (<code>http://…/login?token=…</code>). The token is also in the token file (by default{' '}
        <code>~/.config/trellis/serve-token</code>); then open <code>{location.origin}/login?token=&lt;token&gt;</code>.
      </p>
      <button type="button" class="primary" onClick={() => location.reload()}>
        I opened it — try again
      </button>
    </main>
  );
}

const ReviewPage = lazy(() => import('./views/Review').then((m) => ({ default: m.ReviewPage })));

function Page() {
  const r = useValue(route);
  const [a, b, c] = r.parts;
  if (!a || a === 'runs') {
    if (!b) return <RunsPage query={r.query} />;
    if (c === 'review')
      return (
        <RunPage id={b} tab="review" query={r.query}>
          <Suspense fallback={<Spinner label="Loading the review" />}>
            <ReviewPage id={b} />
          </Suspense>
        </RunPage>
      );
    return <RunPage id={b} tab={c ?? 'graph'} query={r.query} />;
  }
  if (a === 'channels') return <ChannelsPage />;
  if (a === 'tools') return <ToolsPage />;
  if (a === 'chat' && b) return <ChatPage session={b} />;
  return (
    <main class="page">
      <h1>Not found</h1>
      <p>
        <a href={href(['runs'])}>Back to the runs</a>
      </p>
    </main>
  );
}

function App() {
  const auth = useValue(authorized);
  const r = useValue(route);
  const [ready, setReady] = useState(false);
  useEffect(() => {
    get<Workspace[]>('/api/workspaces')
      .then((w) => {
        workspaces.value = w;
        workspaceRoot.value = w[0]?.root ?? '';
      })
      .catch(showError)
      .finally(() => setReady(true));
  }, [auth]);
  if (auth === false) return <Login />;
  if (!ready) return <Spinner label="Connecting to trellis serve" />;
  const section = !r.parts[0] || r.parts[0] === 'runs' ? 'runs' : r.parts[0] === 'tools' ? 'tools' : 'channels';
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href(['runs'])}>
          Trellis
        </a>
        <nav aria-label="Main">
          <a href={href(['runs'])} aria-current={section === 'runs' ? 'page' : undefined} data-testid="nav-runs">
            Runs
          </a>
          <a href={href(['channels'])} aria-current={section === 'channels' ? 'page' : undefined} data-testid="nav-channels">
            Channels
          </a>
          <a href={href(['tools'])} aria-current={section === 'tools' ? 'page' : undefined} data-testid="nav-tools">
            Tools
          </a>
        </nav>
        <span class="spacer" />
        <Connection />
        <NotifyToggle />
        <ThemeToggle />
      </header>
      <div id="main" tabIndex={-1}>
        <Page />
      </div>
    </>
  );
}

render(
  <>
    <App />
    <Toasts />
  </>,
  document.getElementById('app')!,
);
