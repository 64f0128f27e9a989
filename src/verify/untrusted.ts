/**
 * How text the app did not write (model-written code and summaries, test names and outputs, file
 * names, repository config) goes into the Markdown the app posts: as a code span or code block, where
 * GitHub renders nothing (no HTML, links or mentions), or as prose made inert. Only the app's own
 * markup may be HTML. The verify stage renders the evidence and publish the comments, so both use it.
 */

/** A backtick fence longer than any backtick run inside `text` (at least `min`), so the content cannot close it. */
export function fence(text: string, min = 3): string {
  let longest = min - 1;
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length);
  return '`'.repeat(longest + 1);
}

/** A fenced code block: the content shows as it is, whatever it holds. */
export function codeBlock(text: string, lang = ''): string {
  const f = fence(text);
  return `${f}${lang}\n${text.replace(/\n$/, '')}\n${f}`;
}

/**
 * An inline code span: one line (CR/LF become spaces; a span never crosses a block), fenced longer
 * than any backtick run inside and padded where the content starts or ends with a backtick or space.
 * `cell`: inside a table row, where GitHub splits cells at every unescaped `|`, code spans included.
 */
export function code(text: string, o: { cell?: boolean } = {}): string {
  let t = text.replace(/\r\n?|\n/g, ' ');
  if (o.cell) t = t.replace(/\|/g, '\\|');
  if (t === '') return '` `';
  const f = fence(t, 1);
  const pad = /^[` ]|[` ]$/.test(t) ? ' ' : '';
  return `${f}${pad}${t}${pad}${f}`;
}

const ZWJ = '\u200d';

/**
 * Makes prose that the model (or an outsider) wrote inert where the app posts it: closing keywords
 * followed by an issue reference (`Fixes #3`, `closes owner/repo#3`, `resolves https://…/issues/3`)
 * and @-mentions get a zero-width joiner inside, so they neither close issues nor notify anyone;
 * unless `plain` (titles, commit messages), links are broken too (URL schemes, `www.`, `[text](url)`,
 * reference definitions, HTML entities) and, unless `keepHtml` (Markdown the app rendered with
 * `code` and `inert`, as a second layer), HTML tags are escaped.
 */
export function inert(text: string, o: { plain?: boolean; keepHtml?: boolean } = {}): string {
  let t = text
    .replace(
      /\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?=:?\s*(?:(?:[\w.-]+\/[\w.-]+)?#\d|https?:\/\/))/gi,
      (k) => k[0] + ZWJ + k.slice(1),
    )
    .replace(/@(?=[\w-])/g, '@' + ZWJ);
  if (o.plain) return t;
  t = t
    .replace(/\b([a-z][a-z0-9+.-]*):\/\//gi, `$1${ZWJ}://`)
    .replace(/\bwww\./gi, `www${ZWJ}.`)
    .replace(/\]\s*([(:[])/g, `]${ZWJ}$1`)
    .replace(/&(?=#?\w+;)/g, '&amp;');
  return o.keepHtml ? t : t.replace(/<(?=[a-z/!?])/gi, '&lt;');
}
