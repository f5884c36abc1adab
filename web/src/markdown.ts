// Markdown to sanitised HTML: `marked` renders, DOMPurify removes anything executable.
// Never put model or tool text into the DOM as HTML any other way.

import { Marked } from 'marked';
import DOMPurify from 'dompurify';

const md = new Marked({ gfm: true, breaks: false, async: false });

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('rel', 'noopener noreferrer');
    node.setAttribute('target', '_blank');
  }
});

export function renderMarkdown(text: string): string {
  const html = md.parse(text ?? '') as string;
  return DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select'] });
}

/**
 * An agent's report is often JSON (`{output, findings, …}`), sometimes fenced: the readable
 * part as markdown (what `trellis run` prints, crates/cli/src/answer.rs).
 */
export function readable(raw: string): string {
  let t = (raw ?? '').trim();
  const fence = t.match(/^```(?:json)?\s*\n([\s\S]*?)\n?```$/);
  if (fence) t = fence[1].trim();
  if (!t.startsWith('{')) return raw;
  try {
    const v = JSON.parse(t);
    if (typeof v !== 'object' || v === null) return raw;
    const parts: string[] = [];
    if (typeof v.output === 'string') parts.push(readable(v.output));
    const findings = Array.isArray(v.findings) ? v.findings : [];
    if (findings.length) parts.push('**Findings**\n\n' + findings.map((f: unknown) => `- ${typeof f === 'string' ? f : JSON.stringify(f)}`).join('\n'));
    const files = Array.isArray(v.files_changed) ? v.files_changed : [];
    if (files.length) parts.push('**Files changed**\n\n' + files.map((f: unknown) => `- \`${String(f)}\``).join('\n'));
    if (!parts.length) {
      for (const [k, val] of Object.entries(v)) parts.push(`**${k}**: ${typeof val === 'string' ? val : '`' + JSON.stringify(val) + '`'}`);
    }
    if (v.failure === true) parts.unshift('**The agent reports a failure.**');
    return parts.join('\n\n');
  } catch {
    return raw;
  }
}
