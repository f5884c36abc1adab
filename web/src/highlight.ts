// Syntax highlighting for diffs: highlight.js core (in the lazily loaded review chunk) with a
// language module loaded on demand per file extension. Lines are highlighted one by one (a
// diff hunk is a window into a file: a multi-line string or comment that starts outside it
// cannot be known anyway), and hljs escapes the text it returns.

import hljs from 'highlight.js/lib/core';

const BY_EXT: Record<string, string> = {
  js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript',
  ts: 'typescript', tsx: 'typescript', mts: 'typescript',
  py: 'python', rs: 'rust', go: 'go', java: 'java', kt: 'kotlin', c: 'c', h: 'c',
  cc: 'cpp', cpp: 'cpp', hpp: 'cpp', cs: 'csharp', rb: 'ruby', php: 'php', swift: 'swift',
  json: 'json', yaml: 'yaml', yml: 'yaml', toml: 'ini', ini: 'ini', md: 'markdown',
  sh: 'bash', bash: 'bash', zsh: 'bash', css: 'css', scss: 'scss', html: 'xml', xml: 'xml', svg: 'xml',
  sql: 'sql', dockerfile: 'dockerfile', makefile: 'makefile',
};

const loaders: Record<string, () => Promise<{ default: any }>> = {
  javascript: () => import('highlight.js/lib/languages/javascript'),
  typescript: () => import('highlight.js/lib/languages/typescript'),
  python: () => import('highlight.js/lib/languages/python'),
  rust: () => import('highlight.js/lib/languages/rust'),
  go: () => import('highlight.js/lib/languages/go'),
  java: () => import('highlight.js/lib/languages/java'),
  kotlin: () => import('highlight.js/lib/languages/kotlin'),
  c: () => import('highlight.js/lib/languages/c'),
  cpp: () => import('highlight.js/lib/languages/cpp'),
  csharp: () => import('highlight.js/lib/languages/csharp'),
  ruby: () => import('highlight.js/lib/languages/ruby'),
  php: () => import('highlight.js/lib/languages/php'),
  swift: () => import('highlight.js/lib/languages/swift'),
  json: () => import('highlight.js/lib/languages/json'),
  yaml: () => import('highlight.js/lib/languages/yaml'),
  ini: () => import('highlight.js/lib/languages/ini'),
  markdown: () => import('highlight.js/lib/languages/markdown'),
  bash: () => import('highlight.js/lib/languages/bash'),
  css: () => import('highlight.js/lib/languages/css'),
  scss: () => import('highlight.js/lib/languages/scss'),
  xml: () => import('highlight.js/lib/languages/xml'),
  sql: () => import('highlight.js/lib/languages/sql'),
  dockerfile: () => import('highlight.js/lib/languages/dockerfile'),
  makefile: () => import('highlight.js/lib/languages/makefile'),
};

export function languageOf(path: string): string | null {
  const base = path.split('/').pop()!.toLowerCase();
  if (base === 'dockerfile') return 'dockerfile';
  if (base === 'makefile') return 'makefile';
  const ext = base.includes('.') ? base.split('.').pop()! : '';
  return BY_EXT[ext] ?? null;
}

const loading = new Map<string, Promise<boolean>>();

/** Loads the language (once); true when it can be highlighted. */
export function loadLanguage(lang: string | null): Promise<boolean> {
  if (!lang || !loaders[lang]) return Promise.resolve(false);
  if (hljs.getLanguage(lang)) return Promise.resolve(true);
  let p = loading.get(lang);
  if (!p) {
    p = loaders[lang]()
      .then((m) => {
        hljs.registerLanguage(lang, m.default);
        return true;
      })
      .catch(() => false);
    loading.set(lang, p);
  }
  return p;
}

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** One line as HTML (escaped; highlighted when the language is loaded). */
export function highlightLine(text: string, lang: string | null): string {
  if (lang && hljs.getLanguage(lang)) {
    try {
      return hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
    } catch {
      /* fall through */
    }
  }
  return escape(text);
}
