import { html as diffHtml } from 'diff2html';
import MarkdownIt from 'markdown-it';
import { html, trusted, type Html } from './html.js';

/**
 * Markdown without raw HTML (escaped instead) and with only http(s) and relative links: a URL with any
 * other scheme (mailto:, data:, javascript:, a custom app's) is left as text. markdown-it hands the
 * link as written; a scheme is what comes before the first `:` if no `/`, `?` or `#` precedes it.
 */
const markdown = new MarkdownIt({ html: false, linkify: false });
markdown.validateLink = (url) => {
  // eslint-disable-next-line no-control-regex
  const scheme = /^([^/?#]*?):/.exec(url.trim().replace(/[\u0000-\u0020]/g, ''));
  return !scheme || /^https?$/i.test(scheme[1]!);
};
// A table column's alignment as a class, not an inline style: the CSP refuses inline styles.
markdown.core.ruler.push('align_class', (state) => {
  for (const token of state.tokens) {
    const align = /^text-align:(left|center|right)$/.exec(String(token.attrGet('style') ?? ''))?.[1];
    if (!align) continue;
    token.attrs = (token.attrs ?? []).filter(([name]) => name !== 'style');
    token.attrJoin('class', `align-${align}`);
  }
});

export const renderMarkdown = (text: string): Html =>
  html`<div class="md">${trusted(markdown.render(text))}</div>`;

/** A unified diff as diff2html's line-by-line view (it escapes file names and lines). */
export function renderDiff(patch: string): Html {
  if (patch.trim() === '') return html`<p class="muted">No changes.</p>`;
  const view = diffHtml(patch, { drawFileList: true, outputFormat: 'line-by-line', matching: 'none' });
  return html`<div class="scroll">${trusted(view)}</div>`;
}
