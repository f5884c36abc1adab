// Citations in answers (`inventory.py:12`, `src/a.rs:3-9`) become file:line links. The link
// opens the file in an editor through a URL template kept in localStorage
// (`trellis.editorUrl`, default `vscode://file{root}/{path}:{line}`); `{root}` is the
// workspace's directory. Runs on already-sanitised HTML and only adds anchors it builds itself.

import { signal } from './store';

const CITE = /(^|[^\w./-])((?:[\w.-]+\/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8}):(\d+)(?:-(\d+))?(?![\w])/g;

export const workspaceRoot = signal<string>('');

export function editorUrl(path: string, line: string): string {
  const tpl = localStorage.getItem('trellis.editorUrl') || 'vscode://file{root}/{path}:{line}';
  const root = workspaceRoot.value.replace(/\/$/, '');
  return tpl.replace('{root}', encodeURI(root)).replace('{path}', encodeURI(path)).replace('{line}', line);
}

/** `html` with every file:line citation in its text (not inside links) wrapped in a link. */
export function linkCitations(html: string): string {
  const tpl = document.createElement('template');
  tpl.innerHTML = html;
  const walker = document.createTreeWalker(tpl.content, NodeFilter.SHOW_TEXT);
  const texts: Text[] = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if ((n.parentElement as Element | null)?.closest('a')) continue;
    if (CITE.test(n.nodeValue ?? '')) texts.push(n as Text);
    CITE.lastIndex = 0;
  }
  for (const t of texts) {
    const s = t.nodeValue ?? '';
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const m of s.matchAll(CITE)) {
      const start = (m.index ?? 0) + m[1].length;
      frag.append(s.slice(last, start));
      const a = document.createElement('a');
      const cite = m[0].slice(m[1].length);
      a.textContent = cite;
      a.className = 'cite';
      a.setAttribute('href', editorUrl(m[2], m[3]));
      a.setAttribute('data-testid', 'citation');
      a.setAttribute('data-path', m[2]);
      a.setAttribute('data-line', m[3]);
      a.setAttribute('title', `Open ${cite} in your editor`);
      frag.append(a);
      last = start + cite.length;
    }
    frag.append(s.slice(last));
    t.replaceWith(frag);
  }
  return tpl.innerHTML;
}
