/**
 * HTML built from templates where every interpolated value is escaped unless it is already Html (made
 * by `html` itself or by a renderer that escapes: markdown-it without HTML, diff2html). Everything a run
 * holds (issue text, model output, tool observations, test names, file names) is untrusted.
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[];

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

function part(p: Part): string {
  if (p === null || p === undefined || p === false) return '';
  if (p instanceof Html) return p.text;
  if (Array.isArray(p)) return (p as readonly Part[]).map(part).join('');
  return escapeHtml(String(p));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  return new Html(strings.reduce((out, s, i) => out + s + (i < values.length ? part(values[i]!) : ''), ''));
}

/** Markup a trusted renderer produced. */
export const trusted = (text: string): Html => new Html(text);
