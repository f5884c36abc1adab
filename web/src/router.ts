// Hash routes (the server serves the app at `/` only): #/runs, #/runs/<id>/<tab>?node=…,
// #/channels, #/chat/<session>.

import { signal } from './store';

export interface Route {
  parts: string[];
  query: Record<string, string>;
}

function parse(): Route {
  const h = location.hash.replace(/^#\/?/, '');
  const [path, q = ''] = h.split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const query: Record<string, string> = {};
  for (const kv of q.split('&').filter(Boolean)) {
    const [k, v = ''] = kv.split('=');
    query[decodeURIComponent(k)] = decodeURIComponent(v);
  }
  return { parts, query };
}

export const route = signal<Route>(parse());
window.addEventListener('hashchange', () => (route.value = parse()));

export function href(parts: string[], query: Record<string, string | undefined> = {}): string {
  const q = Object.entries(query)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v!)}`)
    .join('&');
  return '#/' + parts.map(encodeURIComponent).join('/') + (q ? '?' + q : '');
}

export function navigate(parts: string[], query: Record<string, string | undefined> = {}, replace = false) {
  const h = href(parts, query);
  if (replace) {
    history.replaceState(null, '', h);
    route.value = parse();
  } else {
    location.hash = h;
  }
}
