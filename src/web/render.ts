import { html as diffHtml } from 'diff2html';
import MarkdownIt from 'markdown-it';
import { html, trusted, type Html } from './html.js';

/** Markdown without raw HTML (escaped instead) and with only http(s) and mailto links. */
const markdown = new MarkdownIt({ html: false, linkify: false });
markdown.validateLink = (url) => /^(https?:|mailto:|#|\/)/i.test(url.trim());

export const renderMarkdown = (text: string): Html => trusted(markdown.render(text));

/** A unified diff as diff2html's line-by-line view (it escapes file names and lines). */
export function renderDiff(patch: string): Html {
  if (patch.trim() === '') return html`<p class="muted">No changes.</p>`;
  return trusted(diffHtml(patch, { drawFileList: true, outputFormat: 'line-by-line', matching: 'none' }));
}
