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

export const renderMarkdown = (text: string): Html => trusted(markdown.render(text));

/** A unified diff as diff2html's line-by-line view (it escapes file names and lines). */
export function renderDiff(patch: string): Html {
  if (patch.trim() === '') return html`<p class="muted">No changes.</p>`;
  return trusted(diffHtml(patch, { drawFileList: true, outputFormat: 'line-by-line', matching: 'none' }));
}
